-- draw_begin: the Go method that calls it (drop.go) says its KEYS, ARGV and
-- replies.
return function(KEYS, ARGV)
  local cfg_key, draw_key, pre_key = KEYS[1], KEYS[2], KEYS[3]
  local owner, lease_ms, seed, commitment = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]

  local cfg = redis.call('HMGET', cfg_key, 'opens_at_ms', 'prequeue')
  local opens_at = tonumber(cfg[1] or '0')
  local d = redis.call('HMGET', draw_key, 'state', 'lock', 'lock_until')
  if d[1] == 'done' then
    return {'DONE'}
  end
  if opens_at == 0 then
    return {'NO_DRAW'}
  end
  local now = now_ms()
  if now < opens_at then
    return {'NOT_YET'}
  end
  -- A live lock of another owner: it is drawing. A lapsed one: it died.
  if d[2] and d[2] ~= owner and tonumber(d[3]) > now then
    return {'BUSY'}
  end
  keep_seed(draw_key, seed, commitment)
  if not d[1] then
    -- From here Leave keeps entrants in pre (negative score) instead of
    -- removing them: the draw's snapshot is being read. The order is the
    -- record's from now on, whatever the settings say later.
    redis.call('HSET', draw_key, 'state', 'drawing', 'entrants', redis.call('ZCARD', pre_key), 'order', cfg[2] or '')
  end
  redis.call('HSET', draw_key, 'lock', owner, 'lock_until', now + lease_ms)
  local kept = redis.call('HMGET', draw_key, 'seed', 'commitment', 'order')
  return {'DRAW', kept[1], kept[2] or '', kept[3] or '', redis.call('ZCARD', pre_key)}
end
