package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/instance"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/shop"
)

// The shipped configurations listen on 8000 and name the waiting room at
// 127.0.0.1:8080 and the shop at 127.0.0.1:8081; the tests template only
// those (and the nginx pid file).
const (
	shippedListen   = "8000"
	shippedWaitroom = "127.0.0.1:8080"
	shippedShop     = "127.0.0.1:8081"
	proxyProduct    = "drop"
	proxyStock      = 100
	proxyAdminToken = "proxy-test-admin-token"
	proxyShopURL    = "https://shop.example/sale"
	// buyerAddr is where the buyers dial from: not the trusted proxy.
	buyerAddr = "127.0.0.2"
)

// proxyStack is the built-in shop on its own listener (--shop-addr) on
// PostgreSQL and RabbitMQ, its waiting room on Redis, and a real proxy
// with a shipped configuration in front.
type proxyStack struct {
	in       *instance.Instance
	store    *testenv.FaultStore // the waiting room's Redis store, failing on cue
	room     string
	proxyURL string
	admitted chan waitroom.Admission

	shopMu      sync.Mutex
	shopCookies []string // the Cookie header of each request the proxy sent the shop
}

// shopRecorder stands between the proxy and the shop, noting the cookies
// each request brings; it returns its address.
func (s *proxyStack) shopRecorder(t *testing.T) string {
	t.Helper()
	target := &url.URL{Scheme: "http", Host: s.in.ShopAddr()}
	forward := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.shopMu.Lock()
		s.shopCookies = append(s.shopCookies, strings.Join(r.Header.Values("Cookie"), "; "))
		s.shopMu.Unlock()
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// startWaitroom starts the instance every proxy test stands behind: only
// 127.0.0.1/32 (the proxy) is trusted with the user header.
func startWaitroom(t *testing.T) *proxyStack {
	t.Helper()
	schema := testenv.Schema(t, "proxy")
	room := testenv.Unique("proxy-")
	client, err := redisstore.Open(testenv.RedisURL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() }) // after the instance's Close
	s := &proxyStack{room: room, admitted: make(chan waitroom.Admission, 16),
		store: &testenv.FaultStore{Store: redisstore.New(client, redisstore.Options{Prefix: testenv.Unique("proxytest")})}}
	s.in = &instance.Instance{
		Store: s.store,
		Config: instance.Config{
			Addr:         "127.0.0.1:0",
			ShopAddr:     "127.0.0.1:0",
			RedisPrefix:  "unused", // the store is the one above
			Rooms:        []string{room},
			Room:         waitroom.RoomConfig{Rate: 1000, TokenTTL: 5 * time.Minute, Lease: 30 * time.Second, ShopURL: proxyShopURL},
			DatabaseURL:  testenv.DatabaseURL() + "&search_path=" + schema,
			DBPool:       8,
			AMQPURL:      testenv.AMQPURL(),
			Products:     []shop.Product{{ID: proxyProduct, Name: "Drop", Stock: proxyStock}},
			AdminToken:   proxyAdminToken,
			GatedRoutes:  []string{"POST /orders"},
			UserHeader:   shop.DefaultUserHeader,
			CookieSecret: []byte("proxy-test-cookie-secret-32-bytes!!"),
			SettleSecret: "proxy-test-settle-secret-32-bytes!!",
			TrustedProxies: []netip.Prefix{
				netip.MustParsePrefix("127.0.0.1/32"),
			},
		},
		OnAdmit: func(r string, admitted []waitroom.Admission) {
			if r != room {
				return
			}
			for _, a := range admitted {
				s.admitted <- a
			}
		},
	}
	require.NoError(t, s.in.Run(t.Context()))
	t.Cleanup(func() { _ = s.in.Close() })
	return s
}

// template is the shipped file at path with each old replaced by its new,
// every one of which must be in it: a test never runs a configuration it
// did not mean to.
func template(t *testing.T, path string, replacements ...string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	conf := string(raw)
	for i := 0; i+1 < len(replacements); i += 2 {
		require.Contains(t, conf, replacements[i], "%s changed: the test templates %q", path, replacements[i])
		conf = strings.ReplaceAll(conf, replacements[i], replacements[i+1])
	}
	return conf
}

