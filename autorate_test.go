package waitroom_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/memstore"
)

func newTuner(t *testing.T, rate float64) (*waitroom.RateTuner, *memstore.Store) {
	t.Helper()
	store := memstore.New(memstore.Options{})
	_, err := store.CreateRoom(t.Context(), "drop", waitroom.RoomConfig{Rate: rate, State: waitroom.RoomPaused})
	require.NoError(t, err)
	return &waitroom.RateTuner{Store: store, Room: "drop", Pool: 40, Margin: 0.5}, store
}

// tune runs one interval of tuner and returns the rate it set.
func tune(t *testing.T, tuner *waitroom.RateTuner) float64 {
	t.Helper()
	rate, err := tuner.Tune(t.Context())
	require.NoError(t, err)
	return rate
}

func observe(tuner *waitroom.RateTuner, n int, took time.Duration) {
	for range n {
		tuner.Observe(took)
	}
}

// TestRateTunerConvergesInBoundedSteps: orders taking 100 ms on a pool of
// 40 at margin 0.5 can sustain 200 users/s; from 100/s the rate climbs by
// at most a quarter per interval and settles there.
func TestRateTunerConvergesInBoundedSteps(t *testing.T) {
	t.Parallel()
	tuner, store := newTuner(t, 100)
	var rates []float64
	for range 6 {
		observe(tuner, 50, 100*time.Millisecond)
		rates = append(rates, tune(t, tuner))
	}
	require.Equal(t, []float64{125, 156.3, 195.4, 200, 200, 200}, rates)
	cfg, err := store.RoomConfig(t.Context(), "drop")
	require.NoError(t, err)
	require.Equal(t, 200.0, cfg.Rate)
	require.Equal(t, waitroom.RoomPaused, cfg.State, "only the rate changes")
}

func TestRateTunerFallsWhenOrdersSlowDown(t *testing.T) {
	t.Parallel()
	tuner, _ := newTuner(t, 100)
	observe(tuner, 30, 400*time.Millisecond) // 40 / 0.4 × 0.5 = 50
	require.Equal(t, 75.0, tune(t, tuner))
}

func TestRateTunerNeedsEnoughSamples(t *testing.T) {
	t.Parallel()
	tuner, _ := newTuner(t, 100)
	observe(tuner, 19, time.Millisecond)
	require.Equal(t, 100.0, tune(t, tuner), "19 orders do not steer the rate")

	// The samples were taken: the next interval starts afresh.
	observe(tuner, 1, time.Millisecond)
	require.Equal(t, 100.0, tune(t, tuner))
}

func TestRateTunerIgnoresNoise(t *testing.T) {
	t.Parallel()
	tuner, _ := newTuner(t, 100)
	observe(tuner, 50, 198*time.Millisecond) // target 101: within 2%
	require.Equal(t, 100.0, tune(t, tuner))
}

func TestRateTunerStaysWithinBounds(t *testing.T) {
	t.Parallel()
	tuner, _ := newTuner(t, 9_000)
	tuner.MaxStep = 1
	observe(tuner, 50, time.Millisecond) // target 20,000/s: above one tick's most
	require.Equal(t, float64(waitroom.MaxTickQuota)/waitroom.DefaultSlice.Seconds(), tune(t, tuner))

	low, _ := newTuner(t, 2)
	low.MaxStep, low.MinRate = 1, 1.5
	observe(low, 50, time.Hour) // target ~0.006/s
	require.Equal(t, 1.5, tune(t, low))
}

// pausedMeanwhile is a store on which an operator pauses the room right
// after the tuner read its settings: a race at the store seam.
type pausedMeanwhile struct {
	*memstore.Store
	t *testing.T
}

func (p pausedMeanwhile) RoomConfig(ctx context.Context, room string) (waitroom.RoomConfig, error) {
	cfg, err := p.Store.RoomConfig(ctx, room)
	paused := cfg
	paused.State = waitroom.RoomPaused
	require.NoError(p.t, p.Store.UpdateRoom(ctx, room, cfg, paused))
	return cfg, err
}

