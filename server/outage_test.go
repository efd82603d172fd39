package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/redistest"
	"github.com/waitroom/waitroom/server"
)

// The server while its store is down: the gate's failure policy, a store
// that hangs, a real Redis that cannot write or is frozen.

// outageStore is a memstore that fails on cue: down answers
// STORE_UNAVAILABLE at once (Redis refusing connections), hang blocks until
// the caller's deadline (Redis not answering). Only the calls a request
// makes fail; the admitter's go on.
type outageStore struct {
	*testenv.FaultStore
	down, hang atomic.Bool
}

func newOutageStore() *outageStore {
	s := &outageStore{FaultStore: &testenv.FaultStore{Store: memstore.New(memstore.Options{})}}
	s.SetFault(func(ctx context.Context, method string) error {
		switch method {
		case "Claim", "Enter", "Status", "RoomConfig", "Ping":
		default:
			return nil
		}
		if s.hang.Load() {
			<-ctx.Done()
			return ctx.Err()
		}
		if s.down.Load() {
			return fmt.Errorf("dial tcp 127.0.0.1:6379: connection refused: %w", waitroom.ErrStoreUnavailable)
		}
		return nil
	})
	return s
}

// orderCounter is the protected handler: it answers 201 and remembers the
// headers each order arrived with.
type orderCounter struct {
	mu    sync.Mutex
	keys  []string
	units []string // Waitroom-Units of each
	leak  bool     // an entry token reached the upstream
}

func (o *orderCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	o.keys = append(o.keys, r.Header.Get(waitroom.IdempotencyKeyHeader))
	o.units = append(o.units, r.Header.Get(waitroom.UnitsHeader))
	o.leak = o.leak || r.Header.Get(waitroom.EntryTokenHeader) != ""
	o.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
}

func (o *orderCounter) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.keys)
}

// policyFixture is a server on an outageStore, driven by ServeHTTP in the
// test's goroutine so that it runs inside a synctest bubble (fake clock).
type policyFixture struct {
	t      *testing.T
	store  *outageStore
	orders *orderCounter
	srv    *server.Server
	served atomic.Int64 // orders the gate reported to OnGateServed
}

func newPolicyFixture(t *testing.T, policy server.FailurePolicy, rate float64) *policyFixture {
	t.Helper()
	store := newOutageStore()
	_, err := store.CreateRoom(t.Context(), "default", waitroom.RoomConfig{Rate: rate})
	require.NoError(t, err)
	f := &policyFixture{t: t, store: store, orders: &orderCounter{}}
	f.srv = servertest.MustServer(t, server.Config{Store: store, Protected: f.orders, FailurePolicy: policy,
		OnGateServed: func(string, time.Duration, int) { f.served.Add(1) }})
	return f
}

func (f *policyFixture) do(method, path, user, token string) servertest.Answer {
	f.t.Helper()
	req := httptest.NewRequestWithContext(f.t.Context(), method, path, strings.NewReader(`{}`))
	req.RemoteAddr = "127.0.0.1:1234" // the user header is believed from loopback only
	if user != "" {
		req.Header.Set("X-User-Id", user)
	}
	if token != "" {
		req.Header.Set(waitroom.EntryTokenHeader, token)
	}
	rec := httptest.NewRecorder()
	f.srv.ServeHTTP(rec, req)
	a := servertest.Answer{Status: rec.Code, Header: rec.Header()}
	if rec.Body.Len() > 0 {
		require.NoError(f.t, json.Unmarshal(rec.Body.Bytes(), &a.Body), rec.Body.String())
	}
	return a
}

