-- spread_pass_begin: the Go method that calls it (passes.go) says its
-- KEYS, ARGV and replies.
return function(KEYS, ARGV)
  local cfg_key, fence_key, lock_key = KEYS[1], KEYS[2], KEYS[3]
  local layout, owner, lease_ms = ARGV[1], ARGV[2], tonumber(ARGV[3])

  local cfg = redis.call('HMGET', cfg_key, 'layout')
  local refused = control_refusal(cfg_key, cfg[1], layout)
  if refused then return refused end
  -- One pass use at a time in the room: each seals every sub-shard, so
  -- two at once would only make each other stale.
  local now = now_ms()
  local held = redis.call('HMGET', lock_key, 'owner', 'until')
  if held[1] and held[1] ~= owner and tonumber(held[2]) > now then
    return {'BUSY'}
  end
  redis.call('HSET', lock_key, 'owner', owner, 'until', now + lease_ms)
  redis.call('PEXPIRE', lock_key, lease_ms + 1000)
  -- The use's fence, as a tick's: the sub-shards it seals refuse every
  -- older tick from then on, and a later tick makes it stale.
  return {'OK', redis.call('INCR', fence_key)}
end
