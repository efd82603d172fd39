package redisstore

import (
	"context"
	"time"

	"github.com/waitroom/waitroom"
)

// enterScript queues users, or returns the standing each already has: the
// Store sends the users of concurrent Enters of one room in one call
// (batch.go), so that the settings, the clock and the call itself are
// paid once per call, not per user. Users are served in the order given,
// each exactly as a call of its own would be at that point.
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
// ARGV     users
//
// Returns {"ROOM_NOT_FOUND"}, or {"OK", seq_before, seq_after, standing,
// …}, a standing per user, one of
//
//	{"ALREADY_ORDERED"}                 one order per user, and it ordered
//	{"ADMITTED", token, ms_left}        the user holds a live token (a second
//	                                    call confirms it: holder_sees)
//	{"SCHEDULED", opens_in_ms, position}  an early arrival (now or before) of a
//	                                    scheduled room; position 0 unless fifo
//	{"WAITING", position, units_left}   queued (now or before), the units
//	                                    short (units: fewer than position ×
//	                                    units per order); 1-based; a user silent
//	                                    past abandon_after has gone: counted
//	                                    abandoned, queued anew
//	{"QUEUED_SOLD_OUT"}                 queued, but the stock is all sold (less
//	                                    than one order's units unsold)
//	{"ROOM_CLOSED"}                     not queued, the room refuses entries
//	{"INVITE_ONLY"}                     not queued, the room lets in pass holders only
//	{"SOLD_OUT"}                        not queued, the stock is all sold
//	{"QUEUE_FULL"}                      not queued; only stats.full counted
//	position                            the same, the units not short: a bare
//	                                    number to send and decode, not a table
//	                                    (waiting)
//
// seq_before and seq_after are the arrival sequence when the call began
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

local cfg = redis.call('HMGET', cfg_key, 'state', 'max_queue', 'stock', 'one_order', 'abandon_ms', 'invite_only',
  'opens_at_ms', 'prequeue', 'closes_at_ms', 'had_opening', 'units')
local state, max_queue, stock = cfg[1], tonumber(cfg[2]), tonumber(cfg[3] or '0')
local opens_at = tonumber(cfg[7] or '0')
if not state then
  return {'ROOM_NOT_FOUND'}
end
local abandon_s = abandon_secs(cfg[5])
local now = now_ms()
local stage = draw_stage(cfg[10], opens_at, draw_key)
local scheduled = opens_at > 0 and stage ~= 'done'
local counts = {per = per_order(cfg[11])} -- units per order; units sold and live tokens, read once a call
-- The sequence before the call: read when no user takes a new place,
-- else one less than the first new place's.
local seq_before, seq_after

local function enter(user)
  -- One order per user: a buyer takes no place, whatever else it has.
  if cfg[4] == '1' and redis.call('SISMEMBER', buyers_key, user) == 1 then
    return {'ALREADY_ORDERED'}
  end

  -- A live token: no second place in the queue; the user gets its own token.
  local e = holder_sees(tok_key, active_key, user, now)
  if e then
    return {'ADMITTED', e.token, time_left(e, now)}
  end

  -- An early arrival waits for the draw: told when the room opens.
  if early_arrival(pre_key, stage, user) then
    return told_opening(opens_at, now, cfg[8], pre_key, user)
  end

  -- Already queued: the same place again, so a refresh never loses it, and
  -- seen now. In a sold-out room it keeps the place for a restock. One silent
  -- past abandon_after has gone (the admitter would skip it): it is counted
  -- and queues anew at the back.
  local queued = queued_standing(q_key, pre_key, drawn_key, stats_key, tok_key, stage, stock, user, now, abandon_s, counts)
  if queued then
    return queued
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
  if units(stock, stats_key, tok_key, 0, counts) then
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
  -- sequence is also the count of places given (stats' entered).
  local next_seq = redis.call('INCR', seq_key)
  seq_before = seq_before or next_seq - 1
  seq_after = next_seq
  if scheduled and now < opens_at then
    -- Before the opening: an early arrival (plain sequence: it is placed
    -- at the draw, and silence counts from the opening).
    redis.call('ZADD', pre_key, next_seq, user)
    return told_opening(opens_at, now, cfg[8], pre_key, user)
  end
  redis.call('ZADD', q_key, queue_score(next_seq, math.floor(now / 1000)), user)
  local position = size + 1
  if position == 1 then
    -- The first in an empty room: wake the admitter, which leaves empty
    -- rooms alone (Wakes).
    redis.call('PUBLISH', q_key, '')
  end
  return waiting(position, stock, stats_key, tok_key, counts)
end

-- Most users of a drop's burst are new: not queued, no token, no order,
-- in a room that takes them. Their places are made together, from what
-- one ZMSCORE and one HMGET of all the call's users found (one order per
-- buyer: and one SMISMEMBER), with one INCRBY and one ZADD (size counts
-- them meanwhile), and those refused as full are counted with one
-- HINCRBY. A scheduled room reads one more ZMSCORE, of the zset its
-- earlier users wait in ahead of q: pre until the opening's draw is done
-- (its users go the whole way: an early arrival is told the opening), then
-- drawn. Before the opening new early arrivals are placed the same way, in
-- pre (a plain sequence, as enter writes them), and told the opening
-- (fifo: their place among the early arrivals, counted meanwhile too).
-- With stock the units are read once (counts): a room sold out sends
-- everyone the whole way, else each new place is told the units left when
-- they are short. Any other user goes the whole way (enter) after the
-- places so far are written, as does a user named twice in the call.
local open = not refuses_entries(state, cfg[9], now) and cfg[6] ~= '1'
  and not units(stock, stats_key, tok_key, 0, counts)
