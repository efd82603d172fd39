-- draw_info: the Go method that calls it (drop.go) says its KEYS, ARGV and
-- replies.
return function(KEYS, ARGV)
  local cfg_key, draw_key = KEYS[1], KEYS[2]

  local cfg = redis.call('HMGET', cfg_key, 'state', 'opens_at_ms', 'prequeue')
  if not cfg[1] then
    return {'ROOM_NOT_FOUND'}
  end
  local state = redis.call('HGET', draw_key, 'state')
  local opens_at = tonumber(cfg[2] or '0')
  if opens_at == 0 and state ~= 'done' then
    return {'NO_DRAW'}
  end
  keep_seed(draw_key, ARGV[1], ARGV[2])
  local d = redis.call('HMGET', draw_key, 'seed', 'commitment', 'order', 'entrants', 'digest', 'drawn_at_ms', 'took_ms')
  local order = d[3] or cfg[3] or ''
  -- Until the opening by Redis's clock the seed cannot be revealed.
  local opens_in = 0
  if opens_at > 0 then
    opens_in = math.max(0, opens_at - now_ms())
  end
  return {'OK', state or '', d[1], d[2] or '', order, cfg[2] or '0', tostring(opens_in), d[4] or '0', d[5] or '', d[6] or '0', d[7] or '0'}
end
