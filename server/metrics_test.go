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
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/server"
)

// TestMetricsScriptedScenario plays a known script (enters, some refused
// for a full queue, admissions, claims of each outcome, expiry) and checks
// every counter against it exactly, through a real scrape.
func TestMetricsScriptedScenario(t *testing.T) {
	t.Parallel()
	up := servertest.NewUpstream(t)
	f := servertest.NewAdminFixture(t, servertest.FixtureOptions{
		// Quota 3 per tick; tokens live 2 s and leases 1 s, so that
		// expiry is reachable by moving the clock.
		Room:      waitroom.RoomConfig{Rate: 30, MaxQueue: 5, TokenTTL: 2 * time.Second, Lease: time.Second},
		Protected: servertest.ProxyTo(t, up.Srv.URL),
	})
	room := f.Room

	// 8 enters: 5 places, 3 refused; one repeat keeps its place; one
	// enter to a room that does not exist.
	for i := 1; i <= 8; i++ {
		a := f.Enter(fmt.Sprintf("u%d", i))
		if i <= 5 {
			require.Equal(t, http.StatusOK, a.Status)
		} else {
			require.Equal(t, http.StatusTooManyRequests, a.Status)
		}
	}
	require.Equal(t, http.StatusOK, f.Enter("u1").Status)
	require.Equal(t, http.StatusNotFound, f.Do("POST", "/rooms/no-such-room/enter", "", "X-User-Id", "u1").Status)

	// Admissions: the first tick starts the bucket, the next admits 3.
	require.Zero(t, f.Tick(time.Second))
	require.Equal(t, 3, f.Tick(time.Second))
	tokens := map[string]string{}
	for _, u := range []string{"u1", "u2", "u3"} {
		a := f.Status(u)
		require.Equal(t, "admitted", a.Str("state"))
		tokens[u] = a.Str("token")
	}
	a := f.Enter("u1")
	require.Equal(t, "admitted", a.Str("state"), "an enter by a token holder answers its token")

	// Claims: u1 orders (completed), u2's order fails (released), u3's
	// token is held elsewhere (TOKEN_IN_USE).
	require.Equal(t, http.StatusCreated, f.Order("u1", tokens["u1"]).Status)
	up.Reply.Store(http.StatusInternalServerError)
	require.Equal(t, http.StatusInternalServerError, f.Order("u2", tokens["u2"]).Status)
	up.Reply.Store(0)
	_, err := f.Store.Claim(t.Context(), room, "u3", tokens["u3"])
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, f.Order("u3", tokens["u3"]).Status)

	// Expiry: u2's released token runs out, and u3's held one once its
	// hold is abandoned (the lease and the settle window after it); the
	// same tick admits the last two queued users.
	f.Clock.Advance(5*time.Second + waitroom.SettleWindow)
	n, err := f.Admitter.Tick(t.Context())
	require.NoError(t, err)
	require.Equal(t, 2, n)

	// Refused claims: a spent token, a token of the wrong value.
	require.Equal(t, http.StatusForbidden, f.Order("u1", tokens["u1"]).Status)
	require.Equal(t, http.StatusForbidden, f.Order("u4", tokens["u1"]).Status)
	require.Equal(t, http.StatusNotFound, f.Do("GET", "/no/such/path", "").Status)
	// A path ServeMux cleans is answered with a redirect, labelled with
	// the pattern it leads to, not the path.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(f.Srv.URL + "/no-such/../healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusTemporaryRedirect, resp.StatusCode)

	m := servertest.Scrape(t, f.Srv.URL)
	enters := func(room, result string) float64 {
		return m.Value("waitroom_enters_total", "room", room, "result", result)
	}
	require.EqualValues(t, 6, enters(room, "queued"), "5 places and 1 repeat")
	require.EqualValues(t, 3, enters(room, "queue_full"))
	require.EqualValues(t, 1, enters(room, "admitted"))
	require.EqualValues(t, 0, enters(room, "room_closed"))
	require.EqualValues(t, 1, enters("", "room_not_found"), "an unknown room is not a label")

	require.EqualValues(t, 5, m.Value("waitroom_admitted_total", "room", room))

	m.RequireEach("waitroom_claims_total", room, "result", map[string]float64{
		"completed": 1, "released": 1, "token_in_use": 1, "entry_token_not_found": 1, "entry_token_invalid": 1,
	})

	require.EqualValues(t, 0, m.Value("waitroom_room_waiting", "room", room))
	require.EqualValues(t, 2, m.Value("waitroom_room_live_tokens", "room", room))
	require.EqualValues(t, 30, m.Value("waitroom_room_admission_rate", "room", room))
	m.RequireEach("waitroom_room_state", room, "state", map[string]float64{"open": 1, "paused": 0})
	m.RequireEach("waitroom_room_entries_total", room, "result", map[string]float64{"queued": 5, "queue_full": 3})
	m.RequireEach("waitroom_room_tokens_total", room, "outcome", map[string]float64{
		"issued": 5, "completed": 1, "released": 1, "expired": 2, "no_show": 0,
	})
	require.EqualValues(t, 0, m.Value("waitroom_room_abandoned_total", "room", room))
	require.EqualValues(t, 1, m.Value("waitroom_store_up"))
	require.EqualValues(t, 0, m.Value("waitroom_room_stock", "room", room), "no stock tracked")
	_, ok := m.Lookup("waitroom_room_units_left", "room", room)
	require.False(t, ok, "no units without stock")
	require.EqualValues(t, 0, m.Value("waitroom_room_last_place_wait_seconds", "room", room), "nobody waits")
	for _, name := range []string{"waitroom_store_lost_places_total", "waitroom_store_lost_tokens_total", "waitroom_store_lost_spent_tokens_total"} {
		require.EqualValues(t, 0, m.Value(name), "an in-process store loses nothing")
	}

	latency := func(route, code string) float64 {
		return m.Value("waitroom_http_request_duration_seconds", "route", route, "code", code)
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
	for _, mf := range m.Families {
		for _, series := range mf.GetMetric() {
			for _, l := range series.GetLabel() {
				require.NotContains(t, l.GetValue(), "no-such", "%s: made-up names never become labels", mf.GetName())
			}
		}
	}

	logs := f.Logs.String()
	require.Equal(t, 1, strings.Count(logs, "queue full: refusing new entries"), "one warning per room per minute, not one per refusal")
	require.Contains(t, logs, "msg=admitted room="+room+" n=3")
	require.Contains(t, logs, `msg="entry token settled" room=`+room+" outcome=completed")
	require.Contains(t, logs, `msg="entry token settled" room=`+room+" outcome=released")
}

