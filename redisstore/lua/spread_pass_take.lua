-- spread_pass_take: the Go method that calls it (passes.go) says its
-- KEYS, ARGV and replies.
return function(KEYS, ARGV)
  local cfg_key, passes_key, fence_key = KEYS[1], KEYS[2], KEYS[3]
  local fence, id, live, sold = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])

  if counter(fence_key) ~= fence then
    return {'STALE'}
  end
  local cfg = redis.call('HMGET', cfg_key, 'state', 'closes_at_ms', 'max_active', 'stock', 'units')
  local now = now_ms()
  local pass, refused = read_pass(passes_key, id, now)
  if not pass then
    return {refused}
  end
  if refuses_entries(cfg[1], cfg[2], now) then
    return {'ROOM_CLOSED'}
  end
  -- Counted like any token, over every sub-shard (sealed and read under
  -- this fence): within max_active and the stock.
  local full = no_free_slot(tonumber(cfg[4] or '0'), sold, live, per_order(cfg[5]), tonumber(cfg[3]))
  if full then
    return {full}
  end
  use_pass(passes_key, id, pass, -1)
  return {'OK'}
end
