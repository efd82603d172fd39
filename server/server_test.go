package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/server"
	upstreamproxy "github.com/waitroom/waitroom/upstream"
)

// fixture is a real Server on memstore behind a real listener.
type fixture struct {
	t     *testing.T
	clock *memstore.ManualClock
	store *memstore.Store
	room  string
	srv   *httptest.Server
	logs  *testenv.LogBuffer
}

type fixtureOptions struct {
	room      waitroom.RoomConfig
	protected http.Handler
	onServed  func(room string, took time.Duration, status int)
}

var roomSeq atomic.Int64

// memRoom is an in-process store holding room, created with cfg.
func memRoom(t *testing.T, room string, cfg waitroom.RoomConfig) *memstore.Store {
	t.Helper()
	store := memstore.New(memstore.Options{})
	_, err := store.CreateRoom(t.Context(), room, cfg)
	require.NoError(t, err)
	return store
}

func uniqueRoom(t *testing.T) string {
	return fmt.Sprintf("t%d-%d", time.Now().UnixNano()%1_000_000, roomSeq.Add(1))
}

func newFixture(t *testing.T, opts fixtureOptions) *fixture {
	t.Helper()
	f := newStoreFixture(t, opts.room)
	f.serve(server.Config{
		Protected:    opts.protected,
		OnGateServed: opts.onServed,
		// These tests read the metrics; who may is TestMetricsAccess's.
		PublicMetrics: true,
	})
	return f
}

// newStoreFixture is a fixture's store side: memstore on a fake clock,
// holding a new room with cfg. serve starts its server.
func newStoreFixture(t *testing.T, cfg waitroom.RoomConfig) *fixture {
	t.Helper()
	c := memstore.NewManualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	f := &fixture{t: t, clock: c, store: memstore.New(memstore.Options{Now: c.Now}), room: uniqueRoom(t), logs: &testenv.LogBuffer{}}
	_, err := f.store.CreateRoom(t.Context(), f.room, cfg)
	require.NoError(t, err)
	return f
}

// serve starts a server with cfg on f's store, room (the default one),
// clock and log, behind a real listener.
func (f *fixture) serve(cfg server.Config) *server.Server {
	f.t.Helper()
	cfg.Store, cfg.DefaultRoom, cfg.Now = f.store, f.room, f.clock.Now
	cfg.Logger = slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := mustServer(f.t, cfg)
	server.SetDrawClock(s, f.clock.Now)
	f.srv = httptest.NewServer(s)
	f.t.Cleanup(f.srv.Close)
	return s
}

// answer is a decoded response: the status, the headers and the JSON body.
type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (a answer) code() string {
	e, _ := a.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// requireError asserts that a is the error code answered with status.
func (a answer) requireError(t *testing.T, status int, code string, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, status, a.status, msgAndArgs...)
	require.Equal(t, code, a.code(), msgAndArgs...)
}

func (a answer) num(field string) int64 {
	n, _ := a.body[field].(float64)
	return int64(n)
}

func (a answer) str(field string) string {
	s, _ := a.body[field].(string)
	return s
}

// do sends one request; headers are name, value pairs.
func (f *fixture) do(method, path, body string, headers ...string) answer {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(f.t.Context(), method, f.srv.URL+path, rd)
	require.NoError(f.t, err)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return send(f.t, f.srv.Client(), req)
}

// send sends req with client and decodes its JSON answer.
func send(t *testing.T, client *http.Client, req *http.Request) answer {
	t.Helper()
	p := pageOf(t, client, req)
	a := answer{status: p.status, header: p.header, raw: p.body}
	if p.body != "" {
		require.NoError(t, json.Unmarshal([]byte(p.body), &a.body), "body %q", p.body)
	}
	return a
}

func (f *fixture) enter(user string) answer {
	return f.do("POST", "/rooms/"+f.room+"/enter", "", "X-User-Id", user)
}

func (f *fixture) status(user string) answer {
	return f.do("GET", "/rooms/"+f.room+"/status", "", "X-User-Id", user)
}

func (f *fixture) order(user, token string) answer {
	return f.do("POST", "/orders", `{"product_id":"p1"}`, "X-User-Id", user, "X-Entry-Token", token)
}