// TestOpenPolicyBoundsOrdersWhileStoreIsDown: failing open, one instance
// lets through OpenShare × rate / Instances orders per second, spread like
// admissions, each with its Idempotency-Key and never its token; the rest
// are 503 STORE_UNAVAILABLE with Retry-After. Enter and status still
// refuse. When the store is back, the next order is claimed again.
func TestOpenPolicyBoundsOrdersWhileStoreIsDown(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// The store says 40/s; the declared rate (the flags') is not
		// used once the store has answered. 40 × 0.5 / 2 = 10 per second.
		f := newPolicyFixture(t, server.FailurePolicy{Default: server.PolicyOpen, OpenShare: 0.5, Instances: 2, DeclaredRate: 1000}, 40)
		require.Equal(t, http.StatusOK, f.do("GET", "/readyz", "", "").Status) // learns the rate

		f.store.down.Store(true)
		ready := f.do("GET", "/readyz", "", "")
		require.Equal(t, http.StatusOK, ready.Status, "failing open, the instance still serves bounded orders")
		require.Equal(t, "store_unavailable", ready.Str("status"))
		require.Equal(t, map[string]any{"default": "open"}, ready.Body["policy"])

		results := map[string]int{}
		tokens := map[string]string{} // Idempotency-Key → token
		start := time.Now()
		for time.Since(start) < 2*time.Second {
			for i := range 3 {
				user := fmt.Sprintf("u%d-%d", time.Since(start).Milliseconds(), i)
				token := waitroom.NewToken()
				tokens[waitroom.IdempotencyKey("default", token)] = token
				a := f.do("POST", "/orders", user, token)
				switch a.Status {
				case http.StatusCreated:
					results["passed"]++
				case http.StatusServiceUnavailable:
					require.Equal(t, "STORE_UNAVAILABLE", a.Code())
					require.NotEmpty(t, a.Header.Get("Retry-After"))
					results["refused"]++
				default:
					t.Fatalf("unexpected answer %d %v", a.Status, a.Body)
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		// 200 ticks × 3 requests; one passes every 100 ms.
		require.Equal(t, map[string]int{"passed": 20, "refused": 580}, results)
		require.Equal(t, 20, f.orders.count())
		require.EqualValues(t, 20, f.served.Load(), "the orders let through by the open policy are measured too")
		require.False(t, f.orders.leak, "the token never reaches the order API")
		for _, key := range f.orders.keys {
			require.Contains(t, tokens, key, "each passed order carries its token's Idempotency-Key")
		}

		// Only well-formed requests are let through.
		time.Sleep(time.Second)
		require.Equal(t, http.StatusBadRequest, f.do("POST", "/orders", "u-bad", "not-a-token").Status)
		require.Equal(t, http.StatusBadRequest, f.do("POST", "/orders", "", waitroom.NewToken()).Status)
		require.Equal(t, http.StatusForbidden, f.do("POST", "/orders", "u-none", "").Status)
		require.Equal(t, 20, f.orders.count())

		// No queue without the store.
		require.Equal(t, http.StatusServiceUnavailable, f.do("POST", "/queue/enter", "u-new", "").Status)
		require.Equal(t, http.StatusServiceUnavailable, f.do("GET", "/queue/position", "u-new", "").Status)

		// Back: the store decides again at once, with no latch to reset.
		f.store.down.Store(false)
		require.Equal(t, "ENTRY_TOKEN_NOT_FOUND", f.do("POST", "/orders", "u-x", waitroom.NewToken()).Code())
		require.Equal(t, http.StatusOK, f.do("GET", "/readyz", "", "").Status)
	})
}

// TestClosedPolicyRefusesWhileStoreIsDown: the default policy lets nothing
// through and makes the instance unready.
func TestClosedPolicyRefusesWhileStoreIsDown(t *testing.T) {
	t.Parallel()
	f := newPolicyFixture(t, server.FailurePolicy{}, 40)
	f.store.down.Store(true)
	for range 20 {
		a := f.do("POST", "/orders", "u1", waitroom.NewToken())
		a.RequireError(t, http.StatusServiceUnavailable, "STORE_UNAVAILABLE")
		require.Equal(t, "5", a.Header.Get("Retry-After"))
	}
	require.Zero(t, f.orders.count())
	ready := f.do("GET", "/readyz", "", "")
	require.Equal(t, http.StatusServiceUnavailable, ready.Status)
	require.Equal(t, "store_unavailable", ready.Str("status"))
	require.Equal(t, map[string]any{"default": "closed"}, ready.Body["policy"])
	require.Equal(t, "STORE_UNAVAILABLE", ready.Code())
	require.Equal(t, "5", ready.Header.Get("Retry-After"))
}

// TestHungStoreIsUnavailableWithinTheTimeout: a store that does not answer
// is STORE_UNAVAILABLE after the store timeout (1 s by default), not after
// the client library's limits; failing open, the order then passes.
func TestHungStoreIsUnavailableWithinTheTimeout(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		closed := newPolicyFixture(t, server.FailurePolicy{}, 40)
		open := newPolicyFixture(t, server.FailurePolicy{Default: server.PolicyOpen, DeclaredRate: 40}, 40)
		for _, f := range []*policyFixture{closed, open} {
			f.store.hang.Store(true)
		}

		start := time.Now()
		a := closed.do("POST", "/queue/enter", "u1", "")
		a.RequireError(t, http.StatusServiceUnavailable, "STORE_UNAVAILABLE")
		require.Equal(t, server.DefaultStoreTimeout, time.Since(start))

		start = time.Now()
		require.Equal(t, http.StatusCreated, open.do("POST", "/orders", "u1", waitroom.NewToken()).Status)
		require.Equal(t, server.DefaultStoreTimeout, time.Since(start))
	})
}

