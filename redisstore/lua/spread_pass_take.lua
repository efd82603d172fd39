-- spread_pass_take: the Go method that calls it (passes.go) says its
-- KEYS, ARGV and replies.
return function(KEYS, ARGV)
  local refusal_ms = 100 -- how long a full or sold-out room's refusal stands for the next uses
  local cfg_key, passes_key, fence_key, bucket_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
  local fence, id, live, sold = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])

  if counter(fence_key) ~= fence then
    return {'STALE'}
  end
  local cfg = redis.call('HMGET', cfg_key, 'state', 'closes_at_ms', 'max_active', 'stock', 'units')
  local now = now_ms()
  local pass, refused = read_pass(passes_key, id, cfg[1], cfg[2], now)
  if not pass then
    return {refused}
  end
  -- Counted like any token, over every sub-shard (sealed and read under
  -- this fence): within max_active and the stock.
  local full = no_free_slot(tonumber(cfg[4] or '0'), sold, live, per_order(cfg[5]), tonumber(cfg[3]))
  if full then
    -- The next uses are refused so without sealing the sub-shards again
    -- for a moment: tokens come free by expiry, release or completion,
    -- stock by a restock, and either is worth a retry, not a seal each.
    redis.call('HSET', bucket_key, 'pass_refused', full, 'pass_refused_until', now + refusal_ms)
    return {full}
  end
  use_pass(passes_key, id, pass, -1)
  return {'OK'}
end
