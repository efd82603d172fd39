package waitroom

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A crowd of one-off keys is forgotten by generations: the limiter holds
// at most two generations of them, and never forgets a key whose count
// still matters.
func TestLocalLimiterForgetsOneOffKeys(t *testing.T) {
	ctx := context.Background()
	c := newTestClock(time.Unix(1_700_000_000, 0))
	lim := NewLocalLimiter(c.Now)
	l := Limit{Rate: 5, Burst: 2}

	// A key at its burst, then ten generations of 1,000 new keys each.
	for range 2 {
		ok, _, err := lim.Allow(ctx, "steady", l)
		require.NoError(t, err)
		require.True(t, ok)
	}
	for gen := range 10 {
		for i := range 1000 {
			ok, _, err := lim.Allow(ctx, fmt.Sprintf("visitor-%d-%d", gen, i), l)
			require.NoError(t, err)
			require.True(t, ok)
		}
		require.LessOrEqual(t, lim.keys(), 2*1000+limiterShards, "generation %d: two generations at most", gen)
		c.Advance(minGeneration)
	}

	// A key with a long horizon (1 a minute, burst 3: its count reaches
	// four minutes ahead) is kept past two short generations.
	slow := Limit{Rate: 1.0 / 60, Burst: 3}
	for range 3 {
		ok, _, err := lim.Allow(ctx, "slow", slow)
		require.NoError(t, err)
		require.True(t, ok)
	}
	// Two generations' worth of time, with calls on its shard that would
	// end each of them.
	other := keyBeside(lim, "slow")
	for range 2 {
		c.Advance(minGeneration + time.Second)
		_, _, err := lim.Allow(ctx, other, slow)
		require.NoError(t, err)
	}
	// Its count reaches a minute ahead still: two more pass, not three.
	var got []bool
	for range 3 {
		ok, _, err := lim.Allow(ctx, "slow", slow)
		require.NoError(t, err)
		got = append(got, ok)
	}
	require.Equal(t, []bool{true, true, false}, got, "a forgotten count would let the third through")
}

// Every shard answers as one GCRA count per key, whatever the spread.
func TestLocalLimiterMatchesGCRA(t *testing.T) {
	ctx := context.Background()
	start := time.Unix(1_700_000_000, 0)
	c := newTestClock(start)
	lim := NewLocalLimiter(c.Now)
	l := Limit{Rate: 3, Burst: 2}
	tats := map[string]time.Time{}
	for step := range 3000 {
		key := fmt.Sprintf("k%d", step*7919%53)
		want, tat, wantWait := GCRA(tats[key], c.Now(), l)
		tats[key] = tat
		ok, wait, err := lim.Allow(ctx, key, l)
		require.NoError(t, err)
		require.Equal(t, want, ok, "step %d key %s", step, key)
		require.Equal(t, wantWait, wait, "step %d key %s", step, key)
		c.Advance(time.Duration(step%11) * 13 * time.Millisecond)
	}
	require.Greater(t, c.Now().Sub(start), 2*minGeneration, "the run crossed generations")
}

// keyBeside returns a key that falls in the same shard as key.
func keyBeside(lim *LocalLimiter, key string) string {
	want := maphash.String(lim.seed, key) % limiterShards
	for i := 0; ; i++ {
		k := fmt.Sprintf("beside-%d", i)
		if maphash.String(lim.seed, k)%limiterShards == want {
			return k
		}
	}
}

// testClock is a clock the limiter's tests move by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock(at time.Time) *testClock { return &testClock{now: at} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
