-- spread_pass_issue: the Go method that calls it (passes.go) says its
-- KEYS, ARGV and replies.
return function(KEYS, ARGV)
  local scfg_key, q_key, tok_key, active_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
  local stats_key, buyers_key, pre_key, notice_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
  local mirror_key, left_key = KEYS[9], KEYS[10]
  local layout, fence, user, token, issue = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5] == '1'

  local cfg = redis.call('HMGET', scfg_key, 'layout', 'fence', 'ttl_ms', 'first_use_ms', 'one_order')
  local refused = sub_refusal(cfg[1], layout)
  if refused then return refused end
  -- Only the pass use that sealed this sub-shard last writes it.
  if issue and tonumber(cfg[2] or '0') ~= fence then
    return {'STALE'}
  end
  -- The user's own standing first, as enter_with_pass reads it.
  local now = now_ms()
  local st, old = pass_holder_standing(tok_key, active_key, buyers_key, cfg[5] == '1', user, now)
  if st then
    return st
  end
  if not issue then
    return {'OK'}
  end

  -- Out of the queue (its ticket gone, for the caller to tell the other
  -- sub-shards), out of the draw's line for an early arrival (as leaving
  -- it), no turn to tell of; a token as the tick issues one, told to its
  -- holder by this answer ('shown').
  local out = {'ADMITTED', token, 0}
  local score = redis.call('ZSCORE', q_key, user)
  if score then
    redis.call('ZREM', q_key, user)
    local ticket = math.floor(tonumber(score))
    spread_gone(mirror_key, left_key, ticket)
    out[4] = ticket
  end
  spread_leave_pre(scfg_key, pre_key, user)
  redis.call('HDEL', notice_key, user)
  if old then
    count_gone(stats_key, old) -- a lingering expired entry: gone unused
  end
  local ttl_ms = math.floor(tonumber(cfg[3]))
  local expires_at = now + math.min(math.floor(tonumber(cfg[4] or cfg[3])), ttl_ms)
  issue_tokens(tok_key, {user, format_entry({token = token, state = 'shown', lease = '', lease_until = now + ttl_ms, expires_at = expires_at})})
  redis.call('ZADD', active_key, expires_at, user)
  redis.call('HINCRBY', stats_key, 'admitted', 1)
  out[3] = ttl_ms
  return out
end
