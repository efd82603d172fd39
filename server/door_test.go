package server_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/json"
	"math/bits"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/server"
)

// The door: who a visitor is (the user header only from trusted proxies,
// else the signed visitor cookie) and how often it may ask.

// A page load queues nobody, however often and by whom: crawlers, link
// previews and prefetchers take no place.
func TestPageLoadQueuesNobody(t *testing.T) {
	t.Parallel()
	f := newPageFixture(t, pageOptions{})
	for range 20 {
		p := f.get("/")
		p.requireShows(t, http.StatusOK, "join")
		require.Nil(t, p.visitorCookie(), "no visitor is made by a page load")
		require.Contains(t, p.body, `<form method="post" action="/">`)
	}
	p := f.request("GET", "/", nil, "X-User-Id", "alice")
	require.True(t, shown(t, p.body, "join"), "a known user without a place is offered to join")
	require.Zero(t, f.waiting())

	// Joining is the explicit step: one POST, which sets the cookie.
	join := f.join("/")
	require.Equal(t, http.StatusSeeOther, join.status)
	require.Equal(t, "/", join.header.Get("Location"))
	require.NotNil(t, join.visitorCookie())
	require.Equal(t, int64(1), f.waiting())
	// The script joins the same way and reads the status answer.
	js := f.request("POST", "/", nil, "Accept", "application/json")
	require.Equal(t, http.StatusOK, js.status)
	require.Equal(t, "waiting", js.json(t)["state"])
	require.EqualValues(t, 2, js.json(t)["position"])
	require.NotNil(t, js.visitorCookie())
	require.Equal(t, int64(2), f.waiting())
}

// The user header counts only from a trusted proxy; from anyone else it is
// removed before any handler, the gate or the upstream sees it, and the
// visitor cookie decides.
func TestUserHeaderOnlyFromTrustedProxies(t *testing.T) {
	t.Parallel()
	// The test client connects from loopback, which these servers do not
	// trust.
	nobody := newPageFixture(t, pageOptions{server: func(c *server.Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	}})
	a := nobody.request("POST", "/rooms/"+nobody.room+"/enter", nil, "X-User-Id", "alice")
	require.Equal(t, http.StatusBadRequest, a.status, "alice's header is not believed")
	visitor := nobody.join("/").visitorCookie()
	require.NotNil(t, visitor)
	a = nobody.request("GET", "/rooms/"+nobody.room+"/status", []*http.Cookie{visitor}, "X-User-Id", "alice", "Accept", "application/json")
	require.Equal(t, http.StatusOK, a.status, "the cookie's visitor, not alice")
	require.EqualValues(t, 1, a.json(t)["position"])
	nobody.admitNext(1)
	token := nobody.statusOf(visitor).json(t)["token"].(string)
	req, err := http.NewRequestWithContext(t.Context(), "POST", nobody.srv.URL+"/orders",
		strings.NewReader(`{"product_id":"`+testProduct+`","quantity":1}`))
	require.NoError(t, err)
	req.AddCookie(visitor)
	req.Header.Set("X-User-Id", "alice")
	req.Header.Set("X-Entry-Token", token)
	req.Header.Set("Content-Type", "application/json")
	order := pageOf(t, nobody.srv.Client(), req)
	require.Equal(t, http.StatusCreated, order.status, order.body)
	require.True(t, strings.HasPrefix(order.json(t)["user"].(string), "visitor-"), "the order is the visitor's")
	// The visitor reads its order by its cookie.
	read := nobody.request("GET", "/orders/"+order.json(t)["id"].(string), []*http.Cookie{visitor})
	require.Equal(t, http.StatusOK, read.status, read.body)
	require.Equal(t, order.json(t)["id"], read.json(t)["id"])

	// The default trusts loopback: the README's curl session works.
	local := newPageFixture(t, pageOptions{})
	a = local.request("POST", "/rooms/"+local.room+"/enter", nil, "X-User-Id", "alice")
	require.Equal(t, http.StatusOK, a.status)
}

