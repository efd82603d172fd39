package redisstore

import (
	"context"
	"time"

	"github.com/waitroom/waitroom"
)

// enterScript queues a user, or returns the standing it already has.
//
// KEYS[1] cfg
// KEYS[2] q
// KEYS[3] seq
// KEYS[4] tok
// KEYS[5] stats
// KEYS[6] active
// KEYS[7] buyers
// KEYS[8] pre
// KEYS[9] drawn
// KEYS[10] draw
// ARGV[1] user
//
// Returns one of
//
//	{"ALREADY_ORDERED"}                          one order per user, and it ordered
//	{"ADMITTED", token, ms_left, seq, seq}       the user holds a live token (a
//	                                             second call confirms it: holder_sees)
//	{"SCHEDULED", opens_in_ms, position,         an early arrival (now or before) of a
//	 seq_before, seq_after}                      scheduled room; position 0 unless fifo
//	{"WAITING", position, units_left,            queued (now or before); 1-based;
//	 seq_before, seq_after}                      units_left -1 unless short (units);
//	                                             a user silent past abandon_after has
//	                                             gone: counted abandoned, queued anew
//	{"QUEUED_SOLD_OUT", seq, seq}                queued, but the stock is all sold
//	{"ROOM_CLOSED"}                              not queued, the room refuses entries
//	{"INVITE_ONLY"}                              not queued, the room lets in pass holders only
//	{"SOLD_OUT"}                                 not queued, the stock is all sold
//	{"QUEUE_FULL"}                               not queued; only stats.full counted
//	{"ROOM_NOT_FOUND"}
//
// seq_before and seq_after are the arrival sequence when the script began
// and ended; the Store watches them for lost writes (lost.go).
var enterScript = newFunction("enter", `
local cfg_key    = KEYS[1]
local q_key      = KEYS[2]
local seq_key    = KEYS[3]
local tok_key    = KEYS[4]
local stats_key  = KEYS[5]
local active_key = KEYS[6]
local buyers_key = KEYS[7]
local pre_key    = KEYS[8]
local drawn_key  = KEYS[9]
local draw_key   = KEYS[10]
local user       = ARGV[1]

local cfg = redis.call('HMGET', cfg_key, 'state', 'max_queue', 'stock', 'one_order', 'abandon_ms', 'invite_only',
  'opens_at_ms', 'prequeue', 'closes_at_ms', 'had_opening')
local state, max_queue, stock = cfg[1], tonumber(cfg[2]), tonumber(cfg[3] or '0')
local opens_at = tonumber(cfg[7] or '0')
if not state then
  return {'ROOM_NOT_FOUND'}
end
-- One order per user: a buyer takes no place, whatever else it has.
if cfg[4] == '1' and redis.call('SISMEMBER', buyers_key, user) == 1 then
  return {'ALREADY_ORDERED'}
end
local abandon_s = abandon_secs(cfg[5])

-- A live token: no second place in the queue; the user gets its own token.
local now = now_ms()
local e = holder_sees(tok_key, active_key, user, now)
if e then
  local seq = counter(seq_key)
  return {'ADMITTED', e.token, time_left(e, now), seq, seq}
end

-- An early arrival waits for the draw: told when the room opens.
local stage = draw_stage(cfg[10], opens_at, draw_key)
local scheduled = opens_at > 0 and stage ~= 'done'
if early_arrival(pre_key, stage, user) then
  local seq = counter(seq_key)
  return {'SCHEDULED', math.max(0, opens_at - now), early_position(cfg[8], pre_key, user), seq, seq}
end

-- Already queued: the same place again, so a refresh never loses it, and
-- seen now. In a sold-out room it keeps the place for a restock. One silent
-- past abandon_after has gone (the admitter would skip it): it is counted
-- and queues anew at the back.
local position, sold_out, left = queued_standing(q_key, pre_key, drawn_key, stats_key, active_key, stage, stock, user, now, abandon_s)
if position then
  local seq = counter(seq_key)
  if sold_out then
    return {'QUEUED_SOLD_OUT', seq, seq}
  end
  return {'WAITING', position, left, seq, seq}
end

-- Closed rooms refuse new entries; paused rooms still accept them.
if refuses_entries(state, cfg[9], now) then
  return {'ROOM_CLOSED'}
end
-- Invite-only rooms take pass holders only (EnterWithPass).
if cfg[6] == '1' then
  return {'INVITE_ONLY'}
end

-- Nothing left to sell: no place, nothing written.
local sold_out = units(stock, stats_key, active_key, now, 0)
if sold_out then
  return {'SOLD_OUT'}
end

-- Full: say so honestly and write nothing but the counter.
local size = ahead_of_q(pre_key, drawn_key, stage) + redis.call('ZCARD', q_key)
if size >= max_queue then
  redis.call('HINCRBY', stats_key, 'full', 1)
  return {'QUEUE_FULL'}
end

-- A new place. The score is a sequence, never a clock, so two users in one
-- millisecond keep arrival order; being the largest score, the new user is
-- last: its position is the queue's length before it, plus one. The
-- sequence is also the count of places given (stats' entered), and before
-- the INCR it was one less: no separate read or counter.
local next_seq = redis.call('INCR', seq_key)
if scheduled and now < opens_at then
  -- Before the opening: an early arrival (plain sequence: it is placed
  -- at the draw, and silence counts from the opening).
  redis.call('ZADD', pre_key, next_seq, user)
  return {'SCHEDULED', opens_at - now, early_position(cfg[8], pre_key, user), next_seq - 1, next_seq}
end
redis.call('ZADD', q_key, queue_score(next_seq, math.floor(now / 1000)), user)
local position = size + 1
if position == 1 then
  -- The first in an empty room: wake the admitter, which leaves empty
  -- rooms alone (Wakes).
  redis.call('PUBLISH', q_key, '')
end
local _, left = units(stock, stats_key, active_key, now, position)
return {'WAITING', position, left, next_seq - 1, next_seq}
`)

