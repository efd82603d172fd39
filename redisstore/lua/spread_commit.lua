-- spread_commit: the Go method that calls it (spread.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  local max_pace_step_s = MAX_PACE_STEP_S -- waitroom.MaxPaceStep
  local pace_fold_us = 1000000 -- the pace sums take a second's ticks at a time, as admit's
  local cfg_key, bucket_key, fence_key = KEYS[1], KEYS[2], KEYS[3]
  local seq_key, stats_key = KEYS[4], KEYS[5]
  local fence, unused, waiting = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
  local no_shows, made_up, stable = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
  local elapsed_us, regular, issued = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
  local skipped, left, left_after = tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12])
  local sold = tonumber(ARGV[13])

  -- Done: a pass use need not wait for it any more (spread_pass_begin).
  redis.call('HSET', bucket_key, 'tick_done', fence)
  -- A later tick began meanwhile: it counted the bucket after this one
  -- took its share, so giving back now could admit the rate twice.
  if counter(fence_key) ~= fence then
    return 'STALE'
  end
  local cfg = redis.call('HMGET', cfg_key, 'rate', 'slice_ms')
  local rate = tonumber(cfg[1])
  local slice_users = rate * tonumber(cfg[2]) / 1000
  local b = redis.call('HMGET', bucket_key, 'carry', 'made_up', 'a_time', 'a_regular', 'a_admitted', 'a_abandoned', 'f_us', 'last_us')
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
  -- The room's size for the ticket counter (spread_ticket): those waiting
  -- after the pops, and every ticket after the stable one.
  -- And the units sold over the room (only grows: the ticket counter
  -- refuses new places once they leave less than an order).
  local writes = {'carry', carry, 'no_shows', no_shows, 'made_up', math.min(made, no_shows),
    'w_waiting', waiting, 'w_seq', stable, 'w_sold', sold}

  -- The pace, as admit measures it (waitroom.PaceSums), from the counters
  -- of every sub-shard, which the room's stats hash mirrors for Stats.
  redis.call('HSET', stats_key, 'left', left, 'left_after', left_after, 'no_shows', no_shows)
  local now_us = tonumber(b[8])
  local a_time, a_regular = tonumber(b[3] or '0'), tonumber(b[4] or '0')
  local a_admitted, a_abandoned = tonumber(b[5] or '0'), tonumber(b[6] or '0')
  if elapsed_us >= 0 and waiting > 0 then
    a_time = a_time + math.min(elapsed_us / 1000000, max_pace_step_s)
    a_regular = a_regular + regular / rate
    a_admitted = a_admitted + issued
    a_abandoned = a_abandoned + skipped
  end
  if elapsed_us >= 0 and waiting > 0 and now_us - tonumber(b[7] or '0') < pace_fold_us then
    push_all(writes, 'a_time', a_time, 'a_regular', a_regular, 'a_admitted', a_admitted, 'a_abandoned', a_abandoned)
  else
    pace_fold_writes(bucket_key, writes, {a_time, a_regular, a_admitted, a_abandoned},
      {counter(seq_key), left, left_after, no_shows}, now_us)
  end
  redis.call('HSET', bucket_key, unpack(writes))
  return 'OK'
end