// requireBinary is the path of a proxy the test needs: missing, the test
// fails (./scripts/test installs it).
func requireBinary(t *testing.T, name, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed: the proxy tests run the real one (./scripts/test installs it: apt-get install %s)", name, pkg)
	}
	return path
}

// runProxy starts cmd and stops it at cleanup (SIGTERM: nginx's master
// then stops its workers), once port answers; an early exit fails the test
// with what it said.
func runProxy(t *testing.T, cmd *exec.Cmd, port string) {
	t.Helper()
	var out bytes.Buffer
	var outMu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) {
		outMu.Lock()
		defer outMu.Unlock()
		return out.Write(p)
	})
	cmd.Stdout, cmd.Stderr = w, w
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			conn.Close()
			return
		}
		select {
		case err := <-exited:
			outMu.Lock()
			defer outMu.Unlock()
			t.Fatalf("%s exited before serving: %v\n%s", cmd.Path, err, out.String())
		case <-time.After(20 * time.Millisecond): // the process starting, not time under test
		}
		if time.Now().After(deadline) {
			outMu.Lock()
			defer outMu.Unlock()
			t.Fatalf("%s does not listen on %s after 15 s:\n%s", cmd.Path, port, out.String())
		}
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// startProxy runs the shipped configuration file of the proxy bin (from
// the Debian package pkg) in front of s, templated by replace for the
// port it listens on and its directory, with the command command makes.
func (s *proxyStack) startProxy(t *testing.T, bin, pkg, file string, replace func(port, dir string) []string, command func(bin, dir, conf string) *exec.Cmd) {
	t.Helper()
	path := requireBinary(t, bin, pkg)
	dir := t.TempDir()
	port := freePort(t)
	conf := filepath.Join(dir, filepath.Base(file))
	shipped := append([]string{shippedWaitroom, s.in.Addr(), shippedShop, s.shopRecorder(t)}, replace(port, dir)...)
	require.NoError(t, os.WriteFile(conf, []byte(template(t, file, shipped...)), 0o644))
	runProxy(t, command(path, dir, conf), port)
	s.proxyURL = "http://127.0.0.1:" + port
}

// startNginx runs deploy/nginx/nginx.conf in front of s.
func (s *proxyStack) startNginx(t *testing.T) {
	s.startProxy(t, "nginx", "nginx-light", filepath.Join("nginx", "nginx.conf"), func(port, dir string) []string {
		return []string{"listen " + shippedListen + ";", "listen 127.0.0.1:" + port + ";",
			"pid /run/nginx-waitroom.pid;", "pid " + filepath.Join(dir, "nginx.pid") + ";"}
	}, func(bin, dir, conf string) *exec.Cmd {
		return exec.Command(bin, "-p", dir, "-e", "stderr", "-c", conf, "-g", "daemon off;")
	})
}

// startCaddy runs deploy/caddy/Caddyfile in front of s.
func (s *proxyStack) startCaddy(t *testing.T) {
	s.startProxy(t, "caddy", "caddy", filepath.Join("caddy", "Caddyfile"), func(port, _ string) []string {
		return []string{"\n:" + shippedListen + " {", "\nhttp://127.0.0.1:" + port + " {"}
	}, func(bin, dir, conf string) *exec.Cmd {
		cmd := exec.Command(bin, "run", "--config", conf, "--adapter", "caddyfile")
		cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
		return cmd
	})
}

// buyer is one browser: its cookies, dialling from buyerAddr.
type buyer struct {
	client *http.Client
	user   string // the visitor id the waiting room gave it
	token  string
}

func newClient(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(buyerAddr)}, Timeout: 5 * time.Second}
	return &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: dialer.DialContext, MaxIdleConnsPerHost: 64,
	}}
}

