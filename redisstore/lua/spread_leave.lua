-- spread_leave: the Go method that calls it (spread.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  local q_key, stats_key, mirror_key, left_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
  local scfg_key, pre_key = KEYS[6], KEYS[7]
  local user, seq = ARGV[1], tonumber(ARGV[2])

  redis.call('HDEL', KEYS[5], user) -- no turn to tell of, early arrival or queued
  -- An early arrival of a scheduled opening gives up its entry.
  spread_leave_pre(scfg_key, pre_key, user)
  local score = redis.call('ZSCORE', q_key, user)
  if not score then
    return {'OK'}
  end
  local ticket = math.floor(tonumber(score))
  redis.call('ZREM', q_key, user)
  -- Counted with the arrivals after it until it left, for the ETA (the
  -- room's counter, read by the caller just before).
  redis.call('HINCRBY', stats_key, 'left', 1)
  redis.call('HINCRBY', stats_key, 'left_after', math.max(0, seq - ticket))
  spread_gone(mirror_key, left_key, ticket)
  return {'OK', ticket}
end
