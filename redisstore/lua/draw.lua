-- The draw's helpers, for the functions that write a draw under its lock.

-- keep_seed: the draw's seed and the commitment to it (SHA-256, computed
-- in Go: Lua has none) are written together and once; afterwards both
-- are only read, so the published commitment is the stored one.
local function keep_seed(draw_key, seed, commitment)
  if redis.call('HEXISTS', draw_key, 'seed') == 0 then
    redis.call('HSET', draw_key, 'seed', seed, 'commitment', commitment)
  end
end

-- not_owner: 'DONE' when the draw is published, 'LOST' when the lock is
-- another owner's (it took over a lapsed lock); nil: owner may write.
local function not_owner(draw_key, owner)
  local d = redis.call('HMGET', draw_key, 'state', 'lock')
  if d[1] == 'done' then
    return 'DONE'
  end
  if d[2] ~= owner then
    return 'LOST'
  end
  return nil
end

-- token_start: when a token issued now starts its clock (first-use
-- deadline and TTL), as waitroom.TokenStart: right after an opening, at the
-- end of the span over which the early arrivals (early: the draw's
-- entrants) make their first polls, since a drawn user learns of its
-- token only then.
-- after_opening: whether now is in the span after an opening where
-- token_start may start a token late (MAX_POLL_MS: waitroom.MaxPoll).
local function after_opening(now, opens_at)
  return opens_at > 0 and now >= opens_at and now < opens_at + MAX_POLL_MS
end

local function token_start(now, opens_at, early)
  local max_poll_ms = MAX_POLL_MS
  if not after_opening(now, opens_at) then
    return now
  end
  -- OPENING_SPREAD_MS: waitroom.OpeningSpread; OPENING_POLL_NS: the spread
  -- per early arrival, time.Second / waitroom.OpeningPolls.
  local span = math.min(max_poll_ms, math.max(OPENING_SPREAD_MS, math.floor(early * OPENING_POLL_NS / 1000000)))
  if now < opens_at + span then
    return opens_at + span
  end
  return now
end