// reply is an answer as the buyer saw it.
type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (r reply) code() string {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func (r reply) String() string { return fmt.Sprintf("%d %s", r.status, r.code()) }

// send is one request as a buyer sends it, asking for JSON; header is
// name, value pairs.
func send(client *http.Client, method, rawURL, body string, header ...string) (reply, error) {
	req, err := http.NewRequest(method, rawURL, strings.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Accept", "application/json")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	r := reply{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body) // a refusal's or an order's JSON; a page has none
	return r, nil
}

func do(t *testing.T, client *http.Client, method, rawURL, body string, header ...string) reply {
	t.Helper()
	r, err := send(client, method, rawURL, body, header...)
	require.NoError(t, err)
	return r
}

// join has a new buyer take a place through the proxy and waits until the
// admitter lets it in; the status it reads then confirms its turn.
func (s *proxyStack) join(t *testing.T) *buyer {
	t.Helper()
	b := &buyer{client: newClient(t)}
	r := do(t, b.client, "POST", s.proxyURL+"/", "")
	require.Equal(t, http.StatusOK, r.status, r.raw)
	select {
	case a := <-s.admitted:
		b.user = a.User
	case <-time.After(10 * time.Second):
		t.Fatal("not admitted within 10 s at 1000 users/s")
	}
	st := do(t, b.client, "GET", s.proxyURL+"/rooms/"+s.room+"/status", "")
	require.Equal(t, "admitted", st.body["state"], st.raw)
	b.token, _ = st.body["token"].(string)
	require.NotEmpty(t, b.token)
	return b
}

// order sends b's order through the proxy with its token; header adds
// what a hostile client adds.
func (s *proxyStack) order(t *testing.T, b *buyer, body string, header ...string) reply {
	t.Helper()
	return do(t, b.client, "POST", s.proxyURL+"/orders", body, append([]string{"X-Entry-Token", b.token}, header...)...)
}

// stock is the shop's stock of the product, read on the admin API.
func (s *proxyStack) stock(t *testing.T) int64 {
	t.Helper()
	r := do(t, http.DefaultClient, "GET", "http://"+s.in.Addr()+"/admin/products/"+proxyProduct, "", "Authorization", "Bearer "+proxyAdminToken)
	require.Equal(t, http.StatusOK, r.status, r.raw)
	return int64(r.body["stock"].(float64))
}

// requireRefused: the gate's refusal as the buyer sees it, its code both
// in the body and in Waitroom-Error.
func requireRefused(t *testing.T, r reply, status int, code string) {
	t.Helper()
	require.Equal(t, status, r.status, r.raw)
	require.Equal(t, code, r.code(), r.raw)
	require.Equal(t, code, r.header.Get("Waitroom-Error"), r.raw)
}

// TestProxiesGuardTheShop runs the shipped nginx and Caddy configurations
// with the real binaries in front of the built-in shop (PostgreSQL,
// RabbitMQ) on its --shop-addr listener, the waiting room on Redis, and
// checks what OPERATIONS.md says each one guarantees.
func TestProxiesGuardTheShop(t *testing.T) {
	t.Parallel()
	for name, start := range map[string]func(*proxyStack, *testing.T){
		"nginx": (*proxyStack).startNginx,
		"caddy": (*proxyStack).startCaddy,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := startWaitroom(t)
			start(s, t)
			t.Run("FiftyOrdersOneTokenReachTheShopOnce", func(t *testing.T) { s.fiftyOrdersOneToken(t) })
			t.Run("ReleasedOrderIsRetriedWithTheTimeLeft", func(t *testing.T) { s.releasedThenRetried(t) })
			t.Run("ForgedHeadersChangeNothing", func(t *testing.T) { s.forgedHeaders(t) })
			t.Run("PageLinksToTheShop", func(t *testing.T) { s.pageThroughProxy(t) })
			t.Run("ShopGetsNoWaitroomCookie", func(t *testing.T) { s.shopGetsNoWaitroomCookie(t) })
			// Last: it fails the store on purpose.
			t.Run("RefusalsCarryTheCodeAndRetryAfter", func(t *testing.T) { s.refusals(t) })
		})
	}
}