// The figures the dashboard shows are on /metrics too: stock, units left,
// sold out, the last place's wait, and what the store lost.
func TestMetricsStockWaitAndLostWrites(t *testing.T) {
	t.Parallel()
	f := servertest.NewStoreFixture(t, waitroom.RoomConfig{Rate: 4, Stock: 3})
	f.Serve(server.Config{PublicMetrics: true, LostWrites: func() (int64, int64, int64) { return 7, 5, 2 }})
	store, room, srv := f.Store, f.Room, f.Srv
	for i := range 6 {
		_, err := store.Enter(t.Context(), room, fmt.Sprint("u", i))
		require.NoError(t, err)
	}
	m := servertest.Scrape(t, srv.URL)
	require.EqualValues(t, 3, m.Value("waitroom_room_stock", "room", room))
	require.EqualValues(t, 3, m.Value("waitroom_room_units_left", "room", room))
	require.EqualValues(t, 0, m.Value("waitroom_room_sold_out", "room", room))
	require.EqualValues(t, 1.5, m.Value("waitroom_room_last_place_wait_seconds", "room", room), "6 waiting at 4/s")
	require.EqualValues(t, 7, m.Value("waitroom_store_lost_places_total"))
	require.EqualValues(t, 5, m.Value("waitroom_store_lost_tokens_total"))
	require.EqualValues(t, 2, m.Value("waitroom_store_lost_spent_tokens_total"))

	// Three admitted and spent: sold out.
	admitter := &waitroom.Admitter{Store: store}
	admitted := 0
	for admitted < 3 {
		f.Clock.Advance(time.Second)
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
	m = servertest.Scrape(t, srv.URL)
	require.EqualValues(t, 0, m.Value("waitroom_room_units_left", "room", room))
	require.EqualValues(t, 1, m.Value("waitroom_room_sold_out", "room", room))
	require.EqualValues(t, 3, m.Value("waitroom_room_tokens_total", "room", room, "outcome", "completed"), "units sold")

	// Paused: nobody is admitted, so the last place has no wait to tell.
	cfg := testenv.RoomConfig(t, store, room)
	paused := cfg
	paused.State = waitroom.RoomPaused
	require.NoError(t, store.UpdateRoom(t.Context(), room, cfg, paused))
	m = servertest.Scrape(t, srv.URL)
	_, ok := m.Lookup("waitroom_room_last_place_wait_seconds", "room", room)
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
	srv := httptest.NewServer(servertest.MustServer(t, server.Config{Store: store, PublicMetrics: true, Logger: slog.New(slog.NewTextHandler(logs, nil)), StoreTimeout: storeTimeout}))
	t.Cleanup(srv.Close)
	enter := func(want int) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/queue/enter", nil)
		require.NoError(t, err)
		req.Header.Set("X-User-Id", "u1")
		require.Equal(t, want, servertest.Send(t, srv.Client(), req).Status)
	}

	for outage := range 2 {
		enter(http.StatusOK)
		require.EqualValues(t, 1, servertest.Scrape(t, srv.URL).Value("waitroom_store_up"))
		store.down.Store(true)
		for range 20 {
			enter(http.StatusServiceUnavailable)
		}
		require.EqualValues(t, 0, servertest.Scrape(t, srv.URL).Value("waitroom_store_up"))
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
	servertest.MustServer(t, server.Config{Store: store, Registry: reg})
	_, err := server.New(server.Config{Store: store, Registry: reg})
	require.Error(t, err, "two servers in one registry would mix their series")
	// Without one, each server has its own: no clash.
	servertest.MustServer(t, server.Config{Store: store})
	servertest.MustServer(t, server.Config{Store: store})
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
	plain := servertest.MustServer(t, server.Config{Store: store})
	require.Equal(t, http.StatusNotFound, get(plain, ""))
	require.Equal(t, http.StatusOK, get(plain.MetricsHandler(), ""), "for a listener of its own")
	admin := servertest.MustServer(t, server.Config{Store: store, AdminToken: token})
	require.Equal(t, http.StatusUnauthorized, get(admin, ""))
	require.Equal(t, http.StatusUnauthorized, get(admin, "wrong-token-of-some-length"))
	require.Equal(t, http.StatusOK, get(admin, token))
	public := servertest.MustServer(t, server.Config{Store: store, PublicMetrics: true})
	require.Equal(t, http.StatusOK, get(public, ""))
}
