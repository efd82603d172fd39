-- spread_leave: the Go method that calls it (spread.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  local q_key, stats_key, mirror_key, left_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
  local user = ARGV[1]

  local score = redis.call('ZSCORE', q_key, user)
  if score then
    redis.call('ZREM', q_key, user)
    redis.call('HINCRBY', stats_key, 'left', 1)
    spread_gone(mirror_key, left_key, math.floor(tonumber(score)))
  end
  return 'OK'
end
