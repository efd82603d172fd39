-- spread_draw_enter: the Go method that calls it (spread_draw.go) says its
-- KEYS, ARGV and replies.
return function(KEYS, ARGV)
  local scfg_key   = KEYS[1]
  local pre_key    = KEYS[2]
  local q_key      = KEYS[3]
  local tok_key    = KEYS[4]
  local active_key = KEYS[5]
  local stats_key  = KEYS[6]
  local mirror_key = KEYS[7]
  local buyers_key = KEYS[8]
  local units_key  = KEYS[9]
  local layout, opens_at = ARGV[1], tonumber(ARGV[2])

  local cfg = redis.call('HMGET', scfg_key, 'layout', 'state', 'closes_at_ms', 'cap', 'head', 'pre_sealed', 'prequeue',
    'one_order', 'stock', 'units', 'invite_only')
  local refused = sub_refusal(cfg[1], layout)
  if refused then return refused end
  local now = now_ms()
  local sealed, fifo = cfg[6] == '1', cfg[7] == 'fifo'
  local closed = refuses_entries(cfg[2], cfg[3], now)
  local cap = tonumber(cfg[4] or '0')
  local positions = spread_positions(mirror_key, tonumber(cfg[5] or '0'))
  -- Nothing left to sell (a restock's room, as spread_enter reads it).
  local stock = tonumber(cfg[9] or '0')
  local sold_out = units(stock, stats_key, tok_key, 0, spread_counts(stock, per_order(cfg[10]), stats_key, tok_key, units_key))
  local size -- those waiting here, new places included; read at the first new place
  local out, scores, full = {'OK'}, {}, 0
  for i = 3, #ARGV, 2 do
    local user, arrival = ARGV[i], tonumber(ARGV[i + 1])
    local st, score
    score = 0
    local early = tonumber(redis.call('ZSCORE', pre_key, user) or '0')
    local queued = redis.call('ZSCORE', q_key, user)
    local e = holder_sees(tok_key, active_key, user, now)
    if cfg[8] == '1' and redis.call('SISMEMBER', buyers_key, user) == 1 then
      -- One order per buyer: a buyer takes no place, whatever else it has.
      st = {'ALREADY_ORDERED'}
    elseif early > 0 then
      -- Already an early arrival: told the opening again.
      st, score = early_told(pre_key, opens_at, fifo, early, now), early
    elseif e then
      st = {'ADMITTED', e.token, time_left(e, now)}
    elseif queued then
      -- Queued before the room was scheduled: its place stands.
      st = positions(math.floor(tonumber(queued)))
    elseif sealed then
      -- The opening came meanwhile: the caller takes a ticket instead.
      st = {'OPENED'}
    elseif closed then
      st = {'ROOM_CLOSED'}
    elseif cfg[11] == '1' then
      st = {'INVITE_ONLY'} -- pass holders only
    elseif sold_out then
      st = {'SOLD_OUT'}
    else
      size = size or redis.call('ZCARD', pre_key) + redis.call('ZCARD', q_key)
      if size >= cap then
        -- This sub-shard's share of max_queue is taken.
        st = {'QUEUE_FULL'}
        full = full + 1
      else
        size = size + 1
        redis.call('ZADD', pre_key, arrival, user)
        redis.call('HINCRBY', stats_key, 'entered', 1)
        st, score = early_told(pre_key, opens_at, fifo, arrival, now), arrival
      end
    end
    out[#out + 1] = st
    scores[#scores + 1] = score
  end
  if full > 0 then
    redis.call('HINCRBY', stats_key, 'full', full)
  end
  -- Then each user's arrival number (fifo: the caller counts the others').
  for _, score in ipairs(scores) do out[#out + 1] = score end
  return out
end
