package server_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/server"
)

// FuzzEnter throws outside input (room names, user headers, bodies, entry
// tokens) at the handler: every answer is a known status with a JSON body,
// never a 500 and never a panic.
func FuzzEnter(f *testing.F) {
	store := memstore.New(memstore.Options{})
	for _, room := range []string{"default", "sale", "tiny"} {
		cfg := waitroom.RoomConfig{}
		if room == "tiny" {
			cfg.MaxQueue = 2
		}
		if _, err := store.CreateRoom(f.Context(), room, cfg); err != nil {
			f.Fatal(err)
		}
	}
	h, err := server.New(server.Config{Store: store, Protected: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})})
	if err != nil {
		f.Fatal(err)
	}

	f.Add("sale", "u1", "", "")
	f.Add("default", "user-2", "{}", "")
	f.Add("tiny", "x", `{"a":1}`, "AAAAAAAAAAAAAAAAAAAAAA")
	f.Add("Sale", "", "null", "bad")
	f.Add("../x", "u 1", "{}{}", "")
	f.Add("sale%2Fx", "\x00", "[", "\xff")
	f.Add(strings.Repeat("a", 65), strings.Repeat("u", 200), "  {  }  ", "")

	f.Fuzz(func(t *testing.T, room, user, body, token string) {
		paths := []struct{ method, path string }{
			{"POST", "/rooms/" + url.PathEscape(room) + "/enter"},
			{"GET", "/rooms/" + url.PathEscape(room) + "/status"},
			{"DELETE", "/rooms/" + url.PathEscape(room) + "/queue"},
			{"POST", "/queue/enter"},
			{"POST", "/orders"},
		}
		for _, p := range paths {
			req, err := http.NewRequest(p.method, "http://waitroom.test"+p.path, strings.NewReader(body))
			if err != nil {
				continue // not a request a client could send
			}
			req.RemoteAddr = "127.0.0.1:40000" // a trusted proxy: its user header counts
			req.Header["X-User-Id"] = []string{user}
			req.Header["X-Entry-Token"] = []string{token}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if err := servertest.CheckAnswer(rec); err != nil {
				t.Fatalf("%s %s user %q body %q token %q: %v", p.method, p.path, user, body, token, err)
			}
		}
	})
}
