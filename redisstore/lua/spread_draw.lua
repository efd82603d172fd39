-- The helpers of a spread room's scheduled opening (spread_draw.go):
-- loaded after spread.lua, read by the spread_draw_* functions and by
-- spread_ticket and spread_pop.
--
-- Until the opening an early arrival waits in its sub-shard's pre
-- (user → arrival number, handed out by the room's draw record so the
-- order is one across the sub-shards), with no ticket. At the opening
-- every pre is sealed (pre_sealed: from then on a leaver's score turns
-- negative, so the snapshot keeps its count), the ticket counter jumps
-- past the entrants (the draw record's base), and the drawer gives each
-- entrant ticket base + place on its sub-shard. The sub-shard's cfg keeps
-- pre_sealed, placed (entrants placed or found gone so far) and, once
-- the draw is written, drawn and entrants.

-- spread_opening: spread_ticket's reply while a scheduled opening stands
-- between the room and its tickets: before the opening {'SCHEDULED',
-- now, opens_at, first arrival number} (n numbers handed out); from it
-- until the draw set the counter {'DRAWING'}; nil when tickets may go.
local function spread_opening(cfg_key, draw_key, n, now)
  local opens_at = tonumber(redis.call('HGET', cfg_key, 'opens_at_ms') or '0')
  if opens_at == 0 then return nil end
  local d = redis.call('HMGET', draw_key, 'state', 'base')
  if d[1] == 'done' or d[2] then return nil end
  if now >= opens_at then return {'DRAWING'} end
  local last = redis.call('HINCRBY', draw_key, 'arrivals', n)
  return {'SCHEDULED', now, opens_at, last - n + 1}
end

-- spread_leave_pre: user, leaving or let in with a pass, gives up its
-- early arrival in pre: before the opening the entry goes; once the
-- draw's snapshot is sealed the leaver keeps its count (and its place in
-- the record) but is not queued (spread_draw_place); once drawn, pre is
-- done with.
local function spread_leave_pre(scfg_key, pre_key, user)
  local s = redis.call('ZSCORE', pre_key, user)
  local c = redis.call('HMGET', scfg_key, 'drawn', 'pre_sealed')
  if not s or c[1] == '1' then
    return
  end
  if c[2] ~= '1' then
    redis.call('ZREM', pre_key, user)
  elseif tonumber(s) > 0 then
    redis.call('ZADD', pre_key, -tonumber(s), user)
  end
end

-- spread_token_start: when a token a spread room's sub-shard issues now
-- starts its clock: token_start with the opening and entrants the
-- sub-shard's cfg keeps.
local function spread_token_start(scfg_key, now)
  local c = redis.call('HMGET', scfg_key, 'opens_at_ms', 'entrants')
  return token_start(now, tonumber(c[1] or '0'), tonumber(c[2] or '0'))
end

-- early_told: an early arrival's answer on a sub-shard, as told_opening:
-- the time to the opening, and (fifo) its place among this sub-shard's
-- early arrivals; the caller adds the other sub-shards'.
local function early_told(pre_key, opens_at, fifo, score, now)
  local position = 0
  if fifo then
    position = redis.call('ZCOUNT', pre_key, '(0', score)
  end
  return {'SCHEDULED', math.max(0, opens_at - now), position}
end