// Past the per-user limit a user gets 429 RATE_LIMITED with Retry-After,
// and keeps its place; other users are not touched.
func TestUserRateLimit(t *testing.T) {
	t.Parallel()
	f := newPageFixture(t, pageOptions{server: func(c *server.Config) { c.UserRateLimit = 1 }})
	enter := func(user string) page {
		return f.request("POST", "/rooms/"+f.room+"/enter", nil, "X-User-Id", user)
	}
	status := func(user string) page {
		return f.request("GET", "/rooms/"+f.room+"/status", nil, "X-User-Id", user)
	}
	require.Equal(t, http.StatusOK, enter("alice").status)
	require.Equal(t, http.StatusOK, status("alice").status) // the burst: two seconds' worth
	for _, p := range []page{status("alice"), enter("alice"), f.request("GET", "/", nil, "X-User-Id", "alice")} {
		require.Equal(t, http.StatusTooManyRequests, p.status)
		retry, err := strconv.Atoi(p.header.Get("Retry-After"))
		require.NoError(t, err)
		require.GreaterOrEqual(t, retry, 1)
	}
	var body map[string]map[string]string
	require.NoError(t, json.Unmarshal([]byte(status("alice").body), &body))
	require.Equal(t, "RATE_LIMITED", body["error"]["code"])
	require.Equal(t, http.StatusOK, enter("bob").status, "bob has his own count")
	st, err := f.store.Status(t.Context(), f.room, "alice")
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Position, "alice keeps her place")
}

// A scheduled room counts an enter or a status once against the user's
// limit, as any room does: the answer's poll spread reads the user without
// counting it again.
func TestUserRateLimitCountsAScheduledRequestOnce(t *testing.T) {
	t.Parallel()
	opens := time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC) // two hours after the fixture's clock
	f := newPageFixture(t, pageOptions{room: waitroom.RoomConfig{OpensAt: opens}, server: func(c *server.Config) { c.UserRateLimit = 5 }})
	var codes []int
	for i := range 10 { // the burst: two seconds' worth of 5/s
		path, method := "/rooms/"+f.room+"/status", "GET"
		if i == 0 {
			path, method = "/rooms/"+f.room+"/enter", "POST"
		}
		p := f.request(method, path, nil, "X-User-Id", "alice")
		codes = append(codes, p.status)
		if p.status == http.StatusOK {
			require.Equal(t, "scheduled", p.json(t)["state"], p.body)
		}
	}
	require.Equal(t, slices.Repeat([]int{http.StatusOK}, 10), codes)
	require.Equal(t, http.StatusTooManyRequests, f.request("GET", "/rooms/"+f.room+"/status", nil, "X-User-Id", "alice").status, "the 11th is beyond the burst")
}

// New visitors are limited per client address; behind a trusted proxy the
// address is the X-Forwarded-For hop before it, and hops a client wrote
// itself do not count.
func TestVisitorRateLimitPerClientAddress(t *testing.T) {
	t.Parallel()
	f := newPageFixture(t, pageOptions{server: func(c *server.Config) { c.VisitorRateLimit = 0.5 }})
	join := func(xff string) int {
		return f.request("POST", "/", nil, "Accept", "application/json", "X-Forwarded-For", xff).status
	}
	require.Equal(t, http.StatusOK, join("203.0.113.5"))
	require.Equal(t, http.StatusTooManyRequests, join("203.0.113.5"))
	require.Equal(t, http.StatusTooManyRequests, join("198.51.100.1, 203.0.113.5"), "a forged hop on the left changes nothing")
	require.Equal(t, http.StatusOK, join("203.0.113.6"), "another address")
	require.Equal(t, int64(2), f.waiting())

	// Trusting nobody, X-Forwarded-For is ignored: every join is the peer's.
	g := newPageFixture(t, pageOptions{server: func(c *server.Config) {
		c.VisitorRateLimit = 0.5
		c.TrustedProxies = []netip.Prefix{}
	}})
	first := g.request("POST", "/", nil, "Accept", "application/json", "X-Forwarded-For", "203.0.113.7")
	second := g.request("POST", "/", nil, "Accept", "application/json", "X-Forwarded-For", "203.0.113.8")
	require.Equal(t, http.StatusOK, first.status)
	require.Equal(t, http.StatusTooManyRequests, second.status)
}

