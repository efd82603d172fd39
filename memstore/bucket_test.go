package memstore

import (
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

// With ticks no further apart than a slice and a queue that never runs
// dry, nothing is capped, so after any tick the bucket has admitted exactly
// floor(rate × elapsed) users: no drift, however ragged the ticks.
func TestBucketIsExactUnderRandomTicks(t *testing.T) {
	t.Parallel()
	for _, cfg := range []waitroom.RoomConfig{
		{Rate: 140},
		{Rate: 175},
		{Rate: 33.3},
		{Rate: 1.5, Slice: time.Second},
		{Rate: 99_999.9, Slice: 10 * time.Millisecond},
	} {
		cfg = cfg.WithDefaults()
		require.NoError(t, cfg.Validate())
		rng := rand.New(rand.NewPCG(3, uint64(cfg.Rate)))
		var b bucket
		now := int64(1_700_000_000_000_000) // µs
		require.Zero(t, b.take(now, cfg, cfg.TickQuota()))
		var elapsed, admitted int64
		for range 20_000 {
			gap := 1 + rng.Int64N(cfg.Slice.Microseconds())
			now += gap
			elapsed += gap
			n := b.take(now, cfg, cfg.TickQuota())
			require.LessOrEqual(t, n, cfg.TickQuota())
			admitted += int64(n)
		}
		// floor(rate × 1e6 × elapsed µs / 1e12), in big integers.
		want := new(big.Int).Mul(big.NewInt(int64(cfg.Rate*1e6+0.5)), big.NewInt(elapsed))
		want.Quo(want, big.NewInt(picosPerUser))
		require.Equal(t, want.Int64(), admitted, "rate %g over %d µs", cfg.Rate, elapsed)
	}
}

// A clock that steps back pays nothing, and the span it stepped over is
// not paid twice when it catches up.
func TestBucketClockStepsBack(t *testing.T) {
	t.Parallel()
	cfg := waitroom.RoomConfig{Rate: 100}.WithDefaults()
	var b bucket
	b.take(1_000_000, cfg, 100)
	require.Equal(t, 10, b.take(1_100_000, cfg, 100))
	require.Zero(t, b.take(1_050_000, cfg, 100))
	require.Zero(t, b.take(1_100_000, cfg, 100))
	require.Equal(t, 10, b.take(1_200_000, cfg, 100))
}

// After a very long idle the refill saturates instead of overflowing.
func TestBucketLongIdle(t *testing.T) {
	t.Parallel()
	cfg := waitroom.RoomConfig{Rate: waitroom.MaxRate, Slice: waitroom.MinSlice}.WithDefaults()
	var b bucket
	b.take(0, cfg, 0)
	require.Equal(t, cfg.TickQuota(), b.take(int64(100*365*24*time.Hour/time.Microsecond), cfg, cfg.TickQuota()))
	require.Equal(t, int64(cfg.TickQuota()+1)*picosPerUser, b.carry, "carry capped at one slice and one user")
}
