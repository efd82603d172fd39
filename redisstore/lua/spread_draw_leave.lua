-- spread_draw_leave: the Go method that calls it (spread_draw.go) says its
-- KEYS, ARGV and replies.
return function(KEYS, ARGV)
  local scfg_key, pre_key, user = KEYS[1], KEYS[2], ARGV[1]

  local s = redis.call('ZSCORE', pre_key, user)
  if not s or redis.call('HGET', scfg_key, 'drawn') == '1' then
    return 'OK'
  end
  if redis.call('HGET', scfg_key, 'pre_sealed') ~= '1' then
    -- Before the opening the entry is given up.
    redis.call('ZREM', pre_key, user)
  elseif tonumber(s) > 0 then
    -- The draw's snapshot is sealed: the leaver keeps its count (and its
    -- place in the record) but is not queued (spread_draw_place).
    redis.call('ZADD', pre_key, -tonumber(s), user)
  end
  return 'OK'
end