// TestFailurePolicyPerRoom: the gate follows the default room's policy;
// the policy of other rooms is reported.
func TestFailurePolicyPerRoom(t *testing.T) {
	t.Parallel()
	policy, err := server.ParseFailurePolicy("default=closed,sale=open")
	require.NoError(t, err)
	f := newPolicyFixture(t, policy, 40)
	f.store.down.Store(true)
	require.Equal(t, http.StatusServiceUnavailable, f.do("POST", "/orders", "u1", waitroom.NewToken()).Status)
	ready := f.do("GET", "/readyz", "", "")
	require.Equal(t, http.StatusServiceUnavailable, ready.Status)
	require.Equal(t, map[string]any{"default": "closed", "sale": "open"}, ready.Body["policy"])

	_, err = server.New(server.Config{Store: f.store, FailurePolicy: server.FailurePolicy{OpenShare: 2}})
	require.ErrorContains(t, err, "OpenShare")
}

// TestRedisOutOfMemoryIsUnavailable: a real Redis that cannot write (OOM:
// maxmemory below its use, noeviction) is a store that cannot serve now,
// not a bug: enter answers 503 STORE_UNAVAILABLE with Retry-After, and a
// gated order failing open passes unclaimed with its Idempotency-Key.
func TestRedisOutOfMemoryIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rdb := redistest.StartServer(t)
	store := redisRoom(t, rdb, 40)
	_, err := store.Enter(ctx, "default", "u1")
	require.NoError(t, err)
	var st waitroom.Status
	require.Eventually(t, func() bool {
		_, err := store.Admit(ctx, "default")
		require.NoError(t, err)
		st, err = store.Status(ctx, "default", "u1")
		require.NoError(t, err)
		return st.State == waitroom.StateAdmitted
	}, 5*time.Second, 10*time.Millisecond)
	admin := rdb.Client()
	require.NoError(t, admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err())
	require.NoError(t, admin.ConfigSet(ctx, "maxmemory", "1").Err())

	orders := &orderCounter{}
	f := &policyFixture{t: t, orders: orders, srv: servertest.MustServer(t, server.Config{
		Store: store, Protected: orders,
		FailurePolicy: server.FailurePolicy{Default: server.PolicyOpen, DeclaredRate: 40},
	})}
	a := f.do("POST", "/queue/enter", "u2", "")
	a.RequireError(t, http.StatusServiceUnavailable, "STORE_UNAVAILABLE")
	require.Equal(t, "5", a.Header.Get("Retry-After"))

	a = f.do("POST", "/orders", "u1", st.Token)
	require.Equal(t, http.StatusCreated, a.Status, "claiming writes: the open failure policy applies")
	require.Equal(t, 1, orders.count())
}

