-- revoke_pass: the Go method that calls it (passes.go) says its KEYS, ARGV and
-- replies.
return function(KEYS, ARGV)
  local passes_key, id = KEYS[1], ARGV[1]
  local v = redis.call('HGET', passes_key, id)
  if not v then
    return 'PASS_INVALID'
  end
  -- Only the last field changes: created, uses, left and expiry stay.
  redis.call('HSET', passes_key, id, (string.gsub(v, '|[01]$', '|1')))
  return 'OK'
end
