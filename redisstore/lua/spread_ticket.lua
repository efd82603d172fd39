-- spread_ticket: the Go method that calls it (spread.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  local cfg_key, seq_key, inflight_key = KEYS[1], KEYS[2], KEYS[3]
  local layout, n = ARGV[1], tonumber(ARGV[2])

  local stored = redis.call('HGET', cfg_key, 'layout')
  if not stored then
    if redis.call('EXISTS', cfg_key) == 0 then
      return {'ROOM_NOT_FOUND'}
    end
    return {'RESHARDED'}
  end
  if stored ~= layout then
    return {'RESHARDED'}
  end
  -- One INCRBY hands out the call's tickets; they are in flight until
  -- placed (spread_done), and the admitter admits no ticket from the first
  -- one in flight on, so a ticket placed late is never passed by.
  local last = redis.call('INCRBY', seq_key, n)
  local first = last - n + 1
  local now = now_ms()
  redis.call('ZADD', inflight_key, now, first)
  return {'OK', first, now}
end
