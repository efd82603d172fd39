package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
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
	upstreamproxy "github.com/waitroom/waitroom/upstream"
)

func TestGateCompletesOnSuccess(t *testing.T) {
	t.Parallel()
	f, up := newGatedFixture(t)
	token := f.Admit("u1")

	a := f.Order("u1", token)
	require.Equal(t, http.StatusCreated, a.Status)
	require.Equal(t, "o1", a.Str("order_id"))
	require.EqualValues(t, 1, up.Calls.Load())

	// Spent: the token opens nothing any more.
	a = f.Order("u1", token)
	a.RequireError(t, http.StatusForbidden, "ENTRY_TOKEN_NOT_FOUND")
	require.EqualValues(t, 1, up.Calls.Load())

	got := up.Headers[0]
	require.Equal(t, waitroom.IdempotencyKey(f.Room, token), got.Get("Idempotency-Key"))
	require.Empty(t, got.Values("X-Entry-Token"), "the token never reaches the upstream")
	require.Equal(t, "u1", got.Get("X-User-Id"), "the upstream knows whose order it is")
}

// TestGateReleasesOnFailure: any answer but 2xx, a refusal (4xx) as much
// as a failure (5xx), releases the token, so the user may try again.
func TestGateReleasesOnFailure(t *testing.T) {
	t.Parallel()
	for _, failed := range []int{http.StatusInternalServerError, http.StatusConflict, http.StatusUnprocessableEntity} {
		t.Run(fmt.Sprint(failed), func(t *testing.T) {
			t.Parallel()
			f, up := newGatedFixture(t)
			token := f.Admit("u1")
			f.Clock.Advance(10 * time.Second)
			before := f.Status("u1").Num("expires_in_ms")
			require.EqualValues(t, 290_000, before)

			up.Reply.Store(int64(failed))
			a := f.Order("u1", token)
			require.Equal(t, failed, a.Status)

			after := f.Status("u1")
			require.Equal(t, "admitted", after.Str("state"), "not completed")
			require.Equal(t, token, after.Str("token"))
			require.LessOrEqual(t, after.Num("expires_in_ms"), before, "a release never renews the TTL")

			up.Reply.Store(http.StatusCreated)
			a = f.Order("u1", token)
			require.Equal(t, http.StatusCreated, a.Status, "the released token works again")

			require.Len(t, up.Headers, 2)
			require.Equal(t, up.Headers[0].Get("Idempotency-Key"), up.Headers[1].Get("Idempotency-Key"),
				"the idempotency key is stable for the token")
			require.NotEmpty(t, up.Headers[0].Get("Idempotency-Key"))
			for _, h := range up.Headers {
				require.Empty(t, h.Values("X-Entry-Token"))
			}
		})
	}
}

func TestGateReleasesWhenTheHandlerPanics(t *testing.T) {
	t.Parallel()
	var panics bool
	var mu sync.Mutex
	f := newFixture(t, servertest.FixtureOptions{Protected: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		p := panics
		mu.Unlock()
		if p {
			panic("order handler bug")
		}
		w.WriteHeader(http.StatusCreated)
	})})
	token := f.Admit("u1")

	mu.Lock()
	panics = true
	mu.Unlock()
	a := f.Order("u1", token)
	a.RequireError(t, http.StatusInternalServerError, "INTERNAL")
	require.NotContains(t, a.Body["error"].(map[string]any)["message"], "order handler bug")
	require.Contains(t, f.Logs.String(), "order handler bug", "the panic is logged")

	mu.Lock()
	panics = false
	mu.Unlock()
	require.Equal(t, http.StatusCreated, f.Order("u1", token).Status, "the panic released the token")
}

func TestGateUnreachableUpstreamReleases(t *testing.T) {
	t.Parallel()
	f := newFixture(t, servertest.FixtureOptions{Protected: servertest.ProxyTo(t, testenv.UnreachableURL(t))})
	token := f.Admit("u1")
	for range 3 {
		a := f.Order("u1", token)
		require.Equal(t, http.StatusBadGateway, a.Status)
		require.Equal(t, "UPSTREAM_UNAVAILABLE", a.Code(), "each try finds the token released by the last")
	}
	require.Equal(t, "admitted", f.Status("u1").Str("state"))
}

