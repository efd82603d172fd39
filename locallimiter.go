package waitroom

import (
	"context"
	"hash/maphash"
	"sync"
	"time"
)

// LocalLimiter is an in-process Limiter: its counts are this instance's
// only (a server's default). The zero value is not usable; use
// NewLocalLimiter.
//
// A crowd of one-off keys (every new visitor is one) must neither grow it
// forever nor stall it: the keys are spread over shards, each with its own
// lock, and each shard forgets by generations instead of sweeping. A shard
// keeps the keys touched in its current generation and in the one before;
// when a generation has lasted forgetAfter, the one before is dropped
// whole. A key untouched for a whole generation has a tat at most its
// horizon (burst × interval) past its last touch, so it is forgotten only
// once that has passed, when forgetting it changes nothing (a new key
// starts at now).
type LocalLimiter struct {
	now    func() time.Time
	seed   maphash.Seed
	shards [limiterShards]limiterShard
}

const limiterShards = 32

// minGeneration is the shortest generation; a limit whose horizon is
// longer lengthens the generations of the shards its keys fall in.
const minGeneration = time.Minute

type limiterShard struct {
	mu          sync.Mutex
	cur, prev   map[string]time.Time // key → theoretical arrival time
	started     time.Time            // when cur began
	forgetAfter time.Duration        // a generation's length: ≥ every horizon seen
}

var _ Limiter = (*LocalLimiter)(nil)

// NewLocalLimiter returns an empty limiter on the clock now (nil: the
// wall clock).
func NewLocalLimiter(now func() time.Time) *LocalLimiter {
	if now == nil {
		now = time.Now
	}
	lim := &LocalLimiter{now: now, seed: maphash.MakeSeed()}
	for i := range lim.shards {
		lim.shards[i] = limiterShard{cur: map[string]time.Time{}, prev: map[string]time.Time{}, forgetAfter: minGeneration}
	}
	return lim
}

// Allow counts one request for key against l.
func (lim *LocalLimiter) Allow(ctx context.Context, key string, l Limit) (bool, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return false, 0, err
	}
	if l.Rate <= 0 {
		return false, 0, BadRequest("limit rate must be > 0")
	}
	sh := &lim.shards[maphash.String(lim.seed, key)%limiterShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := lim.now()
	sh.forgetAfter = max(sh.forgetAfter, horizon(l))
	if now.Sub(sh.started) >= sh.forgetAfter {
		sh.prev, sh.cur, sh.started = sh.cur, make(map[string]time.Time, len(sh.cur)), now
	}
	tat, ok := sh.cur[key]
	if !ok {
		tat = sh.prev[key]
	}
	allowed, tat, wait := GCRA(tat, now, l)
	sh.cur[key] = tat
	return allowed, wait, nil
}

// horizon is how far past now a key's tat can reach under l.
func horizon(l Limit) time.Duration {
	return time.Duration(float64(max(l.Burst, 1)+1) * float64(time.Second) / l.Rate)
}

// keys is how many keys the limiter holds now (tests).
func (lim *LocalLimiter) keys() int {
	n := 0
	for i := range lim.shards {
		sh := &lim.shards[i]
		sh.mu.Lock()
		n += len(sh.cur) + len(sh.prev)
		sh.mu.Unlock()
	}
	return n
}
