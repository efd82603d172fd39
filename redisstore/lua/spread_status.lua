-- spread_status: the Go method that calls it (spread.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  local q_key      = KEYS[2]
  local tok_key    = KEYS[3]
  local active_key = KEYS[4]
  local stats_key  = KEYS[5]
  local mirror_key = KEYS[6]
  local left_key   = KEYS[7]
  local scfg_key, pre_key = KEYS[1], KEYS[11]
  local layout = ARGV[1]

  local users = {unpack(ARGV, 2)}
  local r, refused = user_call_begin(KEYS, layout, users)
  if not r then return refused end
  local abandon_s, stock, counts, now, s = r.abandon_s, r.stock, r.counts, r.now, r.s
  -- One order per buyer: a buyer is told so, whatever else it has (a
  -- place it kept is dropped at the head, as admit drops it).
  local positions, bought = r.positions, r.bought
  local out = {'OK'}
  local gone = {} -- tickets gone in this call, for the caller to tell the other sub-shards
  -- Most polls are of waiting users: their places come from one ZMSCORE
  -- of all the call's users, their "seen" marks go in one ZADD XX; only a
  -- user not queued reads its token.
  local scores = redis.call('ZMSCORE', q_key, unpack(users))
  local seen = {}
  -- early_of: a user's arrival number among the early arrivals of a
  -- scheduled opening (0: none), read for the users neither queued nor
  -- holding a token, in this call: one ZMSCORE of pre, none once the
  -- draw is written (pre then holds nobody waiting: its users are queued).
  local early, opening
  local function early_of(j)
    if not early then
      local c = redis.call('HMGET', scfg_key, 'drawn', 'opens_at_ms', 'prequeue')
      opening = {opens_at = tonumber(c[2] or '0'), fifo = c[3] == 'fifo'}
      early = {}
      if c[1] ~= '1' then
        early = redis.call('ZMSCORE', pre_key, unpack(users))
      end
    end
    return tonumber(early[j] or '0')
  end
  for j, user in ipairs(users) do
    local st = {'NOT_IN_QUEUE'}
    local score = scores[j]
    if bought[j] == 1 then
      st = {'ALREADY_ORDERED'}
    elseif score then
      score = tonumber(score)
      local ticket = math.floor(score)
      if has_gone(KEYS[10], user, score, s, abandon_s) then
        -- Silent past abandon_after (past notice_silence, who asked to be
        -- told of its turn): gone, as the admitter would find it.
        spread_abandon(q_key, stats_key, mirror_key, left_key, user, ticket)
        gone[#gone + 1] = ticket
      else
        local fresh = queue_score(ticket, s)
        if fresh ~= score then
          seen[#seen + 1] = fresh
          seen[#seen + 1] = user
        end
        st = waiting_standing(positions(ticket), stock, stats_key, tok_key, counts)
      end
    else
      local e = holder_sees(tok_key, active_key, user, now)
      local arrival = (not e) and early_of(j) or 0
      if e then
        st = {'ADMITTED', e.token, time_left(e, now)}
      elseif arrival > 0 then
        -- An early arrival: told the opening, with its arrival number
        -- (fifo: the caller counts the other sub-shards' before it).
        st = early_told(pre_key, opening.opens_at, opening.fifo, arrival, now)
        st[4] = arrival
      end
    end
    out[#out + 1] = st
  end
  if #seen > 0 then
    redis.call('ZADD', q_key, 'XX', unpack(seen))
  end
  for _, t in ipairs(gone) do
    out[#out + 1] = t
  end
  return out
end
