package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/server"
)

func newFixture(t *testing.T, opts servertest.FixtureOptions) *servertest.Fixture {
	t.Helper()
	f := servertest.NewStoreFixture(t, opts.Room)
	f.Serve(server.Config{
		Protected:    opts.Protected,
		OnGateServed: opts.OnServed,
		// These tests read the metrics; who may is TestMetricsAccess's.
		PublicMetrics: true,
	})
	return f
}

// The draw cache's clock can be set only from server's own tests, so the
// shared fixture takes the setter from them.
func init() { servertest.SetDrawClock = server.SetDrawClock }

// newGatedFixture is a fixture whose gated orders reach up, an upstream
// that counts its calls.
func newGatedFixture(t *testing.T) (*servertest.Fixture, *servertest.Upstream) {
	t.Helper()
	up := servertest.NewUpstream(t)
	return newFixture(t, servertest.FixtureOptions{Protected: servertest.ProxyTo(t, up.Srv.URL)}), up
}

// requireOrderRefused: the gate answers u1's order with token by status
// and code, and the protected handler behind it never sees the order.
func requireOrderRefused(t *testing.T, f *servertest.Fixture, up *servertest.Upstream, token string, status int, code string) {
	t.Helper()
	f.Order("u1", token).RequireError(t, status, code)
	require.Zero(t, up.Calls.Load(), "the protected handler was called")
}

