-- spread_draw_base: the Go method that calls it (spread_draw.go) says its
-- KEYS, ARGV and replies.
return function(KEYS, ARGV)
  local cfg_key, draw_key, seq_key = KEYS[1], KEYS[2], KEYS[3]
  local entrants = tonumber(ARGV[1])

  local d = redis.call('HMGET', draw_key, 'base', 'entrants', 'state')
  if d[1] then
    return {'OK', tonumber(d[1]), tonumber(d[2] or '0')}
  end
  local cfg = redis.call('HMGET', cfg_key, 'opens_at_ms', 'prequeue')
  local opens_at = tonumber(cfg[1] or '0')
  if opens_at == 0 or now_ms() < opens_at then
    return {'NOT_YET'}
  end
  -- The entrants take tickets base + 1 .. base + entrants (by place); every
  -- later arrival's comes after them.
  local base = counter(seq_key)
  redis.call('INCRBY', seq_key, entrants)
  redis.call('HSET', draw_key, 'base', base, 'entrants', entrants)
  if not d[3] then
    -- As draw_begin: the order is the record's from now on.
    redis.call('HSET', draw_key, 'state', 'drawing', 'order', cfg[2] or '')
  end
  return {'OK', base, entrants}
end
