-- spread_draw_record: the Go method that calls it (spread_draw.go) says its
-- KEYS, ARGV and replies.
return function(KEYS, ARGV)
  local draw_key, places_key, ent_key = KEYS[1], KEYS[2], KEYS[3]
  local owner = ARGV[1]

  local refused = not_owner(draw_key, owner)
  if refused then
    return refused
  end
  redis.call('HSET', draw_key, 'lock_until', now_ms() + tonumber(ARGV[2]))
  local places, ent = {}, {}
  for i = 3, #ARGV, 2 do
    local user, place = ARGV[i], ARGV[i + 1]
    places[#places + 1] = user
    places[#places + 1] = place
    ent[#ent + 1] = place
    ent[#ent + 1] = user
  end
  if #places > 0 then
    redis.call('HSET', places_key, unpack(places))
    redis.call('ZADD', ent_key, unpack(ent))
  end
  return 'OK'
end