func TestErrorTable(t *testing.T) {
	t.Parallel()

	t.Run("QUEUE_FULL", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, servertest.FixtureOptions{Room: waitroom.RoomConfig{MaxQueue: 1}})
		require.Equal(t, http.StatusOK, f.Enter("u1").Status)
		a := f.Enter("u2")
		a.RequireError(t, http.StatusTooManyRequests, "QUEUE_FULL")
		secs, err := strconv.Atoi(a.Header.Get("Retry-After"))
		require.NoError(t, err)
		require.Positive(t, secs)
	})
	t.Run("ROOM_CLOSED", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, servertest.FixtureOptions{})
		require.NoError(t, f.Store.UpdateRoom(t.Context(), f.Room, testenv.RoomConfig(t, f.Store, f.Room), waitroom.RoomConfig{State: waitroom.RoomClosed}))
		a := f.Enter("u1")
		a.RequireError(t, http.StatusForbidden, "ROOM_CLOSED")
	})
	t.Run("ROOM_NOT_FOUND", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, servertest.FixtureOptions{})
		a := f.Do("POST", "/rooms/no-such-room/enter", "", "X-User-Id", "u1")
		a.RequireError(t, http.StatusNotFound, "ROOM_NOT_FOUND")
		rooms, err := f.Store.Rooms(t.Context())
		require.NoError(t, err)
		require.NotContains(t, rooms, "no-such-room", "a room is never created on the fly")
	})
	t.Run("NOT_IN_QUEUE", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, servertest.FixtureOptions{})
		a := f.Status("u1")
		a.RequireError(t, http.StatusNotFound, "NOT_IN_QUEUE")
	})
	t.Run("ENTRY_TOKEN_NOT_FOUND", func(t *testing.T) {
		t.Parallel()
		f, up := newGatedFixture(t)
		for _, token := range []string{"", waitroom.NewToken()} {
			requireOrderRefused(t, f, up, token, http.StatusForbidden, "ENTRY_TOKEN_NOT_FOUND")
		}
	})
	t.Run("ENTRY_TOKEN_INVALID", func(t *testing.T) {
		t.Parallel()
		f, up := newGatedFixture(t)
		f.Admit("u1")
		requireOrderRefused(t, f, up, waitroom.NewToken(), http.StatusForbidden, "ENTRY_TOKEN_INVALID")
	})
	t.Run("TOKEN_IN_USE", func(t *testing.T) {
		t.Parallel()
		f, up := newGatedFixture(t)
		token := f.Admit("u1")
		_, err := f.Store.Claim(t.Context(), f.Room, "u1", token) // another request holds it
		require.NoError(t, err)
		requireOrderRefused(t, f, up, token, http.StatusConflict, "TOKEN_IN_USE")
	})
	t.Run("BAD_REQUEST", func(t *testing.T) {
		t.Parallel()
		f, up := newGatedFixture(t)
		tests := []struct {
			name                 string
			method, path, body   string
			headers              []string
			wantMessageFragments string
		}{
			{"missing user", "POST", "/rooms/" + f.Room + "/enter", "", nil, "X-User-Id"},
			{"user with a space", "POST", "/rooms/" + f.Room + "/enter", "", []string{"X-User-Id", "a b"}, "X-User-Id"},
			{"user too long", "GET", "/rooms/" + f.Room + "/status", "", []string{"X-User-Id", strings.Repeat("u", 129)}, "X-User-Id"},
			{"bad room name", "POST", "/rooms/Bad.Room/enter", "", []string{"X-User-Id", "u1"}, "room"},
			{"room name too long", "GET", "/rooms/" + strings.Repeat("r", 65) + "/status", "", []string{"X-User-Id", "u1"}, "room"},
			{"bad JSON", "POST", "/rooms/" + f.Room + "/enter", `{"a":`, []string{"X-User-Id", "u1"}, "JSON"},
			{"unknown field", "POST", "/rooms/" + f.Room + "/enter", `{"a":1}`, []string{"X-User-Id", "u1"}, "unknown field"},
			{"not an object", "POST", "/queue/enter", `[]`, []string{"X-User-Id", "u1"}, "JSON object"},
			{"two objects", "POST", "/queue/enter", `{}{}`, []string{"X-User-Id", "u1"}, "after the object"},
			{"body too large", "POST", "/queue/enter", "{" + strings.Repeat(" ", 70<<10) + "}", []string{"X-User-Id", "u1"}, "larger"},
			{"malformed token", "POST", "/orders", "", []string{"X-User-Id", "u1", "X-Entry-Token", "not-a-token"}, "X-Entry-Token"},
			{"order without user", "POST", "/orders", "", []string{"X-Entry-Token", waitroom.NewToken()}, "X-User-Id"},
		}
		for _, tt := range tests {
			a := f.Do(tt.method, tt.path, tt.body, tt.headers...)
			require.Equal(t, http.StatusBadRequest, a.Status, tt.name)
			require.Equal(t, "BAD_REQUEST", a.Code(), tt.name)
			msg := a.Body["error"].(map[string]any)["message"].(string)
			require.Contains(t, msg, tt.wantMessageFragments, tt.name)
		}
		require.Zero(t, up.Calls.Load())
		st, err := f.Store.Stats(t.Context(), f.Room)
		require.NoError(t, err)
		require.Zero(t, st.Waiting, "a refused enter writes nothing")
	})
	t.Run("STORE_UNAVAILABLE", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(servertest.MustServer(t, server.Config{Store: failingStore{err: fmt.Errorf("dial tcp: refused: %w", waitroom.ErrStoreUnavailable)}}))
		t.Cleanup(srv.Close)
		for _, req := range []struct{ method, path string }{
			{"POST", "/queue/enter"}, {"GET", "/queue/position"}, {"DELETE", "/queue"}, {"GET", "/readyz"},
		} {
			r, err := http.NewRequest(req.method, srv.URL+req.path, nil)
			require.NoError(t, err)
			r.Header.Set("X-User-Id", "u1")
			a := servertest.Send(t, srv.Client(), r)
			require.Equal(t, http.StatusServiceUnavailable, a.Status, req.path)
			require.Equal(t, "STORE_UNAVAILABLE", a.Code(), req.path)
			require.Equal(t, "5", a.Header.Get("Retry-After"), req.path)
		}
	})
	t.Run("INTERNAL", func(t *testing.T) {
		t.Parallel()
		logs := &testenv.LogBuffer{}
		srv := httptest.NewServer(servertest.MustServer(t, server.Config{
			Store:  failingStore{err: errors.New("secret cause 42")},
			Logger: slog.New(slog.NewTextHandler(logs, nil)),
		}))
		t.Cleanup(srv.Close)
		r, err := http.NewRequest("POST", srv.URL+"/queue/enter", nil)
		require.NoError(t, err)
		r.Header.Set("X-User-Id", "u1")
		a := servertest.Send(t, srv.Client(), r)
		a.RequireError(t, http.StatusInternalServerError, "INTERNAL")
		require.Equal(t, "internal error", a.Body["error"].(map[string]any)["message"])
		require.Contains(t, logs.String(), "secret cause 42", "the cause is logged")
	})
	t.Run("UPSTREAM_UNAVAILABLE", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, servertest.FixtureOptions{Protected: servertest.ProxyTo(t, testenv.UnreachableURL(t))})
		token := f.Admit("u1")
		a := f.Order("u1", token)
		a.RequireError(t, http.StatusBadGateway, "UPSTREAM_UNAVAILABLE")
		// Released, not spent: the same token is claimable again.
		_, err := f.Store.Claim(t.Context(), f.Room, "u1", token)
		require.NoError(t, err)
	})
	t.Run("NOT_CONFIGURED", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, servertest.FixtureOptions{})
		a := f.Order("u1", waitroom.NewToken())
		a.RequireError(t, http.StatusNotFound, "NOT_CONFIGURED")
	})
	t.Run("NOT_FOUND and METHOD_NOT_ALLOWED", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, servertest.FixtureOptions{})
		a := f.Do("GET", "/nowhere", "")
		a.RequireError(t, http.StatusNotFound, "NOT_FOUND")
		a = f.Do("PUT", "/rooms/"+f.Room+"/enter", "", "X-User-Id", "u1")
		a.RequireError(t, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
		require.Equal(t, "POST", a.Header.Get("Allow"))
	})
}

