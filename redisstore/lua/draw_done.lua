-- draw_done: the Go method that calls it (drop.go) says its KEYS, ARGV and
-- replies.
return function(KEYS, ARGV)
  local draw_key, pre_key, ent_key = KEYS[1], KEYS[2], KEYS[3]
  local owner, took_ms, digest = ARGV[1], ARGV[2], ARGV[3]

  local refused = not_owner(draw_key, owner)
  if refused then
    return refused
  end
  redis.call('HSET', draw_key, 'state', 'done', 'drawn_at_ms', now_ms(), 'took_ms', took_ms, 'digest', digest)
  redis.call('HDEL', draw_key, 'lock', 'lock_until')
  -- O(1): the early arrivals become the draw's record of entrants.
  if redis.call('EXISTS', pre_key) == 1 then
    redis.call('RENAME', pre_key, ent_key)
  end
  return 'DONE'
end
