package server

import (
	"strings"
	"testing"

	"github.com/waitroom/waitroom"
)

// FuzzVisitorCookie: the parser takes nothing but exactly what the server
// signed, and never panics on what a browser may send.
func FuzzVisitorCookie(f *testing.F) {
	v := &visitors{secret: []byte("0123456789abcdef0123456789abcdef")}
	_, valid := v.newVisitor()
	id, mac, _ := strings.Cut(valid, ".")
	f.Add(valid)
	f.Add(id + "." + mac[:len(mac)-1] + "A")
	f.Add(id + ".")
	f.Add("." + mac)
	f.Add(strings.ToUpper(valid))
	f.Add(id + "==." + mac)
	f.Add(valid + valid)
	f.Add("")
	f.Add("\x00\xff.")
	f.Fuzz(func(t *testing.T, value string) {
		user, ok := v.parse(value)
		if !ok {
			if user != "" {
				t.Fatalf("parse(%q) refused but named %q", value, user)
			}
			return
		}
		// Anything accepted is a visitor the server made: its id with the
		// id's own MAC, in the one canonical form.
		gotID, ok := strings.CutPrefix(user, visitorPrefix)
		if !ok || !waitroom.ValidUserID(user) {
			t.Fatalf("parse(%q) = %q: not a visitor id", value, user)
		}
		if value != gotID+"."+v.mac(gotID) {
			t.Fatalf("parse(%q) accepted a value the server did not sign", value)
		}
	})
}

func TestNewVisitorsParse(t *testing.T) {
	t.Parallel()
	v := &visitors{secret: newVisitorSecret()}
	seen := map[string]bool{}
	for range 1000 {
		user, cookie := v.newVisitor()
		got, ok := v.parse(cookie)
		if !ok || got != user || !waitroom.ValidUserID(user) {
			t.Fatalf("parse(%q) = %q, %v; want %q", cookie, got, ok, user)
		}
		if seen[user] {
			t.Fatalf("visitor id %q made twice", user)
		}
		seen[user] = true
	}
	other := &visitors{secret: newVisitorSecret()}
	_, cookie := v.newVisitor()
	if _, ok := other.parse(cookie); ok {
		t.Fatal("a cookie signed with another secret was accepted")
	}
}
