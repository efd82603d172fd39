package admin_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/server"
)

// FuzzAdminPatch throws PATCH bodies at the operator API: every answer is
// 200 or a known error with the JSON body, never a 500, and whatever was
// accepted leaves the room readable and changeable (a value the store could
// not read back would lock it against every later change).
func FuzzAdminPatch(f *testing.F) {
	store := memstore.New(memstore.Options{})
	if _, err := store.CreateRoom(f.Context(), "sale", waitroom.RoomConfig{}); err != nil {
		f.Fatal(err)
	}
	const token = "fuzz-admin-token-0123456789"
	h, err := server.New(server.Config{Store: store, AdminToken: token})
	if err != nil {
		f.Fatal(err)
	}
	for _, body := range []string{
		`{"rate":50}`, `{"max_active":100000000}`, `{"max_active":9223372036854775807}`, `{"max_active":1e300}`,
		`{"rate":1e-300}`, `{"rate":-1}`, `{"max_queue":0}`, `{"slice":"1ns"}`, `{"slice":"10s","rate":100000}`,
		`{"state":"paused"}`, `{"state":"melting"}`, `{"token_ttl":"2562047h"}`, `{"lease":"-1s"}`,
		`{"stock":1000000001}`, `{"abandon_after":"1ms"}`, `{"unknown":1}`, `{}`, `null`, `[]`, `{"rate":"fast"}`,
		`{"rate":50}{"rate":60}`, "",
	} {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest("PATCH", "/admin/rooms/sale", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if err := servertest.CheckAnswer(rec); err != nil {
			t.Fatalf("PATCH %q: %v", body, err)
		}
		cfg, err := store.RoomConfig(t.Context(), "sale")
		if err != nil {
			t.Fatalf("after PATCH %q the room cannot be read: %v", body, err)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("after PATCH %q the room holds an invalid setting: %v", body, err)
		}
		if err := store.UpdateRoom(t.Context(), "sale", cfg, cfg); err != nil {
			t.Fatalf("after PATCH %q the room cannot be changed: %v", body, err)
		}
	})
}
