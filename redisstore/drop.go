package redisstore

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/waitroom/waitroom"
)

// The draw of a scheduled room's opening is split so that no script call
// blocks Redis for long, whatever the number of early arrivals:
//
//  1. drawBeginScript takes the draw's lock (one instance draws; another
//     takes over when the lock's lease runs out) and returns the seed;
//  2. the Store reads the early arrivals (pre) in slices of drawReadSlice
//     and orders them in Go (HMAC-SHA256 in Lua would be slow, and Lua has
//     no HMAC);
//  3. drawChunkScript writes drawChunk places at a time: each entrant's
//     place (places) and, unless it left meanwhile, its place in the drawn
//     queue (drawn, scored as q is: place + the second it was seen);
//  4. drawDoneScript publishes the draw in one step: state done, and pre
//     renamed to ent (O(1)).
//
// Until step 4 every status reads the early arrivals as "scheduled" and
// counts all of them ahead of later arrivals, so no answer ever shows a
// half-made order. The places depend only on the seed and the entrants, so
// an instance that takes over a dead drawer's lock writes the same places.

// Slices of the draw: measured so that one call stays far below 50 ms.
const (
	drawReadSlice = 10_000
	drawChunk     = 1_000
	drawLease     = 10 * time.Second // renewed by every slice written
	drawTimeout   = 2 * time.Minute
)

// drawBeginScript takes the draw of a room whose opening has come.
//
// KEYS[1] cfg
// KEYS[2] draw
// KEYS[3] pre
// ARGV[1] owner: this Store's id
// ARGV[2] lease_ms of the lock
// ARGV[3] a fresh seed, kept only if the room has none yet
//
// Returns one of
//
//	{"DRAW", seed, prequeue, entrants}  the lock is this owner's: draw
//	{"DONE"}                            the draw is done
//	{"BUSY"}                            another owner holds the lock
//	{"NOT_YET"}                         the opening has not come
//	{"NO_DRAW"}                         the room has no opening time
var drawBeginScript = newFunction("draw_begin", `
local cfg_key, draw_key, pre_key = KEYS[1], KEYS[2], KEYS[3]
local owner, lease_ms, seed = ARGV[1], tonumber(ARGV[2]), ARGV[3]

local cfg = redis.call('HMGET', cfg_key, 'opens_at_ms', 'prequeue')
local opens_at = tonumber(cfg[1] or '0')
local d = redis.call('HMGET', draw_key, 'state', 'lock', 'lock_until')
if d[1] == 'done' then
  return {'DONE'}
end
if opens_at == 0 then
  return {'NO_DRAW'}
end
local now = now_ms()
if now < opens_at then
  return {'NOT_YET'}
end
-- A live lock of another owner: it is drawing. A lapsed one: it died.
if d[2] and d[2] ~= owner and tonumber(d[3]) > now then
  return {'BUSY'}
end
redis.call('HSETNX', draw_key, 'seed', seed)
if not d[1] then
  -- From here Leave keeps entrants in pre (negative score) instead of
  -- removing them: the draw's snapshot is being read.
  redis.call('HSET', draw_key, 'state', 'drawing', 'entrants', redis.call('ZCARD', pre_key))
end
redis.call('HSET', draw_key, 'lock', owner, 'lock_until', now + lease_ms)
return {'DRAW', redis.call('HGET', draw_key, 'seed'), cfg[2] or '', redis.call('ZCARD', pre_key)}
`)

// drawLib is prepended to the scripts that write a draw under its lock.
const drawLib = `
-- not_owner: 'DONE' when the draw is published, 'LOST' when the lock is
-- another owner's (it took over a lapsed lock); nil: owner may write.
local function not_owner(draw_key, owner)
  local d = redis.call('HMGET', draw_key, 'state', 'lock')
  if d[1] == 'done' then
    return 'DONE'
  end
  if d[2] ~= owner then
    return 'LOST'
  end
  return nil
end
`

// drawChunkScript writes one slice of the draw's places.
//
// KEYS[1] draw
// KEYS[2] pre
// KEYS[3] drawn
// KEYS[4] places
// ARGV[1] owner
// ARGV[2] lease_ms: the lock is extended by it, so a live drawer keeps it
// ARGV[3 ..] user, place, user, place, … (at most drawChunk pairs)
//
// Returns "OK", "DONE" (already published: nothing written) or "LOST" (the
// lock is another owner's now: nothing written).
var drawChunkScript = newFunction("draw_chunk", `
local draw_key, pre_key, drawn_key, places_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local owner = ARGV[1]

local refused = not_owner(draw_key, owner)
if refused then
  return refused
end
local now = now_ms()
redis.call('HSET', draw_key, 'lock_until', now + tonumber(ARGV[2]))
local places, queued = {}, {}
local now_s = math.floor(now / 1000)
for i = 3, #ARGV, 2 do
  local user, place = ARGV[i], ARGV[i + 1]
  places[#places + 1] = user
  places[#places + 1] = place
  -- One who left during the draw keeps its recorded place but is not
  -- queued (Leave made its score negative).
  local s = redis.call('ZSCORE', pre_key, user)
  if s and tonumber(s) > 0 then
    -- A queue score (place + seen second): silence counts from the draw.
    queued[#queued + 1] = queue_score(tonumber(place), now_s)
    queued[#queued + 1] = user
  end
end
if #places > 0 then
  redis.call('HSET', places_key, unpack(places))
end
if #queued > 0 then
  redis.call('ZADD', drawn_key, unpack(queued))
end
return 'OK'
`)

