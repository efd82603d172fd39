package server

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom"
)

// FuzzHoldID feeds the hold id decoder anything: it never panics, refuses
// everything with HOLD_INVALID but an id the sealer made (each fuzz
// worker seals its own seed, under a nonce of its own), in one spelling
// only, and opens that to the very hold sealed.
func FuzzHoldID(f *testing.F) {
	s := newHoldSealer([]byte(strings.Repeat("k", MinCookieSecret)))
	hold := waitroom.Hold{Room: "default", User: "u1", Token: strings.Repeat("A", 22), Lease: "l1", LeaseFor: 30 * time.Second, Units: 2}
	sealed := s.seal(hold)
	f.Add(sealed)
	f.Add(sealed[:len(sealed)-1])
	f.Add("")
	f.Add("!!!")
	f.Add(strings.Repeat("A", maxHoldID+1))
	f.Fuzz(func(t *testing.T, id string) {
		got, err := s.open(id)
		if err != nil {
			if err != errHoldInvalid {
				t.Fatalf("open(%q) = %v, want HOLD_INVALID", id, err)
			}
			return
		}
		if base64.RawURLEncoding.EncodeToString(mustDecode(t, id)) != id {
			t.Fatalf("open(%q) took a non-canonical encoding", id)
		}
		if got != hold {
			t.Fatalf("open(seal(%+v)) = %+v", hold, got)
		}
	})
}

func mustDecode(t *testing.T, id string) []byte {
	raw, err := base64.RawURLEncoding.Strict().DecodeString(id)
	if err != nil {
		t.Fatalf("open(%q) took what is not base64url: %v", id, err)
	}
	return raw
}
