package server

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom"
)

// FuzzEnterBody: the enter body is empty, whitespace or an object with at
// most challenge and nonce; anything else is BAD_REQUEST, never a panic,
// and an accepted body's fields are what it said.
func FuzzEnterBody(f *testing.F) {
	for _, body := range []string{
		"", "  \\n", "{}", `{"challenge":"c1.x","nonce":"42"}`, `{"nonce":1}`, `{"a":1}`, "null", "[]", "{}{}",
		`{"challenge":"` + strings.Repeat("x", 70000) + `"}`, "\xff", `{"challenge":"\u0000"}`,
	} {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest("POST", "/queue/enter", strings.NewReader(body))
		got, err := readEnterBody(req)
		if err != nil {
			if waitroom.ErrorCode(err) != waitroom.ErrBadRequest.Code {
				t.Fatalf("body %q: %v is not BAD_REQUEST", body, err)
			}
			return
		}
		if trimmed := bytes.TrimSpace([]byte(body)); len(trimmed) == 0 && got != (enterBody{}) {
			t.Fatalf("empty body %q read as %+v", body, got)
		}
	})
}

// FuzzJoinSolution: whatever a client sends as challenge and nonce, only a
// challenge this server issued, for this room and user, with a nonce that
// solves it, passes; and checking never panics.
func FuzzJoinSolution(f *testing.F) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := &Server{joinDifficulty: 4, visitors: visitors{secret: []byte("0123456789abcdef0123456789abcdef"), now: func() time.Time { return now }}}
	good := s.newChallenge(challengeForUser, "sale", "u1")
	f.Add("sale", "u1", good, "7")
	f.Add("sale", "u2", good, "7")
	f.Add("sale", "u1", good+"x", "1")
	f.Add("sale", "u1", strings.Replace(good, ".4.", ".0.", 1), "0")
	f.Add("sale", "u1", "c1....", "")
	f.Add("sale", "u1", "", "99999999999999999999999")
	f.Fuzz(func(t *testing.T, room, user, challenge, nonce string) {
		err := s.checkSolution(room, user, challenge, nonce)
		if err == nil && (challenge != good || room != "sale" || user != "u1") {
			t.Fatalf("accepted challenge %q for %q in %q", challenge, user, room)
		}
	})
}

// FuzzClientIP: whatever X-Forwarded-For says, the client address is a
// hop right of every untrusted one: a client cannot name another address
// by writing hops of its own.
func FuzzClientIP(f *testing.F) {
	f.Add("203.0.113.5", "127.0.0.1:1")
	f.Add("198.51.100.1, 203.0.113.5", "127.0.0.1:1")
	f.Add("garbage, 127.0.0.1", "127.0.0.1:1")
	f.Add("10.0.0.1", "192.0.2.1:5")
	f.Add(",,,", "[::1]:1")
	f.Fuzz(func(t *testing.T, xff, remote string) {
		req := &http.Request{RemoteAddr: remote, Header: http.Header{"X-Forwarded-For": {xff}}}
		ip := trustedProxies(DefaultTrustedProxies).clientIP(req)
		p, ok := peer(req)
		if ok && !trustedProxies(DefaultTrustedProxies).contains(p) && ip != p {
			t.Fatalf("untrusted peer %s, but the client is %s", p, ip)
		}
	})
}

// FuzzAddressKey: an address and any other of its IPv6 /64, with or
// without a zone, or written IPv4-mapped, are one key; two IPv4 addresses
// are two.
func FuzzAddressKey(f *testing.F) {
	f.Add("2001:db8:1:2::1", uint64(5), "eth0")
	f.Add("203.0.113.5", uint64(0), "")
	f.Add("::ffff:203.0.113.5", uint64(1), "1")
	f.Fuzz(func(t *testing.T, text string, low uint64, zone string) {
		a, err := netip.ParseAddr(text)
		if err != nil {
			return
		}
		key := addressKey(a)
		if a.Unmap().Is4() {
			b := a.Unmap().As4()
			b[3]++
			if addressKey(netip.AddrFrom4(b)) == key || addressKey(netip.AddrFrom16(a.As16())) != key {
				t.Fatalf("%s: IPv4 keys do not go per address", a)
			}
			return
		}
		b := a.WithZone("").As16()
		binary.BigEndian.PutUint64(b[8:], low)
		other := netip.AddrFrom16(b)
		if zone != "" && !strings.ContainsAny(zone, "%") {
			other = other.WithZone(zone)
		}
		if addressKey(other) != key {
			t.Fatalf("%s and %s are in one /64 but have keys %q and %q", a, other, key, addressKey(other))
		}
	})
}
