-- spread_sold: the Go method that calls it (spread.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  local units_key = KEYS[1]
  local from, sold = ARGV[1], tonumber(ARGV[2])

  -- Units sold only grow: a push that arrives after a later one (or after
  -- a tick that told more) changes nothing.
  local field = 's' .. from
  if sold > tonumber(redis.call('HGET', units_key, field) or '0') then
    redis.call('HSET', units_key, field, sold)
  end
  return 'OK'
end
