-- release: the Go method that calls it (token.go) says its KEYS, ARGV and
-- replies.
return function(KEYS, ARGV)
  local tok_key    = KEYS[1]
  local active_key = KEYS[2]
  local stats_key  = KEYS[3]
  local user       = ARGV[1]
  local token      = ARGV[2]
  local lease      = ARGV[3]

  local e = held_entry(tok_key, user, token, lease)
  if not e then
    local other = parse_entry(redis.call('HGET', tok_key, user))
    if other and other.token == token and other.state ~= 'held' and other.lease ~= lease then
      -- A claim whose gate got no answer and gave it up, not landed yet:
      -- remembered in the unheld entry's lease field, so it holds nothing
      -- when it lands (claim).
      other.lease = lease
      redis.call('HSET', tok_key, user, format_entry(other))
    end
    return 'LOST'
  end

  local now = now_ms()
  if e.expires_at <= now then
    drop_tokens(tok_key, active_key, {user}, {user})
    redis.call('HINCRBY', stats_key, 'expired', 1)
    return 'EXPIRED'
  end

  -- The expiry it had, never a fresh TTL: a failing order cannot extend it.
  e.state, e.lease, e.lease_until = 'ready', '', 0
  redis.call('HSET', tok_key, user, format_entry(e))
  redis.call('ZADD', active_key, e.expires_at, user)
  redis.call('HINCRBY', stats_key, 'released', 1)
  return 'RELEASED'
end
