-- spread_enter: the Go method that calls it (spread.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  local late_ms = SPREAD_LATE_MS -- a ticket older than this is never placed
  local scfg_key   = KEYS[1]
  local q_key      = KEYS[2]
  local tok_key    = KEYS[3]
  local active_key = KEYS[4]
  local stats_key  = KEYS[5]
  local mirror_key = KEYS[6]
  local left_key   = KEYS[7]
  local layout, mode, issued_at = ARGV[1], ARGV[2], tonumber(ARGV[3])

  local cfg = redis.call('HMGET', scfg_key, 'layout', 'state', 'abandon_ms', 'closes_at_ms', 'head')
  local refused = sub_refusal(cfg[1], layout)
  if refused then return refused end
  local state, abandon_s = cfg[2], abandon_secs(cfg[3])
  local head = tonumber(cfg[5] or '0')
  local now = now_ms()
  local s = math.floor(now / 1000)
  local closed = refuses_entries(state, cfg[4], now)
  local out = {'OK'}
  local gone = {} -- tickets gone in this call, for the caller to tell the other sub-shards

  -- standing: a user's standing when it holds a live token or is queued
  -- (marked seen); nil otherwise. One silent past abandon_after has gone:
  -- it is counted, its ticket is gone, and it may queue anew.
  local function standing(user)
    local e = holder_sees(tok_key, active_key, user, now)
    if e then
      return {'ADMITTED', e.token, time_left(e, now)}
    end
    local score = redis.call('ZSCORE', q_key, user)
    if not score then return nil end
    score = tonumber(score)
    if is_gone(score, s, abandon_s) then
      redis.call('ZREM', q_key, user)
      redis.call('HINCRBY', stats_key, 'abandoned', 1)
      spread_gone(mirror_key, left_key, math.floor(score))
      gone[#gone + 1] = math.floor(score)
      return nil
    end
    local fresh = queue_score(math.floor(score), s)
    if fresh ~= score then
      redis.call('ZADD', q_key, 'XX', fresh, user)
    end
    return spread_position(mirror_key, head, math.floor(score))
  end

  if mode == 'check' then
    -- Who needs a ticket: a user with no token and no place, in a room
    -- that takes it (the ticket counter checks max_queue). Nothing is
    -- placed yet.
    for i = 4, #ARGV do
      local user = ARGV[i]
      local st = standing(user)
      if st then
        out[#out + 1] = st
      elseif closed then
        out[#out + 1] = {'ROOM_CLOSED'}
      else
        out[#out + 1] = {'NEW'}
      end
    end
    out[#out + 1] = 0
    for _, t in ipairs(gone) do
      out[#out + 1] = t
    end
    return out
  end

  -- mode 'place': user, ticket, … Each ticket is placed, or gone.
  local placed = 0
  local was_empty = redis.call('EXISTS', q_key) == 0
  for i = 4, #ARGV, 2 do
    local user, ticket = ARGV[i], tonumber(ARGV[i + 1])
    local st
    if now > issued_at + late_ms then
      -- The admitter may have passed this ticket: placing it would reorder.
      st = {'LATE'}
    else
      st = standing(user)
      if not st and closed then
        st = {'ROOM_CLOSED'}
      end
    end
    if st then
      spread_gone(mirror_key, left_key, ticket)
      gone[#gone + 1] = ticket
    else
      redis.call('ZADD', q_key, queue_score(ticket, s), user)
      placed = placed + 1
      st = spread_position(mirror_key, head, ticket)
    end
    out[#out + 1] = st
  end
  if placed > 0 then
    redis.call('HINCRBY', stats_key, 'entered', placed)
  end
  -- The caller wakes the admitter when the whole room was empty.
  out[#out + 1] = (placed > 0 and was_empty) and 1 or 0
  for _, t in ipairs(gone) do
    out[#out + 1] = t
  end
  return out
end
