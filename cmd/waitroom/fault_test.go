package main

// Fault tests: real services on loopback, a fault injected under the running
// server, and what is kept asserted. Services are never stopped: Redis is a
// private redistest server, PostgreSQL and RabbitMQ are reached through a
// TCP proxy the test opens and closes.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redistest"
	"github.com/waitroom/waitroom/server"
)

// reply is one HTTP answer: status, headers and the JSON body.
type reply struct {
	status int
	header http.Header
	body   map[string]any
}

func (r reply) code() string {
	e, _ := r.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// do sends one request as user (and with token, if any); a transport error
// is returned, not fatal, because fault tests expect some.
func do(ctx context.Context, client *http.Client, method, url, user, token, body string) (reply, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return reply{}, err
	}
	if user != "" {
		req.Header.Set("X-User-Id", user)
	}
	if token != "" {
		req.Header.Set(waitroom.EntryTokenHeader, token)
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
	r := reply{status: resp.StatusCode, header: resp.Header}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			return r, fmt.Errorf("status %d, body %q: %w", resp.StatusCode, raw, err)
		}
	}
	return r, nil
}

// mustDo is do for requests that must get an answer.
func mustDo(t *testing.T, method, url, user, token, body string) reply {
	t.Helper()
	r, err := do(t.Context(), http.DefaultClient, method, url, user, token, body)
	require.NoError(t, err)
	return r
}

// eventually polls cond every pollEvery until it holds or d passes: for
// what runs on the real clock (the admitter's ticker, a server starting,
// a failover).
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(pollEvery)
	}
}

// pollEvery paces the tests' polling loops within --user-rate-limit's
// default (5/s): a loop that polls a user's standing faster runs that user
// into debt, and the test's next request for the user is RATE_LIMITED.
const pollEvery = 220 * time.Millisecond

// requireUnavailable asserts the store-outage answer: 503 STORE_UNAVAILABLE
// with a Retry-After the client can follow.
func requireUnavailable(t *testing.T, r reply, what string) {
	t.Helper()
	require.Equal(t, http.StatusServiceUnavailable, r.status, "%s: %v", what, r.body)
	require.Equal(t, "STORE_UNAVAILABLE", r.code(), what)
	require.NotEmpty(t, r.header.Get("Retry-After"), what)
}

// TestFaultRedisRestart: Redis dies under a running server and comes back
// empty (no persistence). While it is down every request fails cleanly by
// the declared policy; when it is back the server serves again without a
// restart, declares its rooms again, and users who lost their place are
// told NOT_IN_QUEUE and enter again.
func TestFaultRedisRestart(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"closed", "open"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			rdb := redistest.StartServer(t)
			logs := &testenv.LogBuffer{}
			// 20/s × share 0.5 / 1 instance: failing open, 10 orders/s pass.
			m := startMainLogging(t, []string{"--redis-url", rdb.URL(), "--rate", "20", "--products", "drop:1000",
				"--failure-policy", policy, "--open-share", "0.5", "--instances", "1"}, envOf(), logs)
			base := "http://" + m.Addr()
			aliceToken := admitted(t, base, "alice")
			require.Equal(t, http.StatusOK, mustDo(t, "GET", base+"/readyz", "", "", "").status)

			rdb.Kill()

			requireUnavailable(t, mustDo(t, "POST", base+"/queue/enter", "carol", "", ""), "enter")
			requireUnavailable(t, mustDo(t, "GET", base+"/queue/position", "alice", "", ""), "status")
			ready := mustDo(t, "GET", base+"/readyz", "", "", "")
			require.Equal(t, "store_unavailable", ready.body["status"])
			require.Equal(t, map[string]any{"default": policy}, ready.body["policy"])

			switch policy {
			case "closed":
				requireUnavailable(t, ready, "readyz")
				requireUnavailable(t, mustDo(t, "POST", base+"/orders", "alice", aliceToken, `{"product_id":"drop"}`), "order")
			case "open":
				require.Equal(t, http.StatusOK, ready.status, "failing open, the instance serves bounded orders")
				passed, refused, elapsed := orderFlood(t, base, 10, 10, 100*time.Millisecond)
				// At most the burst (one) plus 10/s over the flood.
				bound := 1 + int(10*elapsed.Seconds()+0.999)
				t.Logf("open policy: %d of %d orders passed in %s (bound %d), %d refused", passed, passed+refused, elapsed.Round(time.Millisecond), bound, refused)
				require.LessOrEqual(t, passed, bound)
				require.GreaterOrEqual(t, passed, 5, "the open policy lets about 10/s through")
			}

			rdb.Restart()

			// Every request tries Redis first: no restart of the server.
			eventually(t, 10*time.Second, "readyz after Redis is back", func() bool {
				r := mustDo(t, "GET", base+"/readyz", "", "", "")
				return r.status == http.StatusOK && r.body["status"] == "ok"
			})
			// The room was declared again; alice's place and token are
			// gone, and she is told so.
			require.Equal(t, "NOT_IN_QUEUE", mustDo(t, "GET", base+"/queue/position", "alice", "", "").code())
			require.Equal(t, "ENTRY_TOKEN_NOT_FOUND", mustDo(t, "POST", base+"/orders", "alice", aliceToken, `{"product_id":"drop"}`).code())
			// She enters again and buys.
			status, body := order(t, base, "alice", admitted(t, base, "alice"))
			require.Equal(t, http.StatusCreated, status, body)

			out := logs.String()
			require.Contains(t, out, "store unavailable; answering 503 until it is back")
			require.Contains(t, out, "store reachable again")
			require.Contains(t, out, "room re-created: the store had lost it")
			if policy == "open" {
				require.Contains(t, out, "failing open")
			}
		})
	}
}

