-- read_outbox: the Go method that calls it (outbox.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  local cfg_key, bucket_key, out_key = KEYS[1], KEYS[2], KEYS[3]
  local count = tonumber(ARGV[1])

  if redis.call('EXISTS', cfg_key) == 0 then
    return {'ROOM_NOT_FOUND'}
  end
  local b = redis.call('HMGET', bucket_key, 'out_lost', 'outbox', 'named_no_shows', 'named_expired', 'named_abandoned')
  local on = 0
  if b[2] == '1' then on = 1 end
  local out = {'OK', tonumber(b[1] or '0'), on, tonumber(b[3] or '0'), tonumber(b[4] or '0'), tonumber(b[5] or '0')}
  -- Each entry: id, type, the store's ms, the users space-separated.
  for _, e in ipairs(redis.call('XRANGE', out_key, '-', '+', 'COUNT', count)) do
    local f = {}
    for i = 1, #e[2], 2 do
      f[e[2][i]] = e[2][i + 1]
    end
    out[#out + 1] = {e[1], f.t or '', f.at or '', f.u or ''}
  end
  return out
end
