-- claim: the Go method that calls it (token.go) says its KEYS, ARGV and
-- replies.
return function(KEYS, ARGV)
  local cfg_key    = KEYS[1]
  local tok_key    = KEYS[2]
  local active_key = KEYS[3]
  local stats_key  = KEYS[4]
  local user       = ARGV[1]
  local token      = ARGV[2]
  local lease      = ARGV[3]

  -- No entry answers the same in a room that does not exist: the gate
  -- needs no second code for a token that was never issued.
  local e = parse_entry(redis.call('HGET', tok_key, user))
  if not e then
    return 'ENTRY_TOKEN_NOT_FOUND'
  end
  local now = now_ms()
  local cfg = redis.call('HMGET', cfg_key, 'lease_ms', 'one_order', 'units')
  local one_order = 0
  if cfg[2] == '1' then
    one_order = 1
  end
  local per = per_order(cfg[3])

  if e.expires_at <= now and not unsettled(e, now) then
    -- Expired, and no order holds it that may yet complete it: clean it up
    -- now. One that may is in use (below).
    drop_tokens(tok_key, active_key, {user}, {user})
    count_gone(stats_key, e)
    return 'ENTRY_TOKEN_NOT_FOUND'
  end

  if e.token ~= token then
    return 'ENTRY_TOKEN_INVALID'
  end

  if e.state ~= 'held' and e.lease == lease then
    -- This claim's gate gave up on it and released it before it landed
    -- (release): it holds nothing, and nobody waits for this answer.
    return 'TOKEN_IN_USE'
  end

  -- Held, and not abandoned: a lease that ran out within the settle window
  -- may be a gate cut off from Redis whose order succeeded and whose
  -- Complete is on its way; a second order with the token must not pass.
  -- Past the window its holder is gone: the token is claimable again.
  if unsettled(e, now) then
    if e.lease == lease then
      -- The client's retry of this very claim (its reply was lost): the
      -- same answer, not TOKEN_IN_USE against itself for a whole lease.
      return {'OK', math.max(0, e.lease_until - now), one_order, per}
    end
    return 'TOKEN_IN_USE'
  end

  local lease_ms = cfg[1]
  if not lease_ms then
    return 'ROOM_NOT_FOUND' -- tokens outlived their room's settings
  end
  lease_ms = math.floor(tonumber(lease_ms))
  -- Claiming is using: an unconfirmed token gets its full TTL.
  if e.state == 'new' or e.state == 'shown' then
    e.expires_at = e.lease_until
  end
  e.state, e.lease, e.lease_until = 'held', lease, now + lease_ms
  redis.call('HSET', tok_key, user, format_entry(e))
  -- Cleanup must wait for the lease too: the token cannot vanish mid-order.
  redis.call('ZADD', active_key, active_score(e), user)
  return {'OK', lease_ms, one_order, per}
end
