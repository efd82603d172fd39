package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/server"
)

// hotPair is two servers alike but for their routing of ENTER and STATUS:
// the hot path (hotpath.go) in one, the ServeMux in the other (a shop
// route under /rooms/ turns the hot path off).
func hotPair(t *testing.T) (hot, mux http.Handler) {
	t.Helper()
	clock := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	build := func(routes map[string]http.Handler) http.Handler {
		store := memstore.New(memstore.Options{Now: func() time.Time { return clock }})
		for _, room := range []string{"default", "sale"} {
			_, err := store.CreateRoom(t.Context(), room, waitroom.RoomConfig{MaxQueue: 100})
			require.NoError(t, err)
		}
		s, err := server.New(server.Config{Store: store, Routes: routes})
		require.NoError(t, err)
		return s
	}
	shop := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	return build(nil), build(map[string]http.Handler{"GET /rooms/{room}/shop": shop})
}

// pollHint is the one field of an answer drawn at random per request.
var pollHint = regexp.MustCompile(`"poll_after_ms":\d+`)

// TestHotPathAnswersAsTheServeMux: every request the hot path might take
// or must leave (other methods, unclean or escaped paths, bad rooms,
// users and bodies) is answered byte for byte as the ServeMux's routing
// answers it, status and headers included.
func TestHotPathAnswersAsTheServeMux(t *testing.T) {
	t.Parallel()
	hot, mux := hotPair(t)
	type request struct{ method, target, user, body string }
	requests := []request{
		{"POST", "/rooms/default/enter", "alice", ""},
		{"POST", "/rooms/default/enter", "alice", ""},
		{"POST", "/rooms/sale/enter", "bob", "{}"},
		{"POST", "/queue/enter", "carol", "  "},
		{"POST", "/rooms/default/enter", "dave", `{"x":1}`},
		{"POST", "/rooms/default/enter", "dave", "[1]"},
		{"POST", "/rooms/default/enter", "", ""},
		{"POST", "/rooms/default/enter", "bad user!", ""},
		{"POST", "/rooms/Default/enter", "erin", ""},
		{"POST", "/rooms/-x/enter", "erin", ""},
		{"POST", "/rooms/nosuch/enter", "erin", ""},
		{"POST", "/rooms/%64efault/enter", "erin", ""},
		{"POST", "/rooms/a%2Fb/enter", "erin", ""},
		{"POST", "/rooms/x/../default/enter", "erin", ""},
		{"POST", "/rooms//enter", "erin", ""},
		{"POST", "//rooms/default/enter", "erin", ""},
		{"POST", "/rooms/default/enter/", "erin", ""},
		{"POST", "/rooms/default/enter?x=1", "erin", ""},
		{"POST", "/rooms/" + strings.Repeat("a", 65) + "/enter", "erin", ""},
		{"GET", "/rooms/default/status", "alice", ""},
		{"GET", "/rooms/sale/status", "bob", ""},
		{"GET", "/queue/position", "carol", ""},
		{"GET", "/rooms/default/status", "zed", ""},
		{"GET", "/rooms/default/status", "", ""},
		{"HEAD", "/rooms/default/status", "alice", ""},
		{"POST", "/rooms/default/status", "alice", ""},
		{"GET", "/rooms/default/enter", "alice", ""},
		{"PUT", "/queue/enter", "alice", ""},
		{"GET", "/queue/position/", "alice", ""},
		{"DELETE", "/rooms/default/queue", "carol", ""},
		{"GET", "/queue/position", "carol", ""},
	}
	for _, q := range requests {
		answer := func(h http.Handler) string {
			var body io.Reader
			if q.body != "" {
				body = strings.NewReader(q.body)
			}
			req := httptest.NewRequest(q.method, q.target, body)
			req.RemoteAddr = "127.0.0.1:1234"
			if q.user != "" {
				req.Header.Set("X-User-Id", q.user)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			var b strings.Builder
			_ = rec.Result().Write(&b)
			return pollHint.ReplaceAllString(b.String(), `"poll_after_ms":N`)
		}
		want := answer(mux)
		require.Equal(t, want, answer(hot), "%s %s as %q", q.method, q.target, q.user)
	}
}

// TestHotPathLeavesMoreSpecificRoutes: a shop's route that is more
// specific than a hot one, or one on a host of its own, is served, not
// taken by the hot path.
func TestHotPathLeavesMoreSpecificRoutes(t *testing.T) {
	t.Parallel()
	for _, pattern := range []string{"POST /rooms/vip/enter", "shop.example/", "GET shop.example/queue/position"} {
		store := memstore.New(memstore.Options{})
		for _, room := range []string{"default", "vip"} {
			_, err := store.CreateRoom(t.Context(), room, waitroom.RoomConfig{})
			require.NoError(t, err)
		}
		shop := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
		s, err := server.New(server.Config{Store: store, Routes: map[string]http.Handler{pattern: shop}})
		require.NoError(t, err)
		method, target := "POST", "http://shop.example/rooms/vip/enter"
		if strings.Contains(pattern, "position") {
			method, target = "GET", "http://shop.example/queue/position"
		}
		req := httptest.NewRequest(method, target, nil)
		req.RemoteAddr = "127.0.0.1:1234"
		req.Header.Set("X-User-Id", "alice")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		require.Equal(t, http.StatusTeapot, rec.Code, pattern)
	}
}
