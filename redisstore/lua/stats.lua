-- stats: the Go method that calls it (room.go) says its KEYS, ARGV and
-- replies.
return function(KEYS)
  local stats_due_budget = 10000 -- expired tokens read to leave them out of the count, at most
  local cfg_key    = KEYS[1]
  local q_key      = KEYS[2]
  local active_key = KEYS[3]
  local stats_key  = KEYS[4]
  local pre_key    = KEYS[7]
  local drawn_key  = KEYS[8]
  local tok_key    = KEYS[9]

  if redis.call('EXISTS', cfg_key) == 0 then
    return {'ROOM_NOT_FOUND'}
  end
  local now = now_ms()
  -- Early arrivals wait too: in pre until the draw, in drawn after it.
  local waiting = redis.call('ZCARD', q_key) + redis.call('ZCARD', pre_key) + redis.call('ZCARD', drawn_key)
  -- Live tokens: entries whose expiry (or lease) is still ahead. Entries
  -- past it that Admit has not cleaned up yet do not count, up to
  -- stats_due_budget of them (beyond that, after a long admitter outage,
  -- the rest do until cleanup catches up).
  local _, gone = due_tokens(tok_key, active_key, now, stats_due_budget)
  local active = live_tokens(tok_key) - #gone
  -- Every place given took the next arrival sequence: it is the count of
  -- entries (Enter keeps no second counter).
  local c = redis.call('HMGET', stats_key, 'full', 'admitted', 'completed', 'released', 'expired', 'no_shows', 'abandoned', 'left', 'left_after', 'sold')
  local seq = counter(KEYS[6])
  local out = {'OK', waiting, active, seq}
  for i = 1, 7 do
    out[#out + 1] = tonumber(c[i] or '0')
  end
  out[#out + 1] = tonumber(redis.call('HGET', cfg_key, 'max_active') or '0')
  -- The pace sums with what Admit measured since it last folded them.
  local p = redis.call('HMGET', KEYS[5], 'p_time', 'p_regular', 'p_admitted', 'p_abandoned', 'p_no_shows', 'p_arrivals', 'p_left', 'p_left_after',
    'a_time', 'a_regular', 'a_admitted', 'a_abandoned', 'm_seq', 'm_left', 'm_left_after', 'm_no_shows')
  local a_time = tonumber(p[9] or '0')
  local folded = a_time > 0 and pace_fold(p, {a_time, tonumber(p[10] or '0'), tonumber(p[11] or '0'), tonumber(p[12] or '0')},
    {p[13], p[14], p[15], p[16]}, {seq, tonumber(c[8] or '0'), tonumber(c[9] or '0'), tonumber(c[6] or '0')})
  for i = 1, 8 do
    out[#out + 1] = folded and string.format('%.17g', folded[i]) or p[i] or '0'
  end
  out[#out + 1] = units_sold(c[10], c[3])
  return out
end