// fiftyOrdersOneToken: 50 orders at once with one token through the
// proxy: one reaches the shop and sells one unit, the 49 others are the
// gate's refusals (TOKEN_IN_USE while the one runs, ENTRY_TOKEN_NOT_FOUND
// once it settled spent); afterwards the spent token is refused and sells
// nothing.
func (s *proxyStack) fiftyOrdersOneToken(t *testing.T) {
	b := s.join(t)
	before := s.stock(t)
	const n = 50
	replies, errs := make([]reply, n), make([]error, n)
	testenv.AtOnce(n, func(i int) {
		replies[i], errs[i] = send(b.client, "POST", s.proxyURL+"/orders", `{"product_id":"`+proxyProduct+`"}`, "X-Entry-Token", b.token)
	})
	counts := map[string]int{}
	var created reply
	for i, r := range replies {
		switch {
		case errs[i] != nil:
			counts["error: "+errs[i].Error()]++
		case r.status == http.StatusCreated:
			created = r
			counts["201"]++
		case r.status == http.StatusForbidden && r.code() == r.header.Get("Waitroom-Error"):
			counts["403 "+r.code()]++
		default:
			counts["other: "+r.String()+" "+r.raw]++
		}
	}
	inUse, spent := counts["403 TOKEN_IN_USE"], counts["403 ENTRY_TOKEN_NOT_FOUND"]
	t.Logf("50 orders at once: %v", counts)
	require.Equal(t, 1, counts["201"], "%v", counts)
	require.Equal(t, n-1, inUse+spent, "every other order is one of the two refusals: %v", counts)
	require.Len(t, counts, 1+min(inUse, 1)+min(spent, 1), "nothing else: %v", counts)
	require.Equal(t, b.user, created.body["user"], "the order is the buyer's")
	require.Equal(t, before-1, s.stock(t), "one unit sold")

	again := s.order(t, b, `{"product_id":"`+proxyProduct+`"}`)
	requireRefused(t, again, http.StatusForbidden, "ENTRY_TOKEN_NOT_FOUND")
	require.Equal(t, before-1, s.stock(t), "the spent token sold nothing more")
	stats, err := s.in.Guarded().Stats(t.Context(), s.room)
	require.NoError(t, err)
	require.EqualValues(t, 1, stats.Completed, "settled spent once, through POST /gate/settle")
}

// releasedThenRetried: an order the shop refuses is settled released:
// the token stays the buyer's with the time it had left (not a fresh
// TTL), and the retry with it sells.
func (s *proxyStack) releasedThenRetried(t *testing.T) {
	b := s.join(t)
	statusOf := func() reply {
		return do(t, b.client, "GET", s.proxyURL+"/rooms/"+s.room+"/status", "")
	}
	before := statusOf()
	failed := s.order(t, b, `{"product_id":"no-such-product"}`)
	require.Equal(t, http.StatusNotFound, failed.status, failed.raw)
	require.Equal(t, "PRODUCT_NOT_FOUND", failed.code(), "the shop's own refusal reaches the buyer")
	after := statusOf()
	require.Equal(t, "admitted", after.body["state"], after.raw)
	require.Equal(t, b.token, after.body["token"], "the same token, given back")
	require.LessOrEqual(t, after.body["expires_in_ms"].(float64), before.body["expires_in_ms"].(float64), "the time it had left, not a fresh TTL")
	stats, err := s.in.Guarded().Stats(t.Context(), s.room)
	require.NoError(t, err)
	require.EqualValues(t, 1, stats.Released)

	stock := s.stock(t)
	retried := s.order(t, b, `{"product_id":"`+proxyProduct+`"}`)
	require.Equal(t, http.StatusCreated, retried.status, retried.raw)
	require.Equal(t, stock-1, s.stock(t))
}

