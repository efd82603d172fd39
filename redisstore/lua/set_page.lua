-- set_page: the Go method that calls it (page.go) says its KEYS, ARGV and
-- replies.
return function(KEYS, ARGV)
  local cfg_key, ver_key, page_key = KEYS[1], KEYS[2], KEYS[3]
  local version, page_version, archive = ARGV[1], ARGV[2], ARGV[3]

  -- A page must not create a room behind CreateRoom's back.
  if redis.call('EXISTS', cfg_key) == 0 then
    return 'ROOM_NOT_FOUND'
  end
  if page_version == '' then
    redis.call('DEL', page_key)
  else
    redis.call('HSET', page_key, 'v', page_version, 'archive', archive)
  end
  -- The settings name the page, and their new version makes every
  -- instance read them (and so the page) again.
  redis.call('HSET', cfg_key, 'page', page_version)
  redis.call('SET', ver_key, version)
  return 'OK'
end
