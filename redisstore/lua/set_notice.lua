-- set_notice: the Go method that calls it (notice.go) says its KEYS, ARGV
-- and replies.
return function(KEYS, ARGV)
  local cfg_key, q_key, pre_key, drawn_key, draw_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
  local stats_key, notice_key, bucket_key = KEYS[6], KEYS[7], KEYS[8]
  local user, channels = ARGV[1], ARGV[2]

  local cfg = redis.call('HMGET', cfg_key, 'state', 'abandon_ms', 'opens_at_ms', 'had_opening')
  if not cfg[1] then
    return 'ROOM_NOT_FOUND'
  end
  -- Only a place still standing keeps a notice: a queued user is marked
  -- seen, or dropped when it was silent too long, as its status would
  -- find it; an early arrival waits for the draw, silent or not.
  local now = now_ms()
  local stage = draw_stage(cfg[4], tonumber(cfg[3] or '0'), draw_key)
  local key, score = queued_in(q_key, pre_key, drawn_key, stage, user)
  if score then
    if not mark_seen(key, notice_key, stats_key, user, score, math.floor(now / 1000), abandon_secs(cfg[2])) then
      return 'NOT_IN_QUEUE'
    end
  elseif not early_arrival(pre_key, stage, user) then
    return 'NOT_IN_QUEUE'
  end
  if channels == '' then
    redis.call('HDEL', notice_key, user)
    return 'OK'
  end
  redis.call('HSET', notice_key, user, channels)
  -- Admit reads the notices of the users it pops only while this is set.
  redis.call('HSET', bucket_key, 'notices', '1')
  return 'OK'
end