// admit enters user and admits it by moving the store's clock, never by
// waiting: it asks the store to admit, and if the room's bucket had nothing
// yet, moves the clock a second and asks again. The token is issued at the
// clock's time on return.
func (f *fixture) admit(user string) string {
	f.t.Helper()
	require.Equal(f.t, http.StatusOK, f.enter(user).status)
	for try := range 2 {
		if try > 0 {
			f.clock.Advance(time.Second)
		}
		admitted, err := f.store.Admit(f.t.Context(), f.room)
		require.NoError(f.t, err)
		for _, a := range admitted {
			if a.User == user {
				return a.Token
			}
		}
	}
	f.t.Fatalf("%s was not admitted", user)
	return ""
}

// upstream is a fake order API that records what reached it.
type upstream struct {
	srv     *httptest.Server
	calls   atomic.Int64
	mu      sync.Mutex
	headers []http.Header
	reply   atomic.Int64 // status to answer; 0 means 201
}

// newGatedFixture is a fixture whose gated orders reach up, an upstream
// that counts its calls.
func newGatedFixture(t *testing.T) (*fixture, *upstream) {
	t.Helper()
	up := newUpstream(t)
	return newFixture(t, fixtureOptions{protected: proxyTo(t, up.srv.URL)}), up
}

// requireOrderRefused: the gate answers u1's order with token by status
// and code, and the protected handler behind it never sees the order.
func requireOrderRefused(t *testing.T, f *fixture, up *upstream, token string, status int, code string) {
	t.Helper()
	f.order("u1", token).requireError(t, status, code)
	require.Zero(t, up.calls.Load(), "the protected handler was called")
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.calls.Add(1)
		u.mu.Lock()
		u.headers = append(u.headers, r.Header.Clone())
		u.mu.Unlock()
		status := int(u.reply.Load())
		if status == 0 {
			status = http.StatusCreated
		}
		w.WriteHeader(status)
		fmt.Fprint(w, `{"order_id":"o1"}`)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func proxyTo(t *testing.T, rawURL string) http.Handler {
	t.Helper()
	target, err := url.Parse(rawURL)
	require.NoError(t, err)
	h, err := upstreamproxy.New(target, upstreamproxy.Options{})
	require.NoError(t, err)
	return h
}

func TestErrorTable(t *testing.T) {
	t.Parallel()

	t.Run("QUEUE_FULL", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, fixtureOptions{room: waitroom.RoomConfig{MaxQueue: 1}})
		require.Equal(t, http.StatusOK, f.enter("u1").status)
		a := f.enter("u2")
		a.requireError(t, http.StatusTooManyRequests, "QUEUE_FULL")
		secs, err := strconv.Atoi(a.header.Get("Retry-After"))
		require.NoError(t, err)
		require.Positive(t, secs)
	})
	t.Run("ROOM_CLOSED", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, fixtureOptions{})
		require.NoError(t, f.store.UpdateRoom(t.Context(), f.room, testenv.RoomConfig(t, f.store, f.room), waitroom.RoomConfig{State: waitroom.RoomClosed}))
		a := f.enter("u1")
		a.requireError(t, http.StatusForbidden, "ROOM_CLOSED")
	})
	t.Run("ROOM_NOT_FOUND", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, fixtureOptions{})
		a := f.do("POST", "/rooms/no-such-room/enter", "", "X-User-Id", "u1")
		a.requireError(t, http.StatusNotFound, "ROOM_NOT_FOUND")
		rooms, err := f.store.Rooms(t.Context())
		require.NoError(t, err)
		require.NotContains(t, rooms, "no-such-room", "a room is never created on the fly")
	})
	t.Run("NOT_IN_QUEUE", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, fixtureOptions{})
		a := f.status("u1")
		a.requireError(t, http.StatusNotFound, "NOT_IN_QUEUE")
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
		f.admit("u1")
		requireOrderRefused(t, f, up, waitroom.NewToken(), http.StatusForbidden, "ENTRY_TOKEN_INVALID")
	})
	t.Run("TOKEN_IN_USE", func(t *testing.T) {
		t.Parallel()
		f, up := newGatedFixture(t)
		token := f.admit("u1")
		_, err := f.store.Claim(t.Context(), f.room, "u1", token) // another request holds it
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
			{"missing user", "POST", "/rooms/" + f.room + "/enter", "", nil, "X-User-Id"},
			{"user with a space", "POST", "/rooms/" + f.room + "/enter", "", []string{"X-User-Id", "a b"}, "X-User-Id"},
			{"user too long", "GET", "/rooms/" + f.room + "/status", "", []string{"X-User-Id", strings.Repeat("u", 129)}, "X-User-Id"},
			{"bad room name", "POST", "/rooms/Bad.Room/enter", "", []string{"X-User-Id", "u1"}, "room"},
			{"room name too long", "GET", "/rooms/" + strings.Repeat("r", 65) + "/status", "", []string{"X-User-Id", "u1"}, "room"},
			{"bad JSON", "POST", "/rooms/" + f.room + "/enter", `{"a":`, []string{"X-User-Id", "u1"}, "JSON"},
			{"unknown field", "POST", "/rooms/" + f.room + "/enter", `{"a":1}`, []string{"X-User-Id", "u1"}, "unknown field"},
			{"not an object", "POST", "/queue/enter", `[]`, []string{"X-User-Id", "u1"}, "JSON object"},
			{"two objects", "POST", "/queue/enter", `{}{}`, []string{"X-User-Id", "u1"}, "after the object"},
			{"body too large", "POST", "/queue/enter", "{" + strings.Repeat(" ", 70<<10) + "}", []string{"X-User-Id", "u1"}, "larger"},
			{"malformed token", "POST", "/orders", "", []string{"X-User-Id", "u1", "X-Entry-Token", "not-a-token"}, "X-Entry-Token"},
			{"order without user", "POST", "/orders", "", []string{"X-Entry-Token", waitroom.NewToken()}, "X-User-Id"},
		}
		for _, tt := range tests {
			a := f.do(tt.method, tt.path, tt.body, tt.headers...)
			require.Equal(t, http.StatusBadRequest, a.status, tt.name)
			require.Equal(t, "BAD_REQUEST", a.code(), tt.name)
			msg := a.body["error"].(map[string]any)["message"].(string)
			require.Contains(t, msg, tt.wantMessageFragments, tt.name)
		}
		require.Zero(t, up.calls.Load())
		st, err := f.store.Stats(t.Context(), f.room)
		require.NoError(t, err)
		require.Zero(t, st.Waiting, "a refused enter writes nothing")
	})
	t.Run("STORE_UNAVAILABLE", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(mustServer(t, server.Config{Store: failingStore{err: fmt.Errorf("dial tcp: refused: %w", waitroom.ErrStoreUnavailable)}}))
		t.Cleanup(srv.Close)
		for _, req := range []struct{ method, path string }{
			{"POST", "/queue/enter"}, {"GET", "/queue/position"}, {"DELETE", "/queue"}, {"GET", "/readyz"},
		} {
			r, err := http.NewRequest(req.method, srv.URL+req.path, nil)
			require.NoError(t, err)
			r.Header.Set("X-User-Id", "u1")
			a := send(t, srv.Client(), r)
			require.Equal(t, http.StatusServiceUnavailable, a.status, req.path)
			require.Equal(t, "STORE_UNAVAILABLE", a.code(), req.path)
			require.Equal(t, "5", a.header.Get("Retry-After"), req.path)
		}
	})
	t.Run("INTERNAL", func(t *testing.T) {
		t.Parallel()
		logs := &testenv.LogBuffer{}
		srv := httptest.NewServer(mustServer(t, server.Config{
			Store:  failingStore{err: errors.New("secret cause 42")},
			Logger: slog.New(slog.NewTextHandler(logs, nil)),
		}))
		t.Cleanup(srv.Close)
		r, err := http.NewRequest("POST", srv.URL+"/queue/enter", nil)
		require.NoError(t, err)
		r.Header.Set("X-User-Id", "u1")
		a := send(t, srv.Client(), r)
		a.requireError(t, http.StatusInternalServerError, "INTERNAL")
		require.Equal(t, "internal error", a.body["error"].(map[string]any)["message"])
		require.Contains(t, logs.String(), "secret cause 42", "the cause is logged")
	})
	t.Run("UPSTREAM_UNAVAILABLE", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, fixtureOptions{protected: proxyTo(t, testenv.UnreachableURL(t))})
		token := f.admit("u1")
		a := f.order("u1", token)
		a.requireError(t, http.StatusBadGateway, "UPSTREAM_UNAVAILABLE")
		// Released, not spent: the same token is claimable again.
		_, err := f.store.Claim(t.Context(), f.room, "u1", token)
		require.NoError(t, err)
	})
	t.Run("NOT_CONFIGURED", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, fixtureOptions{})
		a := f.order("u1", waitroom.NewToken())
		a.requireError(t, http.StatusNotFound, "NOT_CONFIGURED")
	})
	t.Run("NOT_FOUND and METHOD_NOT_ALLOWED", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, fixtureOptions{})
		a := f.do("GET", "/nowhere", "")
		a.requireError(t, http.StatusNotFound, "NOT_FOUND")
		a = f.do("PUT", "/rooms/"+f.room+"/enter", "", "X-User-Id", "u1")
		a.requireError(t, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
		require.Equal(t, "POST", a.header.Get("Allow"))
	})
}