// With Redis as the limiter, a limit holds across instances. Each of two
// instances answers its share (half the rate and the burst) itself and,
// beyond it, asks Redis, which counts the whole limit and hears first of
// what the share let through.
func TestRateLimitsHoldAcrossInstances(t *testing.T) {
	t.Parallel()
	limiter := redisLimiter(t)
	// 1/s with a burst of 2; each instance's share: 0.5/s, a burst of 1.
	shared := func(c *server.Config) { c.UserRateLimit = 1; c.Limiter = limiter; c.FailurePolicy.Instances = 2 }
	a := newPageFixture(t, pageOptions{server: shared})
	bCfg := server.Config{Store: a.store, DefaultRoom: a.room}
	shared(&bCfg)
	b := newTestServer(t, servertest.MustServer(t, bCfg))
	enters := func(user string, bases ...string) []int {
		var got []int
		for _, base := range bases {
			req, err := http.NewRequestWithContext(t.Context(), "POST", base+"/rooms/"+a.room+"/enter", nil)
			require.NoError(t, err)
			req.Header.Set("X-User-Id", user)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			got = append(got, resp.StatusCode)
		}
		return got
	}
	// On one instance a user gets the whole burst, not more: one request on
	// the share, one from Redis, which counted the share's first.
	require.Equal(t, []int{200, 200, 429, 429}, enters("alice", a.srv.URL, a.srv.URL, a.srv.URL, a.srv.URL))
	// Spread over both, each share's one, then Redis's count: three where
	// two instances counting apart would let four through, and nothing
	// more however many come.
	require.Equal(t, []int{200, 200, 200, 429, 429, 429, 429, 429},
		enters("bob", a.srv.URL, b, a.srv.URL, b, a.srv.URL, b, a.srv.URL, b))
}

// The visitor cookie is Secure when TLS ends at a proxy in front.
func TestCookieSecureSetting(t *testing.T) {
	t.Parallel()
	f := newPageFixture(t, pageOptions{server: func(c *server.Config) { c.CookieSecure = true }})
	c := f.join("/").visitorCookie()
	require.NotNil(t, c)
	require.True(t, c.Secure)
}

// solve finds the nonce the page's script finds.
func solve(challenge string, difficulty int) string {
	for n := 0; ; n++ {
		sum := sha256.Sum256([]byte(challenge + "." + strconv.Itoa(n)))
		zeros := 0
		for _, b := range sum {
			zeros += bits.LeadingZeros8(b)
			if b != 0 {
				break
			}
		}
		if zeros >= difficulty {
			return strconv.Itoa(n)
		}
	}
}

