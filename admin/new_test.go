package admin_test

import (
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/admin"
	"github.com/waitroom/waitroom/memstore"
)

const token = "s3cret-admin-token-for-tests"

// seams is a Config with every function the crowd's server gives.
func seams() admin.Config {
	return admin.Config{
		Store:    memstore.New(memstore.Options{}),
		Token:    token,
		Client:   func(*http.Request) (netip.Addr, string) { return netip.MustParseAddr("192.0.2.1"), "192.0.2.1" },
		PassCode: func(room, id string) (string, string) { return id + ".mac", "/rooms/" + room + "?pass=" + id + ".mac" },
		Changed:  func(string) {},
	}
}

// New refuses what it cannot run with, naming the field, and is off
// (nil) without a token, whose limit it still checks.
func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	for name, edit := range map[string]func(*admin.Config){
		"no store":            func(c *admin.Config) { c.Store = nil },
		"no client":           func(c *admin.Config) { c.Client = nil },
		"no pass code":        func(c *admin.Config) { c.PassCode = nil },
		"no changed":          func(c *admin.Config) { c.Changed = nil },
		"route outside":       func(c *admin.Config) { c.Routes = map[string]http.Handler{"GET /products": http.NotFoundHandler()} },
		"route clash":         func(c *admin.Config) { c.Routes = map[string]http.Handler{"GET /admin/rooms": http.NotFoundHandler()} },
		"bad pattern":         func(c *admin.Config) { c.Routes = map[string]http.Handler{"GET /admin/{": http.NotFoundHandler()} },
		"NaN limit":           func(c *admin.Config) { c.AuthLimit = waitroom.Limit{Rate: math.NaN(), Burst: 1} },
		"no burst":            func(c *admin.Config) { c.AuthLimit = waitroom.Limit{Rate: 1} },
		"bad limit, no token": func(c *admin.Config) { c.Token, c.AuthLimit = "", waitroom.Limit{Rate: -1, Burst: 1} },
	} {
		cfg := seams()
		edit(&cfg)
		h, err := admin.New(cfg)
		require.Error(t, err, name)
		require.Nil(t, h, name)
	}
	cfg := seams()
	cfg.Token = ""
	h, err := admin.New(cfg)
	require.NoError(t, err)
	require.Nil(t, h, "without a token the operator API is off")
}

// The Handler routes by its own patterns, which it lists for the
// server's metrics, and answers every unknown path under /admin/ with
// 401 to a stranger and 404 to the operator.
func TestHandlerPatterns(t *testing.T) {
	t.Parallel()
	h, err := admin.New(seams())
	require.NoError(t, err)
	require.Contains(t, h.Patterns(), "GET /admin/rooms/{room}")
	require.Contains(t, h.Patterns(), "/admin/")
	require.Contains(t, h.Patterns(), "GET /admin/{$}")
	for path, want := range map[string]string{
		"/admin/rooms/sale": "GET /admin/rooms/{room}",
		"/admin/":           "GET /admin/{$}",
		"/admin/nothing":    "/admin/",
	} {
		require.Equal(t, want, h.Pattern(httptest.NewRequest("GET", path, nil)), path)
	}
	for auth, status := range map[string]int{"": http.StatusUnauthorized, "Bearer " + token: http.StatusNotFound} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/admin/nothing", nil)
		req.Header.Set("Authorization", auth)
		h.ServeHTTP(rec, req)
		require.Equal(t, status, rec.Code, "auth %q: %s", auth, rec.Body)
	}
}
