package server

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/waitroom/waitroom"
)

// Visitor identity for browsers that reach the waiting page without the
// shop's auth layer in front: a random id and its issue time in a cookie
// signed with Config.CookieSecret. The id is put into the user header before
// the handlers and the gate run, so they, and the order API behind the
// gate, see one user however it was identified. A user header from a
// trusted proxy wins: the auth layer knows better than a cookie; from
// anyone else it is ignored (TrustedProxies).
const (
	// MinCookieSecret is the shortest Config.CookieSecret accepted: the
	// HMAC key needs as many bits as its output has.
	MinCookieSecret = 32
	// DefaultCookieMaxAge is how long a visitor cookie is accepted after
	// it was issued: longer than any wait and token, so closing the
	// browser mid-queue does not cost the place.
	DefaultCookieMaxAge = 24 * time.Hour

	visitorCookie = "waitroom_visitor"
	// visitorPrefix marks the store's user ids that came from a cookie, so
	// an operator reading the store can tell them from shop users.
	visitorPrefix = "visitor-"
	visitorIDLen  = 22 // 128 bits, base64url without padding
	visitorMACLen = 43 // HMAC-SHA256, base64url without padding
	maxIssuedLen  = 12 // unix seconds in decimal, with room to spare
	// visitorMACContext keeps these MACs apart from anything else a shared
	// secret might ever sign (v2: the issue time is under the MAC).
	visitorMACContext = "waitroom visitor cookie v2\x00"
	// cookieClockSkew is how far in the future an issue time may lie: the
	// instances' clocks differ a little.
	cookieClockSkew = time.Minute
)

var visitorEncoding = base64.RawURLEncoding.Strict()

// visitors signs and checks visitor cookies.
type visitors struct {
	secret []byte
	maxAge time.Duration
	secure bool // Secure even without TLS here (TLS ends at a proxy)
	now    func() time.Time
}

// newVisitorSecret returns a random key for a server configured without
// one.
func newVisitorSecret() []byte {
	b := make([]byte, MinCookieSecret)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return b
}

// newVisitorID returns a fresh visitor id (without visitorPrefix).
func newVisitorID() string {
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	return visitorEncoding.EncodeToString(raw[:])
}

// cookieFor returns the cookie value of visitor id, issued now.
func (v *visitors) cookieFor(id string) string {
	issued := strconv.FormatInt(v.now().Unix(), 10)
	return id + "." + issued + "." + v.mac(id, issued)
}

func (v *visitors) mac(id, issued string) string {
	m := hmac.New(sha256.New, v.secret)
	m.Write([]byte(visitorMACContext))
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(issued))
	return visitorEncoding.EncodeToString(m.Sum(nil))
}

// parse returns the user id a cookie value names when its MAC is right and
// it is not older than the maximum age. Anything else (forged, altered,
// truncated, expired, another format) is no visitor.
func (v *visitors) parse(value string) (user string, ok bool) {
	if len(value) > visitorIDLen+1+maxIssuedLen+1+visitorMACLen {
		return "", false
	}
	id, rest, ok1 := strings.Cut(value, ".")
	issued, mac, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || len(id) != visitorIDLen || len(mac) != visitorMACLen || len(issued) == 0 || len(issued) > maxIssuedLen {
		return "", false
	}
	if !validVisitorID(id) {
		return "", false
	}
	secs, err := strconv.ParseInt(issued, 10, 64)
	if err != nil || secs < 0 || strconv.FormatInt(secs, 10) != issued {
		return "", false // one spelling per time: no "+5" or "007"
	}
	// hmac.Equal compares in constant time: the answer must not tell a
	// forger how many leading characters were right.
	if !hmac.Equal([]byte(mac), []byte(v.mac(id, issued))) {
		return "", false
	}
	age := v.now().Sub(time.Unix(secs, 0))
	if age > v.maxAge || age < -cookieClockSkew {
		return "", false
	}
	return visitorPrefix + id, true
}

// fromCookie returns the visitor a request's cookie names.
func (v *visitors) fromCookie(r *http.Request) (user string, ok bool) {
	// Several cookies of the name (one per path or domain) may arrive;
	// the first valid one counts.
	for _, c := range r.CookiesNamed(visitorCookie) {
		if user, ok := v.parse(c.Value); ok {
			return user, true
		}
	}
	return "", false
}

// setCookie sends a visitor's cookie: HttpOnly (page scripts never need
// it), SameSite=Lax (other sites cannot post as the visitor), Secure on TLS
// or when TLS ends at a proxy (Config.CookieSecure).
func (v *visitors) setCookie(w http.ResponseWriter, r *http.Request, id string) {
	http.SetCookie(w, &http.Cookie{
		Name:     visitorCookie,
		Value:    v.cookieFor(id),
		Path:     "/",
		MaxAge:   int(v.maxAge.Seconds()),
		HttpOnly: true,
		SameSite: http.SameSiteLaxMode,
		Secure:   v.secure || r.TLS != nil,
	})
}

// DefaultTrustedProxies is who may set the user header and
// X-Forwarded-For when Config.TrustedProxies is nil: loopback, so a shop's
// auth layer on the same machine (or curl) works out of the box.
var DefaultTrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// trustedProxies decides whose headers count.
type trustedProxies []netip.Prefix

func (t trustedProxies) contains(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// peer is the address the connection comes from.
func peer(r *http.Request) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	return a.Unmap(), err == nil
}

// clientIP is the client a request is for: the connection's peer, or, when
// that is a trusted proxy, the X-Forwarded-For hop before it, and so on
// leftwards while the hops are trusted. Hops a client wrote itself sit left
// of the first untrusted one and never count.
func (t trustedProxies) clientIP(r *http.Request) netip.Addr {
	ip, ok := peer(r)
	if !ok {
		return netip.Addr{}
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0 && t.contains(ip); i-- {
		hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break // a garbled hop: the trusted proxy before it is the client
		}
		ip = hop.Unmap()
	}
	return ip
}

// addressKey is the key of a client address for the per-address limits:
// an IPv4 address, or the /64 of an IPv6 one, the least a subscriber is
// given (RFC 6177), so that a client cannot be a new key per address of
// its prefix, nor per zone suffix written after an address.
func addressKey(a netip.Addr) string {
	a = a.Unmap()
	if !a.Is6() {
		return a.String()
	}
	p, _ := a.WithZone("").Prefix(64) // an IPv6 address always has a /64
	return p.String()
}

// identify decides who a request is for, before any route runs: the user
// header only from a trusted proxy (from anyone else it is removed, so no
// handler, gate or upstream believes it), otherwise the visitor cookie.
func (s *Server) identify(r *http.Request) {
	if _, sent := r.Header[s.userHeaderKey]; sent {
		if ip, ok := peer(r); !ok || !s.trusted.contains(ip) {
			delete(r.Header, s.userHeaderKey)
		}
	}
	if r.Header.Get(s.userHeader) != "" {
		return
	}
	if user, ok := s.visitors.fromCookie(r); ok {
		r.Header.Set(s.userHeader, user)
	}
}

// visitorID is the id of a visitor user, without its prefix.
func visitorID(user string) (string, bool) {
	return strings.CutPrefix(user, visitorPrefix)
}

// validVisitorID reports whether id has the shape newVisitorID gives: that
// of an entry token, 128 bits in base64url.
func validVisitorID(id string) bool {
	return waitroom.ValidToken(id)
}
