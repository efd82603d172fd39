-- leave: the Go method that calls it (queue.go) says its KEYS, ARGV and
-- replies.
return function(KEYS, ARGV)
  local q_key, pre_key, drawn_key, draw_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
  local stats_key, seq_key, notice_key = KEYS[5], KEYS[6], KEYS[7]
  local user = ARGV[1]

  local queued = redis.call('ZSCORE', q_key, user)
  if queued then
    redis.call('ZREM', q_key, user)
    redis.call('HINCRBY', stats_key, 'left', 1)
    redis.call('HINCRBY', stats_key, 'left_after', counter(seq_key) - math.floor(tonumber(queued)))
  end
  out_of_draw(pre_key, drawn_key, draw_key, user)
  redis.call('HDEL', notice_key, user)
  return 'OK'
end
