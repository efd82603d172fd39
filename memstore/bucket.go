package memstore

import (
	"math"

	"github.com/waitroom/waitroom"
)

// picosPerUser: the bucket counts in 1e-12 users, so that a rate kept to
// 1e-6 users/s times a time in µs is an exact integer and ten seconds at
// 175/s admit exactly 1,750, with no floating drift.
const picosPerUser = 1_000_000_000_000

// bucket is a room's admission token bucket.
type bucket struct {
	started bool
	last    int64 // µs since the Unix epoch
	carry   int64 // allowance left over, in 1e-12 users
	madeUp  int64 // no-shows made up by extra admissions so far
}

// take refills the bucket for the time since the last call and takes as
// many whole users as it holds, at most limit (which the caller has already
// bounded by the tick quota, the queue and MaxActive).
func (b *bucket) take(nowMicros int64, cfg waitroom.RoomConfig, limit int) int {
	allow, _ := b.refill(nowMicros, cfg, 0)
	n := int(min(allow/picosPerUser, int64(max(limit, 0))))
	b.settle(n, allow, cfg)
	return n
}

// refill returns what this call may admit, in 1e-12 users: allow, the
// bucket's share of the rate since the last call, and extra, the share
// that makes up owed no-shows: at most as much again, and at most one
// slice's worth, so admission never runs above twice the rate. The first
// call only starts the clock, and so does every call while the room is
// paused: a pause saves up nothing. settle must follow.
func (b *bucket) refill(nowMicros int64, cfg waitroom.RoomConfig, owed int64) (allow, extra int64) {
	if !b.started || cfg.State == waitroom.RoomPaused {
		b.started, b.last, b.carry = true, nowMicros, 0
		return 0, 0
	}
	// A clock that steps back refills nothing and does not move last back,
	// so the same span is never paid twice.
	elapsed := max(nowMicros-b.last, 0)
	b.last = max(b.last, nowMicros)

	rate := max(int64(math.Round(cfg.Rate*1e6)), 1) // 1e-12 users per µs
	carryCap := rate * cfg.Slice.Microseconds()
	// Beyond a full tick plus a full carry more refill changes nothing;
	// capping the span keeps rate × elapsed inside int64 after long idles.
	useful := carryCap + int64(cfg.TickQuota())*picosPerUser
	elapsed = min(elapsed, useful/rate+1)
	extra = min(owed*picosPerUser, rate*elapsed, carryCap)
	return b.carry + rate*elapsed, max(extra, 0)
}

// settle records that n users were admitted out of allow (refill's): the
// first of them are the rate's share, the rest made up no-shows, which it
// returns. The carry lets what was allowed but not admitted through on the
// next call, so the average rate is exact, but never more than one slice's
// worth, so no burst builds up while the queue is empty or the cap is
// reached.
func (b *bucket) settle(n int, allow int64, cfg waitroom.RoomConfig) (madeUp int) {
	regular := min(int64(n), allow/picosPerUser)
	rate := max(int64(math.Round(cfg.Rate*1e6)), 1)
	b.carry = min(allow-regular*picosPerUser, rate*cfg.Slice.Microseconds())
	return n - int(regular)
}