func mustServer(t *testing.T, cfg server.Config) *server.Server {
	t.Helper()
	s, err := server.New(cfg)
	require.NoError(t, err)
	return s
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
	f := newFixture(t, fixtureOptions{room: waitroom.RoomConfig{Rate: 10}})

	a := f.enter("u1")
	require.Equal(t, http.StatusOK, a.status)
	require.Equal(t, "waiting", a.str("state"))
	require.Equal(t, f.room, a.str("room"))
	require.EqualValues(t, 1, a.num("position"))
	require.EqualValues(t, 0, a.num("ahead"))
	require.EqualValues(t, 1, a.num("eta_seconds"))
	require.EqualValues(t, 0, a.num("eta_low_seconds"))
	require.EqualValues(t, 2, a.num("eta_high_seconds"), "a slice and a poll of granularity")
	require.Positive(t, a.num("poll_after_ms"))
	require.Equal(t, "no-store", a.header.Get("Cache-Control"))

	a = f.do("POST", "/queue/enter", "{}", "X-User-Id", "u2") // the seed's path, default room
	require.Equal(t, http.StatusOK, a.status)
	require.EqualValues(t, 2, a.num("position"))
	require.EqualValues(t, 1, a.num("ahead"))

	// Entering again keeps the place; bodies of whitespace and {} are fine.
	for _, body := range []string{"", " \n", "{}", " { } "} {
		a = f.do("POST", "/rooms/"+f.room+"/enter", body, "X-User-Id", "u2")
		require.Equal(t, http.StatusOK, a.status, "body %q", body)
		require.EqualValues(t, 2, a.num("position"))
	}
	a = f.do("GET", "/queue/position", "", "X-User-Id", "u2")
	require.EqualValues(t, 2, a.num("position"))

	// Leaving moves the next one up.
	a = f.do("DELETE", "/rooms/"+f.room+"/queue", "", "X-User-Id", "u1")
	require.Equal(t, http.StatusNoContent, a.status)
	require.EqualValues(t, 1, f.status("u2").num("position"))
	require.Equal(t, "NOT_IN_QUEUE", f.status("u1").code())

	// Admitted: the token and its time left, rounded down.
	token := f.admit("u2")
	f.clock.Advance(1500 * time.Millisecond)
	a = f.status("u2")
	require.Equal(t, "admitted", a.str("state"))
	require.Equal(t, token, a.str("token"))
	require.EqualValues(t, 298, a.num("expires_in"))
	require.EqualValues(t, 298500, a.num("expires_in_ms"))
	a = f.enter("u2")
	require.Equal(t, "admitted", a.str("state"), "a token holder gets no second place")
	require.Equal(t, token, a.str("token"))
}

