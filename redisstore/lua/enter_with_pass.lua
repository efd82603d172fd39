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
  local now = now_ms()
  local st, old = pass_holder_standing(tok_key, active_key, buyers_key, cfg[5] == '1', user, now)
  if st then
    return st
  end

  local pass, refused = read_pass(passes_key, id, state, cfg[7], now)
  if not pass then
    return {refused}
  end

  -- Counted like any token: within max_active and the stock.
  local live, sold = live_tokens(tok_key), 0
  if stock > 0 then
    local c = redis.call('HMGET', stats_key, 'sold', 'completed')
    sold = units_sold(c[1], c[2])
  end
  local full = no_free_slot(stock, sold, live, per_order(cfg[8]), max_active)
  if full then
    return {full}
  end

  -- One use; out of the queue, and out of the draw's line for an early
  -- arrival; a token as Admit issues one, already told
  -- to its holder by this answer ('shown'): the next look confirms it.
  use_pass(passes_key, id, pass, -1)
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
