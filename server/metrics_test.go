package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/server"
)

// scrape GETs /metrics over HTTP, as the operator with the admin token,
// and parses the text format.
func scrape(t *testing.T, baseURL string) scraped {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", baseURL+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return scraped{t: t, families: families}
}

type scraped struct {
	t        *testing.T
	families map[string]*dto.MetricFamily
}

// value is the value of the series of name with exactly the given labels
// (name, value pairs); a histogram gives its count. A missing series
// fails the test.
func (s scraped) value(name string, labels ...string) float64 {
	s.t.Helper()
	v, ok := s.lookup(name, labels...)
	require.True(s.t, ok, "no series %s%v", name, labels)
	return v
}

// requireEach checks the series of name in room, one per value of label.
func (s scraped) requireEach(name, room, label string, want map[string]float64) {
	s.t.Helper()
	for v, n := range want {
		require.EqualValues(s.t, n, s.value(name, "room", room, label, v), "%s{%s=%q}", name, label, v)
	}
}

func (s scraped) lookup(name string, labels ...string) (float64, bool) {
	mf := s.families[name]
	if mf == nil {
		return 0, false
	}
	for _, m := range mf.GetMetric() {
		if len(m.GetLabel())*2 != len(labels) {
			continue
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			match = match && found
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// TestMetricsScriptedScenario plays a known script (enters, some refused
// for a full queue, admissions, claims of each outcome, expiry) and checks
// every counter against it exactly, through a real scrape.
func TestMetricsScriptedScenario(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	f := newAdminFixture(t, fixtureOptions{
		// Quota 3 per tick; tokens live 2 s and leases 1 s, so that
		// expiry is reachable by moving the clock.
		room:      waitroom.RoomConfig{Rate: 30, MaxQueue: 5, TokenTTL: 2 * time.Second, Lease: time.Second},
		protected: proxyTo(t, up.srv.URL),
	})
	room := f.room

	// 8 enters: 5 places, 3 refused; one repeat keeps its place; one
	// enter to a room that does not exist.
	for i := 1; i <= 8; i++ {
		a := f.enter(fmt.Sprintf("u%d", i))
		if i <= 5 {
			require.Equal(t, http.StatusOK, a.status)
		} else {
			require.Equal(t, http.StatusTooManyRequests, a.status)
		}
	}
	require.Equal(t, http.StatusOK, f.enter("u1").status)
	require.Equal(t, http.StatusNotFound, f.do("POST", "/rooms/no-such-room/enter", "", "X-User-Id", "u1").status)

	// Admissions: the first tick starts the bucket, the next admits 3.
	require.Zero(t, f.tick(time.Second))
	require.Equal(t, 3, f.tick(time.Second))
	tokens := map[string]string{}
	for _, u := range []string{"u1", "u2", "u3"} {
		a := f.status(u)
		require.Equal(t, "admitted", a.str("state"))
		tokens[u] = a.str("token")
	}
	a := f.enter("u1")
	require.Equal(t, "admitted", a.str("state"), "an enter by a token holder answers its token")

	// Claims: u1 orders (completed), u2's order fails (released), u3's
	// token is held elsewhere (TOKEN_IN_USE).
	require.Equal(t, http.StatusCreated, f.order("u1", tokens["u1"]).status)
	up.reply.Store(http.StatusInternalServerError)
	require.Equal(t, http.StatusInternalServerError, f.order("u2", tokens["u2"]).status)
	up.reply.Store(0)
	_, err := f.store.Claim(t.Context(), room, "u3", tokens["u3"])
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, f.order("u3", tokens["u3"]).status)

	// Expiry: u2's released token runs out, and u3's held one once its
	// hold is abandoned (the lease and the settle window after it); the
	// same tick admits the last two queued users.
	f.clock.Advance(5*time.Second + waitroom.SettleWindow)
	n, err := f.admitter.Tick(t.Context())
	require.NoError(t, err)
	require.Equal(t, 2, n)

	// Refused claims: a spent token, a token of the wrong value.
	require.Equal(t, http.StatusForbidden, f.order("u1", tokens["u1"]).status)
	require.Equal(t, http.StatusForbidden, f.order("u4", tokens["u1"]).status)
	require.Equal(t, http.StatusNotFound, f.do("GET", "/no/such/path", "").status)
	// A path ServeMux cleans is answered with a redirect, labelled with
	// the pattern it leads to, not the path.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(f.srv.URL + "/no-such/../healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusTemporaryRedirect, resp.StatusCode)

	m := scrape(t, f.srv.URL)
	enters := func(room, result string) float64 {
		return m.value("waitroom_enters_total", "room", room, "result", result)
	}
	require.EqualValues(t, 6, enters(room, "queued"), "5 places and 1 repeat")
	require.EqualValues(t, 3, enters(room, "queue_full"))
	require.EqualValues(t, 1, enters(room, "admitted"))
	require.EqualValues(t, 0, enters(room, "room_closed"))
	require.EqualValues(t, 1, enters("", "room_not_found"), "an unknown room is not a label")

	require.EqualValues(t, 5, m.value("waitroom_admitted_total", "room", room))

	m.requireEach("waitroom_claims_total", room, "result", map[string]float64{
		"completed": 1, "released": 1, "token_in_use": 1, "entry_token_not_found": 1, "entry_token_invalid": 1,
	})

	require.EqualValues(t, 0, m.value("waitroom_room_waiting", "room", room))
	require.EqualValues(t, 2, m.value("waitroom_room_live_tokens", "room", room))
	require.EqualValues(t, 30, m.value("waitroom_room_admission_rate", "room", room))
	m.requireEach("waitroom_room_state", room, "state", map[string]float64{"open": 1, "paused": 0})
	m.requireEach("waitroom_room_entries_total", room, "result", map[string]float64{"queued": 5, "queue_full": 3})
	m.requireEach("waitroom_room_tokens_total", room, "outcome", map[string]float64{
		"issued": 5, "completed": 1, "released": 1, "expired": 2, "no_show": 0,
	})
	require.EqualValues(t, 0, m.value("waitroom_room_abandoned_total", "room", room))
	require.EqualValues(t, 1, m.value("waitroom_store_up"))
	require.EqualValues(t, 0, m.value("waitroom_room_stock", "room", room), "no stock tracked")
	_, ok := m.lookup("waitroom_room_units_left", "room", room)
	require.False(t, ok, "no units without stock")
	require.EqualValues(t, 0, m.value("waitroom_room_last_place_wait_seconds", "room", room), "nobody waits")
	for _, name := range []string{"waitroom_store_lost_places_total", "waitroom_store_lost_tokens_total", "waitroom_store_lost_spent_tokens_total"} {
		require.EqualValues(t, 0, m.value(name), "an in-process store loses nothing")
	}

	latency := func(route, code string) float64 {
		return m.value("waitroom_http_request_duration_seconds", "route", route, "code", code)
	}
	require.EqualValues(t, 7, latency("POST /rooms/{room}/enter", "200"))
	require.EqualValues(t, 3, latency("POST /rooms/{room}/enter", "429"))
	require.EqualValues(t, 1, latency("POST /rooms/{room}/enter", "404"))
	require.EqualValues(t, 3, latency("GET /rooms/{room}/status", "200"))
	require.EqualValues(t, 1, latency("POST /orders", "201"))
	require.EqualValues(t, 1, latency("POST /orders", "500"))
	require.EqualValues(t, 1, latency("POST /orders", "409"))
	require.EqualValues(t, 2, latency("POST /orders", "403"))
	require.EqualValues(t, 1, latency("unmatched", "404"), "raw paths are never labels")
	require.EqualValues(t, 1, latency("GET /healthz", "307"))
	for _, mf := range m.families {
		for _, series := range mf.GetMetric() {
			for _, l := range series.GetLabel() {
				require.NotContains(t, l.GetValue(), "no-such", "%s: made-up names never become labels", mf.GetName())
			}
		}
	}

	logs := f.logs.String()
	require.Equal(t, 1, strings.Count(logs, "queue full: refusing new entries"), "one warning per room per minute, not one per refusal")
	require.Contains(t, logs, "msg=admitted room="+room+" n=3")
	require.Contains(t, logs, `msg="entry token settled" room=`+room+" outcome=completed")
	require.Contains(t, logs, `msg="entry token settled" room=`+room+" outcome=released")
}

// The figures the dashboard shows are on /metrics too: stock, units left,
// sold out, the last place's wait, and what the store lost.
func TestMetricsStockWaitAndLostWrites(t *testing.T) {
	t.Parallel()
	f := newStoreFixture(t, waitroom.RoomConfig{Rate: 4, Stock: 3})
	f.serve(server.Config{PublicMetrics: true, LostWrites: func() (int64, int64, int64) { return 7, 5, 2 }})
	store, room, srv := f.store, f.room, f.srv
	for i := range 6 {
		_, err := store.Enter(t.Context(), room, fmt.Sprint("u", i))
		require.NoError(t, err)
	}
	m := scrape(t, srv.URL)
	require.EqualValues(t, 3, m.value("waitroom_room_stock", "room", room))
	require.EqualValues(t, 3, m.value("waitroom_room_units_left", "room", room))
	require.EqualValues(t, 0, m.value("waitroom_room_sold_out", "room", room))
	require.EqualValues(t, 1.5, m.value("waitroom_room_last_place_wait_seconds", "room", room), "6 waiting at 4/s")
	require.EqualValues(t, 7, m.value("waitroom_store_lost_places_total"))
	require.EqualValues(t, 5, m.value("waitroom_store_lost_tokens_total"))
	require.EqualValues(t, 2, m.value("waitroom_store_lost_spent_tokens_total"))

	// Three admitted and spent: sold out.
	admitter := &waitroom.Admitter{Store: store}
	admitted := 0
	for admitted < 3 {
		f.clock.Advance(time.Second)
		n, err := admitter.Tick(t.Context())
		require.NoError(t, err)
		admitted += n
	}
	for i := range 3 {
		st, err := store.Status(t.Context(), room, fmt.Sprint("u", i))
		require.NoError(t, err)
		h, err := store.Claim(t.Context(), room, fmt.Sprint("u", i), st.Token)
		require.NoError(t, err)
		require.NoError(t, store.Complete(t.Context(), h))
	}
	m = scrape(t, srv.URL)
	require.EqualValues(t, 0, m.value("waitroom_room_units_left", "room", room))
	require.EqualValues(t, 1, m.value("waitroom_room_sold_out", "room", room))
	require.EqualValues(t, 3, m.value("waitroom_room_tokens_total", "room", room, "outcome", "completed"), "units sold")

	// Paused: nobody is admitted, so the last place has no wait to tell.
	cfg := testenv.RoomConfig(t, store, room)
	paused := cfg
	paused.State = waitroom.RoomPaused
	require.NoError(t, store.UpdateRoom(t.Context(), room, cfg, paused))
	m = scrape(t, srv.URL)
	_, ok := m.lookup("waitroom_room_last_place_wait_seconds", "room", room)
	require.False(t, ok)
}

// flakyStore is a memstore whose Enter and Rooms answer STORE_UNAVAILABLE
// while down.
type flakyStore struct {
	*testenv.FaultStore
	down atomic.Bool
}

func newFlakyStore() *flakyStore {
	s := &flakyStore{FaultStore: &testenv.FaultStore{Store: memstore.New(memstore.Options{})}}
	s.SetFault(func(_ context.Context, method string) error {
		if s.down.Load() && (method == "Enter" || method == "Rooms") {
			return fmt.Errorf("dial tcp 127.0.0.1:6379: connection refused: %w", waitroom.ErrStoreUnavailable)
		}
		return nil
	})
	return s
}

// TestStoreOutageIsLoggedOnTransitions: an outage is one warning when it
// starts and one line when it ends, however many requests fail meanwhile,
// and waitroom_store_up follows it.
func TestStoreOutageIsLoggedOnTransitions(t *testing.T) {
	t.Parallel()
	store := newFlakyStore()
	_, err := store.CreateRoom(t.Context(), "default", waitroom.RoomConfig{})
	require.NoError(t, err)
	logs := &testenv.LogBuffer{}
	// A short store timeout: a failure within four of them after an outage
	// ends is its tail, not a new one (waitroom.GuardedStore).
	const storeTimeout = 50 * time.Millisecond
	srv := httptest.NewServer(mustServer(t, server.Config{Store: store, PublicMetrics: true, Logger: slog.New(slog.NewTextHandler(logs, nil)), StoreTimeout: storeTimeout}))
	t.Cleanup(srv.Close)
	enter := func(want int) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/queue/enter", nil)
		require.NoError(t, err)
		req.Header.Set("X-User-Id", "u1")
		require.Equal(t, want, send(t, srv.Client(), req).status)
	}

	for outage := range 2 {
		enter(http.StatusOK)
		require.EqualValues(t, 1, scrape(t, srv.URL).value("waitroom_store_up"))
		store.down.Store(true)
		for range 20 {
			enter(http.StatusServiceUnavailable)
		}
		require.EqualValues(t, 0, scrape(t, srv.URL).value("waitroom_store_up"))
		store.down.Store(false)
		enter(http.StatusOK)
		enter(http.StatusOK)
		require.Equal(t, outage+1, strings.Count(logs.String(), "level=WARN msg=\"store unavailable"), logs.String())
		require.Equal(t, outage+1, strings.Count(logs.String(), "level=INFO msg=\"store reachable again\""), logs.String())
		time.Sleep(4 * storeTimeout)
	}
	require.NotContains(t, logs.String(), "request failed", "no line per failed request")
}

func TestMetricsRegistryPerServer(t *testing.T) {
	t.Parallel()
	store := memstore.New(memstore.Options{})
	reg := prometheus.NewRegistry()
	mustServer(t, server.Config{Store: store, Registry: reg})
	_, err := server.New(server.Config{Store: store, Registry: reg})
	require.Error(t, err, "two servers in one registry would mix their series")
	// Without one, each server has its own: no clash.
	mustServer(t, server.Config{Store: store})
	mustServer(t, server.Config{Store: store})
}

// /metrics is not public unless the operator says so: behind the admin
// token, and absent without one (a listener of its own serves
// MetricsHandler).
func TestMetricsAccess(t *testing.T) {
	t.Parallel()
	store := memstore.New(memstore.Options{})
	get := func(h http.Handler, auth string) int {
		req := httptest.NewRequest("GET", "/metrics", nil)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	const token = "an-admin-token-of-some-length"
	plain := mustServer(t, server.Config{Store: store})
	require.Equal(t, http.StatusNotFound, get(plain, ""))
	require.Equal(t, http.StatusOK, get(plain.MetricsHandler(), ""), "for a listener of its own")
	admin := mustServer(t, server.Config{Store: store, AdminToken: token})
	require.Equal(t, http.StatusUnauthorized, get(admin, ""))
	require.Equal(t, http.StatusUnauthorized, get(admin, "wrong-token-of-some-length"))
	require.Equal(t, http.StatusOK, get(admin, token))
	public := mustServer(t, server.Config{Store: store, PublicMetrics: true})
	require.Equal(t, http.StatusOK, get(public, ""))
}