// orderFlood sends rounds of n concurrent orders, each with a fresh
// well-formed token, every pause, and counts what passed (201) and what
// was refused (503 STORE_UNAVAILABLE); anything else fails the test.
func orderFlood(t *testing.T, base string, rounds, n int, pause time.Duration) (passed, refused int, elapsed time.Duration) {
	t.Helper()
	var mu sync.Mutex
	var others []string
	start := time.Now()
	for round := range rounds {
		var wg sync.WaitGroup
		begin := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-begin
				r, err := do(t.Context(), http.DefaultClient, "POST", base+"/orders",
					fmt.Sprintf("flood-%d-%d", round, i), waitroom.NewToken(), `{"product_id":"drop"}`)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					others = append(others, err.Error())
				case r.status == http.StatusCreated:
					passed++
				case r.status == http.StatusServiceUnavailable && r.code() == "STORE_UNAVAILABLE" && r.header.Get("Retry-After") != "":
					refused++
				default:
					others = append(others, fmt.Sprintf("%d %v", r.status, r.body))
				}
			})
		}
		close(begin)
		wg.Wait()
		if round < rounds-1 {
			time.Sleep(pause) // pacing the load, not waiting for a result
		}
	}
	require.Empty(t, others)
	return passed, refused, time.Since(start)
}

// tcpProxy forwards loopback connections to target while up; while down it
// closes every connection at once, the way a dead host's port looks to a
// client. The test owns it, so no shared service is ever stopped.
type tcpProxy struct {
	ln       net.Listener
	target   string
	accepted atomic.Int64 // connections attempted, up or down

	mu    sync.Mutex
	up    bool
	conns map[net.Conn]struct{}
}

func startProxy(t *testing.T, target string, up bool) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{ln: ln, target: target, up: up, conns: map[net.Conn]struct{}{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.serve()
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		p.setUp(false)
	})
	return p
}

func (p *tcpProxy) Addr() string { return p.ln.Addr().String() }

func (p *tcpProxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.accepted.Add(1)
		p.mu.Lock()
		up := p.up
		p.mu.Unlock()
		if !up {
			_ = client.Close()
			continue
		}
		server, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		if !p.up { // went down while dialling
			p.mu.Unlock()
			_ = client.Close()
			_ = server.Close()
			continue
		}
		p.conns[client], p.conns[server] = struct{}{}, struct{}{}
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			_ = dst.Close()
			_ = src.Close()
			p.mu.Lock()
			delete(p.conns, dst)
			delete(p.conns, src)
			p.mu.Unlock()
		}
		go pipe(client, server)
		go pipe(server, client)
	}
}

// setUp opens or closes the proxy; closing cuts every open connection.
func (p *tcpProxy) setUp(up bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = up
	if up {
		return
	}
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// testSchema makes a PostgreSQL schema for one test, dropped afterwards,
// and returns a connection and the database URL that uses it.
func testSchema(t *testing.T, name string) (conn *pgx.Conn, dbURL, schema string) {
	t.Helper()
	dbURL = testenv.DatabaseURL()
	schema = fmt.Sprintf("%s_%d", name, time.Now().UnixNano())
	conn, err := pgx.Connect(t.Context(), dbURL)
	require.NoError(t, err)
	_, err = conn.Exec(t.Context(), "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		_ = conn.Close(context.Background())
	})
	return conn, dbURL, schema
}