// drawDoneScript publishes the draw.
//
// KEYS[1] draw
// KEYS[2] pre
// KEYS[3] ent
// ARGV[1] owner
// ARGV[2] took_ms: how long the owner took
//
// Returns "DONE" (now or before) or "LOST".
var drawDoneScript = newFunction("draw_done", `
local draw_key, pre_key, ent_key = KEYS[1], KEYS[2], KEYS[3]
local owner, took_ms = ARGV[1], ARGV[2]

local refused = not_owner(draw_key, owner)
if refused then
  return refused
end
redis.call('HSET', draw_key, 'state', 'done', 'drawn_at_ms', now_ms(), 'took_ms', took_ms)
redis.call('HDEL', draw_key, 'lock', 'lock_until')
-- O(1): the early arrivals become the draw's record of entrants.
if redis.call('EXISTS', pre_key) == 1 then
  redis.call('RENAME', pre_key, ent_key)
end
return 'DONE'
`)

// drawOpening makes the room's draw, if the opening has come and no other
// instance is making it; it reports whether the draw is done. The draw
// runs to its end whatever the caller's deadline (one Admit is bounded by
// the store timeout, a large draw takes longer), within drawTimeout: cut
// short, the next tick would only start it again.
func (s *Store) drawOpening(ctx context.Context, room string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drawTimeout)
	defer cancel()
	began := time.Now()
	k := s.keys(room)
	r, err := s.do(ctx, "draw", drawBeginScript, []string{k.cfg, k.draw, k.pre},
		s.id, drawLease.Milliseconds(), waitroom.NewSeed())
	if err != nil {
		return false, err
	}
	switch r.code() {
	case "DRAW":
	case "DONE":
		return true, nil
	case "BUSY", "NOT_YET", "NO_DRAW":
		return false, nil
	default:
		return false, s.unexpected(ctx, "draw", r)
	}
	seed, ok1 := r.str(1)
	order, ok2 := r.str(2)
	n, ok3 := r.int(3)
	if !ok1 || !ok2 || !ok3 {
		return false, s.unexpected(ctx, "draw", r)
	}

	// The snapshot: nobody joins pre after the opening; leavers only turn
	// negative, so reading by index sees every entrant once.
	type arrival struct {
		user string
		seq  float64
	}
	arrivals := make([]arrival, 0, n)
	for from := int64(0); from < n; from += drawReadSlice {
		zs, err := s.client.ZRangeWithScores(ctx, k.pre, from, from+drawReadSlice-1).Result()
		if err != nil {
			return false, s.fail("draw", err)
		}
		for _, z := range zs {
			arrivals = append(arrivals, arrival{z.Member.(string), math.Abs(z.Score)})
		}
	}
	slices.SortFunc(arrivals, func(a, b arrival) int { return int(a.seq - b.seq) })
	users := make([]string, len(arrivals))
	for i, a := range arrivals {
		users[i] = a.user
	}
	placed, err := waitroom.DrawPlaces(waitroom.PrequeueOrder(order), seed, users)
	if err != nil {
		return false, fmt.Errorf("redisstore draw of %q: %w", room, err)
	}

	for from := 0; from < len(placed); from += drawChunk {
		args := []any{s.id, drawLease.Milliseconds()}
		for i := from; i < min(from+drawChunk, len(placed)); i++ {
			args = append(args, placed[i], i+1)
		}
		r, err := s.do(ctx, "draw", drawChunkScript, []string{k.draw, k.pre, k.drawn, k.places}, args...)
		if err != nil {
			return false, err
		}
		switch r.code() {
		case "OK":
		case "DONE":
			return true, nil
		case "LOST":
			return false, nil
		default:
			return false, s.unexpected(ctx, "draw", r)
		}
	}
	r, err = s.do(ctx, "draw", drawDoneScript, []string{k.draw, k.pre, k.ent}, s.id, time.Since(began).Milliseconds())
	if err != nil {
		return false, err
	}
	switch r.code() {
	case "DONE":
		s.log.InfoContext(ctx, "redisstore: the opening is drawn", "room", room, "order", order, "entrants", len(placed), "took", time.Since(began))
		return true, nil
	case "LOST":
		return false, nil
	default:
		return false, s.unexpected(ctx, "draw", r)
	}
}

