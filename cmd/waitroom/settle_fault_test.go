package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/redistest"
)

// TestFaultSoldUnitStaysSoldThroughRedisStall: a drop of 40 units with one
// order per buyer, a crowd that orders fast (two orders at once with each
// token) against an upstream that takes 700 ms, and Redis frozen (SIGSTOP)
// for a while as the first orders are in flight: the orders whose settle
// met the freeze are settled when Redis answers again, their units stay
// sold, their buyers stay recorded, and the upstream never receives more
// orders than the stock, in any of ten runs.
func TestFaultSoldUnitStaysSoldThroughRedisStall(t *testing.T) {
	t.Parallel()
	const runs = 10
	for run := range runs {
		t.Run(fmt.Sprint(run), func(t *testing.T) {
			t.Parallel() // each run on a Redis and a server of its own
			orders, buyers, forgotten := stallDuringOrders(t, rand.Uint64())
			t.Logf("run %d: %d orders reached the upstream for %d buyers, %d buyers forgotten, stock %d",
				run, orders, buyers, forgotten, stallStock)
			require.LessOrEqual(t, orders, stallStock, "orders reached the upstream")
			require.Zero(t, forgotten, "buyers the room forgot")
		})
	}
}

const stallStock = 40

// stallDuringOrders runs one drop through a Redis freeze and returns how
// many order requests reached the upstream, for how many buyers (by
// Idempotency-Key, the buyer's with one order per user), and how many of
// those buyers the room forgot (a new Enter is not ALREADY_ORDERED).
func stallDuringOrders(t *testing.T, seed uint64) (orders, buyers, forgotten int) {
	const (
		crowd      = 120
		freezeFor  = 3 * time.Second
		orderTakes = 700 * time.Millisecond
		freezeAt   = 16 // orders received upstream when Redis freezes
	)
	t.Logf("seed %d", seed)
	rdb := redistest.StartServer(t)
	var mu sync.Mutex
	byKey := map[string]string{} // Idempotency-Key → user
	received := 0
	freezeNow := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received++
		byKey[r.Header.Get("Idempotency-Key")] = r.Header.Get("X-User-Id")
		if received == freezeAt {
			close(freezeNow)
		}
		mu.Unlock()
		time.Sleep(orderTakes)
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(up.Close)
	m := startMain(t, []string{"--redis-url", rdb.URL(), "--upstream", up.URL, "--rate", "100",
		"--stock", fmt.Sprint(stallStock), "--one-order-per-user", "--token-ttl", "3s",
		"--first-use-within", "1s", "--lease", "1s"}, envOf())
	base := "http://" + m.Addr()

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	rng := rand.New(rand.NewPCG(seed, seed))
	var wg sync.WaitGroup
	for i := range crowd {
		user := fmt.Sprintf("buyer-%03d", i)
		wait := time.Duration(rng.Int64N(int64(2500 * time.Millisecond)))
		wg.Go(func() { stallBuyer(ctx, base, user, wait) })
	}
	select {
	case <-freezeNow:
	case <-time.After(30 * time.Second):
		t.Fatal("no orders reached the upstream")
	}
	resume := rdb.Freeze()
	time.Sleep(freezeFor) // the fault's length, not a wait for an outcome
	resume()
	// Time for the units Redis would free to be admitted and ordered:
	// a tick, the buyers' wait and the order.
	time.Sleep(4*time.Second + orderTakes)
	stop()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	// The settles that met the freeze land once Redis answers again.
	deadline := time.Now().Add(10 * time.Second)
	for _, user := range byKey {
		for {
			r, err := do(t.Context(), http.DefaultClient, "POST", base+"/queue/enter", user, "", "")
			if err == nil && r.code() == "ALREADY_ORDERED" {
				break
			}
			if time.Now().After(deadline) {
				forgotten++
				break
			}
			time.Sleep(pollEvery)
		}
	}
	return received, len(byKey), forgotten
}

// stallBuyer enters, asks until admitted, confirms, waits, then sends two
// orders at once with its token; it gives up when ctx ends.
func stallBuyer(ctx context.Context, base, user string, wait time.Duration) {
	if _, err := do(ctx, http.DefaultClient, "POST", base+"/queue/enter", user, "", ""); err != nil {
		return
	}
	for ctx.Err() == nil {
		r, err := do(ctx, http.DefaultClient, "GET", base+"/queue/position", user, "", "")
		if token, _ := r.body["token"].(string); err == nil && token != "" {
			// A second look confirms the token (its page shows "your
			// turn"): it lives its whole TTL, not the first-use deadline.
			if _, err := do(ctx, http.DefaultClient, "GET", base+"/queue/position", user, "", ""); err != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			begin := make(chan struct{})
			var orders sync.WaitGroup
			for range 2 {
				orders.Go(func() {
					<-begin
					_, _ = do(context.WithoutCancel(ctx), http.DefaultClient, "POST", base+"/orders", user, token, `{}`)
				})
			}
			close(begin)
			orders.Wait()
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(pollEvery):
		}
	}
}