local early_room = open and stage == 'pending' and now < opens_at
local fifo = cfg[8] == 'fifo'
local scores, bought, early_scores, drawn_scores, entries
if open then
  scores, bought, early_scores, drawn_scores = where_users(ARGV, q_key, buyers_key, pre_key, drawn_key, cfg[4] == '1', stage)
  entries = redis.call('HMGET', tok_key, unpack(ARGV))
end
local size -- those waiting (pre and q), places so far included; nil: read again
local early_count -- fifo: the early arrivals, as told_opening counts them
local placed, woken = {}, false -- users with a place not written yet
local full = 0 -- refused as full, not counted yet
local function write_places()
  if #placed == 0 then return end
  -- The sequence is taken for all of them at once; each score is its own
  -- number of it, in the order placed.
  seq_after = redis.call('INCRBY', seq_key, #placed)
  local first = seq_after - #placed + 1
  seq_before = seq_before or first - 1
  local args, s = {}, math.floor(now / 1000)
  for j, user in ipairs(placed) do
    args[2 * j - 1] = early_room and first + j - 1 or queue_score(first + j - 1, s)
    args[2 * j] = user
  end
  redis.call('ZADD', early_room and pre_key or q_key, unpack(args))
  placed = {}
  if woken then
    redis.call('PUBLISH', q_key, '') -- as enter does for the first in an empty room
    woken = false
  end
end

local out = {'OK', 0, 0}
local named = {}
for i = 1, #ARGV do
  local user = ARGV[i]
  if open and not named[user] and not scores[i] and not entries[i]
    and not (bought and bought[i] == 1) and not (early_scores and early_scores[i])
    and not (drawn_scores and drawn_scores[i]) then
    if not size then
      size = ahead_of_q(pre_key, drawn_key, stage) + redis.call('ZCARD', q_key)
      if early_room then
        early_count = fifo and redis.call('ZCOUNT', pre_key, '(0', '+inf') or 0
      end
    end
    if size >= max_queue then
      full = full + 1
      out[i + 3] = {'QUEUE_FULL'}
    else
      size = size + 1
      placed[#placed + 1] = user
      if early_room then
        early_count = fifo and early_count + 1 or 0
        out[i + 3] = {'SCHEDULED', opens_at - now, early_count}
      else
        woken = woken or size == 1
        out[i + 3] = waiting(size, stock, stats_key, tok_key, counts)
      end
    end
  else
    write_places()
    out[i + 3] = enter(user)
    size = nil
  end
  named[user] = true
end
write_places()
if full > 0 then
  redis.call('HINCRBY', stats_key, 'full', full)
end
if not seq_before then
  seq_before = counter(seq_key)
  seq_after = seq_before
end
out[2], out[3] = seq_before, seq_after
return out
`)

// Enter queues user, or returns the standing it already has: its own live
// token, or its place. Concurrent Enters of a room share calls (batch.go).
func (s *Store) Enter(ctx context.Context, room, user string) (waitroom.Status, error) {
	if err := waitroom.CheckUserID(user); err != nil {
		return waitroom.Status{}, err
	}
	return s.batched(ctx, enterOp, room, user)
}

var enterOp = &batchedOp{
	name: "enter",
	call: func(k *roomKeys) fcall { return k.enter },
	line: func(k *roomKeys) *callLine { return &k.enterLine },
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

// statusScript reads users' standings: the Store sends the users of
// concurrent Status calls of one room in one call (batch.go), each served
// as a call of its own would be.
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
// ARGV     users
//
// Returns {"ROOM_NOT_FOUND"}, or {"OK", seq, seq, standing, …}, a standing
// per user, one of
//
//	{"ALREADY_ORDERED"}                 one order per user, and it ordered
//	{"SCHEDULED", opens_in_ms, position}  an early arrival; position 0 unless fifo
//	{"ADMITTED", token, ms_left}        a second call confirms it (holder_sees)
//	{"WAITING", position, units_left}   waiting, the units short (units)
//	{"QUEUED_SOLD_OUT"}                 queued, but the stock is all sold
//	{"NOT_IN_QUEUE"}
//	position                            waiting, the units not short
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

local cfg = redis.call('HMGET', cfg_key, 'state', 'stock', 'one_order', 'abandon_ms', 'opens_at_ms', 'prequeue', 'had_opening', 'units')
if not cfg[1] then
  return {'ROOM_NOT_FOUND'}
end
local stock = tonumber(cfg[2] or '0')
local opens_at = tonumber(cfg[5] or '0')
local abandon_s = abandon_secs(cfg[4])
local seq = counter(seq_key)
local now = now_ms()
local stage = draw_stage(cfg[7], opens_at, draw_key)
local counts = {per = per_order(cfg[8])} -- units per order; units sold and live tokens, read once a call

local function status(user)
  if cfg[3] == '1' and redis.call('SISMEMBER', buyers_key, user) == 1 then
    return {'ALREADY_ORDERED'}
  end

  -- A queued user holds no live token (Enter never queues a token holder,
  -- Admit pops whom it admits), so the common poll, a waiting user's, reads
  -- no token. ZSCORE is O(1), ZRANK and ZADD O(log N). One silent past
  -- abandon_after has gone.
  local queued = queued_standing(q_key, pre_key, drawn_key, stats_key, tok_key, stage, stock, user, now, abandon_s, counts)
  if queued then
    return queued
  end

  -- An early arrival waits for the draw.
  if early_arrival(pre_key, stage, user) then
    return told_opening(opens_at, now, cfg[6], pre_key, user)
  end

  -- Not queued: admitted (a live token), or not in the room.
  local e = holder_sees(tok_key, active_key, user, now)
  if e then
    return {'ADMITTED', e.token, time_left(e, now)}
  end
  return {'NOT_IN_QUEUE'}
end

-- Most polls are of waiting users: their places come from one ZMSCORE of
-- all the call's users and a ZRANK each, and their "seen" marks are
-- written with one ZADD XX. A scheduled room reads one more ZMSCORE, of
-- the zset its earlier users wait in ahead of q, whose count is read once:
-- pre until the opening's draw is done (an early arrival there is told
-- the opening; fifo: its place among them, one ZCOUNT), then drawn (its
-- users are served as q's). One order per buyer: one SMISMEMBER finds the
-- buyers, who go the whole way. With stock each is told the units left
-- when they are short, or that the stock is sold, from counts read once a
-- call. Any other user, or one silent past abandon_after, goes the whole
-- way (status) after the marks so far are written, as does a user named
-- twice.
local scores, bought, early_scores, drawn_scores = where_users(ARGV, q_key, buyers_key, pre_key, drawn_key, cfg[3] == '1', stage)
local seen = {[q_key] = {}, [drawn_key] = {}} -- per zset: ZADD XX's score, user, … not written yet
local function write_seen()
  for key, marks in pairs(seen) do
    if #marks > 0 then
      redis.call('ZADD', key, 'XX', unpack(marks))
      seen[key] = {}
    end
  end
end
local q_ahead -- those waiting ahead of q (ahead_of_q); nil: read again

local out = {'OK', seq, seq}
local named = {}
local s = math.floor(now / 1000)
for i = 1, #ARGV do
  local user = ARGV[i]
  local key, score, early
  if not named[user] and not (bought and bought[i] == 1) then
    if drawn_scores and drawn_scores[i] then
      key, score = drawn_key, tonumber(drawn_scores[i])
    elseif scores[i] then
      key, score = q_key, tonumber(scores[i])
    else
      early = early_scores and early_scores[i] and tonumber(early_scores[i]) > 0
    end
  end
  if early then
    out[i + 3] = told_opening(opens_at, now, cfg[6], pre_key, user, early_scores[i])
  elseif score and not is_gone(score, s, abandon_s) then
    local fresh = queue_score(math.floor(score), s)
    if fresh ~= score then
      local marks = seen[key]
      marks[#marks + 1] = fresh
      marks[#marks + 1] = user
    end
    local ahead = 0
    if key == q_key then
      q_ahead = q_ahead or ahead_of_q(pre_key, drawn_key, stage)
      ahead = q_ahead
    end
    out[i + 3] = waiting(ahead + redis.call('ZRANK', key, user) + 1, stock, stats_key, tok_key, counts)
  else
    write_seen()
    out[i + 3] = status(user)
    q_ahead = nil
  end
  named[user] = true
end
write_seen()
return out
`)

// Status returns the user's standing, or ErrNotInQueue. Concurrent Status
// calls of a room share calls (batch.go).
func (s *Store) Status(ctx context.Context, room, user string) (waitroom.Status, error) {
	return s.batched(ctx, statusOp, room, user)
}

var statusOp = &batchedOp{
	name: "status",
	call: func(k *roomKeys) fcall { return k.status },
	line: func(k *roomKeys) *callLine { return &k.statusLine },
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
