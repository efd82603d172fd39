-- list_passes: the Go method that calls it (passes.go) says its KEYS, ARGV and
-- replies.
return function(KEYS)
  if redis.call('EXISTS', KEYS[1]) == 0 then
    return {'ROOM_NOT_FOUND'}
  end
  local out = {'OK'}
  for _, v in ipairs(redis.call('HGETALL', KEYS[2])) do
    out[#out + 1] = v
  end
  return out
end