// forgedHeaders: what a client outside the trusted proxies sends as the
// gate's headers is cleared by the proxy: a user it names is not the
// order's, its Waitroom-Units do not raise the reserved units, its
// Idempotency-Key and Waitroom-Hold are replaced by the gate's (the
// order settles its real hold). Asked directly, the waiting room does not
// believe its user header either, and the shop's listener takes no order
// without a hold the waiting room sealed.
func (s *proxyStack) forgedHeaders(t *testing.T) {
	victim := s.join(t)
	b := s.join(t)
	forged := []string{"X-User-Id", victim.user, "Idempotency-Key", "forged-key", "Waitroom-Units", "10", "Waitroom-Hold", "forged-hold"}

	over := s.order(t, b, `{"product_id":"`+proxyProduct+`","quantity":2}`, forged...)
	require.Equal(t, http.StatusUnprocessableEntity, over.status, over.raw)
	require.Equal(t, "QUANTITY_OVER_LIMIT", over.code(), "the gate's Waitroom-Units (1), not the client's 10")

	ok := s.order(t, b, `{"product_id":"`+proxyProduct+`"}`, forged...)
	require.Equal(t, http.StatusCreated, ok.status, ok.raw)
	require.Equal(t, b.user, ok.body["user"], "the order is the token's buyer's, not the user the client named")
	requireRefused(t, s.order(t, b, `{"product_id":"`+proxyProduct+`"}`), http.StatusForbidden, "ENTRY_TOKEN_NOT_FOUND")

	// The victim's token in another buyer's hands, naming the victim:
	// the proxy drops the name, and the gate knows this buyer by its own
	// visitor cookie, whose token this is not. Without a cookie there is
	// no user at all.
	stranger := s.join(t)
	refused := s.order(t, &buyer{client: stranger.client, token: victim.token}, `{"product_id":"`+proxyProduct+`"}`, "X-User-Id", victim.user)
	requireRefused(t, refused, http.StatusForbidden, "ENTRY_TOKEN_INVALID")
	nobody := s.order(t, &buyer{client: newClient(t), token: victim.token}, `{"product_id":"`+proxyProduct+`"}`, "X-User-Id", victim.user)
	requireRefused(t, nobody, http.StatusForbidden, "BAD_REQUEST")
	// Straight to the waiting room from outside 127.0.0.1/32: the user
	// header is not believed.
	direct := do(t, newClient(t), "GET", "http://"+s.in.Addr()+"/gate/auth", "", "X-Entry-Token", victim.token, "X-User-Id", victim.user)
	requireRefused(t, direct, http.StatusForbidden, "BAD_REQUEST")
	require.Empty(t, direct.header.Get("Waitroom-Hold"))
	// Straight to the shop's listener, past the proxy: without a hold, or
	// with one the waiting room did not seal, nothing is ordered.
	stock := s.stock(t)
	shopURL := "http://" + s.in.ShopAddr() + "/orders"
	body := `{"product_id":"` + proxyProduct + `"}`
	noHold := do(t, stranger.client, "POST", shopURL, body, "X-User-Id", victim.user, "Idempotency-Key", "k")
	require.Equal(t, "403 HOLD_MISSING", noHold.String(), noHold.raw)
	forgedHold := do(t, stranger.client, "POST", shopURL, body, "X-User-Id", victim.user, "Idempotency-Key", "k", "Waitroom-Hold", "forged-hold")
	require.Equal(t, "400 HOLD_INVALID", forgedHold.String(), forgedHold.raw)
	require.Equal(t, stock, s.stock(t), "nothing sold past the proxy")
	st := do(t, victim.client, "GET", s.proxyURL+"/rooms/"+s.room+"/status", "")
	require.Equal(t, "admitted", st.body["state"], "the victim's token is untouched: %s", st.raw)
}

// pageThroughProxy: the waiting page, served through the proxy, is the
// waiting room's, and sends the admitted buyer on to the shop; another
// method than POST on /orders never reaches the shop.
func (s *proxyStack) pageThroughProxy(t *testing.T) {
	b := s.join(t)
	req, err := http.NewRequest("GET", s.proxyURL+"/rooms/"+s.room, nil)
	require.NoError(t, err)
	resp, err := b.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(page), `<section id="admitted"`)
	require.Contains(t, string(page), `<a class="button" id="shop-link" href="`+proxyShopURL+`">Continue to the shop</a>`)
	methods := do(t, b.client, "GET", s.proxyURL+"/orders", "")
	require.Equal(t, http.StatusMethodNotAllowed, methods.status, "only POST /orders is the shop's: %s", methods.raw)
}

