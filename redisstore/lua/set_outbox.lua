-- set_outbox: the Go method that calls it (outbox.go) says its KEYS, ARGV
-- and replies.
return function(KEYS, ARGV)
  local cfg_key, bucket_key = KEYS[1], KEYS[2]
  local on = ARGV[1] == '1'

  if redis.call('EXISTS', cfg_key) == 0 then
    return 'ROOM_NOT_FOUND'
  end
  -- Admit reads the mark in the bucket's HMGET it makes anyway, and
  -- writes the outbox only while it is set.
  if on then
    redis.call('HSET', bucket_key, 'outbox', '1')
  else
    redis.call('HDEL', bucket_key, 'outbox')
  end
  return 'OK'
end
