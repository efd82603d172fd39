package server

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"time"

	"github.com/waitroom/waitroom"
)

// Visitor identity for browsers that reach the waiting page without the
// shop's auth layer in front: a random id in a cookie signed with
// Config.CookieSecret. The id is put into the user header before the
// handlers and the gate run, so they, and the order API behind the gate,
// see one user however it was identified. A user header, when present,
// wins: the auth layer knows better than a cookie.
const (
	// MinCookieSecret is the shortest Config.CookieSecret accepted: the
	// HMAC key needs as many bits as its output has.
	MinCookieSecret = 32

	visitorCookie = "waitroom_visitor"
	// visitorPrefix marks the store's user ids that came from a cookie, so
	// an operator reading the store can tell them from shop users.
	visitorPrefix = "visitor-"
	visitorIDLen  = 22 // 128 bits, base64url without padding
	visitorMACLen = 43 // HMAC-SHA256, base64url without padding
	// visitorCookieMaxAge outlives any wait and token, so closing the
	// browser mid-queue does not cost the place; it is renewed on each
	// page load.
	visitorCookieMaxAge = 24 * time.Hour
	// visitorMACContext keeps these MACs apart from anything else a shared
	// secret might ever sign.
	visitorMACContext = "waitroom visitor cookie v1\x00"
)

var visitorEncoding = base64.RawURLEncoding.Strict()

// visitors signs and checks visitor cookies.
type visitors struct {
	secret []byte
}

// newVisitorSecret returns a random key for a server configured without
// one.
func newVisitorSecret() []byte {
	b := make([]byte, MinCookieSecret)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return b
}

// newVisitor returns a fresh visitor's user id and its cookie value.
func (v *visitors) newVisitor() (user, cookie string) {
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	id := visitorEncoding.EncodeToString(raw[:])
	return visitorPrefix + id, id + "." + v.mac(id)
}

func (v *visitors) mac(id string) string {
	m := hmac.New(sha256.New, v.secret)
	m.Write([]byte(visitorMACContext))
	m.Write([]byte(id))
	return visitorEncoding.EncodeToString(m.Sum(nil))
}

// parse returns the user id a cookie value names when its MAC is right.
// Anything else (forged, altered, truncated, another format) is no visitor.
func (v *visitors) parse(value string) (user string, ok bool) {
	if len(value) != visitorIDLen+1+visitorMACLen || value[visitorIDLen] != '.' {
		return "", false
	}
	id, mac := value[:visitorIDLen], value[visitorIDLen+1:]
	if _, err := visitorEncoding.DecodeString(id); err != nil {
		return "", false
	}
	// hmac.Equal compares in constant time: the answer must not tell a
	// forger how many leading characters were right.
	if !hmac.Equal([]byte(mac), []byte(v.mac(id))) {
		return "", false
	}
	return visitorPrefix + id, true
}

// fromCookie returns the visitor a request's cookie names and that cookie's
// value.
func (v *visitors) fromCookie(r *http.Request) (user, cookie string, ok bool) {
	// Several cookies of the name (one per path or domain) may arrive;
	// the first valid one counts.
	for _, c := range r.CookiesNamed(visitorCookie) {
		if user, ok := v.parse(c.Value); ok {
			return user, c.Value, true
		}
	}
	return "", "", false
}

// setCookie sends a visitor's cookie: HttpOnly (page scripts never need
// it), SameSite=Lax (other sites cannot post as the visitor), Secure on TLS.
func setVisitorCookie(w http.ResponseWriter, r *http.Request, value string) {
	http.SetCookie(w, &http.Cookie{
		Name:     visitorCookie,
		Value:    value,
		Path:     "/",
		MaxAge:   int(visitorCookieMaxAge.Seconds()),
		HttpOnly: true,
		SameSite: http.SameSiteLaxMode,
		Secure:   r.TLS != nil,
	})
}

// hasUserHeader reports whether the auth layer named the user; a header
// it sent empty counts as absent.
func (s *Server) hasUserHeader(r *http.Request) bool {
	return r.Header.Get(s.userHeader) != ""
}

// identify lets a visitor with a valid cookie through as that visitor.
// Without one the request goes on as it came, and the handler or the gate
// refuses a missing user as before. With renew, the cookie is sent again
// so that its lifetime restarts (enter, not the frequent status polls).
func (s *Server) identify(renew bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hasUserHeader(r) {
			if user, cookie, ok := s.visitors.fromCookie(r); ok {
				r.Header.Set(s.userHeader, user)
				if renew {
					setVisitorCookie(w, r, cookie)
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// pageVisitor returns the user a page load is for: the user header, or the
// cookie's visitor, or a new visitor whose cookie it sets. A forged cookie
// yields a new visitor, never the one it tried to name.
func (s *Server) pageVisitor(w http.ResponseWriter, r *http.Request) (string, error) {
	if s.hasUserHeader(r) {
		user := r.Header.Get(s.userHeader)
		if !waitroom.ValidUserID(user) {
			return "", waitroom.BadRequest("malformed " + s.userHeader + " header")
		}
		return user, nil
	}
	user, cookie, ok := s.visitors.fromCookie(r)
	if !ok {
		user, cookie = s.visitors.newVisitor()
	}
	setVisitorCookie(w, r, cookie)
	r.Header.Set(s.userHeader, user)
	return user, nil
}
