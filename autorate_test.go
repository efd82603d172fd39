package waitroom_test

import (
	"context"
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