// redisRoom is a store on rdb, a Redis server of the test's own, with the
// room "default" at rate.
func redisRoom(t *testing.T, rdb *redistest.Server, rate float64) *redisstore.Store {
	t.Helper()
	client, err := redisstore.Open(rdb.URL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	store := redisstore.New(client, redisstore.Options{})
	_, err = store.CreateRoom(t.Context(), "default", waitroom.RoomConfig{Rate: rate})
	require.NoError(t, err)
	return store
}

// TestRedisFreezeLoggedOnce: a real Redis frozen (SIGSTOP) under a crowd of
// pollers, with the admitter and the keeper ticking on the same guarded
// store, then resumed: the calls that waited through the freeze settle out
// of order after it, yet the log says "store unavailable" once when it
// starts and "store reachable again" once when it ends.
func TestRedisFreezeLoggedOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rdb := redistest.StartServer(t)
	store := redisRoom(t, rdb, 20)

	var logs testenv.LogBuffer
	// The default timeout, well inside the 3 s freeze: a shorter one (its
	// settle too) let a loaded machine's backlog after the resume pass
	// for a second outage.
	log := slog.New(slog.NewTextHandler(&logs, nil))
	// One guarded store for the server, the admitter and the keeper, as
	// the instance builds it.
	guarded := waitroom.Guard(store, waitroom.GuardOptions{Logger: log, Timeout: waitroom.DefaultStoreTimeout})
	srv := servertest.MustServer(t, server.Config{Store: guarded, Logger: log})
	web := httptest.NewServer(srv)
	t.Cleanup(web.Close)
	runCtx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	t.Cleanup(func() { stop(); running.Wait() })
	admitter := &waitroom.Admitter{Store: guarded, Every: 25 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	running.Go(func() { _ = admitter.Run(runCtx) })
	running.Go(func() { _ = guarded.Keeper().Run(runCtx) })

	// The crowd: each poller enters, then asks for its status in a loop.
	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		resumed  time.Time
		okAfter  int // 200s answered to requests sent after the resume
	)
	const pollers = 60
	for i := range pollers {
		running.Go(func() {
			user := "u" + strconv.Itoa(i)
			method, path := "POST", "/queue/enter"
			for runCtx.Err() == nil {
				req, _ := http.NewRequestWithContext(runCtx, method, web.URL+path, nil)
				req.Header.Set("X-User-Id", user)
				sent := time.Now()
				resp, err := web.Client().Do(req)
				if err != nil {
					return // the test is over
				}
				resp.Body.Close()
				mu.Lock()
				statuses[resp.StatusCode]++
				if resp.StatusCode == http.StatusOK && !resumed.IsZero() && sent.After(resumed) {
					okAfter++
				}
				mu.Unlock()
				if resp.StatusCode == http.StatusOK {
					method, path = "GET", "/queue/position"
				}
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	resume := rdb.Freeze()
	time.Sleep(3 * time.Second)
	mu.Lock()
	resumed = time.Now()
	mu.Unlock()
	resume()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return okAfter >= 10*pollers
	}, 20*time.Second, 10*time.Millisecond, "the crowd is served again")
	stop()
	running.Wait()

	mu.Lock()
	t.Logf("answers: %v; 200s after the resume: %d", statuses, okAfter)
	require.Positive(t, statuses[http.StatusServiceUnavailable], "the freeze was seen")
	mu.Unlock()
	out := logs.String()
	require.Equal(t, 1, strings.Count(out, `msg="store unavailable`), out)
	require.Equal(t, 1, strings.Count(out, `msg="store reachable again"`), out)
}

// An order the open policy lets through unclaimed is keyed and limited as
// a claim would have done it, from the room's settings last read: keyed by
// the buyer with one order per user, Waitroom-Units the room's units per
// order.
func TestOpenPolicyPassesTheLastKnownUnits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := newOutageStore()
		_, err := store.CreateRoom(t.Context(), "default", waitroom.RoomConfig{Rate: 40, UnitsPerOrder: 3, OneOrderPerUser: true})
		require.NoError(t, err)
		f := &policyFixture{t: t, store: store, orders: &orderCounter{}}
		f.srv = servertest.MustServer(t, server.Config{Store: store, Protected: f.orders,
			FailurePolicy: server.FailurePolicy{Default: server.PolicyOpen, OpenShare: 1, Instances: 1, DeclaredRate: 40}})
		require.Equal(t, http.StatusOK, f.do("GET", "/readyz", "", "").Status) // reads the settings
		f.store.down.Store(true)
		time.Sleep(time.Second)
		a := f.do("POST", "/orders", "u1", waitroom.NewToken())
		require.Equal(t, http.StatusCreated, a.Status, a.Body)
		require.Equal(t, []string{waitroom.BuyerKey("default", "u1")}, f.orders.keys)
		require.Equal(t, []string{"3"}, f.orders.units)
	})
}