// TestRateTunerNeverUndoesAnOperator: the tuner writes only over the
// settings it read, so a pause made meanwhile stands.
func TestRateTunerNeverUndoesAnOperator(t *testing.T) {
	t.Parallel()
	tuner, store := newTuner(t, 100)
	_, err := waitroom.ChangeRoom(t.Context(), store, "drop", func(c *waitroom.RoomConfig) error {
		c.State = waitroom.RoomOpen
		return nil
	})
	require.NoError(t, err)
	tuner.Store = pausedMeanwhile{Store: store, t: t}
	observe(tuner, 50, 100*time.Millisecond)
	require.Equal(t, 100.0, tune(t, tuner), "this interval yields to the operator")
	cfg, err := store.RoomConfig(t.Context(), "drop")
	require.NoError(t, err)
	require.Equal(t, waitroom.RoomPaused, cfg.State)
	require.Equal(t, 100.0, cfg.Rate)
}

// TestRateTunerBehindASlowUpstream: orders take 2 s on a pool of 10 at
// margin 0.7, so the tuner lowers the rate from 11.2/s to 3.5/s, below one
// user per 100 ms slice; each interval still admits its rate × 10 s (within
// one user), and every user admitted orders. When nobody orders any more
// while users still wait, the rate climbs back a step per interval to where
// it started, not beyond; with nobody waiting it stays.
func TestRateTunerBehindASlowUpstream(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := memstore.NewManualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	store := memstore.New(memstore.Options{Now: clock.Now})
	_, err := store.CreateRoom(ctx, "drop", waitroom.RoomConfig{Rate: 11.2, MaxActive: 1000})
	require.NoError(t, err)
	for i := range 1000 {
		_, err := store.Enter(ctx, "drop", fmt.Sprintf("buyer-%04d", i))
		require.NoError(t, err)
	}
	tuner := &waitroom.RateTuner{Store: store, Room: "drop", Pool: 10, Margin: 0.7, MinSamples: 5}
	// interval admits for 10 s in 100 ms ticks and returns how many; each
	// admitted user orders, taking 2 s, when orders is set.
	interval := func(orders bool) int {
		admitted := 0
		for range 100 {
			clock.Advance(100 * time.Millisecond)
			got, err := store.Admit(ctx, "drop")
			require.NoError(t, err)
			admitted += len(got)
			if orders {
				observe(tuner, len(got), 2*time.Second)
			}
		}
		return admitted
	}
	_, err = store.Admit(ctx, "drop") // starts the bucket
	require.NoError(t, err)

	var rates []float64
	for range 6 {
		cfg, err := store.RoomConfig(ctx, "drop")
		require.NoError(t, err)
		admitted := interval(true)
		require.InDelta(t, cfg.Rate*10, float64(admitted), 1, "at %g/s", cfg.Rate)
		rates = append(rates, tune(t, tuner))
	}
	require.Equal(t, []float64{8.4, 6.3, 4.7, 3.5, 3.5, 3.5}, rates, "10 / 2 s × 0.7, a quarter at most per interval")

	// Nobody orders, users wait: back up to 11.2, a quarter per interval.
	rates = nil
	for range 6 {
		require.Positive(t, interval(false))
		rates = append(rates, tune(t, tuner))
	}
	require.Equal(t, []float64{4.4, 5.5, 6.9, 8.6, 10.8, 11.2}, rates)

	// Lowered again, then nobody waits: the rate stays.
	for range 4 {
		interval(true)
		tune(t, tuner)
	}
	for {
		st, err := store.Stats(ctx, "drop")
		require.NoError(t, err)
		if st.Waiting == 0 {
			break
		}
		interval(false)
	}
	low := tune(t, tuner)
	require.Less(t, low, 11.2)
	interval(false)
	require.Equal(t, low, tune(t, tuner), "nobody waits: nothing to climb for")
}
