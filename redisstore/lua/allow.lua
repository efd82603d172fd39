-- allow: the Go method that calls it (limit.go) says its KEYS, ARGV and
-- replies.
return function(KEYS, ARGV)
  local tat_key  = KEYS[1]
  local interval = tonumber(ARGV[1])
  local burst    = tonumber(ARGV[2])
  local passed   = tonumber(ARGV[3])

  local now = clock_us()
  local tat = tonumber(redis.call('GET', tat_key) or '0')
  if tat < now then
    tat = now
  end
  -- The requests let through already add their debt, allowed or not.
  tat = tat + passed * interval
  local next = tat + interval
  -- Refused while the debt this request would leave exceeds the burst.
  local wait = next - now - burst
  if wait > 0 then
    if passed > 0 then
      redis.call('SET', tat_key, tat, 'PX', math.ceil((tat - now) / 1000) + 1)
    end
    return {0, wait}
  end
  -- The key means nothing once its tat has passed: let it expire then.
  redis.call('SET', tat_key, next, 'PX', math.ceil((next - now) / 1000) + 1)
  return {1, 0}
end
