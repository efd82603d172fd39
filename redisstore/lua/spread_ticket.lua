-- spread_ticket: the Go method that calls it (spread.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  local cfg_key, seq_key, inflight_key, bucket_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
  local layout, n = ARGV[1], tonumber(ARGV[2])

  local cfg = redis.call('HMGET', cfg_key, 'layout', 'max_queue', 'state', 'closes_at_ms', 'stock', 'units', 'invite_only')
  local refused = control_refusal(cfg_key, cfg[1], layout)
  if refused then return refused end
  -- The room's size, never less than it is: those waiting at the last
  -- tick (counted after its pops) and every ticket since the last one it
  -- found placed. So the room never holds more than max_queue; places
  -- freed since the last tick count from the next.
  local now = now_ms()
  -- A scheduled opening: no ticket before it, none from it until the
  -- draw set the counter past the early arrivals (spread_draw.lua).
  local opening = spread_opening(cfg_key, KEYS[5], n, now)
  if opening then return opening end
  -- A closed room hands out no ticket: nobody takes a new place.
  if refuses_entries(cfg[3], cfg[4], now) then
    return {'OK', 0, now, 0, 'ROOM_CLOSED'}
  end
  -- Nor does an invite-only one: it takes pass holders only.
  if cfg[7] == '1' then
    return {'OK', 0, now, 0, 'INVITE_ONLY'}
  end
  local w = redis.call('HMGET', bucket_key, 'w_waiting', 'w_seq', 'w_sold')
  -- Sold out at the last tick (units sold only grow, so never early; a
  -- restock counts at once): no ticket, so a crowd at a sold-out room
  -- leaves no gaps for the sub-shards to count. The sub-shards also
  -- refuse a ticket once they know it sold out.
  local stock = tonumber(cfg[5] or '0')
  if stock > 0 and stock - tonumber(w[3] or '0') < per_order(cfg[6]) then
    return {'OK', 0, now, 0, 'SOLD_OUT'}
  end
  local seq = counter(seq_key)
  local size = tonumber(w[1] or '0') + seq - tonumber(w[2] or '0')
  local granted = math.max(0, math.min(n, tonumber(cfg[2]) - size))
  if granted == 0 then
    return {'OK', 0, now, 0, 'QUEUE_FULL'}
  end
  -- One INCRBY hands out the call's tickets; they are in flight until
  -- placed (spread_done), and the admitter admits no ticket from the first
  -- one in flight on, so a ticket placed late is never passed by.
  local last = redis.call('INCRBY', seq_key, granted)
  local first = last - granted + 1
  redis.call('ZADD', inflight_key, now, first)
  return {'OK', first, now, granted, 'QUEUE_FULL'}
end
