-- The helpers of a room spread over shards (spread.go): loaded after
-- shared.lua, read by the spread_* functions.
--
-- A spread room's sub-shard is a hash tag of its own (wr:{ROOM#n}:…)
-- whose cfg is a copy of the room's settings with the room's layout id
-- (layout), the head ticket the admitter published (head), the last
-- fence an admitter sealed it with (fence) and how much of its list of
-- leavers was trimmed (left_base). Its queue is scored by tickets from
-- the room's one counter, so the order across shards is exact.

-- sub_refusal: the reply of a function on a sub-shard when its cfg is
-- gone (stored, its layout field, is absent with it) or holds another
-- layout than the caller's (a reshard); nil when it is the caller's.
local function sub_refusal(stored, layout)
  if not stored then
    return {'ROOM_NOT_FOUND'}
  end
  if stored ~= layout then
    return {'RESHARDED'}
  end
  return nil
end

-- control_refusal: the same on the room's own keys, whose cfg (cfg_key)
-- has no layout field while the room is on one shard.
local function control_refusal(cfg_key, stored, layout)
  if not stored and redis.call('EXISTS', cfg_key) == 1 then
    return {'RESHARDED'}
  end
  return sub_refusal(stored, layout)
end

-- spread_gone records ticket as one that waits no more ahead of anyone
-- behind it (a leaver, an abandoned user, a ticket never placed): counted
-- at once in this sub-shard's positions (mirror), and listed (left) for
-- the admitter to copy into the other sub-shards' mirrors.
local function spread_gone(mirror_key, left_key, ticket)
  redis.call('ZADD', mirror_key, ticket, ticket)
  redis.call('RPUSH', left_key, ticket)
end

-- spread_abandon drops user, queued with ticket and found silent too long
-- (has_gone) by its own call, as the admitter would: out of the queue,
-- counted abandoned, its ticket gone (spread_gone).
local function spread_abandon(q_key, stats_key, mirror_key, left_key, user, ticket)
  redis.call('ZREM', q_key, user)
  redis.call('HINCRBY', stats_key, 'abandoned', 1)
  spread_gone(mirror_key, left_key, ticket)
end

-- spread_positions returns the place of a ticket in the whole room: the
-- tickets after the head (all at or before it are admitted or gone),
-- less those known gone between (mirror: read only when it holds any);
-- at least 1. Exact but for the other sub-shards' leavers not told here
-- yet.
local function spread_positions(mirror_key, head)
  local any_gone = redis.call('EXISTS', mirror_key) == 1
  return function(ticket)
    if ticket <= head then return 1 end
    local gone = 0
    if any_gone then
      gone = redis.call('ZCOUNT', mirror_key, '(' .. head, '(' .. ticket)
    end
    return math.max(1, ticket - head - gone)
  end
end

-- told_units: the units the other sub-shards sold and use (sold, and
-- reserved by their live tokens), as this one was told (units_key: s<i>,
-- sold on sub-shard i, pushed by each Complete there and by every tick;
-- u<i>, used there after the last tick). Sold elsewhere only grows, so
-- "sold out" is never said early. A Complete turns a reservation into a
-- sale, so it leaves the used units as they were; only a tick adds to
-- them, and it tells every sub-shard (an expired token's, gone between
-- ticks, count until the next), so the units left are never said more
-- than they are.
local function told_units(units_key)
  local sold, used = 0, 0
  local told = redis.call('HGETALL', units_key)
  for i = 1, #told, 2 do
    if string.byte(told[i], 1) == 115 then -- 's'
      sold = sold + tonumber(told[i + 1])
    else
      used = used + tonumber(told[i + 1])
    end
  end
  return sold, used
end

-- spread_counts: the counts units() reads (shared.lua) for a sub-shard of
-- a room with stock, over the whole room: its own units sold and used
-- plus the others' (told_units). Without stock nothing is read.
local function spread_counts(stock, per, stats_key, tok_key, units_key)
  local counts = {per = per}
  if stock <= 0 then return counts end
  local c = redis.call('HMGET', stats_key, 'sold', 'completed')
  local own_sold = units_sold(c[1], c[2])
  local told_sold, told_used = told_units(units_key)
  counts.sold = own_sold + told_sold
  counts.used = math.max(counts.sold, own_sold + live_tokens(tok_key) * per + told_used)
  return counts
end

-- user_call_begin: what spread_enter and spread_status read first, once
-- a call, of their sub-shard (both take the same KEYS): nil and the
-- refusal when the caller's layout is not the sub-shard's; else the
-- call's reading: the settings it needs, the clock, the positions, the
-- units sold and used over the room (read once: neither call sells or
-- issues), and bought[j] == 1 for each users[j] whose order completed
-- under one order per buyer (a user's orders are all on its sub-shard, so
-- its buyers set is the room's for it).
local function user_call_begin(KEYS, layout, users)
  local cfg = redis.call('HMGET', KEYS[1], 'layout', 'abandon_ms', 'head', 'one_order', 'stock', 'units')
  local refused = sub_refusal(cfg[1], layout)
  if refused then return nil, refused end
  local head, stock = tonumber(cfg[3] or '0'), tonumber(cfg[5] or '0')
  local now = now_ms()
  local r = {
    abandon_s = abandon_secs(cfg[2]), stock = stock, now = now, s = math.floor(now / 1000),
    counts = spread_counts(stock, per_order(cfg[6]), KEYS[5], KEYS[3], KEYS[9]),
    positions = spread_positions(KEYS[6], head), bought = {},
  }
  if cfg[4] == '1' then
    r.bought = redis.call('SMISMEMBER', KEYS[8], unpack(users))
  end
  return r
end
