package waitroom_test

import (
	"encoding/base64"
	"testing"

	"github.com/waitroom/waitroom"
)

// FuzzValidToken: only the shape NewToken gives passes (22 characters of
// unpadded base64url, 128 bits), and checking never panics.
func FuzzValidToken(f *testing.F) {
	f.Add(waitroom.NewToken())
	f.Add("AAAAAAAAAAAAAAAAAAAAAA")
	f.Add("AAAAAAAAAAAAAAAAAAAAA=")
	f.Add("AAAAAAAAAAAAAAAAAAAAAAA")
	f.Add("+/AAAAAAAAAAAAAAAAAAAA")
	f.Add("0\r000000\r0000000000000") // the decoder skips CR and LF
	f.Add("AAAAAAAAAAAAAAAAAAAAAB")   // bits past the 128th
	f.Add("")
	f.Add("\xff\xfe")
	f.Fuzz(func(t *testing.T, s string) {
		if !waitroom.ValidToken(s) {
			return
		}
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(b) != 16 || base64.RawURLEncoding.EncodeToString(b) != s {
			t.Fatalf("ValidToken(%q) passed a value NewToken cannot give", s)
		}
	})
}

// FuzzValidUserID: a user id that passes is 1–128 bytes of printable ASCII
// without spaces: safe in a store key, a header and a log line.
func FuzzValidUserID(f *testing.F) {
	for _, s := range []string{"u1", "alice@example.com", "a b", "", "\x00", "é", "{room}", string(make([]byte, 129))} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !waitroom.ValidUserID(s) {
			return
		}
		if len(s) < 1 || len(s) > waitroom.MaxUserIDLen {
			t.Fatalf("ValidUserID(%q): length %d", s, len(s))
		}
		for i := 0; i < len(s); i++ {
			if s[i] <= ' ' || s[i] > '~' {
				t.Fatalf("ValidUserID(%q): byte %d is %q", s, i, s[i])
			}
		}
	})
}