// Enter queues user, or returns the standing it already has: its own live
// token, or its place.
func (s *Store) Enter(ctx context.Context, room, user string) (waitroom.Status, error) {
	if err := checkRoom(room); err != nil {
		return waitroom.Status{}, err
	}
	k := s.keys(room)
	w := s.watch(room)
	at := w.marks()
	r, err := s.doCall(ctx, "enter", k.enter, user)
	if err != nil {
		return waitroom.Status{}, err
	}
	st, next, ok := standing(r)
	seq, ok2 := r.reading(next)
	if !ok || !ok2 {
		return waitroom.Status{}, s.unexpected(ctx, "enter", r)
	}
	s.observe(ctx, room, w, at, seq, nil)
	return st, nil
}

// standing decodes {"ADMITTED", token, ms_left, …}, {"WAITING",
// position, units_left, …}, {"QUEUED_SOLD_OUT", …} and {"SCHEDULED",
// opens_in_ms, position, …}; next is the index of the first element after
// them. Any other code is not ok.
func standing(r reply) (st waitroom.Status, next int, ok bool) {
	switch r.code() {
	case "ADMITTED":
		token, ok1 := r.str(1)
		ms, ok2 := r.int(2)
		return waitroom.Status{
			State:     waitroom.StateAdmitted,
			Token:     token,
			ExpiresIn: time.Duration(ms) * time.Millisecond,
		}, 3, ok1 && ok2
	case "WAITING":
		pos, ok1 := r.int(1)
		left, ok2 := r.int(2)
		st := waitroom.Status{State: waitroom.StateWaiting, Position: pos}
		if left >= 0 {
			st.UnitsLeft, st.FewLeft = left, true
		}
		return st, 3, ok1 && ok2
	case "QUEUED_SOLD_OUT":
		return waitroom.Status{State: waitroom.StateSoldOut}, 1, true
	case "SCHEDULED":
		ms, ok1 := r.int(1)
		pos, ok2 := r.int(2)
		return waitroom.Status{State: waitroom.StateScheduled, OpensIn: time.Duration(ms) * time.Millisecond, Position: pos}, 3, ok1 && ok2
	}
	return waitroom.Status{}, 0, false
}

