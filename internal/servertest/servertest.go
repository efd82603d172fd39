// Package servertest holds what the HTTP tests of server and admin share:
// a real Server on memstore behind a real listener, its answers decoded,
// a fake order API, a headless Chromium with axe-core, and /metrics
// parsed. It is imported by tests only.
package servertest

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
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

// Fixture is a real Server on memstore behind a real listener.
type Fixture struct {
	T     *testing.T
	Clock *memstore.ManualClock
	Store *memstore.Store
	Room  string
	Srv   *httptest.Server
	Logs  *testenv.LogBuffer
}

type FixtureOptions struct {
	Room      waitroom.RoomConfig
	Protected http.Handler
	OnServed  func(room string, took time.Duration, status int)
}

var roomSeq atomic.Int64

// SetDrawClock, when set, puts a served Server's cache of draw records on
// the fixture's clock. Only server's own tests can reach that cache
// (server/export_test.go), so they set it; elsewhere the cache keeps the
// real clock, which no test outside server reads.
var SetDrawClock func(s *server.Server, now func() time.Time)

// MemRoom is an in-process store holding room, created with cfg.
func MemRoom(t *testing.T, room string, cfg waitroom.RoomConfig) *memstore.Store {
	t.Helper()
	store := memstore.New(memstore.Options{})
	_, err := store.CreateRoom(t.Context(), room, cfg)
	require.NoError(t, err)
	return store
}

func UniqueRoom(t *testing.T) string {
	return fmt.Sprintf("t%d-%d", time.Now().UnixNano()%1_000_000, roomSeq.Add(1))
}

// NewStoreFixture is a fixture's store side: memstore on a fake clock,
// holding a new room with cfg. Serve starts its server.
func NewStoreFixture(t *testing.T, cfg waitroom.RoomConfig) *Fixture {
	t.Helper()
	c := memstore.NewManualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	f := &Fixture{T: t, Clock: c, Store: memstore.New(memstore.Options{Now: c.Now}), Room: UniqueRoom(t), Logs: &testenv.LogBuffer{}}
	_, err := f.Store.CreateRoom(t.Context(), f.Room, cfg)
	require.NoError(t, err)
	return f
}

// Serve starts a server with cfg on f's store, room (the default one),
// clock and log, behind a real listener.
func (f *Fixture) Serve(cfg server.Config) *server.Server {
	f.T.Helper()
	cfg.Store, cfg.DefaultRoom, cfg.Now = f.Store, f.Room, f.Clock.Now
	cfg.Logger = slog.New(slog.NewTextHandler(f.Logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := MustServer(f.T, cfg)
	if SetDrawClock != nil {
		SetDrawClock(s, f.Clock.Now)
	}
	f.Srv = httptest.NewServer(s)
	f.T.Cleanup(f.Srv.Close)
	return s
}

// Answer is a decoded response: the status, the headers and the JSON body.
type Answer struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    string
}

func (a Answer) Code() string {
	e, _ := a.Body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// RequireError asserts that a is the error code answered with status.
func (a Answer) RequireError(t *testing.T, status int, code string, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, status, a.Status, msgAndArgs...)
	require.Equal(t, code, a.Code(), msgAndArgs...)
}

func (a Answer) Num(field string) int64 {
	n, _ := a.Body[field].(float64)
	return int64(n)
}

func (a Answer) Str(field string) string {
	s, _ := a.Body[field].(string)
	return s
}

// Do sends one request; headers are name, value pairs.
func (f *Fixture) Do(method, path, body string, headers ...string) Answer {
	f.T.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(f.T.Context(), method, f.Srv.URL+path, rd)
	require.NoError(f.T, err)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return Send(f.T, f.Srv.Client(), req)
}

// Send sends req with client and decodes its JSON answer.
func Send(t *testing.T, client *http.Client, req *http.Request) Answer {
	t.Helper()
	resp, body := testenv.Do(t, client, req)
	a := Answer{Status: resp.StatusCode, Header: resp.Header, Raw: body}
	if body != "" {
		require.NoError(t, json.Unmarshal([]byte(body), &a.Body), "body %q", body)
	}
	return a
}

func (f *Fixture) Enter(user string) Answer {
	return f.Do("POST", "/rooms/"+f.Room+"/enter", "", "X-User-Id", user)
}

func (f *Fixture) Status(user string) Answer {
	return f.Do("GET", "/rooms/"+f.Room+"/status", "", "X-User-Id", user)
}

func (f *Fixture) Order(user, token string) Answer {
	return f.Do("POST", "/orders", `{"product_id":"p1"}`, "X-User-Id", user, "X-Entry-Token", token)
}

// Admit enters user and admits it by moving the store's clock, never by
// waiting: it asks the store to admit, and if the room's bucket had nothing
// yet, moves the clock a second and asks again. The token is issued at the
// clock's time on return.
func (f *Fixture) Admit(user string) string {
	f.T.Helper()
	require.Equal(f.T, http.StatusOK, f.Enter(user).Status)
	for try := range 2 {
		if try > 0 {
			f.Clock.Advance(time.Second)
		}
		admitted, err := f.Store.Admit(f.T.Context(), f.Room)
		require.NoError(f.T, err)
		for _, a := range admitted {
			if a.User == user {
				return a.Token
			}
		}
	}
	f.T.Fatalf("%s was not admitted", user)
	return ""
}

// Upstream is a fake order API that records what reached it.
type Upstream struct {
	Srv     *httptest.Server
	Calls   atomic.Int64
	Mu      sync.Mutex
	Headers []http.Header
	Reply   atomic.Int64 // status to answer; 0 means 201
}

func NewUpstream(t *testing.T) *Upstream {
	u := &Upstream{}
	u.Srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.Calls.Add(1)
		u.Mu.Lock()
		u.Headers = append(u.Headers, r.Header.Clone())
		u.Mu.Unlock()
		status := int(u.Reply.Load())
		if status == 0 {
			status = http.StatusCreated
		}
		w.WriteHeader(status)
		fmt.Fprint(w, `{"order_id":"o1"}`)
	}))
	t.Cleanup(u.Srv.Close)
	return u
}

func ProxyTo(t *testing.T, rawURL string) http.Handler {
	t.Helper()
	target, err := url.Parse(rawURL)
	require.NoError(t, err)
	h, err := upstreamproxy.New(target, upstreamproxy.Options{})
	require.NoError(t, err)
	return h
}

func MustServer(t *testing.T, cfg server.Config) *server.Server {
	t.Helper()
	s, err := server.New(cfg)
	require.NoError(t, err)
	return s
}

func CheckAnswer(rec *httptest.ResponseRecorder) error {
	switch rec.Code {
	case http.StatusOK, http.StatusCreated:
		return nil
	case http.StatusNoContent:
		if rec.Body.Len() != 0 {
			return fmt.Errorf("204 with a body %q", rec.Body)
		}
		return nil
	case http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return nil // ServeMux cleaning a path such as /rooms/../x
	case http.StatusInternalServerError:
		return fmt.Errorf("500: %s", rec.Body)
	}
	var body struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Error.Code == "" {
		return fmt.Errorf("status %d without the error body: %q", rec.Code, rec.Body)
	}
	return nil
}
