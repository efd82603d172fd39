-- notice: the Go method that calls it (notice.go) says its KEYS, ARGV and
-- replies.
return function(KEYS, ARGV)
  if redis.call('EXISTS', KEYS[1]) == 0 then
    return 'ROOM_NOT_FOUND'
  end
  return {'OK', redis.call('HGET', KEYS[2], ARGV[1]) or ''}
end
