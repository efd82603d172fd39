-- spread_commit: the Go method that calls it (spread.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  local cfg_key, bucket_key, fence_key = KEYS[1], KEYS[2], KEYS[3]
  local fence, unused, waiting = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
  local no_shows, made_up = tonumber(ARGV[4]), tonumber(ARGV[5])

  -- A later tick began meanwhile: it counted the bucket after this one
  -- took its share, so giving back now could admit the rate twice.
  if counter(fence_key) ~= fence then
    return 'STALE'
  end
  local cfg = redis.call('HMGET', cfg_key, 'rate', 'slice_ms')
  local slice_users = tonumber(cfg[1]) * tonumber(cfg[2]) / 1000
  local b = redis.call('HMGET', bucket_key, 'carry', 'made_up')
  -- What was allowed but not admitted is carried: with users still waiting
  -- at most one slice's worth plus one user, with nobody waiting at most
  -- one user (idle time saves up no burst), as admit carries.
  local cap = 1
  if waiting > 0 then cap = slice_users + 1 end
  local carry = math.min(tonumber(b[1] or '0') + unused, cap)
  -- No-shows are made up only while users wait: with nobody waiting there
  -- is nobody to make them up with, and nothing is owed.
  local made = tonumber(b[2] or '0') + made_up
  if waiting == 0 then made = no_shows end
  redis.call('HSET', bucket_key, 'carry', carry, 'no_shows', no_shows, 'made_up', math.min(made, no_shows))
  return 'OK'
end
