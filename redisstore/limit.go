package redisstore

import (
	"context"
	"time"

	"github.com/waitroom/waitroom"
)

// allowScript counts one request against a GCRA limit (waitroom.GCRA, the
// same arithmetic) on the Redis clock, so every instance shares one count.
//
// KEYS[1] the key's theoretical arrival time, in µs
// ARGV[1] emission interval in µs (1 s ÷ rate)
// ARGV[2] burst in µs (burst × interval)
// ARGV[3] requests an instance let through already on its own share
// (waitroom.LocalShare): counted first, whatever the answer
//
// Returns {1, 0} allowed, or {0, wait µs} refused (only the requests
// already let through written).
var allowScript = newFunction("allow")

var _ waitroom.SharedLimiter = (*Store)(nil)

// Allow counts one request for key against l, shared by every instance on
// this Redis.
func (s *Store) Allow(ctx context.Context, key string, l waitroom.Limit) (bool, time.Duration, error) {
	return s.AllowAfter(ctx, key, l, 0)
}

// AllowAfter counts passed requests for key that an instance let through
// on its own, then decides one more as Allow does.
func (s *Store) AllowAfter(ctx context.Context, key string, l waitroom.Limit, passed int) (bool, time.Duration, error) {
	if l.Rate <= 0 {
		return false, 0, waitroom.BadRequest("limit rate must be > 0")
	}
	if passed < 0 {
		return false, 0, waitroom.BadRequest("passed requests must be ≥ 0")
	}
	interval := int64(float64(time.Second/time.Microsecond) / l.Rate)
	burst := int64(max(l.Burst, 1)) * interval
	res, err := s.run(ctx, fcall{f: allowScript, keys: []string{s.prefix + ":{rl:" + key + "}"}}, interval, burst, passed)
	if err != nil {
		return false, 0, s.fail("allow", err)
	}
	if r, ok := res.([]any); ok && len(r) == 2 {
		allowed, _ := r[0].(int64)
		wait, _ := r[1].(int64)
		return allowed == 1, time.Duration(wait) * time.Microsecond, nil
	}
	return false, 0, s.unexpected(ctx, "allow", res)
}