// viaProxy returns rawURL with its host replaced by addr and, if schema is
// set, search_path pointing at it.
func viaProxy(t *testing.T, rawURL, addr, schema string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	u.Host = addr
	if schema != "" {
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
	}
	return u.String()
}

func hostOf(t *testing.T, rawURL, defaultPort string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	if u.Port() == "" {
		return net.JoinHostPort(u.Hostname(), defaultPort)
	}
	return u.Host
}

// TestFaultPostgresUnreachable: with the shop's database gone, an order
// fails with a clear 503 and gives the entry token back; the same token
// buys once the database is back.
func TestFaultPostgresUnreachable(t *testing.T) {
	t.Parallel()
	conn, dbURL, schema := testSchema(t, "fault_pg")
	proxy := startProxy(t, hostOf(t, dbURL, "5432"), true)
	m := startMain(t, []string{"--products", "drop:10", "--rate", "1000", "--db-pool", "2"},
		envOf("DATABASE_URL", viaProxy(t, dbURL, proxy.Addr(), schema)))
	base := "http://" + m.Addr()
	token := admitted(t, base, "alice")

	proxy.setUp(false)
	start := time.Now()
	r := mustDo(t, "POST", base+"/orders", "alice", token, `{"product_id":"drop"}`)
	t.Logf("order with PostgreSQL unreachable: %d %s after %s", r.status, r.code(), time.Since(start).Round(time.Millisecond))
	requireUnavailable(t, r, "order")
	require.Contains(t, r.body["error"].(map[string]any)["message"], "order service is unavailable")
	// The token was released, not spent: alice still holds it.
	st := mustDo(t, "GET", base+"/queue/position", "alice", "", "")
	require.Equal(t, "admitted", st.body["state"])
	require.Equal(t, token, st.body["token"])

	proxy.setUp(true)
	var status int
	var body map[string]any
	eventually(t, 10*time.Second, "an order once PostgreSQL is back", func() bool {
		status, body = order(t, base, "alice", token)
		return status != http.StatusServiceUnavailable
	})
	require.Equal(t, http.StatusCreated, status, body)
	var orders int
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT count(*) FROM "+schema+".orders WHERE user_id = 'alice'").Scan(&orders))
	require.Equal(t, 1, orders)
}

// TestFaultRabbitMQUnreachable: with the broker unreachable orders still
// succeed and their events wait in the outbox; once it is reachable the
// relay delivers every one of them.
func TestFaultRabbitMQUnreachable(t *testing.T) {
	t.Parallel()
	conn, dbURL, schema := testSchema(t, "fault_mq")
	amqpURL := testenv.AMQPURL()

	deliveries := listenOrderEvents(t, amqpURL)

	proxy := startProxy(t, hostOf(t, amqpURL, "5672"), false)
	m := startMain(t, []string{"--products", "drop:10", "--rate", "1000", "--db-pool", "4"}, envOf(
		"DATABASE_URL", viaProxy(t, dbURL, hostOf(t, dbURL, "5432"), schema),
		"AMQP_URL", viaProxy(t, amqpURL, proxy.Addr(), "")))
	base := "http://" + m.Addr()

	const n = 5
	ids := map[string]int{} // order id → events received
	for i := range n {
		user := fmt.Sprintf("buyer-%d", i)
		status, body := order(t, base, user, admitted(t, base, user))
		require.Equal(t, http.StatusCreated, status, body)
		ids[body["id"].(string)] = 0
	}
	pending := func() int {
		var c int
		require.NoError(t, conn.QueryRow(t.Context(), "SELECT count(*) FROM "+schema+".outbox WHERE sent_at IS NULL").Scan(&c))
		return c
	}
	// The relay has tried the broker (and failed) at least twice since.
	tried := proxy.accepted.Load()
	eventually(t, 15*time.Second, "the relay retrying the broker", func() bool { return proxy.accepted.Load() >= tried+2 })
	require.Equal(t, n, pending(), "every event waits in the outbox")

	proxy.setUp(true)
	opened := time.Now()
	deadline := time.After(30 * time.Second) // the relay's backoff is at most 10 s
	for received := 0; received < n; {
		select {
		case d := <-deliveries:
			var placed struct {
				ID string `json:"id"`
			}
			require.NoError(t, json.Unmarshal(d.Body, &placed))
			if _, ours := ids[placed.ID]; !ours {
				continue // another test's order on the shared exchange
			}
			ids[placed.ID]++
			if ids[placed.ID] == 1 {
				received++
			}
		case <-deadline:
			t.Fatalf("events delivered: %v", ids)
		}
	}
	t.Logf("all %d events delivered %s after the broker became reachable", n, time.Since(opened).Round(time.Millisecond))
	eventually(t, 10*time.Second, "the outbox marked sent", func() bool { return pending() == 0 })
	for id, c := range ids {
		require.Equal(t, 1, c, "events for order %s", id)
	}
}