// drawInfoScript reads a room's draw record, giving a scheduled room its
// seed if it has none yet.
//
// KEYS[1] cfg
// KEYS[2] draw
// ARGV[1] a fresh seed
//
// Returns {"OK", state, seed, prequeue, opens_at_ms, entrants, drawn_at_ms,
// took_ms}, {"NO_DRAW"} or {"ROOM_NOT_FOUND"}. state is "" before the
// draw began.
var drawInfoScript = newFunction("draw_info", `
local cfg_key, draw_key = KEYS[1], KEYS[2]

local cfg = redis.call('HMGET', cfg_key, 'state', 'opens_at_ms', 'prequeue')
if not cfg[1] then
  return {'ROOM_NOT_FOUND'}
end
local state = redis.call('HGET', draw_key, 'state')
if tonumber(cfg[2] or '0') == 0 and state ~= 'done' then
  return {'NO_DRAW'}
end
redis.call('HSETNX', draw_key, 'seed', ARGV[1])
local d = redis.call('HMGET', draw_key, 'seed', 'entrants', 'drawn_at_ms', 'took_ms')
return {'OK', state or '', d[1], cfg[3] or '', cfg[2] or '0', d[2] or '0', d[3] or '0', d[4] or '0'}
`)

// Draw returns the room's draw record: the commitment to its seed before
// the draw, the seed and figures after it.
func (s *Store) Draw(ctx context.Context, room string) (waitroom.Draw, error) {
	if err := checkRoom(room); err != nil {
		return waitroom.Draw{}, err
	}
	k := s.keys(room)
	r, err := s.do(ctx, "draw", drawInfoScript, []string{k.cfg, k.draw}, waitroom.NewSeed())
	if err != nil {
		return waitroom.Draw{}, err
	}
	if r.code() == "NO_DRAW" {
		return waitroom.Draw{}, waitroom.ErrNoDraw
	}
	if r.code() != "OK" {
		return waitroom.Draw{}, s.unexpected(ctx, "draw", r)
	}
	var f [7]string
	var ok bool
	for i := range f {
		if f[i], ok = r.str(i + 1); !ok {
			return waitroom.Draw{}, s.unexpected(ctx, "draw", r)
		}
	}
	commitment, err := waitroom.Commitment(f[1])
	if err != nil {
		return waitroom.Draw{}, s.unexpected(ctx, "draw", r)
	}
	cfg := waitroom.RoomConfig{PrequeueOrder: waitroom.PrequeueOrder(f[2])}
	d := waitroom.Draw{Order: cfg.Order(), State: waitroom.DrawPending, Commitment: commitment}
	if ms, _ := strconv.ParseInt(f[3], 10, 64); ms > 0 {
		d.OpensAt = time.UnixMilli(ms).UTC()
	}
	if f[0] == "done" {
		d.State, d.Seed = waitroom.DrawDone, f[1]
		d.Entrants, _ = strconv.ParseInt(f[4], 10, 64)
		if ms, _ := strconv.ParseInt(f[5], 10, 64); ms > 0 {
			d.DrawnAt = time.UnixMilli(ms).UTC()
		}
		ms, _ := strconv.ParseInt(f[6], 10, 64)
		d.Took = time.Duration(ms) * time.Millisecond
	}
	return d, nil
}

// Entrants returns the draw's entrants in place order, read in slices.
func (s *Store) Entrants(ctx context.Context, room string) ([]waitroom.Entrant, error) {
	d, err := s.Draw(ctx, room)
	if err != nil {
		return nil, err
	}
	if d.State != waitroom.DrawDone {
		return nil, waitroom.ErrDrawPending
	}
	k := s.keys(room)
	var out []waitroom.Entrant
	for from := int64(0); ; from += drawReadSlice {
		users, err := s.client.ZRange(ctx, k.ent, from, from+drawReadSlice-1).Result()
		if err != nil {
			return nil, s.fail("entrants", err)
		}
		if len(users) == 0 {
			break
		}
		places, err := s.client.HMGet(ctx, k.places, users...).Result()
		if err != nil {
			return nil, s.fail("entrants", err)
		}
		for i, u := range users {
			p, _ := places[i].(string)
			place, err := strconv.ParseInt(p, 10, 64)
			if err != nil {
				return nil, s.unexpected(ctx, "entrants", places[i])
			}
			out = append(out, waitroom.Entrant{User: u, Place: place})
		}
	}
	slices.SortFunc(out, func(a, b waitroom.Entrant) int { return int(a.Place - b.Place) })
	return out, nil
}
