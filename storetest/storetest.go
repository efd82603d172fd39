// Package storetest is the conformance suite every waitroom.Store passes,
// run against the real backends (like river's riverdrivertest).
package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
)

// Harness gives the suite one store under test.
type Harness struct {
	// Store is the store under test; rooms made by the suite have unique
	// names, so one backend may serve parallel tests.
	Store waitroom.Store
	// Peer returns another handle on the same backend, as a second server
	// instance would have (a new client on the same Redis; the same store
	// in process).
	Peer func(t *testing.T) waitroom.Store
	// Advance moves the store's clock forward by at least d: a fake clock
	// where the store has one, a real wait where the clock is the server's.
	Advance func(t *testing.T, d time.Duration)
	// FakeClock says Advance is exact and instant, so the suite may run
	// long simulated spans (10 s of admissions) exactly.
	FakeClock bool
	// AdmitAfter (required) runs Admit in room as though d had passed on
	// the store's clock since the room's last Admit, and returns how many
	// it admitted and the span its bucket counted: d, or on a real clock d
	// plus the moments the call itself took. The rate's exactness is
	// checked on it over simulated hours; nil fails that check.
	AdmitAfter func(t *testing.T, room string, d time.Duration) (admitted int, counted time.Duration)
	// ReplaceSeed writes seedHex over room's draw seed behind the store's
	// back, as an insider could (the key itself on Redis).
	ReplaceSeed func(t *testing.T, room, seedHex string)
	// Now reads the store's clock, for settings that name a time (a
	// scheduled opening); nil: time.Now, the clock of a Redis on this
	// machine.
	Now func() time.Time
	// Shards, above 1, spreads every room the suite makes over that many
	// shards (RoomConfig.Shards) unless it names its own (spread.go).
	Shards int
}

// now reads the store's clock.
func (h Harness) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// RunLimiter checks a waitroom.Limiter: a burst, then refusals with the
// right wait, recovery at the rate, and one count shared by lim and peer
// (another instance on the same backend; lim itself in process). advance
// moves the limiter's clock as Harness.Advance does.
func RunLimiter(t *testing.T, lim, peer waitroom.Limiter, advance func(t *testing.T, d time.Duration)) {
	t.Helper()
	// On a real clock a loaded machine can stretch the half second past a
	// whole one, when a second request is rightly allowed: such a round is
	// run again on a new key, not judged.
	for attempt := 1; ; attempt++ {
		if limiterRound(t, lim, peer, advance) {
			return
		}
		require.Less(t, attempt, 3, "every round took over a second: the limit could not be judged")
		t.Logf("attempt %d: the half second took over a second on a loaded machine; again", attempt)
	}
}

// limiterRound runs RunLimiter's checks on a new key; false when the last
// one could not be judged because more than a second had passed.
func limiterRound(t *testing.T, lim, peer waitroom.Limiter, advance func(t *testing.T, d time.Duration)) bool {
	t.Helper()
	ctx := t.Context()
	key := testenv.Unique("limit-")
	l := waitroom.Limit{Rate: 2, Burst: 4}
	start := time.Now()
	// A burst of 4 at once, alternating instances: the count is shared.
	for i := range 4 {
		who := lim
		if i%2 == 1 {
			who = peer
		}
		ok, _, err := who.Allow(ctx, key, l)
		require.NoError(t, err)
		require.True(t, ok, "request %d of the burst", i+1)
	}
	for _, who := range []waitroom.Limiter{lim, peer} {
		ok, wait, err := who.Allow(ctx, key, l)
		require.NoError(t, err)
		require.False(t, ok, "beyond the burst")
		require.Greater(t, wait, time.Duration(0))
		require.LessOrEqual(t, wait, 500*time.Millisecond, "one interval at 2/s")
	}
	// Other keys are not touched.
	ok, _, err := lim.Allow(ctx, key+"-other", l)
	require.NoError(t, err)
	require.True(t, ok)
	// Half a second later one more request is allowed, and only one
	// (within a second of the burst; a fake clock takes no wall time).
	advance(t, 520*time.Millisecond)
	ok, _, err = peer.Allow(ctx, key, l)
	require.NoError(t, err)
	require.True(t, ok)
	ok, _, err = lim.Allow(ctx, key, l)
	require.NoError(t, err)
	if ok && time.Since(start) >= time.Second {
		return false
	}
	require.False(t, ok)
	return true
}
