-- spread_enter: the Go method that calls it (spread.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  local late_ms = SPREAD_LATE_MS -- a ticket older than this is never placed
  local q_key      = KEYS[2]
  local tok_key    = KEYS[3]
  local active_key = KEYS[4]
  local stats_key  = KEYS[5]
  local mirror_key = KEYS[6]
  local left_key   = KEYS[7]
  local layout, issued_at, refusal = ARGV[1], tonumber(ARGV[2]), ARGV[3]

  local users, tickets = {}, {}
  for i = 4, #ARGV, 2 do
    users[#users + 1] = ARGV[i]
    tickets[#tickets + 1] = tonumber(ARGV[i + 1])
  end
  local r, refused = user_call_begin(KEYS, layout, users)
  if not r then return refused end
  local abandon_s, stock, counts, now, s = r.abandon_s, r.stock, r.counts, r.now, r.s
  local positions, bought = r.positions, r.bought
  local late = now > issued_at + late_ms
  local out = {'OK'}
  local gone = {} -- tickets gone in this call, for the caller to tell the other sub-shards

  -- The call's users read at once: their places and token entries. Most
  -- have neither (new) or only a place (a refresh); only a user with an
  -- entry, or one silent past abandon_after, goes the whole way.
  local scores = redis.call('ZMSCORE', q_key, unpack(users))
  local entries = redis.call('HMGET', tok_key, unpack(users))
  local seen = {} -- ZADD XX's score, user, …: the refreshes' "seen" marks
  local places = {} -- ZADD's score, user, …: the new places
  local full = 0

  -- standing: a user's standing when it has ordered (one order per
  -- buyer: whatever else it has), holds a live token or is queued
  -- (marked seen); nil otherwise. One silent too long has gone (has_gone):
  -- it is counted, its ticket is gone, and it may queue anew.
  local function standing(j, user)
    if bought[j] == 1 then
      return {'ALREADY_ORDERED'}
    end
    if entries[j] then
      local e = holder_sees(tok_key, active_key, user, now)
      if e then
        return {'ADMITTED', e.token, time_left(e, now)}
      end
    end
    local score = scores[j]
    if not score then return nil end
    score = tonumber(score)
    local ticket = math.floor(score)
    if has_gone(KEYS[10], user, score, s, abandon_s) then
      spread_abandon(q_key, stats_key, mirror_key, left_key, user, ticket)
      gone[#gone + 1] = ticket
      return nil
    end
    local fresh = queue_score(ticket, s)
    if fresh ~= score then
      seen[#seen + 1] = fresh
      seen[#seen + 1] = user
    end
    return waiting_standing(positions(ticket), stock, stats_key, tok_key, counts)
  end

  -- Each user came with a ticket, or with none (0: the counter refused
  -- it, for refusal). A user with a standing keeps it, and its ticket is
  -- gone; so is the ticket of one refused (closed, then sold out: fewer
  -- units unsold than an order takes, then full, as enter checks them),
  -- and a ticket too late (the admitter may have passed it: placing it
  -- would reorder); any other ticket is placed.
  local was_empty = redis.call('EXISTS', q_key) == 0
  local sold_out = units(stock, stats_key, tok_key, 0, counts)
  for j, user in ipairs(users) do
    local ticket = tickets[j]
    local st = standing(j, user)
    if not st and ticket == 0 and (refusal == 'ROOM_CLOSED' or refusal == 'INVITE_ONLY') then
      st = {refusal}
    elseif not st and sold_out then
      st = {'SOLD_OUT'}
    elseif not st and ticket == 0 then
      st = {refusal}
      if refusal == 'QUEUE_FULL' then full = full + 1 end
    elseif not st and late then
      st = {'LATE'}
    end
    if st then
      if ticket > 0 then
        spread_gone(mirror_key, left_key, ticket)
        gone[#gone + 1] = ticket
      end
    else
      places[#places + 1] = queue_score(ticket, s)
      places[#places + 1] = user
      st = waiting_standing(positions(ticket), stock, stats_key, tok_key, counts)
    end
    out[#out + 1] = st
  end
  if #seen > 0 then
    redis.call('ZADD', q_key, 'XX', unpack(seen))
  end
  if #places > 0 then
    redis.call('ZADD', q_key, unpack(places))
    redis.call('HINCRBY', stats_key, 'entered', #places / 2)
  end
  if full > 0 then
    redis.call('HINCRBY', stats_key, 'full', full)
  end
  -- The caller wakes the admitter when the whole room was empty.
  out[#out + 1] = (#places > 0 and was_empty) and 1 or 0
  for _, t in ipairs(gone) do
    out[#out + 1] = t
  end
  return out
end
