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
// bounded by the tick quota, the queue and MaxActive), with users still
// waiting after it.
func (b *bucket) take(nowMicros int64, cfg waitroom.RoomConfig, limit int) int {
	allow, _ := b.refill(nowMicros, cfg, 0)
	n := int(min(allow/picosPerUser, int64(max(limit, 0))))
	b.settle(n, allow, cfg, true)
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

	rate := bucketRate(cfg)
	slice := rate * cfg.Slice.Microseconds()
	// Beyond a full tick plus a full carry more refill changes nothing;
	// capping the span keeps rate × elapsed inside int64 after long idles.
	useful := carryCap(cfg, true) + int64(cfg.TickQuota())*picosPerUser
	elapsed = min(elapsed, useful/rate+1)
	extra = min(owed*picosPerUser, rate*elapsed, slice)
	return b.carry + rate*elapsed, max(extra, 0)
}

// settle records that n users were admitted out of allow (refill's): the
// first of them are the rate's share, the rest made up no-shows, which it
// returns. What was allowed but not admitted is carried to the next call
// (carryCap), so the average rate is exact, whatever the rate.
func (b *bucket) settle(n int, allow int64, cfg waitroom.RoomConfig, waiting bool) (madeUp int) {
	regular := min(int64(n), allow/picosPerUser)
	b.carry = min(allow-regular*picosPerUser, carryCap(cfg, waiting))
	return n - int(regular)
}

// carryCap is the most allowance the bucket carries to the next call, in
// 1e-12 users. With users still waiting it is one slice's worth plus one
// user: the fraction of a user the rate has built up towards the next
// admission (a cap below one user would never let a slow room admit
// anyone), plus what a tick late by up to a slice could not admit within
// its quota; a longer stall loses the rest, so it cannot make up a burst.
// With nobody waiting it is one user: an idle room saves up no burst, yet
// the next user to come is let in as soon as the rate had allowed.
func carryCap(cfg waitroom.RoomConfig, waiting bool) int64 {
	if !waiting {
		return picosPerUser
	}
	return bucketRate(cfg)*cfg.Slice.Microseconds() + picosPerUser
}

// bucketRate is the room's rate in 1e-12 users per µs (millionths of a
// user per second), at least one.
func bucketRate(cfg waitroom.RoomConfig) int64 {
	return max(int64(math.Round(cfg.Rate*1e6)), 1)
}
