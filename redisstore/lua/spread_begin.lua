-- spread_begin: the Go method that calls it (spread.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  local inflight_ms = SPREAD_INFLIGHT_MS -- a ticket in flight longer was never placed
  local cfg_key, bucket_key, seq_key = KEYS[1], KEYS[2], KEYS[3]
  local inflight_key, fence_key = KEYS[4], KEYS[5]
  local layout = ARGV[1]

  local cfg = redis.call('HMGET', cfg_key, 'layout', 'state', 'rate', 'slice_ms', 'quota', 'stock', 'units')
  local refused = control_refusal(cfg_key, cfg[1], layout)
  if refused then return refused end
  local state, rate = cfg[2], tonumber(cfg[3])
  local slice_users = rate * tonumber(cfg[4]) / 1000
  local quota = tonumber(cfg[5])
  local now_us = clock_us()
  local now = math.floor(now_us / 1000)
  -- The stock the tick admits against, read with its fence: a tick
  -- that begins after a change of the stock counts with the new one.
  local stock, per = tonumber(cfg[6] or '0'), per_order(cfg[7])

  -- This tick's fence: the sub-shards it seals refuse every older tick
  -- from then on (spread_head, spread_pop).
  local fence = redis.call('INCR', fence_key)

  -- The last ticket every earlier ticket of is placed or gone: the one
  -- before the oldest still in flight. Tickets in flight too long are
  -- never placed (spread_enter refuses them late), so they stop holding
  -- the admitter back.
  redis.call('ZREMRANGEBYSCORE', inflight_key, '-inf', now - inflight_ms)
  local stable = counter(seq_key)
  local oldest = redis.call('ZRANGE', inflight_key, 0, 0)
  if #oldest > 0 then
    -- Not the smallest score but the smallest ticket: a ZSCAN would cost
    -- more than the few members a crowd keeps in flight.
    local firsts = redis.call('ZRANGE', inflight_key, 0, -1)
    for i = 1, #firsts do
      stable = math.min(stable, tonumber(firsts[i]) - 1)
    end
  end

  local b = redis.call('HMGET', bucket_key, 'last_us', 'carry', 'made_up', 'no_shows', HASH_TABLE_FIELD, 'outbox')
  if not b[5] then
    keep_hash_table(bucket_key)
  end
  -- The time this tick measures the pace over; -1: the first tick.
  local elapsed = -1
  -- The room's outbox is on: the sub-shards name whom the tick admits
  -- and drops in their own (spread_head, spread_pop).
  local events = b[6] == '1' and 1 or 0
  if b[1] then
    elapsed = math.max(0, now_us - tonumber(b[1]))
  end
  if state == 'paused' then
    -- Admit nobody and save nothing up, so resuming does not burst; the
    -- sub-shards are still read, for the room's size.
    redis.call('HSET', bucket_key, 'last_us', now_us, 'carry', 0, 'tick_fence', fence, 'tick_at', now)
    return {'OK', fence, 0, 0, stable, now, elapsed, stock, per, events}
  end
  local allow, extra = 0, 0
  if b[1] then
    -- A clock that stepped back (failover) counts as no time passed.
    local elapsed_us = math.max(0, now_us - tonumber(b[1]))
    allow = tonumber(b[2]) + elapsed_us * rate / 1000000
    -- No-shows the last tick counted and not made up yet are admitted
    -- again, at most as fast again as the rate.
    local owed = math.max(0, tonumber(b[4] or '0') - tonumber(b[3] or '0'))
    extra = math.min(owed, math.min(elapsed_us * rate / 1000000, slice_users))
  end
  -- The epsilon absorbs float error (14.999999… users is 15).
  local regular = math.min(math.floor(allow + 1e-9), quota)
  local n = math.min(math.floor(allow + extra + 1e-9), quota + math.floor(extra + 1e-9))
  -- The tick takes its share now: a second admitter ticking at once takes
  -- only what accrued since. What it does not admit, spread_commit gives
  -- back; a tick that dies gives nothing back (fewer, never more).
  local carry = math.min(allow - regular, slice_users + 1)
  -- The tick under way (tick_fence, tick_at; spread_commit marks it
  -- done): a pass use waits for it rather than make it stale.
  redis.call('HSET', bucket_key, 'last_us', now_us, 'carry', carry, 'tick_fence', fence, 'tick_at', now)
  return {'OK', fence, n, regular, stable, now, elapsed, stock, per, events}
end
