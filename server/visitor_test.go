package server_test

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/server"
)

func TestVisitorCookieIsSignedHttpOnlyLax(t *testing.T) {
	t.Parallel()
	f := newPageFixture(t, pageOptions{})

	p := f.visit("/")
	c := p.visitorCookie()
	require.NotNil(t, c, "a visitor without the user header gets a cookie")
	require.True(t, c.HttpOnly)
	require.Equal(t, http.SameSiteLaxMode, c.SameSite)
	require.Equal(t, "/", c.Path)
	require.False(t, c.Secure, "plain HTTP: a Secure cookie would never come back")
	require.Positive(t, c.MaxAge)

	// Over TLS the cookie is Secure.
	req := httptest.NewRequest("POST", "/", nil)
	req.TLS = &tls.ConnectionState{}
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	require.Equal(t, http.StatusSeeOther, rec.Code)
	tlsCookie := page{header: rec.Header()}.visitorCookie()
	require.NotNil(t, tlsCookie)
	require.True(t, tlsCookie.Secure)
	require.NotEqual(t, c.Value, tlsCookie.Value, "each new visitor gets a new id")
}

func TestValidVisitorCookieKeepsThePlace(t *testing.T) {
	t.Parallel()
	f := newPageFixture(t, pageOptions{})
	f.enterUsers("u1")

	c := f.visit("/").visitorCookie()
	require.NotNil(t, c)
	for range 3 {
		p := f.get("/", c)
		require.Equal(t, http.StatusOK, p.status)
		require.Equal(t, "2", text(t, p.body, "position"))
		require.Nil(t, p.visitorCookie(), "a page load sets no cookie")
	}
	require.Equal(t, int64(2), f.waiting())

	// Every API endpoint knows the visitor by the cookie.
	st := f.statusOf(c)
	require.Equal(t, http.StatusOK, st.status)
	require.EqualValues(t, 2, st.json(t)["position"])
	require.Nil(t, st.visitorCookie(), "status polls do not set the cookie")

	enter := f.request("POST", "/rooms/"+f.room+"/enter", []*http.Cookie{c})
	require.Equal(t, http.StatusOK, enter.status)
	require.EqualValues(t, 2, enter.json(t)["position"])

	leave := f.request("DELETE", "/rooms/"+f.room+"/queue", []*http.Cookie{c})
	require.Equal(t, http.StatusNoContent, leave.status)
	require.Equal(t, int64(1), f.waiting())
	require.Equal(t, http.StatusNotFound, f.statusOf(c).status)
}

// A cookie that was not made by the server, or was changed, names nobody:
// the page treats the browser as a new visitor with a new place, and never
// as the visitor the cookie tried to name.
func TestForgedVisitorCookieIsANewVisitor(t *testing.T) {
	t.Parallel()
	f := newPageFixture(t, pageOptions{})
	owner := f.visit("/").visitorCookie()
	require.NotNil(t, owner)
	other := newPageFixture(t, pageOptions{secret: []byte(strings.Repeat("k", 32))}).visit("/").visitorCookie()
	second := f.visit("/").visitorCookie()
	require.Equal(t, int64(2), f.waiting())

	id, rest, ok := strings.Cut(owner.Value, ".")
	require.True(t, ok)
	issued, mac, ok := strings.Cut(rest, ".")
	require.True(t, ok)
	_, secondRest, _ := strings.Cut(second.Value, ".")
	_, secondMAC, _ := strings.Cut(secondRest, ".")
	it := issued + "."
	forged := map[string]string{
		"id changed":          flip(id, 0) + "." + it + mac,
		"last id char":        flip(id, len(id)-1) + "." + it + mac,
		"MAC changed":         id + "." + it + flip(mac, 10),
		"MAC of another id":   id + "." + it + secondMAC,
		"issue time changed":  id + "." + issued + "0." + mac,
		"no issue time":       id + "." + mac,
		"signed elsewhere":    other.Value,
		"no MAC":              id,
		"empty MAC":           id + "." + it,
		"MAC truncated":       id + "." + it + mac[:len(mac)-1],
		"extra part":          owner.Value + ".x",
		"padded":              id + "==." + it + mac,
		"user id as cookie":   "visitor-" + id,
		"garbage":             "%%%",
		"long":                strings.Repeat("A", 4000),
		"upper-cased MAC":     id + "." + it + strings.ToUpper(mac),
		"owner's id, no sign": "v1." + id,
	}
	waiting := f.waiting()
	for name, value := range forged {
		cookie := &http.Cookie{Name: "waitroom_visitor", Value: value}
		p := f.get("/", cookie)
		require.Equal(t, http.StatusOK, p.status, name)
		require.True(t, shown(t, p.body, "join"), "%s: a page load is someone without a place", name)
		require.Equal(t, waiting, f.waiting(), "%s: a page load takes no place", name)
		p = f.visit("/", cookie)
		require.Equal(t, http.StatusOK, p.status, name)
		fresh := p.visitorCookie()
		require.NotNil(t, fresh, name)
		require.NotEqual(t, owner.Value, fresh.Value, name)
		waiting++
		require.Equal(t, waiting, f.waiting(), "%s: a new visitor takes a new place", name)
		require.Equal(t, strconv.FormatInt(waiting, 10), text(t, p.body, "position"), name)

		// The API endpoints do not take the forged cookie as anyone.
		st := f.statusOf(cookie)
		require.Equal(t, http.StatusBadRequest, st.status, name)
		require.Equal(t, http.StatusBadRequest, f.request("POST", "/rooms/"+f.room+"/enter", []*http.Cookie{cookie}).status, name)
		require.Equal(t, http.StatusBadRequest, f.request("DELETE", "/rooms/"+f.room+"/queue", []*http.Cookie{cookie}).status, name)
	}
	// The owner's place is untouched.
	st := f.statusOf(owner)
	require.Equal(t, http.StatusOK, st.status)
	require.EqualValues(t, 1, st.json(t)["position"])
}

