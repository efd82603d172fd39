package server_test

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/servertest"
)

// grafanaPanel is what the test reads of a Grafana dashboard panel.
type grafanaPanel struct {
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // a row's
}

var (
	// selector is a metric name with its label matchers, if any.
	selector = regexp.MustCompile(`\b(waitroom_[a-z0-9_]+)(\{([^}]*)\})?`)
	// matcher is one label matcher: name, operator, value.
	matcher = regexp.MustCompile(`\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"\s*`)
)

// The example Grafana dashboard queries only metrics /metrics serves, with
// labels they have: a renamed metric breaks this test, not the operator's
// dashboard on the day of the drop.
func TestGrafanaDashboardQueriesExistingMetrics(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../grafana/waitroom.json")
	require.NoError(t, err)
	var dash struct {
		Panels     []grafanaPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))

	var exprs []string
	var walk func([]grafanaPanel)
	walk = func(panels []grafanaPanel) {
		for _, p := range panels {
			if p.Type != "row" {
				require.NotEmpty(t, p.Targets, "panel %q queries nothing", p.Title)
			}
			for _, target := range p.Targets {
				require.NotEmpty(t, strings.TrimSpace(target.Expr), "panel %q", p.Title)
				exprs = append(exprs, target.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Definition != "" {
			exprs = append(exprs, v.Definition)
		}
	}
	require.GreaterOrEqual(t, len(exprs), 15)

	// A server that has done everything once, so every family has series:
	// a room with stock, entries, admissions, an order through the gate.
	up := servertest.NewUpstream(t)
	f := servertest.NewAdminFixture(t, servertest.FixtureOptions{Room: waitroom.RoomConfig{Rate: 30, Stock: 10}, Protected: servertest.ProxyTo(t, up.Srv.URL)})
	f.Enter("u1")
	f.Enter("u2")
	f.Tick(time.Second)
	f.Tick(time.Second)
	token := f.Status("u1").Str("token")
	require.NotEmpty(t, token)
	require.Equal(t, http.StatusCreated, f.Order("u1", token).Status)
	pass := f.MintPass(f.Room, `{}`).Str("code")
	require.Equal(t, "admitted", f.EnterWithPass("guest", pass).Str("state"))
	m := servertest.Scrape(t, f.Srv.URL)

	// The label values a series of the family has for name.
	values := func(family, name string) []string {
		var out []string
		for _, series := range m.Families[family].GetMetric() {
			for _, l := range series.GetLabel() {
				if l.GetName() == name {
					out = append(out, l.GetValue())
				}
			}
		}
		return out
	}
	queried := map[string]bool{}
	for _, expr := range exprs {
		found := selector.FindAllStringSubmatch(expr, -1)
		require.NotEmpty(t, found, "%q queries no waitroom metric", expr)
		for _, sel := range found {
			name := sel[1]
			family := name
			if m.Families[family] == nil {
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					if base, ok := strings.CutSuffix(name, suffix); ok && m.Families[base] != nil {
						family = base
					}
				}
			}
			require.NotNil(t, m.Families[family], "%q queries %s, which /metrics does not serve", expr, name)
			queried[family] = true
			for _, lm := range matcher.FindAllStringSubmatch(sel[3], -1) {
				label, op, value := lm[1], lm[2], lm[3]
				if label == "le" && family != name {
					continue
				}
				have := values(family, label)
				require.NotEmpty(t, have, "%q: %s has no label %s", expr, family, label)
				if op == "=" {
					require.True(t, slices.Contains(have, value), "%q: %s{%s} is never %q (seen %v)", expr, family, label, value, have)
				}
			}
		}
	}
	// The figures the dashboard page shows are all on the Grafana one.
	for _, family := range []string{
		"waitroom_room_state", "waitroom_room_admission_rate", "waitroom_room_waiting", "waitroom_room_live_tokens",
		"waitroom_room_tokens_total", "waitroom_room_last_place_wait_seconds", "waitroom_room_units_left", "waitroom_room_stock",
		"waitroom_room_sold_out", "waitroom_room_abandoned_total", "waitroom_pass_entries_total", "waitroom_store_lost_places_total", "waitroom_store_lost_tokens_total", "waitroom_store_up",
	} {
		require.True(t, queried[family], "the Grafana dashboard does not show %s", family)
	}
}