// statusScript reads a user's standing.
//
// A waiting user is marked seen: its score's fraction is refreshed (the
// place is the same). One silent past abandon_after has gone: it is dropped
// and counted abandoned, and is NOT_IN_QUEUE, as the admitter would have
// found it at the head.
//
// KEYS[1] cfg
// KEYS[2] q
// KEYS[3] tok
// KEYS[4] seq
// KEYS[5] stats
// KEYS[6] active
// KEYS[7] buyers
// KEYS[8] pre
// KEYS[9] drawn
// KEYS[10] draw
// ARGV[1] user
//
// Returns one of
//
//	{"ALREADY_ORDERED"}                     one order per user, and it ordered
//	{"SCHEDULED", opens_in_ms, position, seq}  an early arrival; position 0 unless fifo
//	{"ADMITTED", token, ms_left, seq}       a second call confirms it (holder_sees)
//	{"WAITING", position, units_left, seq}  units_left -1 unless short (units)
//	{"QUEUED_SOLD_OUT", seq}                queued, but the stock is all sold
//	{"NOT_IN_QUEUE", seq}
//	{"ROOM_NOT_FOUND"}
//
// seq is the arrival sequence, which the Store watches for lost writes.
var statusScript = newFunction("status", `
local cfg_key    = KEYS[1]
local q_key      = KEYS[2]
local tok_key    = KEYS[3]
local seq_key    = KEYS[4]
local stats_key  = KEYS[5]
local active_key = KEYS[6]
local buyers_key = KEYS[7]
local pre_key    = KEYS[8]
local drawn_key  = KEYS[9]
local draw_key   = KEYS[10]
local user       = ARGV[1]

local cfg = redis.call('HMGET', cfg_key, 'state', 'stock', 'one_order', 'abandon_ms', 'opens_at_ms', 'prequeue', 'had_opening')
if not cfg[1] then
  return {'ROOM_NOT_FOUND'}
end
local stock = tonumber(cfg[2] or '0')
if cfg[3] == '1' and redis.call('SISMEMBER', buyers_key, user) == 1 then
  return {'ALREADY_ORDERED'}
end
local seq = counter(seq_key)
local now = now_ms()

-- A queued user holds no live token (Enter never queues a token holder,
-- Admit pops whom it admits), so the common poll, a waiting user's, reads
-- no token. ZSCORE is O(1), ZRANK and ZADD O(log N). One silent past
-- abandon_after has gone.
local stage = draw_stage(cfg[7], tonumber(cfg[5] or '0'), draw_key)
local position, sold_out, left = queued_standing(q_key, pre_key, drawn_key, stats_key, active_key, stage, stock, user, now, abandon_secs(cfg[4]))
if position then
  if sold_out then
    return {'QUEUED_SOLD_OUT', seq}
  end
  return {'WAITING', position, left, seq}
end

-- An early arrival waits for the draw.
if early_arrival(pre_key, stage, user) then
  return {'SCHEDULED', math.max(0, tonumber(cfg[5] or '0') - now), early_position(cfg[6], pre_key, user), seq}
end

-- Not queued: admitted (a live token), or not in the room.
local e = holder_sees(tok_key, active_key, user, now)
if e then
  return {'ADMITTED', e.token, time_left(e, now), seq}
end
return {'NOT_IN_QUEUE', seq}
`)

// Status returns the user's standing, or ErrNotInQueue.
func (s *Store) Status(ctx context.Context, room, user string) (waitroom.Status, error) {
	if err := checkRoom(room); err != nil {
		return waitroom.Status{}, err
	}
	k := s.keys(room)
	w := s.watch(room)
	at := w.marks()
	r, err := s.doCall(ctx, "status", k.status, user)
	if err != nil {
		return waitroom.Status{}, err
	}
	st, next, ok := standing(r)
	if r.code() == "NOT_IN_QUEUE" {
		st, next, ok, err = waitroom.Status{}, 1, true, waitroom.ErrNotInQueue
	}
	seq, ok2 := r.int(next)
	if !ok || !ok2 {
		return waitroom.Status{}, s.unexpected(ctx, "status", r)
	}
	s.observe(ctx, room, w, at, reading{seq, seq}, nil)
	return st, err
}

// leaveScript takes a user out of the queue. A user who leaves the queue
// is counted (stats left) with the arrivals after it until it left (stats
// left_after, from its score's sequence), for the ETA (admitScript).
//
// KEYS[1] q
// KEYS[2] pre
// KEYS[3] drawn
// KEYS[4] draw
// KEYS[5] stats
// KEYS[6] seq
// ARGV[1] user
//
// Returns "OK".
var leaveScript = newFunction("leave", `
local q_key, pre_key, drawn_key, draw_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local stats_key, seq_key = KEYS[5], KEYS[6]
local user = ARGV[1]

local queued = redis.call('ZSCORE', q_key, user)
if queued then
  redis.call('ZREM', q_key, user)
  redis.call('HINCRBY', stats_key, 'left', 1)
  redis.call('HINCRBY', stats_key, 'left_after', counter(seq_key) - math.floor(tonumber(queued)))
end
out_of_draw(pre_key, drawn_key, draw_key, user)
return 'OK'
`)

// Leave removes user from the queue, early arrivals included; leaving
// when not queued (or from no room) is no error.
func (s *Store) Leave(ctx context.Context, room, user string) error {
	if err := checkRoom(room); err != nil {
		return err
	}
	k := s.keys(room)
	if err := s.call(ctx, s.client, leaveScript, []string{k.q, k.pre, k.drawn, k.draw, k.stats, k.seq}, user).Err(); err != nil {
		return s.fail("leave", err)
	}
	return nil
}
