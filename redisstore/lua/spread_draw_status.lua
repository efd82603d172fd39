-- spread_draw_status: the Go method that calls it (spread_draw.go) says its
-- KEYS, ARGV and replies.
return function(KEYS, ARGV)
  local scfg_key, pre_key = KEYS[1], KEYS[2]
  local layout = ARGV[1]

  local cfg = redis.call('HMGET', scfg_key, 'layout', 'drawn', 'opens_at_ms', 'prequeue')
  local refused = sub_refusal(cfg[1], layout)
  if refused then return refused end
  local out, scores = {'OK'}, {}
  -- Once the draw is written pre holds nobody waiting (its users are queued).
  local drawn, fifo = cfg[2] == '1', cfg[4] == 'fifo'
  local opens_at, now = tonumber(cfg[3] or '0'), now_ms()
  for i = 2, #ARGV do
    local early = 0
    if not drawn then
      early = tonumber(redis.call('ZSCORE', pre_key, ARGV[i]) or '0')
    end
    if early > 0 then
      out[#out + 1] = early_told(pre_key, opens_at, fifo, early, now)
    else
      out[#out + 1] = {'NOT_IN_QUEUE'}
      early = 0
    end
    scores[#scores + 1] = early
  end
  -- Then each user's arrival number (fifo: the caller counts the others').
  for _, score in ipairs(scores) do out[#out + 1] = score end
  return out
end
