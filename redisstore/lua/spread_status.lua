-- spread_status: the Go method that calls it (spread.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  local scfg_key   = KEYS[1]
  local q_key      = KEYS[2]
  local tok_key    = KEYS[3]
  local active_key = KEYS[4]
  local stats_key  = KEYS[5]
  local mirror_key = KEYS[6]
  local left_key   = KEYS[7]
  local layout = ARGV[1]

  local cfg = redis.call('HMGET', scfg_key, 'layout', 'abandon_ms', 'head')
  local refused = sub_refusal(cfg[1], layout)
  if refused then return refused end
  local abandon_s, head = abandon_secs(cfg[2]), tonumber(cfg[3] or '0')
  local now = now_ms()
  local s = math.floor(now / 1000)
  local out = {'OK'}
  local gone = {} -- tickets gone in this call, for the caller to tell the other sub-shards
  for i = 2, #ARGV do
    local user = ARGV[i]
    local st = {'NOT_IN_QUEUE'}
    local score = redis.call('ZSCORE', q_key, user)
    if score then
      score = tonumber(score)
      local ticket = math.floor(score)
      if is_gone(score, s, abandon_s) then
        -- Silent past abandon_after: gone, as the admitter would find it.
        redis.call('ZREM', q_key, user)
        redis.call('HINCRBY', stats_key, 'abandoned', 1)
        spread_gone(mirror_key, left_key, ticket)
        gone[#gone + 1] = ticket
      else
        local fresh = queue_score(ticket, s)
        if fresh ~= score then
          redis.call('ZADD', q_key, 'XX', fresh, user)
        end
        st = spread_position(mirror_key, head, ticket)
      end
    else
      local e = holder_sees(tok_key, active_key, user, now)
      if e then
        st = {'ADMITTED', e.token, time_left(e, now)}
      end
    end
    out[#out + 1] = st
  end
  for _, t in ipairs(gone) do
    out[#out + 1] = t
  end
  return out
end
