-- draw_chunk: the Go method that calls it (drop.go) says its KEYS, ARGV and
-- replies.
return function(KEYS, ARGV)
  local draw_key, pre_key, drawn_key, places_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
  local owner = ARGV[1]

  local refused = not_owner(draw_key, owner)
  if refused then
    return refused
  end
  local now = now_ms()
  redis.call('HSET', draw_key, 'lock_until', now + tonumber(ARGV[2]))
  local places, queued = {}, {}
  local now_s = math.floor(now / 1000)
  for i = 3, #ARGV, 2 do
    local user, place = ARGV[i], ARGV[i + 1]
    places[#places + 1] = user
    places[#places + 1] = place
    -- One who left during the draw keeps its recorded place but is not
    -- queued (Leave made its score negative).
    local s = redis.call('ZSCORE', pre_key, user)
    if s and tonumber(s) > 0 then
      -- A queue score (place + seen second): silence counts from the draw.
      queued[#queued + 1] = queue_score(tonumber(place), now_s)
      queued[#queued + 1] = user
    end
  end
  if #places > 0 then
    redis.call('HSET', places_key, unpack(places))
  end
  if #queued > 0 then
    redis.call('ZADD', drawn_key, unpack(queued))
  end
  return 'OK'
end