// shopGetsNoWaitroomCookie: an order carrying the waiting room's cookies
// (the token, the visitor id) among the shop's own reaches the shop with
// the shop's only, wherever they stand in the header, and still sells.
func (s *proxyStack) shopGetsNoWaitroomCookie(t *testing.T) {
	for i, cookies := range []string{
		"shop_session=s1; waitroom_token=%s",
		"waitroom_token=%s; shop_session=s1; cart=c2",
		"cart=c2; waitroom_token=%s; shop_session=s1",
		// Two of each, as a browser holding cookies for two paths sends.
		"waitroom_token=%[1]s; cart=c2; waitroom_visitor=v2; shop_session=s1; waitroom_token=%[1]s",
	} {
		b := s.join(t)
		s.shopMu.Lock()
		s.shopCookies = nil
		s.shopMu.Unlock()
		stock := s.stock(t)
		// The buyer's jar adds its waitroom_visitor cookie to these.
		r := s.order(t, b, `{"product_id":"`+proxyProduct+`"}`, "Cookie", fmt.Sprintf(cookies, b.token))
		require.Equal(t, http.StatusCreated, r.status, "%d: %s", i, r.raw)
		require.Equal(t, stock-1, s.stock(t))
		s.shopMu.Lock()
		seen := slices.Clone(s.shopCookies)
		s.shopMu.Unlock()
		require.Len(t, seen, 1, "%d: one request reached the shop", i)
		require.NotContains(t, seen[0], "waitroom_", "%d: the shop got %q", i, seen[0])
		require.NotContains(t, seen[0], b.token, "%d", i)
		require.Contains(t, seen[0], "shop_session=s1", "%d: the shop's own cookie reaches it: %q", i, seen[0])
		if strings.Contains(cookies, "cart=") {
			require.Contains(t, seen[0], "cart=c2", "%d: %q", i, seen[0])
		}
	}
	// More copies than a browser sends: the token still never reaches
	// the shop (nginx sends no cookie then, Caddy the shop's own).
	b := s.join(t)
	s.shopMu.Lock()
	s.shopCookies = nil
	s.shopMu.Unlock()
	r := s.order(t, b, `{"product_id":"`+proxyProduct+`"}`, "Cookie",
		strings.Repeat("waitroom_token="+b.token+"; ", 3)+"shop_session=s1")
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	s.shopMu.Lock()
	defer s.shopMu.Unlock()
	require.Len(t, s.shopCookies, 1)
	require.NotContains(t, s.shopCookies[0], "waitroom_", "the shop got %q", s.shopCookies[0])
	require.NotContains(t, s.shopCookies[0], b.token)
}

// refusals: the gate's 401 and 403 reach the buyer with the gate's code
// (body and Waitroom-Error) and its Retry-After: no token at all, and the
// store down (a claim that fails STORE_UNAVAILABLE under the closed
// failure policy).
func (s *proxyStack) refusals(t *testing.T) {
	b := s.join(t)
	noToken := do(t, b.client, "POST", s.proxyURL+"/orders", `{"product_id":"`+proxyProduct+`"}`)
	require.Equal(t, http.StatusUnauthorized, noToken.status, noToken.raw)
	require.NotEmpty(t, noToken.code(), noToken.raw)
	require.Equal(t, noToken.code(), noToken.header.Get("Waitroom-Error"))

	s.store.SetFault(func(_ context.Context, method string) error {
		if method == "Claim" {
			return waitroom.ErrStoreUnavailable
		}
		return nil
	})
	down := s.order(t, b, `{"product_id":"`+proxyProduct+`"}`)
	s.store.SetFault(nil)
	requireRefused(t, down, http.StatusForbidden, waitroom.ErrStoreUnavailable.Code)
	require.Equal(t, strconv.Itoa(int(waitroom.UnavailableRetryAfter/time.Second)), down.header.Get("Retry-After"), down.raw)
}
