-- enter: the Go method that calls it (queue.go) says its KEYS, ARGV and
-- replies.
return function(KEYS, ARGV)
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
  local notice_key = KEYS[11]

  local cfg = redis.call('HMGET', cfg_key, 'state', 'max_queue', 'stock', 'one_order', 'abandon_ms', 'invite_only',
    'opens_at_ms', 'prequeue', 'closes_at_ms', 'had_opening', 'units', 'shards')
  local state, max_queue, stock = cfg[1], tonumber(cfg[2]), tonumber(cfg[3] or '0')
  local opens_at = tonumber(cfg[7] or '0')
  if not state then
    return {'ROOM_NOT_FOUND'}
  end
  if tonumber(cfg[12] or '1') > 1 then
    return {'SPREAD'} -- its places are in its sub-shards (spread.go)
  end
  local abandon_s = abandon_secs(cfg[5])
  local now = now_ms()
  local stage = draw_stage(cfg[10], opens_at, draw_key)
  local scheduled = opens_at > 0 and stage ~= 'done'
  local counts = {per = per_order(cfg[11])} -- units per order; units sold and live tokens, read once a call
  -- The sequence before the call: read when no user takes a new place,
  -- else one less than the first new place's.
  local seq_before, seq_after

  -- enter_slow: user's standing the whole way, one read at a time: any
  -- user enter_fast does not answer.
  local function enter_slow(user)
    -- One order per user: a buyer takes no place; a live token: no
    -- second place in the queue, the user gets its own token.
    local held = held_standing(tok_key, active_key, buyers_key, cfg[4] == '1', user, now)
    if held then
      return held
    end

    -- An early arrival waits for the draw: told when the room opens.
    if early_arrival(pre_key, stage, user) then
      return told_opening(opens_at, now, cfg[8], pre_key, user)
    end

    -- Already queued: the same place again, so a refresh never loses it, and
    -- seen now. In a sold-out room it keeps the place for a restock. One silent
    -- past abandon_after has gone (the admitter would skip it): it is counted
    -- and queues anew at the back.
    local queued = queued_standing(q_key, pre_key, drawn_key, stats_key, tok_key, notice_key, stage, stock, user, now, abandon_s, counts)
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
    return waiting_standing(position, stock, stats_key, tok_key, counts)
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
  -- they are short. Any other user goes the whole way (enter_slow) after the
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
  -- enter_fast: a new user's standing, its place (or its refusal as full)
  -- left for write_places to write; nil when user goes the whole way
  -- (enter_slow).
  local function enter_fast(i, user)
    if not (open and not named[user] and not scores[i] and not entries[i]
      and not (bought and bought[i] == 1) and not (early_scores and early_scores[i])
      and not (drawn_scores and drawn_scores[i])) then
      return nil
    end
    if not size then
      size = ahead_of_q(pre_key, drawn_key, stage) + redis.call('ZCARD', q_key)
      if early_room then
        early_count = fifo and redis.call('ZCOUNT', pre_key, '(0', '+inf') or 0
      end
    end
    if size >= max_queue then
      full = full + 1
      return {'QUEUE_FULL'}
    end
    size = size + 1
    placed[#placed + 1] = user
    if early_room then
      early_count = fifo and early_count + 1 or 0
      return {'SCHEDULED', opens_at - now, early_count}
    end
    woken = woken or size == 1
    return waiting_standing(size, stock, stats_key, tok_key, counts)
  end

  each_user(ARGV, out, named, enter_fast, enter_slow, write_places, function() size = nil end)
  if full > 0 then
    redis.call('HINCRBY', stats_key, 'full', full)
  end
  if not seq_before then
    seq_before = counter(seq_key)
    seq_after = seq_before
  end
  out[2], out[3] = seq_before, seq_after
  return out
end
