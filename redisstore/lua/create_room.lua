-- create_room: the Go method that calls it (room.go) says its KEYS, ARGV and
-- replies.
return function(KEYS, ARGV)
  local cfg_key, ver_key = KEYS[1], KEYS[2]
  local version          = ARGV[1]

  -- Never overwrite a live room: CreateRoom is create-if-absent. A room
  -- made before its settings had a version gets one, so that RoomVersions
  -- tells it is there.
  if redis.call('EXISTS', cfg_key) == 1 then
    redis.call('SET', ver_key, version, 'NX')
    return 'EXISTS'
  end
  redis.call('HSET', cfg_key, unpack(ARGV, 2))
  keep_hash_table(cfg_key)
  redis.call('SET', ver_key, version)
  return 'CREATED'
end
