package server_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/redistest"
	"github.com/waitroom/waitroom/server"
)

// settleFixture is a server on a store that fails on cue, in front of an
// order API that answers 201, recording each gated request's outcome.
type settleFixture struct {
	store    *testenv.FaultStore
	srv      *server.Server
	web      *httptest.Server
	mu       sync.Mutex
	outcomes map[string]int
}

func newSettleFixture(t *testing.T, store waitroom.Store, cfg waitroom.RoomConfig) *settleFixture {
	t.Helper()
	f := &settleFixture{store: &testenv.FaultStore{Store: store}, outcomes: map[string]int{}}
	_, err := store.CreateRoom(t.Context(), "default", cfg)
	require.NoError(t, err)
	f.srv = servertest.MustServer(t, server.Config{Store: f.store, StoreTimeout: 300 * time.Millisecond,
		Protected: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"order_id":"o1"}`))
		}),
		OnGateOutcome: func(_, outcome string) {
			f.mu.Lock()
			f.outcomes[outcome]++
			f.mu.Unlock()
		}})
	f.web = httptest.NewServer(f.srv)
	t.Cleanup(f.web.Close)
	return f
}

// admit enters user and admits it on the store itself.
func (f *settleFixture) admit(t *testing.T, user string) string {
	t.Helper()
	_, err := f.store.Enter(t.Context(), "default", user)
	require.NoError(t, err)
	for range 100 {
		got, err := f.store.Admit(t.Context(), "default")
		require.NoError(t, err)
		for _, a := range got {
			if a.User == user {
				return a.Token
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s not admitted", user)
	return ""
}

func (f *settleFixture) order(t *testing.T, user, token string) (int, string) {
	t.Helper()
	status, body := testenv.Request(t, "POST", f.web.URL+"/orders", user, token, `{}`)
	e, _ := body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return status, code
}

func (f *settleFixture) counted() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.outcomes)
}

// failFirst fails the first n calls of method as a stalled store does.
func failFirst(method string, n int) func(context.Context, string) error {
	var mu sync.Mutex
	return func(_ context.Context, m string) error {
		mu.Lock()
		defer mu.Unlock()
		if m != method || n == 0 {
			return nil
		}
		n--
		return fmt.Errorf("%w: stalled", waitroom.ErrStoreUnavailable)
	}
}

// TestGateRetriesACompleteTheStoreDidNotAnswer: the order API said 201
// but the store did not answer the Complete: the gate answers the buyer
// at once and retries in the background until the unit is sold and the
// buyer recorded; a second order with the token meanwhile does not pass.
func TestGateRetriesACompleteTheStoreDidNotAnswer(t *testing.T) {
	t.Parallel()
	f := newSettleFixture(t, memstore.New(memstore.Options{}),
		waitroom.RoomConfig{Rate: 1000, Stock: 1, OneOrderPerUser: true})
	token := f.admit(t, "ann")
	f.store.SetFault(failFirst("Complete", 3))

	status, _ := f.order(t, "ann", token)
	require.Equal(t, http.StatusCreated, status)
	require.Eventually(t, func() bool { return f.counted()["completed"] == 1 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, map[string]int{"settle_retrying": 1, "completed": 1}, f.counted())

	stats := testenv.Stats(t, f.store, "default")
	require.Equal(t, int64(1), stats.Completed, "the unit is sold")
	require.Zero(t, stats.Active)
	_, err := f.store.Enter(t.Context(), "default", "ann")
	require.ErrorIs(t, err, waitroom.ErrAlreadyOrdered, "the buyer is recorded")
}

// TestGateDrainMakesALastAttempt: on shutdown the settles still retried
// make one last attempt each: one that lands sells its unit, one that
// does not is counted abandoned; Drain returns either way.
func TestGateDrainMakesALastAttempt(t *testing.T) {
	t.Parallel()
	for _, lands := range []bool{true, false} {
		t.Run(fmt.Sprintf("lands=%t", lands), func(t *testing.T) {
			t.Parallel()
			f := newSettleFixture(t, memstore.New(memstore.Options{}), waitroom.RoomConfig{Rate: 1000, Stock: 1})
			token := f.admit(t, "ann")
			f.store.SetFault(failFirst("Complete", 1_000_000))
			status, _ := f.order(t, "ann", token)
			require.Equal(t, http.StatusCreated, status)
			require.Equal(t, 1, f.counted()["settle_retrying"])
			if lands {
				f.store.SetFault(nil)
			}
			f.srv.DrainSettles()
			stats := testenv.Stats(t, f.store, "default")
			if lands {
				require.Equal(t, map[string]int{"settle_retrying": 1, "completed": 1}, f.counted())
				require.Equal(t, int64(1), stats.Completed)
				return
			}
			require.Equal(t, map[string]int{"settle_retrying": 1, "settle_abandoned": 1}, f.counted())
			require.Zero(t, stats.Completed)
			require.Equal(t, int64(1), stats.Active, "the hold keeps its unit until the settle window is over")
		})
	}
}

// TestGateGivesBackAClaimThatTimedOut: Redis frozen while a claim is on
// its way: the gate answers 503, and the claim runs when Redis resumes,
// holding the token under a lease nobody knows of. The gate gives that
// hold back, so the buyer's retry is served well before the lease (30 s)
// would have freed it.
func TestGateGivesBackAClaimThatTimedOut(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartServer(t)
	store := redisRoom(t, rdb, 1000)
	f := newSettleFixture(t, store, waitroom.RoomConfig{Rate: 1000})
	token := f.admit(t, "ann")

	resume := rdb.Freeze()
	status, code := f.order(t, "ann", token)
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, "STORE_UNAVAILABLE", code)
	resume()

	start := time.Now()
	answers := map[string]int{}
	for {
		status, code := f.order(t, "ann", token)
		if status == http.StatusCreated {
			break
		}
		answers[code]++
		require.Less(t, time.Since(start), 15*time.Second, "the retry was refused all along: %v", answers)
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the retry passed after %s (%v before)", time.Since(start).Round(time.Millisecond), answers)
	require.Eventually(t, func() bool { return f.counted()["claim_withdrawn"] == 1 }, 10*time.Second, 10*time.Millisecond)
	_, err := store.Claim(t.Context(), "default", "ann", token)
	require.ErrorIs(t, err, waitroom.ErrTokenNotFound, "the order spent the token")
}
