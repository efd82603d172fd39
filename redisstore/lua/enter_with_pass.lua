-- enter_with_pass: the Go method that calls it (passes.go) says its KEYS, ARGV and
-- replies.
return function(KEYS, ARGV)
  local cfg_key, q_key, tok_key, active_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
  local stats_key, buyers_key, passes_key = KEYS[5], KEYS[6], KEYS[7]
  local pre_key, drawn_key, draw_key, notice_key = KEYS[8], KEYS[9], KEYS[10], KEYS[11]
  local user, id, token = ARGV[1], ARGV[2], ARGV[3]

  local cfg = redis.call('HMGET', cfg_key, 'state', 'ttl_ms', 'max_active', 'stock', 'one_order', 'first_use_ms', 'closes_at_ms', 'units')
  local state = cfg[1]
  if not state then
    return {'ROOM_NOT_FOUND'}
  end
  local ttl_ms     = math.floor(tonumber(cfg[2]))
  local max_active = tonumber(cfg[3])
  local stock      = tonumber(cfg[4] or '0')
  local first_ms   = math.min(math.floor(tonumber(cfg[6] or cfg[2])), ttl_ms)
  if cfg[5] == '1' and redis.call('SISMEMBER', buyers_key, user) == 1 then
    return {'ALREADY_ORDERED'}
  end

  -- A live token: the user keeps it, and the pass keeps its use.
  local now = now_ms()
  local e = holder_sees(tok_key, active_key, user, now)
  if e then
    return {'ADMITTED', e.token, time_left(e, now)}
  end
  -- An order holds the user's expired token and may yet complete it: a new
  -- token now would reserve a second unit while the first may be sold.
  local old = parse_entry(redis.call('HGET', tok_key, user))
  if old and unsettled(old, now) then
    return {'TOKEN_IN_USE'}
  end

  -- The pass: n|uses|left|expires_ms|revoked.
  local v = redis.call('HGET', passes_key, id)
  if not v then
    return {'PASS_INVALID'}
  end
  local created, uses, left, expires_ms, revoked = string.match(v, '^(%d+)|(%d+)|(%d+)|(%d+)|([01])$')
  if not created or revoked == '1' or tonumber(expires_ms) <= now then
    return {'PASS_INVALID'}
  end
  left = tonumber(left)
  if left <= 0 then
    return {'PASS_USED_UP'}
  end
  if refuses_entries(state, cfg[7], now) then
    return {'ROOM_CLOSED'}
  end

  -- Counted like any token: within max_active and the stock.
  local live = live_tokens(tok_key)
  if stock > 0 then
    local c = redis.call('HMGET', stats_key, 'sold', 'completed')
    local sold, per = units_sold(c[1], c[2]), per_order(cfg[8])
    if stock - sold < per then
      return {'SOLD_OUT'}
    end
    if tokens_left(stock, sold, live, per) == 0 then
      return {'NO_FREE_SLOT'}
    end
  end
  if max_active > 0 and live >= max_active then
    return {'NO_FREE_SLOT'}
  end

  -- One use; out of the queue, and out of the draw's line for an early
  -- arrival; a token as Admit issues one, already told
  -- to its holder by this answer ('shown'): the next look confirms it.
  redis.call('HSET', passes_key, id, string.format('%s|%s|%d|%s|0', created, uses, left - 1, expires_ms))
  redis.call('ZREM', q_key, user)
  out_of_draw(pre_key, drawn_key, draw_key, user)
  redis.call('HDEL', notice_key, user) -- no turn to tell of: it is let in now
  if old then
    -- A lingering expired entry cleanup had not reached: gone unused.
    count_gone(stats_key, old)
  end
  local expires_at = now + first_ms
  issue_tokens(tok_key, {user, format_entry({token = token, state = 'shown', lease = '', lease_until = now + ttl_ms, expires_at = expires_at})})
  redis.call('ZADD', active_key, expires_at, user)
  redis.call('HINCRBY', stats_key, 'admitted', 1)
  return {'ADMITTED', token, ttl_ms}
end
