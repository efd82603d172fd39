package server_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/server"
)

// The hot paths through the whole handler on memstore, without the network:
// what the server adds on top of the store.

func benchServer(b *testing.B) (http.Handler, *memstore.Store) {
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
func BenchmarkEnterHTTP(b *testing.B) {
	h, _ := benchServer(b)
	serveEach(b, h, "POST", "/rooms/bench/enter", func(i int) string { return "user-" + strconv.Itoa(i) })
}

// BenchmarkStatusHTTP: users spread over a queue of 10,000 ask for their
// place.
func BenchmarkStatusHTTP(b *testing.B) {
	h, store := benchServer(b)
	const waiting = 10_000
	users := make([]string, waiting)
	for i := range users {
		users[i] = "user-" + strconv.Itoa(i)
		if _, err := store.Enter(b.Context(), "bench", users[i]); err != nil {
			b.Fatal(err)
		}
	}
	serveEach(b, h, "GET", "/rooms/bench/status", func(i int) string { return users[(i*7919)%waiting] })
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
