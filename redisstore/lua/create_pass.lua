-- create_pass: the Go method that calls it (passes.go) says its KEYS, ARGV and
-- replies.
return function(KEYS, ARGV)
  local cfg_key, passes_key = KEYS[1], KEYS[2]
  local id, uses, left, expires_ms, most = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
  if redis.call('EXISTS', cfg_key) == 0 then
    return 'ROOM_NOT_FOUND'
  end
  if redis.call('HEXISTS', passes_key, id) == 1 then
    return 'EXISTS'
  end
  if redis.call('HLEN', passes_key) >= most then
    return 'TOO_MANY_PASSES'
  end
  local n = redis.call('HLEN', passes_key) + 1
  redis.call('HSET', passes_key, id, string.format('%d|%s|%s|%s|0', n, uses, left, expires_ms))
  return 'OK'
end
