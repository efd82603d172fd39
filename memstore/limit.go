package memstore

import (
	"context"
	"sync"
	"time"

	"github.com/waitroom/waitroom"
)

// Limiter is an in-process waitroom.Limiter: its counts are this
// instance's only. The zero value is not usable; use NewLimiter.
type Limiter struct {
	now func() time.Time

	mu    sync.Mutex
	tat   map[string]time.Time // key → theoretical arrival time
	swept time.Time
}

var _ waitroom.Limiter = (*Limiter)(nil)

// NewLimiter returns an empty limiter on the clock of opts.
func NewLimiter(opts Options) *Limiter {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Limiter{now: now, tat: make(map[string]time.Time)}
}

// Allow counts one request for key against l.
func (lim *Limiter) Allow(ctx context.Context, key string, l waitroom.Limit) (bool, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return false, 0, err
	}
	if l.Rate <= 0 {
		return false, 0, waitroom.BadRequest("limit rate must be > 0")
	}
	lim.mu.Lock()
	defer lim.mu.Unlock()
	now := lim.now()
	lim.sweep(now)
	ok, tat, wait := waitroom.GCRA(lim.tat[key], now, l)
	if ok {
		lim.tat[key] = tat
	}
	return ok, wait, nil
}

// sweep drops the keys whose tat has passed (forgetting them changes
// nothing: a new key starts at now), at most once per minute, so that
// one-off keys (a crowd of visitors) do not grow the map forever.
func (lim *Limiter) sweep(now time.Time) {
	if now.Sub(lim.swept) < time.Minute {
		return
	}
	lim.swept = now
	for k, tat := range lim.tat {
		if !tat.After(now) {
			delete(lim.tat, k)
		}
	}
}