// With the join challenge on, a place costs a solved puzzle: API clients
// get it in a 428 answer, and one solution is good for its own user and
// room only.
func TestJoinChallenge(t *testing.T) {
	t.Parallel()
	const difficulty = 8
	f := newPageFixture(t, pageOptions{server: func(c *server.Config) { c.JoinChallenge = difficulty }})
	enter := func(user, body string) page {
		req, err := http.NewRequestWithContext(t.Context(), "POST", f.srv.URL+"/rooms/"+f.room+"/enter", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("X-User-Id", user)
		return pageOf(t, f.srv.Client(), req)
	}
	refused := enter("alice", "")
	require.Equal(t, http.StatusPreconditionRequired, refused.status)
	body := refused.json(t)
	require.Equal(t, "CHALLENGE_REQUIRED", body["error"].(map[string]any)["code"])
	require.EqualValues(t, difficulty, body["difficulty"])
	challenge := body["challenge"].(string)
	nonce := solve(challenge, difficulty)
	require.Zero(t, f.waiting())

	wrong := strconv.Itoa(mustAtoi(t, nonce) + 1)
	for _, bad := range []page{
		enter("bob", `{"challenge":"`+challenge+`","nonce":"`+nonce+`"}`),    // alice's solution
		enter("alice", `{"challenge":"`+challenge+`x","nonce":"`+nonce+`"}`), // altered
		enter("alice", `{"challenge":"`+challenge+`","nonce":"-1"}`),
	} {
		require.Equal(t, http.StatusBadRequest, bad.status, bad.body)
	}
	if sum := sha256.Sum256([]byte(challenge + "." + wrong)); sum[0] != 0 {
		require.Equal(t, http.StatusBadRequest, enter("alice", `{"challenge":"`+challenge+`","nonce":"`+wrong+`"}`).status)
	}
	require.Zero(t, f.waiting())

	ok := enter("alice", `{"challenge":"`+challenge+`","nonce":"`+nonce+`"}`)
	require.Equal(t, http.StatusOK, ok.status, ok.body)
	require.Equal(t, "waiting", ok.json(t)["state"])
	// Someone with a place needs no new solution.
	require.Equal(t, http.StatusOK, enter("alice", "").status)
	require.Equal(t, int64(1), f.waiting())

	// A page without scripts cannot solve it: the join view says so.
	p := f.get("/")
	require.Contains(t, p.body, "Joining needs JavaScript")
	j := f.join("/")
	j.requireShows(t, http.StatusPreconditionRequired, "join")
	require.Nil(t, j.visitorCookie())
	require.Equal(t, int64(1), f.waiting())
}

func mustAtoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

func newTestServer(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

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
		return pageOf(t, f.srv.Client(), req)
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
	twin := httptest.NewServer(servertest.MustServer(t, server.Config{Store: f.store, DefaultRoom: f.room, CookieSecret: testSecret}))
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

// With the default bound, one address (a script, or a carrier's NAT) makes
// at most the burst, 100 new visitors at once, then 50 a second: 1,000
// cookie-less joins within a second take 150 places, and each of the rest
// is told RATE_LIMITED with a Retry-After.
func TestDefaultVisitorLimitBoundsOneAddress(t *testing.T) {
	t.Parallel()
	var f *pageFixture
	f = newPageFixture(t, pageOptions{server: func(c *server.Config) {
		c.VisitorRateLimit = server.DefaultVisitorRateLimit
		c.Limiter = waitroom.NewLocalLimiter(func() time.Time { return f.clock.Now() })
	}})
	joins := func(n int) (ok int, limited int) {
		codes := make([]page, n)
		testenv.AtOnce(n, func(i int) {
			codes[i] = f.request("POST", "/", nil, "Accept", "application/json", "X-Forwarded-For", "203.0.113.9")
		})
		for _, p := range codes {
			switch p.status {
			case http.StatusOK:
				ok++
			case http.StatusTooManyRequests:
				require.Equal(t, "RATE_LIMITED", p.json(t)["error"].(map[string]any)["code"])
				require.NotEmpty(t, p.header.Get("Retry-After"))
				limited++
			default:
				t.Fatalf("join answered %d: %s", p.status, p.body)
			}
		}
		return ok, limited
	}
	ok, limited := joins(500)
	require.Equal(t, [2]int{100, 400}, [2]int{ok, limited}, "the burst, at once")
	f.clock.Advance(time.Second)
	ok, limited = joins(500)
	require.Equal(t, [2]int{50, 450}, [2]int{ok, limited}, "a second's worth")
	require.Equal(t, int64(150), f.waiting())
	require.Equal(t, http.StatusOK, f.request("POST", "/", nil, "Accept", "application/json", "X-Forwarded-For", "203.0.113.10").status, "another address has its own bound")
}

// New visitors are counted per IPv4 address and per IPv6 /64 (what one
// subscriber gets), a zone suffix being no new address; on both limiters.
func TestVisitorLimitKeyedPerIPv6Slash64(t *testing.T) {
	t.Parallel()
	for name, limiter := range bothLimiters(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// One new visitor per 100 s: a second one from a key is refused
			// however slow the machine.
			f := newPageFixture(t, pageOptions{server: func(c *server.Config) { c.VisitorRateLimit = 0.01; c.Limiter = limiter }})
			join := func(from string) int {
				return f.request("POST", "/", nil, "Accept", "application/json", "X-Forwarded-For", from).status
			}
			for _, step := range []struct {
				from string
				want int
				why  string
			}{
				{"2001:db8:1:2::1", http.StatusOK, "the first of its /64"},
				{"2001:db8:1:2:ffff:ffff:ffff:fffe", http.StatusTooManyRequests, "another address of the same /64"},
				{"2001:db8:1:2::1%eth0", http.StatusTooManyRequests, "the same address with a zone"},
				{"2001:db8:1:2::7%25", http.StatusTooManyRequests, "a zone of any name"},
				{"2001:db8:1:3::1", http.StatusOK, "the next /64"},
				{"203.0.113.5", http.StatusOK, "an IPv4 address"},
				{"::ffff:203.0.113.5", http.StatusTooManyRequests, "the same IPv4 address, mapped"},
				{"203.0.113.6", http.StatusOK, "each IPv4 address is its own"},
			} {
				require.Equal(t, step.want, join(step.from), step.why)
			}
			require.Equal(t, int64(4), f.waiting())
		})
	}
}

// redisLimiter is a limiter on the test Redis under a prefix of the test's
// own.
func redisLimiter(t *testing.T) *redisstore.Store {
	t.Helper()
	client, err := redisstore.Open(testenv.RedisURL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	prefix := "wrtest:limit:" + waitroom.NewToken()
	t.Cleanup(func() { _ = redisstore.DeletePrefix(context.Background(), client, prefix) })
	return redisstore.New(client, redisstore.Options{Prefix: prefix})
}

// bothLimiters is a fresh limiter of each store, by name.
func bothLimiters(t *testing.T) map[string]waitroom.Limiter {
	return map[string]waitroom.Limiter{
		"memstore":   waitroom.NewLocalLimiter(nil),
		"redisstore": redisLimiter(t),
	}
}
