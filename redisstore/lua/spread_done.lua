-- spread_done: the Go method that calls it (spread.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 'OK'
end
