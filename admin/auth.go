package admin

import (
	"sync"
	"time"

	"github.com/waitroom/waitroom"
)

// Failed bearer attempts on the operator API are limited per client
// address (the key Config.Client gives, from the crowd's server): a guesser gets
// DefaultAuthLimit's burst of wrong tokens, then one per interval,
// and meanwhile every request from the address is refused with 429
// RATE_LIMITED and Retry-After, the right token too, so that a guess made
// while refused tells nothing. A right token from an address within the
// limit is not counted and never waits.
//
// The counts are this instance's: behind a balancer that spreads one
// address over n instances, the address gets n times the limit. That is
// enough for what the limit is for (a token of instance.MinAdminToken characters is
// not guessed at ten a minute, n times over); the shared limiters
// (server.Config.Limiter) answer requests without a way to ask "would the next
// one be refused?" without counting it, which the right token needs.

// DefaultAuthLimit is Config.AuthLimit's default: 10 wrong tokens at once
// from one address, then one every 6 s (10 a minute).
var DefaultAuthLimit = waitroom.Limit{Rate: 10.0 / 60, Burst: 10}

const (
	// maxAuthAddresses bounds the addresses counted one by one; beyond it
	// (a guesser with more addresses than that within a limit's horizon)
	// the addresses not yet counted share one count, so memory stays
	// bounded and the crowd is still limited, together.
	maxAuthAddresses = 100_000
	// sharedAuthKey is the one count of the addresses beyond
	// maxAuthAddresses; no addressKey is empty.
	sharedAuthKey = ""
	// authSweepEvery is how often the counts of addresses whose limit is
	// whole again are dropped (forgetting them changes nothing).
	authSweepEvery = time.Second
)

// authFailures counts the failed bearer attempts of each client address
// by GCRA, the arithmetic of the other limits (waitroom.GCRA).
type authFailures struct {
	limit waitroom.Limit
	now   func() time.Time

	mu    sync.Mutex
	tats  map[string]time.Time // addressKey → theoretical arrival time of its failures
	swept time.Time
}

func newAuthFailures(limit waitroom.Limit, now func() time.Time) *authFailures {
	return &authFailures{limit: limit, now: now, tats: map[string]time.Time{}}
}

// attempt decides a request from key whose token was right or not: refused
// (with the wait its Retry-After tells) while key's failures are beyond
// the limit, whatever the token; otherwise a wrong token is counted. One
// lock for the look and the count, so a burst of concurrent guesses gets
// exactly the limit's burst through.
func (a *authFailures) attempt(key string, right bool) (refused bool, wait time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	a.sweep(now)
	if _, counted := a.tats[key]; !counted && len(a.tats) >= maxAuthAddresses {
		key = sharedAuthKey
	}
	// Would one more failure be allowed? If not, nothing is.
	ok, tat, wait := waitroom.GCRA(a.tats[key], now, a.limit)
	switch {
	case !ok:
		return true, wait
	case !right:
		a.tats[key] = tat
	}
	return false, 0
}

// sweep drops the counts that have run out, at most every authSweepEvery.
func (a *authFailures) sweep(now time.Time) {
	if now.Sub(a.swept) < authSweepEvery {
		return
	}
	a.swept = now
	for key, tat := range a.tats {
		if !tat.After(now) {
			delete(a.tats, key)
		}
	}
}
