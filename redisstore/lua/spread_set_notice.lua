-- spread_set_notice: the Go method that calls it (notice.go) says its
-- KEYS, ARGV and replies.
return function(KEYS, ARGV)
  local scfg_key, q_key, pre_key, stats_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
  local notice_key, mirror_key, left_key = KEYS[5], KEYS[6], KEYS[7]
  local layout, user, channels = ARGV[1], ARGV[2], ARGV[3]

  local cfg = redis.call('HMGET', scfg_key, 'layout', 'abandon_ms', 'drawn')
  local refused = sub_refusal(cfg[1], layout)
  if refused then return refused end
  -- Only a place still standing keeps a notice, as set_notice: a queued
  -- user is marked seen, or dropped when it was silent too long (its
  -- ticket then gone, for the caller to tell the other sub-shards); an
  -- early arrival waits for the draw, silent or not.
  local score = redis.call('ZSCORE', q_key, user)
  if score then
    score = tonumber(score)
    local s = math.floor(now_ms() / 1000)
    local ticket = math.floor(score)
    if has_gone(notice_key, user, score, s, abandon_secs(cfg[2])) then
      spread_abandon(q_key, stats_key, mirror_key, left_key, user, ticket)
      return {'NOT_IN_QUEUE', ticket}
    end
    local fresh = queue_score(ticket, s)
    if fresh ~= score then
      redis.call('ZADD', q_key, 'XX', fresh, user)
    end
  elseif cfg[3] == '1' or tonumber(redis.call('ZSCORE', pre_key, user) or '0') <= 0 then
    return {'NOT_IN_QUEUE'}
  end
  if channels == '' then
    redis.call('HDEL', notice_key, user)
  else
    redis.call('HSET', notice_key, user, channels)
  end
  return {'OK'}
end
