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
  local layout, mode, issued_at, wake = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]

  local cfg = redis.call('HMGET', scfg_key, 'layout', 'state', 'cap', 'abandon_ms', 'closes_at_ms', 'head')
  if not cfg[1] then
    return {'ROOM_NOT_FOUND'}
  end
  if cfg[1] ~= layout then
    return {'RESHARDED'}
  end
  local state, cap, abandon_s = cfg[2], tonumber(cfg[3]), abandon_secs(cfg[4])
  local head = tonumber(cfg[6] or '0')
  local now = now_ms()
  local s = math.floor(now / 1000)
  local closed = refuses_entries(state, cfg[5], now)
  local out = {'OK'}

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
    -- that takes it, within this sub-shard's share of max_queue. Nothing
    -- is placed yet.
    local size, full = redis.call('ZCARD', q_key), 0
    for i = 5, #ARGV do
      local user = ARGV[i]
      local st = standing(user)
      if st then
        out[#out + 1] = st
      elseif closed then
        out[#out + 1] = {'ROOM_CLOSED'}
      elseif size >= cap then
        full = full + 1
        out[#out + 1] = {'QUEUE_FULL'}
      else
        size = size + 1
        out[#out + 1] = {'NEW'}
      end
    end
    if full > 0 then
      redis.call('HINCRBY', stats_key, 'full', full)
    end
    return out
  end

  -- mode 'place': user, ticket, … Each ticket is placed, or gone.
  local size, placed, full = redis.call('ZCARD', q_key), 0, 0
  local was_empty = size == 0
  for i = 5, #ARGV, 2 do
    local user, ticket = ARGV[i], tonumber(ARGV[i + 1])
    local st
    if now > issued_at + late_ms then
      -- The admitter may have passed this ticket: placing it would reorder.
      st = {'LATE'}
    else
      st = standing(user)
      if not st then
        if closed then
          st = {'ROOM_CLOSED'}
        elseif size >= cap then
          full = full + 1
          st = {'QUEUE_FULL'}
        end
      end
    end
    if st then
      spread_gone(mirror_key, left_key, ticket)
    else
      redis.call('ZADD', q_key, queue_score(ticket, s), user)
      size, placed = size + 1, placed + 1
      st = spread_position(mirror_key, head, ticket)
    end
    out[#out + 1] = st
  end
  if placed > 0 then
    redis.call('HINCRBY', stats_key, 'entered', placed)
    if was_empty then
      redis.call('PUBLISH', wake, '') -- the first in an empty room: wake the admitter
    end
  end
  if full > 0 then
    redis.call('HINCRBY', stats_key, 'full', full)
  end
  return out
end
