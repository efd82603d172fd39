package server

import (
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom"
)

var fuzzNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func testVisitors(secret []byte) *visitors {
	return &visitors{secret: secret, maxAge: DefaultCookieMaxAge, now: func() time.Time { return fuzzNow }}
}

// FuzzVisitorCookie: the parser takes nothing but exactly what the server
// signed, within its age, and never panics on what a browser may send.
func FuzzVisitorCookie(f *testing.F) {
	v := testVisitors([]byte("0123456789abcdef0123456789abcdef"))
	id := newVisitorID()
	valid := v.cookieFor(id)
	parts := strings.Split(valid, ".")
	f.Add(valid)
	f.Add(parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-1] + "A")
	f.Add(parts[0] + "." + parts[2]) // the old format, without the issue time
	f.Add(parts[0] + ".+" + parts[1] + "." + parts[2])
	f.Add(parts[0] + ".0" + parts[1] + "." + parts[2])
	f.Add(id + "..")
	f.Add(strings.ToUpper(valid))
	f.Add(valid + valid)
	f.Add("")
	f.Add("\x00\xff..")
	f.Fuzz(func(t *testing.T, value string) {
		user, ok := v.parse(value)
		if !ok {
			if user != "" {
				t.Fatalf("parse(%q) refused but named %q", value, user)
			}
			return
		}
		// Anything accepted is a visitor the server made: its id and issue
		// time with their own MAC, in the one canonical form.
		gotID, ok := strings.CutPrefix(user, visitorPrefix)
		if !ok || !waitroom.ValidUserID(user) || !validVisitorID(gotID) {
			t.Fatalf("parse(%q) = %q: not a visitor id", value, user)
		}
		_, rest, _ := strings.Cut(value, ".")
		issued, _, _ := strings.Cut(rest, ".")
		if value != gotID+"."+issued+"."+v.mac(gotID, issued) {
			t.Fatalf("parse(%q) accepted a value the server did not sign", value)
		}
	})
}

func TestNewVisitorsParse(t *testing.T) {
	t.Parallel()
	v := testVisitors(newVisitorSecret())
	seen := map[string]bool{}
	for range 1000 {
		id := newVisitorID()
		got, ok := v.parse(v.cookieFor(id))
		if !ok || got != visitorPrefix+id || !waitroom.ValidUserID(got) {
			t.Fatalf("parse(cookie of %q) = %q, %v", id, got, ok)
		}
		if seen[id] {
			t.Fatalf("visitor id %q made twice", id)
		}
		seen[id] = true
	}
	other := testVisitors(newVisitorSecret())
	if _, ok := other.parse(v.cookieFor(newVisitorID())); ok {
		t.Fatal("a cookie signed with another secret was accepted")
	}
}

// A cookie is accepted for its maximum age after it was issued, not after;
// nor from further in the future than the clocks' skew.
func TestVisitorCookieMaxAge(t *testing.T) {
	t.Parallel()
	now := fuzzNow
	v := &visitors{secret: newVisitorSecret(), maxAge: time.Hour, now: func() time.Time { return now }}
	cookie := v.cookieFor(newVisitorID())
	for _, tc := range []struct {
		after time.Duration
		ok    bool
	}{{0, true}, {59 * time.Minute, true}, {time.Hour + time.Second, false}, {-2 * time.Minute, false}} {
		now = fuzzNow.Add(tc.after)
		_, ok := v.parse(cookie)
		if ok != tc.ok {
			t.Errorf("%s after issue: accepted %v, want %v", tc.after, ok, tc.ok)
		}
	}
}
