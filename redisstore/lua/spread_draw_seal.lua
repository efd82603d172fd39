-- spread_draw_seal: the Go method that calls it (spread_draw.go) says its
-- KEYS, ARGV and replies.
return function(KEYS, ARGV)
  local scfg_key, pre_key, layout = KEYS[1], KEYS[2], ARGV[1]

  local refused = sub_refusal(redis.call('HGET', scfg_key, 'layout'), layout)
  if refused then return refused end
  -- From now on nobody joins pre, and a leaver's entry stays (negative):
  -- its count is the number of this sub-shard's entrants for good.
  redis.call('HSET', scfg_key, 'pre_sealed', '1')
  return {'OK', redis.call('ZCARD', pre_key)}
end