// failingStore fails every call the handlers make with err: the seam for
// store outages that a real store cannot be made to have on cue.
type failingStore struct {
	waitroom.Store // nil: any other call panics, which the test would see
	err            error
}

func (s failingStore) Enter(context.Context, string, string) (waitroom.Status, error) {
	return waitroom.Status{}, s.err
}

func (s failingStore) Status(context.Context, string, string) (waitroom.Status, error) {
	return waitroom.Status{}, s.err
}
func (s failingStore) Leave(context.Context, string, string) error { return s.err }
func (s failingStore) Ping(context.Context) error                  { return s.err }

func TestEnterAndStatus(t *testing.T) {
	t.Parallel()
	f := newFixture(t, servertest.FixtureOptions{Room: waitroom.RoomConfig{Rate: 10}})

	a := f.Enter("u1")
	require.Equal(t, http.StatusOK, a.Status)
	require.Equal(t, "waiting", a.Str("state"))
	require.Equal(t, f.Room, a.Str("room"))
	require.EqualValues(t, 1, a.Num("position"))
	require.EqualValues(t, 0, a.Num("ahead"))
	require.EqualValues(t, 1, a.Num("eta_seconds"))
	require.EqualValues(t, 0, a.Num("eta_low_seconds"))
	require.EqualValues(t, 2, a.Num("eta_high_seconds"), "a slice and a poll of granularity")
	require.Positive(t, a.Num("poll_after_ms"))
	require.Equal(t, "no-store", a.Header.Get("Cache-Control"))

	a = f.Do("POST", "/queue/enter", "{}", "X-User-Id", "u2") // the seed's path, default room
	require.Equal(t, http.StatusOK, a.Status)
	require.EqualValues(t, 2, a.Num("position"))
	require.EqualValues(t, 1, a.Num("ahead"))

	// Entering again keeps the place; bodies of whitespace and {} are fine.
	for _, body := range []string{"", " \n", "{}", " { } "} {
		a = f.Do("POST", "/rooms/"+f.Room+"/enter", body, "X-User-Id", "u2")
		require.Equal(t, http.StatusOK, a.Status, "body %q", body)
		require.EqualValues(t, 2, a.Num("position"))
	}
	a = f.Do("GET", "/queue/position", "", "X-User-Id", "u2")
	require.EqualValues(t, 2, a.Num("position"))

	// Leaving moves the next one up.
	a = f.Do("DELETE", "/rooms/"+f.Room+"/queue", "", "X-User-Id", "u1")
	require.Equal(t, http.StatusNoContent, a.Status)
	require.EqualValues(t, 1, f.Status("u2").Num("position"))
	require.Equal(t, "NOT_IN_QUEUE", f.Status("u1").Code())

	// Admitted: the token and its time left, rounded down.
	token := f.Admit("u2")
	f.Clock.Advance(1500 * time.Millisecond)
	a = f.Status("u2")
	require.Equal(t, "admitted", a.Str("state"))
	require.Equal(t, token, a.Str("token"))
	require.EqualValues(t, 298, a.Num("expires_in"))
	require.EqualValues(t, 298500, a.Num("expires_in_ms"))
	a = f.Enter("u2")
	require.Equal(t, "admitted", a.Str("state"), "a token holder gets no second place")
	require.Equal(t, token, a.Str("token"))
}

