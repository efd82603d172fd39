-- spread_settled: the Go method that calls it (spread_draw.go) says its
-- KEYS, ARGV and replies.
return function(KEYS)
  local seq_key, inflight_key = KEYS[1], KEYS[2]

  -- A ticket in flight may still be placed, its user in no queue yet; one
  -- in flight longer than SPREAD_INFLIGHT_MS never will be (spread_begin).
  if redis.call('ZCOUNT', inflight_key, '(' .. (now_ms() - SPREAD_INFLIGHT_MS), '+inf') > 0 then
    return {'IN_FLIGHT'}
  end
  return {'OK', counter(seq_key)}
end
