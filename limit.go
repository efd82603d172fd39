package waitroom

import (
	"context"
	"hash/maphash"
	"sync"
	"time"
)

// Limit is a rate limit: Rate requests per second on average, with bursts
// of up to Burst at once.
type Limit struct {
	Rate  float64
	Burst int
}

// Limiter counts requests per key against a Limit. redisstore keeps the
// counts in Redis, so a limit holds across every instance on it; memstore
// keeps them in process, per instance.
type Limiter interface {
	// Allow counts one request for key: ok, or the wait until the next
	// request for key would be allowed.
	Allow(ctx context.Context, key string, l Limit) (ok bool, retryAfter time.Duration, err error)
}

// GCRA decides one request by the generic cell rate algorithm: tat is the
// key's theoretical arrival time (zero for a new key), now the clock. It
// returns whether the request is allowed, the new tat to keep (unchanged
// when refused), and the wait until a request would be allowed. The same
// arithmetic runs in redisstore's script.
func GCRA(tat, now time.Time, l Limit) (ok bool, newTAT time.Time, retryAfter time.Duration) {
	interval := time.Duration(float64(time.Second) / l.Rate)
	burst := time.Duration(max(l.Burst, 1)) * interval
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(interval)
	// A request is allowed while the debt it leaves stays within the burst.
	if wait := next.Sub(now) - burst; wait > 0 {
		return false, tat, wait
	}
	return true, next, 0
}

// SharedLimiter is a Limiter whose counts several instances share
// (redisstore). LocalShare stands in front of one, answering most requests
// without it.
type SharedLimiter interface {
	Limiter
	// AllowAfter first counts passed requests for key that were let
	// through already (they count whatever the answer), then decides one
	// more as Allow does.
	AllowAfter(ctx context.Context, key string, l Limit, passed int) (ok bool, retryAfter time.Duration, err error)
}

// LocalShare is a Limiter in front of a SharedLimiter that most requests
// never have to wait for. Each of the Instances instances lets a key
// through on its own while the key stays within this instance's share of
// the limit (1/Instances of the rate and of the burst), and asks the
// shared limiter only beyond it, handing over the requests it let through
// on its own since it last asked. So:
//
//   - a key that stays within the shares costs no shared call, and the
//     shares together are the limit;
//   - a key beyond its share on an instance is counted by the shared
//     limiter, its share's requests included, so one instance (or a load
//     balancer that keeps a client on one) still gives it the whole limit;
//   - a key spread over the instances gets at most the limit from the
//     shares plus the limit from the shared count: under twice the limit
//     however many instances there are (each instance alone would give
//     Instances times it).
//
// Instances must be the number of instances sharing the limiter: a lower
// figure gives every instance a bigger share.
type LocalShare struct {
	Shared    SharedLimiter // required
	Instances int           // ≥ 1
	Timeout   time.Duration // bounds each shared call; 0: none
	// Now is the local clock; nil: time.Now. The shared count keeps its
	// own.
	Now func() time.Time

	shards [shareShards]shareShard
}

// shareShards spreads the keys over several locks, so that concurrent
// requests seldom wait for each other.
const shareShards = 32

// shareSweepEvery is how often a shard drops the keys whose share is full
// again; a key is that short-lived (its share's burst over its rate, 2 s at
// the server's limits), so the table holds the keys of the last seconds.
const shareSweepEvery = time.Second

type shareShard struct {
	mu    sync.Mutex
	keys  map[string]shareKey
	swept time.Time
}

type shareKey struct {
	tat    time.Time // the share's theoretical arrival time (GCRA)
	passed int       // let through on the share since the shared limiter last heard
}

var _ Limiter = (*LocalShare)(nil)

// Allow counts one request for key against l: on this instance's share if
// it fits, else on the shared limiter.
func (ls *LocalShare) Allow(ctx context.Context, key string, l Limit) (bool, time.Duration, error) {
	if l.Rate <= 0 {
		return false, 0, BadRequest("limit rate must be > 0")
	}
	n := max(ls.Instances, 1)
	share := Limit{Rate: l.Rate / float64(n), Burst: l.Burst / n}
	sh := &ls.shards[shardOf(key)]
	passed := 0
	// A share without a whole request of burst answers nothing itself.
	if share.Burst >= 1 {
		sh.mu.Lock()
		now := ls.now()
		sh.sweep(now)
		k := sh.keys[key]
		if !k.tat.After(now) {
			// The share is full again: what it let through is older than
			// its own debt, and older than the shared one's, whose
			// interval is shorter.
			k.passed = 0
		}
		ok, tat, _ := GCRA(k.tat, now, share)
		if ok {
			sh.keys[key] = shareKey{tat: tat, passed: k.passed + 1}
			sh.mu.Unlock()
			return true, 0, nil
		}
		passed = k.passed
		k.passed = 0
		sh.keys[key] = k
		sh.mu.Unlock()
	}
	if ls.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ls.Timeout)
		defer cancel()
	}
	ok, wait, err := ls.Shared.AllowAfter(ctx, key, l, passed)
	if err != nil && passed > 0 {
		// Not handed over after all: keep them for the next ask.
		sh.mu.Lock()
		if k, found := sh.keys[key]; found {
			k.passed += passed
			sh.keys[key] = k
		}
		sh.mu.Unlock()
	}
	return ok, wait, err
}

func (ls *LocalShare) now() time.Time {
	if ls.Now != nil {
		return ls.Now()
	}
	return time.Now()
}

// sweep drops the keys whose share is full again (forgetting them changes
// nothing, as Allow's reset says), at most every shareSweepEvery.
func (sh *shareShard) sweep(now time.Time) {
	if sh.keys == nil {
		sh.keys = make(map[string]shareKey)
	}
	if now.Sub(sh.swept) < shareSweepEvery {
		return
	}
	sh.swept = now
	for key, k := range sh.keys {
		if !k.tat.After(now) {
			delete(sh.keys, key)
		}
	}
}

var shardSeed = maphash.MakeSeed()

func shardOf(key string) int {
	return int(maphash.String(shardSeed, key) % shareShards)
}
