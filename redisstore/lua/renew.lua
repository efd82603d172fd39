-- renew: the Go method that calls it (token.go) says its KEYS, ARGV and
-- replies.
return function(KEYS, ARGV)
  local cfg_key    = KEYS[1]
  local tok_key    = KEYS[2]
  local active_key = KEYS[3]
  local user       = ARGV[1]
  local token      = ARGV[2]
  local lease      = ARGV[3]

  -- A lease that ran out but was not claimed again may go on (held_entry).
  local e = held_entry(tok_key, user, token, lease)
  if not e then
    return 'LOST'
  end
  local lease_ms = redis.call('HGET', cfg_key, 'lease_ms')
  if not lease_ms then
    return 'ROOM_NOT_FOUND'
  end
  e.lease_until = now_ms() + math.floor(tonumber(lease_ms))
  redis.call('HSET', tok_key, user, format_entry(e))
  -- Cleanup waits for the new end of the lease too.
  redis.call('ZADD', active_key, active_score(e), user)
  return 'OK'
end
