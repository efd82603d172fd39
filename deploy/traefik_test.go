package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// traefikDynamic is the part of Traefik's dynamic configuration the
// shipped file uses, with Traefik's own field names; KnownFields makes
// any other (a misspelt one Traefik would ignore) a failure.
type traefikDynamic struct {
	HTTP struct {
		Routers map[string]struct {
			EntryPoints []string `yaml:"entryPoints"`
			Rule        string   `yaml:"rule"`
			Priority    int      `yaml:"priority"`
			Middlewares []string `yaml:"middlewares"`
			Service     string   `yaml:"service"`
		} `yaml:"routers"`
		Middlewares map[string]struct {
			Headers *struct {
				CustomRequestHeaders map[string]string `yaml:"customRequestHeaders"`
			} `yaml:"headers"`
			ForwardAuth *struct {
				Address                  string   `yaml:"address"`
				TrustForwardHeader       bool     `yaml:"trustForwardHeader"`
				AuthRequestHeaders       []string `yaml:"authRequestHeaders"`
				AuthResponseHeaders      []string `yaml:"authResponseHeaders"`
				AddAuthCookiesToResponse []string `yaml:"addAuthCookiesToResponse"`
			} `yaml:"forwardAuth"`
		} `yaml:"middlewares"`
		Services map[string]struct {
			LoadBalancer struct {
				Servers []struct {
					URL string `yaml:"url"`
				} `yaml:"servers"`
			} `yaml:"loadBalancer"`
		} `yaml:"services"`
	} `yaml:"http"`
}

// vouchedHeaders are what /gate/auth's 200 carries for the shop.
var vouchedHeaders = []string{"X-User-Id", "Idempotency-Key", "Waitroom-Units", "Waitroom-Hold"}

// TestTraefikConfig checks deploy/traefik/waitroom.yml, which no test
// runs under a real Traefik (not in Debian, and its module does not build
// from the Go proxy: see OPERATIONS.md): the order route clears the
// client's copies of the vouched headers, then asks /gate/auth, copies
// its answer's headers, and only then reaches the shop; every other route
// clears the user header; the static file names the dynamic one.
func TestTraefikConfig(t *testing.T) {
	t.Parallel()
	f, err := os.Open(filepath.Join("traefik", "waitroom.yml"))
	require.NoError(t, err)
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	var c traefikDynamic
	require.NoError(t, dec.Decode(&c))

	orders := c.HTTP.Routers["waitroom-orders"]
	require.Equal(t, "Method(`POST`) && Path(`/orders`)", orders.Rule)
	require.Equal(t, []string{"waitroom-clear", "waitroom-gate"}, orders.Middlewares, "cleared first, then the gate")
	require.Equal(t, "shop", orders.Service)
	for name, r := range c.HTTP.Routers {
		require.Equal(t, []string{"web"}, r.EntryPoints, name)
		require.Contains(t, r.Middlewares, "waitroom-clear", "%s: every route clears what a client names", name)
		if name != "waitroom-orders" {
			require.Greater(t, orders.Priority, r.Priority, "%s: the order route is matched first", name)
		}
	}

	clear := c.HTTP.Middlewares["waitroom-clear"].Headers
	require.NotNil(t, clear)
	for _, h := range vouchedHeaders {
		v, ok := clear.CustomRequestHeaders[h]
		require.True(t, ok, "%s is cleared", h)
		require.Empty(t, v, "%s: an empty value removes the header", h)
	}
	gate := c.HTTP.Middlewares["waitroom-gate"].ForwardAuth
	require.NotNil(t, gate)
	require.Equal(t, "http://"+shippedWaitroom+"/gate/auth", gate.Address)
	require.False(t, gate.TrustForwardHeader)
	require.ElementsMatch(t, vouchedHeaders, gate.AuthResponseHeaders)
	require.ElementsMatch(t, []string{"X-Entry-Token", "Cookie"}, gate.AuthRequestHeaders)
	require.False(t, slices.Contains(gate.AuthRequestHeaders, "X-User-Id"), "the gate never hears a user the client named")
	require.Equal(t, "http://"+shippedShop, c.HTTP.Services["shop"].LoadBalancer.Servers[0].URL)
	require.Equal(t, "http://"+shippedWaitroom, c.HTTP.Services["waitroom"].LoadBalancer.Servers[0].URL)

	var static struct {
		EntryPoints map[string]struct {
			Address string `yaml:"address"`
		} `yaml:"entryPoints"`
		Providers struct {
			File struct {
				Filename string `yaml:"filename"`
				Watch    bool   `yaml:"watch"`
			} `yaml:"file"`
		} `yaml:"providers"`
	}
	raw, err := os.ReadFile(filepath.Join("traefik", "traefik.yml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(raw, &static))
	require.Equal(t, ":"+shippedListen, static.EntryPoints["web"].Address)
	require.Equal(t, "deploy/traefik/waitroom.yml", static.Providers.File.Filename)
}
