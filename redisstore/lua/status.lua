-- status: the Go method that calls it (queue.go) says its KEYS, ARGV and
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

  local cfg = redis.call('HMGET', cfg_key, 'state', 'stock', 'one_order', 'abandon_ms', 'opens_at_ms', 'prequeue', 'had_opening', 'units', 'shards')
  if not cfg[1] then
    return {'ROOM_NOT_FOUND'}
  end
  if tonumber(cfg[9] or '1') > 1 then
    return {'SPREAD'} -- its users are in its sub-shards (spread.go)
  end
  local stock = tonumber(cfg[2] or '0')
  local opens_at = tonumber(cfg[5] or '0')
  local abandon_s = abandon_secs(cfg[4])
  local seq = counter(seq_key)
  local now = now_ms()
  local stage = draw_stage(cfg[7], opens_at, draw_key)
  local counts = {per = per_order(cfg[8])} -- units per order; units sold and live tokens, read once a call

  -- status_slow: user's standing the whole way, one read at a time: any
  -- user status_fast does not answer.
  local function status_slow(user)
    if cfg[3] == '1' and redis.call('SISMEMBER', buyers_key, user) == 1 then
      return {'ALREADY_ORDERED'}
    end

    -- A queued user holds no live token (Enter never queues a token holder,
    -- Admit pops whom it admits), so the common poll, a waiting user's, reads
    -- no token. ZSCORE is O(1), ZRANK and ZADD O(log N). One silent past
    -- abandon_after has gone.
    local queued = queued_standing(q_key, pre_key, drawn_key, stats_key, tok_key, notice_key, stage, stock, user, now, abandon_s, counts)
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
  -- way (status_slow) after the marks so far are written, as does a user named
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
  -- status_fast: the standing of a waiting user (or an early arrival of a
  -- pre whose draw is pending) from what where_users read; nil when user
  -- goes the whole way (status_slow).
  local function status_fast(i, user)
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
      return told_opening(opens_at, now, cfg[6], pre_key, user, early_scores[i])
    end
    if not score or is_gone(score, s, abandon_s) then
      return nil
    end
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
    return waiting_standing(ahead + redis.call('ZRANK', key, user) + 1, stock, stats_key, tok_key, counts)
  end

  each_user(ARGV, out, named, status_fast, status_slow, write_seen, function() q_ahead = nil end)
  return out
end