func TestGateOneTokenConcurrentOrders(t *testing.T) {
	t.Parallel()
	const n = 50
	// The upstream holds the one order that got through until every other
	// request has been answered, so all of them overlap with it.
	proceed := make(chan struct{})
	up := servertest.NewUpstream(t)
	proxy := servertest.ProxyTo(t, up.Srv.URL)
	blocking := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-proceed
		proxy.ServeHTTP(w, r)
	})
	f := newFixture(t, servertest.FixtureOptions{Protected: blocking})
	token := f.Admit("u1")

	start := make(chan struct{})
	type outcome struct {
		status int
		code   string
		err    error
	}
	outcomes := make(chan outcome, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, err := http.NewRequest("POST", f.Srv.URL+"/orders", strings.NewReader(`{}`))
			if err != nil {
				outcomes <- outcome{err: err}
				return
			}
			req.Header.Set("X-User-Id", "u1")
			req.Header.Set("X-Entry-Token", token)
			<-start
			resp, err := f.Srv.Client().Do(req)
			if err != nil {
				outcomes <- outcome{err: err}
				return
			}
			defer resp.Body.Close()
			var body struct {
				Error struct{ Code string } `json:"error"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&body) // a 201 has no error field
			outcomes <- outcome{status: resp.StatusCode, code: body.Error.Code}
		})
	}
	close(start)
	counts := make(map[string]int)
	for range n - 1 {
		o := <-outcomes
		require.NoError(t, o.err)
		counts[fmt.Sprintf("%d %s", o.status, o.code)]++
	}
	close(proceed)
	wg.Wait()
	o := <-outcomes
	require.NoError(t, o.err)
	counts[fmt.Sprintf("%d %s", o.status, o.code)]++

	require.Equal(t, map[string]int{"201 ": 1, "409 TOKEN_IN_USE": n - 1}, counts)
	require.EqualValues(t, 1, up.Calls.Load(), "exactly one order reached the upstream")
}

func TestGatePanicAfterWritingCutsTheAnswerAndReleases(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	f := newFixture(t, servertest.FixtureOptions{Protected: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"order_id":`))
			w.(http.Flusher).Flush()
			panic("half-written order")
		}
		w.WriteHeader(http.StatusCreated)
	})})
	token := f.Admit("u1")

	req, err := http.NewRequest("POST", f.Srv.URL+"/orders", nil)
	require.NoError(t, err)
	req.Header.Set("X-User-Id", "u1")
	req.Header.Set("X-Entry-Token", token)
	resp, err := f.Srv.Client().Do(req)
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	require.Error(t, err, "a half-written answer is cut, not passed off as whole")

	// A panic is a failure whatever was written before it: the token is
	// released, and a retry reaches the upstream with the same idempotency
	// key, which returns the first order if there was one.
	a := f.Order("u1", token)
	require.Equal(t, http.StatusCreated, a.Status)
	require.EqualValues(t, 2, calls.Load())
}

