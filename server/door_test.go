package server_test

import (
	"crypto/sha256"
	"encoding/json"
	"io"
	"math/bits"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/server"
)

// A page load queues nobody, however often and by whom: crawlers, link
// previews and prefetchers take no place.
func TestPageLoadQueuesNobody(t *testing.T) {
	t.Parallel()
	f := newPageFixture(t, pageOptions{})
	for range 20 {
		p := f.get("/")
		require.Equal(t, http.StatusOK, p.status)
		require.True(t, shown(t, p.body, "join"))
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
	order := pageOf(t, nobody, req)
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

// With Redis as the limiter, a limit holds across instances: one count.
func TestRateLimitsHoldAcrossInstances(t *testing.T) {
	t.Parallel()
	client, err := redisstore.Open(testenv.RedisURL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	prefix := "wrtest:limit:" + waitroom.NewToken()
	t.Cleanup(func() { _ = redisstore.DeletePrefix(t.Context(), client, prefix) })
	limiter := redisstore.New(client, redisstore.Options{Prefix: prefix})
	a := newPageFixture(t, pageOptions{server: func(c *server.Config) { c.UserRateLimit = 1; c.Limiter = limiter }})
	// A second instance on the same rooms and the same Redis.
	b := mustServer(t, server.Config{Store: a.store, DefaultRoom: a.room, UserRateLimit: 1, Limiter: limiter})
	bSrv := newTestServer(t, b)
	status := func(base string) int {
		req, err := http.NewRequestWithContext(t.Context(), "POST", base+"/rooms/"+a.room+"/enter", nil)
		require.NoError(t, err)
		req.Header.Set("X-User-Id", "alice")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, []int{200, 200, 429, 429}, []int{status(a.srv.URL), status(bSrv), status(a.srv.URL), status(bSrv)})
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
		return pageOf(t, f, req)
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
	require.Equal(t, http.StatusPreconditionRequired, j.status)
	require.True(t, shown(t, j.body, "join"))
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

// pageOf sends req and keeps its answer as text.
func pageOf(t *testing.T, f *pageFixture, req *http.Request) page {
	t.Helper()
	resp, err := f.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return page{status: resp.StatusCode, header: resp.Header, body: string(b)}
}
