package waitroom_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

// sharedCount is a SharedLimiter in process, on a clock the test moves: one
// GCRA count per key, as redisstore's script keeps it, that records what
// each call handed over.
type sharedCount struct {
	now  func() time.Time
	fail error // answered instead, when set

	mu     sync.Mutex
	tat    map[string]time.Time
	passed []int // per call
}

func (c *sharedCount) Allow(ctx context.Context, key string, l waitroom.Limit) (bool, time.Duration, error) {
	return c.AllowAfter(ctx, key, l, 0)
}

func (c *sharedCount) AllowAfter(_ context.Context, key string, l waitroom.Limit, passed int) (bool, time.Duration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.passed = append(c.passed, passed)
	if c.fail != nil {
		return false, 0, c.fail
	}
	now := c.now()
	tat := c.tat[key]
	if tat.Before(now) {
		tat = now
	}
	tat = tat.Add(time.Duration(passed) * time.Duration(float64(time.Second)/l.Rate))
	ok, next, wait := waitroom.GCRA(tat, now, l)
	c.tat[key] = next
	return ok, wait, nil
}

func (c *sharedCount) calls() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.passed...)
}

// clock is a fake local clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newShare(instances int) (*waitroom.LocalShare, *sharedCount, *clock) {
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	shared := &sharedCount{now: clk.Now, tat: map[string]time.Time{}}
	return &waitroom.LocalShare{Shared: shared, Instances: instances, Now: clk.Now}, shared, clk
}

func allowN(t *testing.T, lim waitroom.Limiter, key string, l waitroom.Limit, n int) []bool {
	t.Helper()
	got := make([]bool, n)
	for i := range got {
		ok, _, err := lim.Allow(t.Context(), key, l)
		require.NoError(t, err)
		got[i] = ok
	}
	return got
}

// Within its share (1/2 of rate 4 and burst 8) a key costs no shared call;
// beyond it the shared count hears of the share's requests first, so one
// instance still gives the whole limit, and not more.
func TestLocalShareAsksOnlyBeyondItsShare(t *testing.T) {
	t.Parallel()
	share, shared, clk := newShare(2)
	l := waitroom.Limit{Rate: 4, Burst: 8}
	require.Equal(t, []bool{true, true, true, true}, allowN(t, share, "k", l, 4))
	require.Empty(t, shared.calls(), "the share answers its burst of 4 alone")
	require.Equal(t, []bool{true, true, true, true, false}, allowN(t, share, "k", l, 5))
	require.Equal(t, []int{4, 0, 0, 0, 0}, shared.calls(), "the share's 4 handed over once; 4 more of the burst of 8, then refused")

	// The share refills at 2/s: one request half a second later is its
	// own again, and is handed over with the next one beyond it.
	clk.Advance(500 * time.Millisecond)
	require.Equal(t, []bool{true}, allowN(t, share, "k", l, 1))
	require.Len(t, shared.calls(), 5)
	_, _, err := share.Allow(t.Context(), "k", l)
	require.NoError(t, err)
	require.Equal(t, 1, shared.calls()[5])

	require.Equal(t, []bool{true}, allowN(t, share, "other", l, 1), "another key has its own share")
	require.Len(t, shared.calls(), 6)
}

// Once the share is full again, what it let through is forgotten: its debt
// (and the shared count's for it, at a shorter interval) is gone.
func TestLocalShareForgetsWhatRefilled(t *testing.T) {
	t.Parallel()
	share, shared, clk := newShare(2)
	l := waitroom.Limit{Rate: 4, Burst: 8}
	allowN(t, share, "k", l, 3)
	clk.Advance(2 * time.Second) // the share's 3 × 500 ms have passed
	require.Equal(t, []bool{true, true, true, true, true}, allowN(t, share, "k", l, 5))
	require.Equal(t, []int{4}, shared.calls(), "only the requests since the refill")
}

// A failed shared call hands nothing over: the next one hands the same
// requests over again.
func TestLocalShareKeepsWhatAFailedCallDidNotHandOver(t *testing.T) {
	t.Parallel()
	share, shared, _ := newShare(1)
	l := waitroom.Limit{Rate: 1, Burst: 3}
	allowN(t, share, "k", l, 3)
	shared.fail = errors.New("redis down")
	_, _, err := share.Allow(t.Context(), "k", l)
	require.ErrorIs(t, err, shared.fail)
	shared.fail = nil
	ok, wait, err := share.Allow(t.Context(), "k", l)
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, time.Second, wait, "3 handed over: the burst is spent, the next slot is one interval away")
	require.Equal(t, []int{3, 3}, shared.calls())
}

// A share smaller than one request (burst 1 over 2 instances) answers
// nothing itself: every request asks the shared count.
func TestLocalShareWithoutAWholeRequest(t *testing.T) {
	t.Parallel()
	share, shared, _ := newShare(2)
	l := waitroom.Limit{Rate: 0.5, Burst: 1}
	require.Equal(t, []bool{true, false}, allowN(t, share, "k", l, 2))
	require.Equal(t, []int{0, 0}, shared.calls())
	_, _, err := share.Allow(t.Context(), "k", waitroom.Limit{})
	require.ErrorIs(t, err, waitroom.ErrBadRequest)
}

// Concurrent requests of one key, started at one signal: exactly the burst
// passes, and the share's requests are handed over exactly once.
func TestLocalShareConcurrentRequests(t *testing.T) {
	t.Parallel()
	share, shared, _ := newShare(1)
	l := waitroom.Limit{Rate: 1, Burst: 10}
	const n = 50
	start := make(chan struct{})
	var wg sync.WaitGroup
	results := make(chan bool, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ok, _, err := share.Allow(context.Background(), "k", l)
			if err != nil {
				panic(err)
			}
			results <- ok
		}()
	}
	close(start)
	wg.Wait()
	close(results)
	allowed := 0
	for ok := range results {
		if ok {
			allowed++
		}
	}
	require.Equal(t, 10, allowed)
	handed := 0
	for _, p := range shared.calls() {
		handed += p
	}
	require.Equal(t, 10, handed)
	require.Len(t, shared.calls(), n-10)
}
