package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/server"
)

// The hot paths through the whole handler on memstore, without the network:
// what the server adds on top of the store.

func benchServer(b testing.TB) (http.Handler, *memstore.Store) {
	store := memstore.New(memstore.Options{})
	if _, err := store.CreateRoom(b.Context(), "bench", waitroom.RoomConfig{MaxQueue: waitroom.MaxMaxQueue}); err != nil {
		b.Fatal(err)
	}
	s, err := server.New(server.Config{Store: store, DefaultRoom: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	return s, store
}

// BenchmarkEnterHTTP: each iteration a new user takes a place.
func BenchmarkEnterHTTP(b *testing.B) { benchEnter(b, serveEach) }

// BenchmarkStatusHTTP: users spread over a queue of 10,000 ask for their
// place.
func BenchmarkStatusHTTP(b *testing.B) { benchStatus(b, serveEach) }

// BenchmarkEnterHandler and BenchmarkStatusHandler: the same, allocations
// counted as TestEnterAllocations counts them: the server's alone, not
// httptest's (benchHandler).
func BenchmarkEnterHandler(b *testing.B)  { benchEnter(b, benchHandler) }
func BenchmarkStatusHandler(b *testing.B) { benchStatus(b, benchHandler) }

// benchServe serves b.N requests by h, as the user userOf(i) for the i-th.
type benchServe func(b *testing.B, h http.Handler, method, path string, userOf func(i int) string)

func benchEnter(b *testing.B, serve benchServe) {
	h, _ := benchServer(b)
	serve(b, h, "POST", "/rooms/bench/enter", func(i int) string { return "user-" + strconv.Itoa(i) })
}

func benchStatus(b *testing.B, serve benchServe) {
	h, store := benchServer(b)
	users := waitingUsers(b, store, 10_000)
	serve(b, h, "GET", "/rooms/bench/status", func(i int) string { return users[(i*7919)%len(users)] })
}

// waitingUsers enters n users into the bench room and returns them.
func waitingUsers(tb testing.TB, store *memstore.Store, n int) []string {
	users := make([]string, n)
	for i := range users {
		users[i] = "user-" + strconv.Itoa(i)
		if _, err := store.Enter(tb.Context(), "bench", users[i]); err != nil {
			tb.Fatal(err)
		}
	}
	return users
}

// serveEach serves one request per iteration, as the user userOf(i) for
// the i-th, and fails on any answer but 200.
func serveEach(b *testing.B, h http.Handler, method, path string, userOf func(i int) string) {
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		req := httptest.NewRequest(method, path, nil)
		req.RemoteAddr = "127.0.0.1:1234" // the user header is believed from loopback only
		req.Header.Set("X-User-Id", userOf(i))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
}

// BenchmarkEnterHTTPRedis: ENTER through the whole handler on Redis, with
// serve's defaults (the user limit in Redis, 5/s, answered by this
// instance's share), 32 callers at once as under wrk. A new user each
// time. For profiles of what the server adds around the Redis round trip:
// the time per op is Redis's as much as ours, the allocations are ours.
func BenchmarkEnterHTTPRedis(b *testing.B) {
	client, err := redisstore.Open(testenv.RedisURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Close() })
	prefix := "wrbench:" + waitroom.NewToken()
	b.Cleanup(func() { _ = redisstore.DeletePrefix(context.Background(), client, prefix) })
	store := redisstore.New(client, redisstore.Options{Prefix: prefix})
	if _, err := store.CreateRoom(b.Context(), "bench", waitroom.RoomConfig{MaxQueue: waitroom.MaxMaxQueue}); err != nil {
		b.Fatal(err)
	}
	h, err := server.New(server.Config{Store: store, Limiter: store, DefaultRoom: "bench", UserRateLimit: 5})
	if err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest("POST", "/rooms/bench/enter", nil)
			req.RemoteAddr = "127.0.0.1:1234"
			req.Header.Set("X-User-Id", "user-"+strconv.FormatInt(n.Add(1), 10))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				b.Errorf("status %d: %s", rec.Code, rec.Body)
				return
			}
		}
	})
}