// TestFaultRedisHangs: a Redis that stops answering (SIGSTOP: the port
// still accepts, nothing replies) costs a request --store-timeout, then
// the policy answers; when Redis resumes the same process serves again.
// The client's own timeouts are ten minutes, so an answer at all (within
// the test's two) is --store-timeout's: no verdict hangs on how fast the
// machine ran.
func TestFaultRedisHangs(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t)
	slowClient := rdb.URL() + "?read_timeout=10m&write_timeout=10m&pool_timeout=10m"
	m := startMain(t, []string{"--redis-url", slowClient, "--store-timeout", "300ms"}, envOf())
	base := "http://" + m.Addr()
	// On a loaded machine a first call can outlast 300 ms before the
	// freeze too; this test is about the freeze.
	eventually(t, 10*time.Second, "alice enters before the freeze", func() bool {
		return mustDo(t, "POST", base+"/queue/enter", "alice", "", "").status == http.StatusOK
	})

	resume := rdb.Freeze()
	for _, path := range []string{"/queue/position", "/queue/enter"} {
		start := time.Now()
		method := map[string]string{"/queue/position": "GET", "/queue/enter": "POST"}[path]
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		r, err := do(ctx, http.DefaultClient, method, base+path, "alice", "", "")
		cancel()
		require.NoError(t, err, "%s: no answer: --store-timeout did not bound the call", path)
		t.Logf("%s with Redis hung: %d %s after %s", path, r.status, r.code(), time.Since(start).Round(time.Millisecond))
		requireUnavailable(t, r, path)
	}

	resume()
	eventually(t, 10*time.Second, "status once Redis answers again", func() bool {
		return mustDo(t, "GET", base+"/queue/position", "alice", "", "").status == http.StatusOK
	})
}

// TestParseServeFailurePolicy: the failure policy's flags and variables,
// and the mistakes they refuse.
func TestParseServeFailurePolicy(t *testing.T) {
	t.Parallel()
	c, err := parseServe(nil, envOf())
	require.NoError(t, err)
	require.Equal(t, server.PolicyClosed, c.FailurePolicy.For("default"))
	require.Equal(t, time.Second, c.StoreTimeout)
	require.InDelta(t, 0.5, c.FailurePolicy.OpenShare, 1e-9)
	require.Equal(t, 1, c.FailurePolicy.Instances)
	require.InDelta(t, c.Room.Rate, c.FailurePolicy.DeclaredRate, 1e-9, "the declared rate bounds the open policy until the store answers")

	c, err = parseServe([]string{"--failure-policy", "default=open,sale=closed", "--open-share", "0.25", "--store-timeout", "250ms"},
		envOf("WAITROOM_INSTANCES", "4"))
	require.NoError(t, err)
	require.Equal(t, server.PolicyOpen, c.FailurePolicy.For("default"))
	require.Equal(t, server.PolicyClosed, c.FailurePolicy.For("sale"))
	require.Equal(t, 4, c.FailurePolicy.Instances)
	require.InDelta(t, 0.25, c.FailurePolicy.OpenShare, 1e-9)
	require.Equal(t, 250*time.Millisecond, c.StoreTimeout)

	for _, tt := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"--failure-policy", "ajar"}, nil, `--failure-policy="ajar"`},
		{nil, []string{"WAITROOM_FAILURE_POLICY", "sale=maybe"}, `WAITROOM_FAILURE_POLICY="sale=maybe"`},
		{[]string{"--open-share", "0"}, nil, `--open-share="0": must be in (0, 1]`},
		{[]string{"--instances", "0"}, nil, `--instances="0"`},
		{[]string{"--store-timeout", "1ms"}, nil, `--store-timeout="1ms"`},
	} {
		_, err := parseServe(tt.args, envOf(tt.env...))
		require.ErrorContains(t, err, tt.want)
	}
}