func TestUserHeaderWinsOverCookie(t *testing.T) {
	t.Parallel()
	f := newPageFixture(t, pageOptions{})
	visitor := f.visit("/").visitorCookie()

	p := f.request("GET", "/", []*http.Cookie{visitor}, "X-User-Id", "alice")
	require.True(t, shown(t, p.body, "join"), "alice has no place yet")
	require.Equal(t, http.StatusOK, f.request("POST", "/rooms/"+f.room+"/enter", []*http.Cookie{visitor}, "X-User-Id", "alice").status)
	p = f.request("GET", "/", []*http.Cookie{visitor}, "X-User-Id", "alice")
	require.Equal(t, http.StatusOK, p.status)
	require.Equal(t, "2", text(t, p.body, "position"), "alice is a user of her own")
	require.Nil(t, p.visitorCookie(), "a user the auth layer names needs no cookie")

	st := f.request("GET", "/rooms/"+f.room+"/status", []*http.Cookie{visitor}, "X-User-Id", "alice")
	require.EqualValues(t, 2, st.json(t)["position"])
	require.EqualValues(t, 1, f.statusOf(visitor).json(t)["position"])

	bad := f.request("GET", "/", nil, "X-User-Id", "a b")
	require.Equal(t, http.StatusBadRequest, bad.status)
	require.Nil(t, bad.visitorCookie())
}

// The gate takes the cookie's visitor too, and the order API behind it
// sees that visitor as the user.
func TestVisitorOrdersThroughTheGate(t *testing.T) {
	t.Parallel()
	f := newPageFixture(t, pageOptions{})
	visitor := f.visit("/").visitorCookie()
	f.admitNext(1)
	st := f.statusOf(visitor).json(t)
	require.Equal(t, "admitted", st["state"])
	token := st["token"].(string)

	order := func(cookie *http.Cookie) page {
		req, err := http.NewRequestWithContext(t.Context(), "POST", f.srv.URL+"/orders",
			strings.NewReader(`{"product_id":"`+testProduct+`","quantity":1}`))
		require.NoError(t, err)
		req.AddCookie(cookie)
		req.Header.Set("X-Entry-Token", token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := f.srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return page{status: resp.StatusCode, header: resp.Header, body: string(b)}
	}

	// A forged cookie with the right token is nobody: refused before the
	// token is touched.
	refused := order(&http.Cookie{Name: "waitroom_visitor", Value: flip(visitor.Value, len(visitor.Value)-5)})
	require.Equal(t, http.StatusBadRequest, refused.status, refused.body)

	placed := order(visitor)
	require.Equal(t, http.StatusCreated, placed.status, placed.body)
	user := placed.json(t)["user"].(string)
	require.True(t, strings.HasPrefix(user, "visitor-"), user)
	require.True(t, waitroom.ValidUserID(user))
	require.Len(t, user, len("visitor-")+22, "128 bits of id")

	spent := order(visitor)
	require.Equal(t, http.StatusForbidden, spent.status, "the token was spent")
}

func TestCookieSecret(t *testing.T) {
	t.Parallel()

	_, err := server.New(server.Config{Store: newPageFixture(t, pageOptions{}).store, CookieSecret: []byte("short")})
	require.ErrorContains(t, err, "CookieSecret")

	// Instances that share the secret (and the store) share visitors.
	f := newPageFixture(t, pageOptions{})
	visitor := f.visit("/").visitorCookie()
	twin := httptest.NewServer(mustServer(t, server.Config{Store: f.store, DefaultRoom: f.room, CookieSecret: testSecret}))
	t.Cleanup(twin.Close)
	req, err := http.NewRequestWithContext(t.Context(), "GET", twin.URL+"/rooms/"+f.room+"/status", nil)
	require.NoError(t, err)
	req.AddCookie(visitor)
	resp, err := twin.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// flip changes the base64url character at i to another one.
func flip(s string, i int) string {
	c := byte('A')
	if s[i] == 'A' {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}