// An upstream that sends 103 Early Hints before its 201 placed the order:
// the token is spent, not released for a second order, and every record of
// the request (the gate's hook, the request metrics) says 201.
func TestGateJudgesTheFinalStatusNotEarlyHints(t *testing.T) {
	t.Parallel()
	var calls int
	var mu sync.Mutex
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		w.Header().Set("Link", "</style.css>; rel=preload; as=style")
		w.WriteHeader(http.StatusEarlyHints)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"order_id":"o1"}`)
	}))
	t.Cleanup(up.Close)
	var served []int
	f := newFixture(t, servertest.FixtureOptions{
		Protected: servertest.ProxyTo(t, up.URL),
		OnServed: func(_ string, _ time.Duration, status int) {
			mu.Lock()
			served = append(served, status)
			mu.Unlock()
		},
	})
	token := f.Admit("u1")

	a := f.Order("u1", token)
	require.Equal(t, http.StatusCreated, a.Status)
	for range 3 {
		a = f.Order("u1", token)
		require.Equal(t, http.StatusForbidden, a.Status)
		require.Equal(t, "ENTRY_TOKEN_NOT_FOUND", a.Code(), "the 201 spent the token")
	}
	mu.Lock()
	require.Equal(t, 1, calls, "one order reached the upstream")
	require.Equal(t, []int{http.StatusCreated}, served, "the service time is measured on the final status")
	mu.Unlock()

	_, body := testenv.Get(t, f.Srv.Client(), f.Srv.URL+"/metrics")
	require.Contains(t, body, `waitroom_http_request_duration_seconds_count{code="201",route="POST /orders"} 1`)
	require.NotContains(t, body, `code="103"`)
}

// A client that names the gate's headers in Connection, or sends its own
// Idempotency-Key, does not change what the upstream reads: the user the
// token was claimed for and the gate's key, each exactly once.
func TestGateHeadersReachTheUpstreamWhateverTheClientSends(t *testing.T) {
	t.Parallel()
	f, up := newGatedFixture(t)
	token := f.Admit("u1")

	a := f.Do("POST", "/orders", `{}`, "X-User-Id", "u1", "X-Entry-Token", token,
		"Connection", "Idempotency-Key, X-User-Id, X-Entry-Token", "Idempotency-Key", "chosen-by-client")
	require.Equal(t, http.StatusCreated, a.Status)
	require.Len(t, up.Headers, 1)
	got := up.Headers[0]
	require.Equal(t, []string{waitroom.IdempotencyKey(f.Room, token)}, got.Values("Idempotency-Key"))
	require.Equal(t, []string{"u1"}, got.Values("X-User-Id"))
	require.Empty(t, got.Values("X-Entry-Token"))

	// CGI-style servers (PHP, WSGI, Rack) read X_User_Id as X-User-Id:
	// a spelling with underscores would be a second user header there.
	token = f.Admit("u2")
	a = f.Do("POST", "/orders", `{}`, "X-User-Id", "u2", "X-Entry-Token", token,
		"X_User_Id", "u1", "x-user_id", "u1", "Idempotency_Key", "chosen-by-client", "X_Entry_Token", token)
	require.Equal(t, http.StatusCreated, a.Status)
	require.Len(t, up.Headers, 2)
	var names []string
	for name := range up.Headers[1] {
		folded := strings.ToLower(strings.ReplaceAll(name, "_", "-"))
		if folded == "x-user-id" || folded == "idempotency-key" || folded == "x-entry-token" {
			names = append(names, name)
		}
	}
	require.ElementsMatch(t, []string{"X-User-Id", "Idempotency-Key"}, names, "each exactly once, in one spelling")
	require.Equal(t, []string{"u2"}, up.Headers[1].Values("X-User-Id"))
}

// Two user headers are ambiguous: the upstream might read the other one.
func TestGateRefusesSeveralUserHeaders(t *testing.T) {
	t.Parallel()
	f, up := newGatedFixture(t)
	token := f.Admit("u1")

	for _, users := range [][]string{{"u1", "u2"}, {"u1", "u1"}} {
		req, err := http.NewRequestWithContext(t.Context(), "POST", f.Srv.URL+"/orders", strings.NewReader(`{}`))
		require.NoError(t, err)
		for _, u := range users {
			req.Header.Add("X-User-Id", u)
		}
		req.Header.Set("X-Entry-Token", token)
		a := servertest.Send(t, f.Srv.Client(), req)
		a.RequireError(t, http.StatusBadRequest, "BAD_REQUEST")
	}
	require.Zero(t, up.Calls.Load())
	require.Equal(t, http.StatusCreated, f.Order("u1", token).Status, "the refusals cost the token nothing")
}

// An order that runs for several leases keeps its token held: a second
// request with the token meanwhile is TOKEN_IN_USE, not a second order.
func TestGateRenewsTheLeaseWhileTheOrderRuns(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const lease = time.Second
		store := servertest.MemRoom(t, "r", waitroom.RoomConfig{Lease: lease}) // the bubble's clock
		_, err := store.Enter(t.Context(), "r", "u1")
		require.NoError(t, err)
		var admitted []waitroom.Admission
		for len(admitted) == 0 {
			time.Sleep(100 * time.Millisecond)
			admitted, err = store.Admit(t.Context(), "r")
			require.NoError(t, err)
		}
		token := admitted[0].Token

		var orders int
		var mu sync.Mutex
		gate := &waitroom.Gate{Store: store, Room: "r"}
		h := gate.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			orders++
			mu.Unlock()
			time.Sleep(5 * lease) // a slow order API
			w.WriteHeader(http.StatusCreated)
		}))
		order := func() int {
			req := httptest.NewRequest("POST", "/orders", nil)
			req.Header.Set("X-User-Id", "u1")
			req.Header.Set("X-Entry-Token", token)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec.Code
		}
		first := make(chan int, 1)
		go func() { first <- order() }()
		var seconds []int
		for range 4 {
			time.Sleep(lease)
			seconds = append(seconds, order())
		}
		require.Equal(t, http.StatusCreated, <-first)
		require.Equal(t, []int{409, 409, 409, 409}, seconds, "the running order keeps its token")
		require.Equal(t, 1, orders)
		_, err = store.Claim(t.Context(), "r", "u1", token)
		require.ErrorIs(t, err, waitroom.ErrTokenNotFound, "spent by the one order")
	})
}

// The proxy's bounds: an upstream that does not answer in time or answers
// too much is a failed order, and the token is released.
func TestUpstreamBounds(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("answer") {
		case "slow":
			<-r.Context().Done() // the proxy gave up
		case "big":
			w.Header().Set("Content-Length", "4096")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(make([]byte, 4096))
		case "big-unannounced":
			w.WriteHeader(http.StatusCreated)
			for range 8 {
				_, _ = w.Write(make([]byte, 1024))
				w.(http.Flusher).Flush()
			}
		default:
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(make([]byte, 2048)) // exactly the bound
		}
	}))
	t.Cleanup(up.Close)
	target, err := url.Parse(up.URL)
	require.NoError(t, err)
	proxy, err := upstreamproxy.New(target, upstreamproxy.Options{ResponseTimeout: 200 * time.Millisecond, MaxBody: 2048})
	require.NoError(t, err)
	f := newFixture(t, servertest.FixtureOptions{Protected: proxy})
	token := f.Admit("u1")

	order := func(answer string) (int, error) {
		req, err := http.NewRequestWithContext(t.Context(), "POST", f.Srv.URL+"/orders?answer="+answer, nil)
		require.NoError(t, err)
		req.Header.Set("X-User-Id", "u1")
		req.Header.Set("X-Entry-Token", token)
		resp, err := f.Srv.Client().Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		return resp.StatusCode, err
	}
	status, err := order("slow")
	require.NoError(t, err)
	require.Equal(t, http.StatusBadGateway, status)
	status, err = order("big")
	require.NoError(t, err)
	require.Equal(t, http.StatusBadGateway, status)
	_, err = order("big-unannounced")
	require.Error(t, err, "an answer that outgrows the bound is cut")
	require.Equal(t, "admitted", f.Status("u1").Str("state"), "every failure released the token")
	status, err = order("")
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, status, "an answer of exactly the bound passes")
}

// OnSettled is told each settle that landed: released after a failed
// order (the token usable again), completed after a successful one, and
// nothing for a refused claim.
func TestGateTellsEachLandedSettle(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := servertest.MemRoom(t, "r", waitroom.RoomConfig{})
		_, err := store.Enter(t.Context(), "r", "u1")
		require.NoError(t, err)
		var admitted []waitroom.Admission
		for len(admitted) == 0 {
			time.Sleep(100 * time.Millisecond) // the bubble's clock
			admitted, err = store.Admit(t.Context(), "r")
			require.NoError(t, err)
		}
		var mu sync.Mutex
		var told []string
		status := http.StatusInternalServerError
		gate := &waitroom.Gate{Store: store, Room: "r", OnSettled: func(h waitroom.Hold, outcome string) {
			mu.Lock()
			defer mu.Unlock()
			told = append(told, h.User+" "+outcome)
		}}
		h := gate.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }))
		order := func() int {
			req := httptest.NewRequest("POST", "/orders", nil)
			req.Header.Set("X-User-Id", "u1")
			req.Header.Set("X-Entry-Token", admitted[0].Token)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec.Code
		}
		require.Equal(t, http.StatusInternalServerError, order())
		status = http.StatusCreated
		require.Equal(t, http.StatusCreated, order())
		require.Equal(t, http.StatusForbidden, order()) // spent: refused, not settled
		require.Equal(t, []string{"u1 released", "u1 completed"}, told)
	})
}
