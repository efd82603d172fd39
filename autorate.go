package waitroom

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"time"
)

// RateTuner keeps a room's admission rate at what the protected API
// measurably serves: Pool ÷ the mean time a successful order took × Margin,
// the same formula as RateFromCapacity with a measured service time. By
// Little's law this keeps about Pool × Margin orders in flight: when orders
// slow down (lock contention, a slower database) the rate falls, when they
// speed up it rises, a bounded step per interval so it cannot oscillate.
//
// The gate feeds it (Gate.OnServed); it owns the room's rate while it runs,
// so an operator who sets the rate by hand should not run it.
type RateTuner struct {
	Store Store
	Room  string
	// Pool is the protected API's connection pool; Margin the headroom in
	// (0, 1].
	Pool   int
	Margin float64
	// Interval between adjustments; default 10 s.
	Interval time.Duration
	// MinSamples successful orders are needed in an interval before the
	// rate moves; default 20, so a trickle of orders does not steer it.
	MinSamples int
	// MaxStep is the largest relative change per interval; default 0.25.
	MaxStep float64
	// MinRate and MaxRate bound the rate; defaults 1 and the most one tick
	// can admit at the room's slice. A MinRate below the settings' least
	// (waitroom.MinRate) is that least.
	MinRate, MaxRate float64
	// StartRate is the rate a room with users waiting climbs back to, a
	// step per interval, while no order measures the API (nobody ordered
	// in an interval): a rate lowered once is otherwise never raised when
	// its few admissions do not order. Default: the room's rate at the
	// first Tune.
	StartRate float64
	Logger    *slog.Logger

	mu    sync.Mutex
	total time.Duration
	n     int
	start float64 // StartRate, or the rate the first Tune read
}

// Observe records how long one successful order took.
func (t *RateTuner) Observe(took time.Duration) {
	if took <= 0 {
		return
	}
	t.mu.Lock()
	t.total += took
	t.n++
	t.mu.Unlock()
}

// Run adjusts the rate every Interval until ctx is done.
func (t *RateTuner) Run(ctx context.Context) error {
	interval := t.Interval
	if interval <= 0 {
		interval = 10 * time.Second
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
		if _, err := t.Tune(ctx); err != nil && ctx.Err() == nil {
			t.logger().WarnContext(ctx, "rate tuning failed", "room", t.Room, "err", err)
		}
	}
}

// Tune takes the samples gathered since the last call and, when there are
// enough, moves the room's rate toward Pool ÷ mean service time × Margin.
// It returns the room's rate after the call.
func (t *RateTuner) Tune(ctx context.Context) (float64, error) {
	t.mu.Lock()
	total, n := t.total, t.n
	t.total, t.n = 0, 0
	t.mu.Unlock()

	cfg, err := t.Store.RoomConfig(ctx, t.Room)
	if err != nil {
		return 0, err
	}
	t.mu.Lock()
	if t.start <= 0 {
		t.start = cmp.Or(t.StartRate, cfg.Rate)
	}
	start := t.start
	t.mu.Unlock()
	minSamples := t.MinSamples
	if minSamples <= 0 {
		minSamples = 20
	}
	var target float64
	var mean time.Duration
	switch {
	case n == 0 && cfg.Rate < start:
		// Nobody ordered: if users wait, the rate climbs back towards
		// where it started, since only admissions that order can tell
		// it to fall again.
		stats, err := t.Store.Stats(ctx, t.Room)
		if err != nil {
			return cfg.Rate, err
		}
		if stats.Waiting == 0 {
			return cfg.Rate, nil
		}
		target = start
	case n < minSamples:
		return cfg.Rate, nil
	default:
		mean = total / time.Duration(n)
		target, err = RateFromCapacity(t.Pool, mean, t.Margin)
		if err != nil {
			return cfg.Rate, err
		}
	}
	step := t.MaxStep
	if step <= 0 {
		step = 0.25
	}
	lo, hi := t.MinRate, t.MaxRate
	if lo <= 0 {
		lo = 1
	}
	lo = max(lo, MinRate)
	if most := float64(MaxTickQuota) / cfg.Slice.Seconds(); hi <= 0 || hi > most {
		hi = most
	}
	next := min(max(target, cfg.Rate*(1-step)), cfg.Rate*(1+step))
	next = min(max(next, lo), hi)
	// Rates are kept to 0.1 user/s; a change below 2% is noise, not news.
	next = max(math.Round(next*10)/10, lo)
	if math.Abs(next-cfg.Rate) < 0.02*cfg.Rate {
		return cfg.Rate, nil
	}
	updated := cfg
	updated.Rate = next
	switch err := t.Store.UpdateRoom(ctx, t.Room, cfg, updated); {
	case errors.Is(err, ErrRoomChanged):
		// An operator changed the room meanwhile: their change stands, and
		// the next interval tunes from it.
		return cfg.Rate, nil
	case err != nil:
		return cfg.Rate, err
	}
	t.logger().InfoContext(ctx, "admission rate tuned", "room", t.Room, "from", cfg.Rate, "to", next,
		"target", math.Round(target*10)/10, "mean_service_time", mean, "orders", n)
	return next, nil
}

func (t *RateTuner) logger() *slog.Logger {
	if t.Logger != nil {
		return t.Logger
	}
	return slog.Default()
}
