package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
)

func TestGateCompletesOnSuccess(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	f := newFixture(t, fixtureOptions{protected: proxyTo(t, up.srv.URL)})
	token := f.admit("u1")

	a := f.order("u1", token)
	require.Equal(t, http.StatusCreated, a.status)
	require.Equal(t, "o1", a.str("order_id"))
	require.EqualValues(t, 1, up.calls.Load())

	// Spent: the token opens nothing any more.
	a = f.order("u1", token)
	require.Equal(t, http.StatusForbidden, a.status)
	require.Equal(t, "ENTRY_TOKEN_NOT_FOUND", a.code())
	require.EqualValues(t, 1, up.calls.Load())

	got := up.headers[0]
	require.Equal(t, waitroom.IdempotencyKey(f.room, token), got.Get("Idempotency-Key"))
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
			up := newUpstream(t)
			f := newFixture(t, fixtureOptions{protected: proxyTo(t, up.srv.URL)})
			token := f.admit("u1")
			f.clock.Advance(10 * time.Second)
			before := f.status("u1").num("expires_in_ms")
			require.EqualValues(t, 290_000, before)

			up.reply.Store(int64(failed))
			a := f.order("u1", token)
			require.Equal(t, failed, a.status)

			after := f.status("u1")
			require.Equal(t, "admitted", after.str("state"), "not completed")
			require.Equal(t, token, after.str("token"))
			require.LessOrEqual(t, after.num("expires_in_ms"), before, "a release never renews the TTL")

			up.reply.Store(http.StatusCreated)
			a = f.order("u1", token)
			require.Equal(t, http.StatusCreated, a.status, "the released token works again")

			require.Len(t, up.headers, 2)
			require.Equal(t, up.headers[0].Get("Idempotency-Key"), up.headers[1].Get("Idempotency-Key"),
				"the idempotency key is stable for the token")
			require.NotEmpty(t, up.headers[0].Get("Idempotency-Key"))
			for _, h := range up.headers {
				require.Empty(t, h.Values("X-Entry-Token"))
			}
		})
	}
}

func TestGateReleasesWhenTheHandlerPanics(t *testing.T) {
	t.Parallel()
	var panics bool
	var mu sync.Mutex
	f := newFixture(t, fixtureOptions{protected: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		p := panics
		mu.Unlock()
		if p {
			panic("order handler bug")
		}
		w.WriteHeader(http.StatusCreated)
	})})
	token := f.admit("u1")

	mu.Lock()
	panics = true
	mu.Unlock()
	a := f.order("u1", token)
	require.Equal(t, http.StatusInternalServerError, a.status)
	require.Equal(t, "INTERNAL", a.code())
	require.NotContains(t, a.body["error"].(map[string]any)["message"], "order handler bug")
	require.Contains(t, f.logs.String(), "order handler bug", "the panic is logged")

	mu.Lock()
	panics = false
	mu.Unlock()
	require.Equal(t, http.StatusCreated, f.order("u1", token).status, "the panic released the token")
}

func TestGateUnreachableUpstreamReleases(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{protected: proxyTo(t, testenv.UnreachableURL(t))})
	token := f.admit("u1")
	for range 3 {
		a := f.order("u1", token)
		require.Equal(t, http.StatusBadGateway, a.status)
		require.Equal(t, "UPSTREAM_UNAVAILABLE", a.code(), "each try finds the token released by the last")
	}
	require.Equal(t, "admitted", f.status("u1").str("state"))
}

func TestGateOneTokenConcurrentOrders(t *testing.T) {
	t.Parallel()
	const n = 50
	// The upstream holds the one order that got through until every other
	// request has been answered, so all of them overlap with it.
	proceed := make(chan struct{})
	up := newUpstream(t)
	proxy := proxyTo(t, up.srv.URL)
	blocking := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-proceed
		proxy.ServeHTTP(w, r)
	})
	f := newFixture(t, fixtureOptions{protected: blocking})
	token := f.admit("u1")

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
			req, err := http.NewRequest("POST", f.srv.URL+"/orders", strings.NewReader(`{}`))
			if err != nil {
				outcomes <- outcome{err: err}
				return
			}
			req.Header.Set("X-User-Id", "u1")
			req.Header.Set("X-Entry-Token", token)
			<-start
			resp, err := f.srv.Client().Do(req)
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
	require.EqualValues(t, 1, up.calls.Load(), "exactly one order reached the upstream")
}

func TestGatePanicAfterWritingCutsTheAnswerAndReleases(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	f := newFixture(t, fixtureOptions{protected: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"order_id":`))
			w.(http.Flusher).Flush()
			panic("half-written order")
		}
		w.WriteHeader(http.StatusCreated)
	})})
	token := f.admit("u1")

	req, err := http.NewRequest("POST", f.srv.URL+"/orders", nil)
	require.NoError(t, err)
	req.Header.Set("X-User-Id", "u1")
	req.Header.Set("X-Entry-Token", token)
	resp, err := f.srv.Client().Do(req)
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	require.Error(t, err, "a half-written answer is cut, not passed off as whole")

	// A panic is a failure whatever was written before it: the token is
	// released, and a retry reaches the upstream with the same idempotency
	// key, which returns the first order if there was one.
	a := f.order("u1", token)
	require.Equal(t, http.StatusCreated, a.status)
	require.EqualValues(t, 2, calls.Load())
}