func TestPausedRoomSaysSo(t *testing.T) {
	t.Parallel()
	f := newFixture(t, servertest.FixtureOptions{})
	require.NoError(t, f.Store.UpdateRoom(t.Context(), f.Room, testenv.RoomConfig(t, f.Store, f.Room), waitroom.RoomConfig{State: waitroom.RoomPaused}))
	a := f.Enter("u1")
	require.Equal(t, http.StatusOK, a.Status, "paused rooms still accept entries")
	require.Equal(t, true, a.Body["paused"])
}

func TestConcurrentEntersGetPositionsOneToN(t *testing.T) {
	t.Parallel()
	f := newFixture(t, servertest.FixtureOptions{})
	const n = 50
	// enter is f.enter for a goroutine: an error, not a failed test.
	enter := func(user string) (int64, error) {
		req, err := http.NewRequest("POST", f.Srv.URL+"/rooms/"+f.Room+"/enter", nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("X-User-Id", user)
		resp, err := f.Srv.Client().Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var body struct {
			State    string `json:"state"`
			Position int64  `json:"position"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusOK || body.State != "waiting" {
			return 0, fmt.Errorf("status %d, state %q", resp.StatusCode, body.State)
		}
		return body.Position, nil
	}
	positions := make([]int64, n)
	errs := make([]error, n)
	testenv.AtOnce(n, func(i int) { positions[i], errs[i] = enter(fmt.Sprintf("user-%d", i)) })
	seen := make(map[int64]bool)
	for i, err := range errs {
		require.NoError(t, err)
		p := positions[i]
		require.False(t, seen[p], "position %d given twice", p)
		seen[p] = true
	}
	require.Len(t, seen, n)
	for p := int64(1); p <= n; p++ {
		require.True(t, seen[p], "position %d missing", p)
	}
}

func TestPollHintGrowsWithDistance(t *testing.T) {
	t.Parallel()
	f := newFixture(t, servertest.FixtureOptions{Room: waitroom.RoomConfig{Rate: 10}})
	for i := 1; i <= 2000; i++ {
		_, err := f.Store.Enter(t.Context(), f.Room, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
	}
	var lastPoll, lastETA int64
	for _, pos := range []int{1, 50, 200, 1000, 2000} {
		a := f.Status(fmt.Sprintf("u%d", pos))
		require.EqualValues(t, pos, a.Num("position"))
		poll, eta := a.Num("poll_after_ms"), a.Num("eta_seconds")
		require.Greater(t, poll, lastPoll, "position %d", pos)
		require.Greater(t, eta, lastETA, "position %d", pos)
		require.GreaterOrEqual(t, poll, (waitroom.MinPoll * 9 / 10).Milliseconds())
		require.LessOrEqual(t, poll, (waitroom.NearPoll * 11 / 10).Milliseconds())
		lastPoll, lastETA = poll, eta
	}
}

// TestETARoundsToTheNearestSecond: the answer's ETA is the estimate to the
// nearest second, not up (which promised half a second more than the
// estimate on average), and at least one while waiting; its range still
// surrounds it.
func TestETARoundsToTheNearestSecond(t *testing.T) {
	t.Parallel()
	f := newFixture(t, servertest.FixtureOptions{Room: waitroom.RoomConfig{Rate: 10}})
	for i := 1; i <= 106; i++ {
		_, err := f.Store.Enter(t.Context(), f.Room, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
	}
	for _, c := range []struct {
		position, eta int64
	}{{1, 1}, {4, 1}, {6, 1}, {102, 10}, {104, 10}, {106, 11}} { // 0.1 s, 0.4 s, 0.6 s, 10.2 s, 10.4 s, 10.6 s
		a := f.Status(fmt.Sprintf("u%d", c.position))
		require.EqualValues(t, c.position, a.Num("position"))
		require.EqualValues(t, c.eta, a.Num("eta_seconds"), "position %d", c.position)
		require.LessOrEqual(t, a.Num("eta_low_seconds"), a.Num("eta_seconds"))
		require.Greater(t, a.Num("eta_high_seconds"), a.Num("eta_seconds"))
	}
}

// TestPollHintWithinAThirdOfAbandonAfter: far back the hint would be a
// minute, but a page that follows it must never look gone; the ETA range
// surrounds the ETA.
func TestPollHintWithinAThirdOfAbandonAfter(t *testing.T) {
	t.Parallel()
	f := newFixture(t, servertest.FixtureOptions{Room: waitroom.RoomConfig{Rate: 10, AbandonAfter: 30 * time.Second}})
	for i := 1; i <= 5000; i++ {
		_, err := f.Store.Enter(t.Context(), f.Room, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
	}
	for _, pos := range []int{1000, 5000} {
		a := f.Status(fmt.Sprintf("u%d", pos))
		require.EqualValues(t, 10_000, a.Num("poll_after_ms"), "position %d", pos)
		eta := a.Num("eta_seconds")
		require.InDelta(t, float64(pos)/10, eta, 1)
		require.Less(t, a.Num("eta_low_seconds"), eta)
		require.Greater(t, a.Num("eta_high_seconds"), eta)
	}
}

func TestRoomSettingsAreCached(t *testing.T) {
	t.Parallel()
	c := memstore.NewManualClock(time.Now())
	counting := &countingStore{Store: memstore.New(memstore.Options{Now: c.Now})}
	_, err := counting.CreateRoom(t.Context(), "cached", waitroom.RoomConfig{})
	require.NoError(t, err)
	h := servertest.MustServer(t, server.Config{Store: counting, DefaultRoom: "cached", ConfigRefresh: time.Hour})
	for i := range 100 {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/queue/enter", nil)
		req.RemoteAddr = "127.0.0.1:1234" // the user header is believed from loopback only
		req.Header.Set("X-User-Id", fmt.Sprintf("u%d", i))
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code)
	}
	require.EqualValues(t, 1, counting.roomConfigCalls.Load(), "settings are read once, not per request")
}

// A crowd following a link to a room that does not exist costs the store
// one read per ConfigRefresh, not one a request, and a room made meanwhile
// is found once that has passed.
func TestMissingRoomIsRememberedBriefly(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		counting := &countingStore{Store: memstore.New(memstore.Options{})}
		h := servertest.MustServer(t, server.Config{Store: counting, ConfigRefresh: time.Second})
		enter := func(user string) *httptest.ResponseRecorder {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("POST", "/rooms/ghost/enter", nil)
			req.RemoteAddr = "127.0.0.1:1234" // the user header is believed from loopback only
			req.Header.Set("X-User-Id", user)
			h.ServeHTTP(rec, req)
			return rec
		}
		for i := range 100 {
			rec := enter(fmt.Sprintf("u%d", i))
			require.Equal(t, http.StatusNotFound, rec.Code)
			require.Contains(t, rec.Body.String(), `"ROOM_NOT_FOUND"`)
		}
		require.EqualValues(t, 1, counting.enterCalls.Load()+counting.roomConfigCalls.Load(), "a missing room is asked for once, not per request")
		for range 10 {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/rooms/ghost", nil))
			require.Equal(t, http.StatusNotFound, rec.Code, "the page of a missing room")
		}
		require.EqualValues(t, 1, counting.enterCalls.Load()+counting.roomConfigCalls.Load(), "the page shares what enter learnt")

		_, err := counting.CreateRoom(t.Context(), "ghost", waitroom.RoomConfig{})
		require.NoError(t, err)
		require.Equal(t, http.StatusNotFound, enter("early").Code, "within ConfigRefresh the miss is remembered")
		time.Sleep(time.Second)
		require.Equal(t, http.StatusOK, enter("later").Code, "past ConfigRefresh the store is asked again")
		require.EqualValues(t, 1+2, counting.enterCalls.Load()+counting.roomConfigCalls.Load(), "the miss, then the enter and its settings")
	})
}

type countingStore struct {
	waitroom.Store
	roomConfigCalls, enterCalls atomic.Int64
}

func (s *countingStore) Enter(ctx context.Context, room, user string) (waitroom.Status, error) {
	s.enterCalls.Add(1)
	return s.Store.Enter(ctx, room, user)
}

func (s *countingStore) RoomConfig(ctx context.Context, room string) (waitroom.RoomConfig, error) {
	s.roomConfigCalls.Add(1)
	return s.Store.RoomConfig(ctx, room)
}

func TestHealth(t *testing.T) {
	t.Parallel()
	f := newFixture(t, servertest.FixtureOptions{})
	require.Equal(t, http.StatusOK, f.Do("GET", "/healthz", "").Status)
	require.Equal(t, http.StatusOK, f.Do("GET", "/readyz", "").Status)
}

func TestRequestsAreLoggedAtDebugOnly(t *testing.T) {
	t.Parallel()
	logs := &testenv.LogBuffer{}
	store := servertest.MemRoom(t, "default", waitroom.RoomConfig{})
	h := servertest.MustServer(t, server.Config{Store: store, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	for range 3 {
		req := httptest.NewRequest("POST", "/queue/enter", nil)
		req.RemoteAddr = "127.0.0.1:1234" // the user header is believed from loopback only
		req.Header.Set("X-User-Id", "u1")
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	require.Empty(t, logs.String(), "no line per request at info")
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	store := memstore.New(memstore.Options{})
	for name, cfg := range map[string]server.Config{
		"no store":          {},
		"bad default room":  {Store: store, DefaultRoom: "Not Valid"},
		"bad gated pattern": {Store: store, GatedRoutes: []string{"POST"}},
		"conflicting route": {Store: store, GatedRoutes: []string{"GET /healthz"}},
		"extra route clash": {Store: store, Routes: map[string]http.Handler{"POST /orders": http.NotFoundHandler()}},
	} {
		_, err := server.New(cfg)
		require.Error(t, err, name)
	}
}

func TestExtraRoutes(t *testing.T) {
	t.Parallel()
	store := memstore.New(memstore.Options{})
	h := servertest.MustServer(t, server.Config{Store: store, Routes: map[string]http.Handler{
		"GET /orders/{id}": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, r.PathValue("id"))
		}),
	}})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/orders/o42", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "o42", rec.Body.String())
}
