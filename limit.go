package waitroom

import (
	"context"
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
