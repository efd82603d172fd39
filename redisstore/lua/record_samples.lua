-- record_samples: the Go method that calls it (history.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  local keys_per_room = 8
  -- Expired tokens read to leave them out of the live count, at most, per
  -- room: a batch holds Redis for all of its rooms (beyond it, after a
  -- long admitter outage, the rest count until cleanup catches up).
  local sample_due_budget = 1000
  local at_s = tonumber(ARGV[1])
  local keep = tonumber(ARGV[2])
  local ttl_ms = tonumber(ARGV[3])

  local now -- the Redis clock, read for the first room with tokens only
  local recorded = 0
  local spread = {} -- the rooms spread over shards, by their place in KEYS
  for base = 0, #KEYS - keys_per_room, keys_per_room do
    local cfg_key    = KEYS[base + 1]
    local q_key      = KEYS[base + 2]
    local pre_key    = KEYS[base + 3]
    local drawn_key  = KEYS[base + 4]
    local tok_key    = KEYS[base + 5]
    local active_key = KEYS[base + 6]
    local stats_key  = KEYS[base + 7]
    local hist_key   = KEYS[base + 8]

    -- No settings: no room (or not yet), no sample. A room spread over
    -- shards keeps its users on other shards: the Store records it from
    -- its summed figures (append_sample), told by its place in the reply.
    local c = redis.call('HMGET', cfg_key, 'rate', 'shards')
    local rate = c[1]
    if rate and tonumber(c[2] or '1') > 1 then
      spread[#spread + 1] = base / keys_per_room + 1
      rate = nil
    end
    if rate and not recorded_since(hist_key, at_s) then
      -- The figures as stats counts them; a room nobody is in (most
      -- rooms most of the time) costs one EXISTS for both.
      local waiting, live = 0, 0
      if redis.call('EXISTS', q_key, pre_key, drawn_key, tok_key) > 0 then
        waiting = redis.call('ZCARD', q_key) + redis.call('ZCARD', pre_key) + redis.call('ZCARD', drawn_key)
        live = live_tokens(tok_key)
        if live > 0 then
          now = now or now_ms()
          local _, gone = due_tokens(tok_key, active_key, now, sample_due_budget)
          live = live - #gone
        end
      end
      local admitted = redis.call('HGET', stats_key, 'admitted') or '0'
      -- "second rate waiting live admitted": a few bytes a sample.
      push_sample(hist_key, at_s .. ' ' .. rate .. ' ' .. waiting .. ' ' .. live .. ' ' .. admitted, keep, ttl_ms)
      recorded = recorded + 1
    end
  end
  local out = {'OK', recorded}
  for _, i in ipairs(spread) do
    out[#out + 1] = i
  end
  return out
end
