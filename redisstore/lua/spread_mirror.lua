-- spread_mirror: the Go method that calls it (spread.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  local scfg_key, mirror_key = KEYS[1], KEYS[2]
  local head = tonumber(redis.call('HGET', scfg_key, 'head') or '0')
  local args = {}
  for i = 1, #ARGV do
    local t = tonumber(ARGV[i])
    -- At or before the head a ticket no longer counts in any position.
    if t > head then
      args[#args + 1] = t
      args[#args + 1] = t
    end
  end
  if #args > 0 then
    redis.call('ZADD', mirror_key, unpack(args))
  end
  return 'OK'
end