func TestPausedRoomSaysSo(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	require.NoError(t, f.store.UpdateRoom(t.Context(), f.room, testenv.RoomConfig(t, f.store, f.room), waitroom.RoomConfig{State: waitroom.RoomPaused}))
	a := f.enter("u1")
	require.Equal(t, http.StatusOK, a.status, "paused rooms still accept entries")
	require.Equal(t, true, a.body["paused"])
}

func TestConcurrentEntersGetPositionsOneToN(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	const n = 50
	// enter is f.enter for a goroutine: an error, not a failed test.
	enter := func(user string) (int64, error) {
		req, err := http.NewRequest("POST", f.srv.URL+"/rooms/"+f.room+"/enter", nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("X-User-Id", user)
		resp, err := f.srv.Client().Do(req)
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
	f := newFixture(t, fixtureOptions{room: waitroom.RoomConfig{Rate: 10}})
	for i := 1; i <= 2000; i++ {
		_, err := f.store.Enter(t.Context(), f.room, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
	}
	var lastPoll, lastETA int64
	for _, pos := range []int{1, 50, 200, 1000, 2000} {
		a := f.status(fmt.Sprintf("u%d", pos))
		require.EqualValues(t, pos, a.num("position"))
		poll, eta := a.num("poll_after_ms"), a.num("eta_seconds")
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
	f := newFixture(t, fixtureOptions{room: waitroom.RoomConfig{Rate: 10}})
	for i := 1; i <= 106; i++ {
		_, err := f.store.Enter(t.Context(), f.room, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
	}
	for _, c := range []struct {
		position, eta int64
	}{{1, 1}, {4, 1}, {6, 1}, {102, 10}, {104, 10}, {106, 11}} { // 0.1 s, 0.4 s, 0.6 s, 10.2 s, 10.4 s, 10.6 s
		a := f.status(fmt.Sprintf("u%d", c.position))
		require.EqualValues(t, c.position, a.num("position"))
		require.EqualValues(t, c.eta, a.num("eta_seconds"), "position %d", c.position)
		require.LessOrEqual(t, a.num("eta_low_seconds"), a.num("eta_seconds"))
		require.Greater(t, a.num("eta_high_seconds"), a.num("eta_seconds"))
	}
}

// TestPollHintWithinAThirdOfAbandonAfter: far back the hint would be a
// minute, but a page that follows it must never look gone; the ETA range
// surrounds the ETA.
func TestPollHintWithinAThirdOfAbandonAfter(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{room: waitroom.RoomConfig{Rate: 10, AbandonAfter: 30 * time.Second}})
	for i := 1; i <= 5000; i++ {
		_, err := f.store.Enter(t.Context(), f.room, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
	}
	for _, pos := range []int{1000, 5000} {
		a := f.status(fmt.Sprintf("u%d", pos))
		require.EqualValues(t, 10_000, a.num("poll_after_ms"), "position %d", pos)
		eta := a.num("eta_seconds")
		require.InDelta(t, float64(pos)/10, eta, 1)
		require.Less(t, a.num("eta_low_seconds"), eta)
		require.Greater(t, a.num("eta_high_seconds"), eta)
	}
}

func TestRoomSettingsAreCached(t *testing.T) {
	t.Parallel()
	c := memstore.NewManualClock(time.Now())
	counting := &countingStore{Store: memstore.New(memstore.Options{Now: c.Now})}
	_, err := counting.CreateRoom(t.Context(), "cached", waitroom.RoomConfig{})
	require.NoError(t, err)
	h := mustServer(t, server.Config{Store: counting, DefaultRoom: "cached", ConfigRefresh: time.Hour})
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

type countingStore struct {
	waitroom.Store
	roomConfigCalls atomic.Int64
}

func (s *countingStore) RoomConfig(ctx context.Context, room string) (waitroom.RoomConfig, error) {
	s.roomConfigCalls.Add(1)
	return s.Store.RoomConfig(ctx, room)
}

func TestHealth(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{})
	require.Equal(t, http.StatusOK, f.do("GET", "/healthz", "").status)
	require.Equal(t, http.StatusOK, f.do("GET", "/readyz", "").status)
}

func TestRequestsAreLoggedAtDebugOnly(t *testing.T) {
	t.Parallel()
	logs := &testenv.LogBuffer{}
	store := memRoom(t, "default", waitroom.RoomConfig{})
	h := mustServer(t, server.Config{Store: store, Logger: slog.New(slog.NewTextHandler(logs, nil))})
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
	h := mustServer(t, server.Config{Store: store, Routes: map[string]http.Handler{
		"GET /orders/{id}": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, r.PathValue("id"))
		}),
	}})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/orders/o42", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "o42", rec.Body.String())
}
