-- spread_pass_begin: the Go method that calls it (passes.go) says its
-- KEYS, ARGV and replies.
return function(KEYS, ARGV)
  local tick_max_ms = 1000 -- a tick begun longer ago and not done has died
  local cfg_key, fence_key, lock_key = KEYS[1], KEYS[2], KEYS[3]
  local bucket_key, passes_key = KEYS[4], KEYS[5]
  local layout, owner, lease_ms, id = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]

  local cfg = redis.call('HMGET', cfg_key, 'layout', 'state', 'closes_at_ms')
  local refused = control_refusal(cfg_key, cfg[1], layout)
  if refused then return refused end
  -- What this use would be refused for anyway is refused before it seals
  -- anything, so a script of uses with a spent, revoked or forged pass,
  -- at a closed room, or at one found full a moment ago, costs one call
  -- and never stalls admission.
  local now = now_ms()
  local pass, bad = read_pass(passes_key, id, cfg[2], cfg[3], now)
  if not pass then
    return {bad}
  end
  local b = redis.call('HMGET', bucket_key, 'tick_fence', 'tick_at', 'tick_done', 'pass_refused', 'pass_refused_until')
  if b[4] and now < tonumber(b[5]) then
    return {b[4]}
  end
  -- A tick under way (the fence is its, it has not ended, it began a
  -- moment ago) is not made stale by a pass: the use waits for it.
  local fence = counter(fence_key)
  if tonumber(b[1] or '-1') == fence and b[3] ~= b[1] and now - tonumber(b[2] or '0') < tick_max_ms then
    return {'BUSY'}
  end
  -- One pass use at a time in the room: each seals every sub-shard, so
  -- two at once would only make each other stale.
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
