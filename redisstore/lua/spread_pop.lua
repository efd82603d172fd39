-- spread_pop: the Go method that calls it (spread.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  local batch = 500 -- users per batched command (unpack's stack limit)
  local scfg_key   = KEYS[1]
  local q_key      = KEYS[2]
  local tok_key    = KEYS[3]
  local active_key = KEYS[4]
  local stats_key  = KEYS[5]
  local mirror_key = KEYS[6]
  local buyers_key = KEYS[7]
  local units_key  = KEYS[8]
  local notice_key = KEYS[9]
  local out_key    = KEYS[10]
  local layout, fence, cutoff, head = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  local n_tokens, n_leavers = tonumber(ARGV[5]), tonumber(ARGV[6])
  local self, n_figures = tonumber(ARGV[7]), tonumber(ARGV[8])
  local events = ARGV[9] == '1' -- the room's outbox is on: name whom it admits and drops
  local tokens_at = 10
  local leavers_at = tokens_at + n_tokens
  local figures_at = leavers_at + n_leavers

  local cfg = redis.call('HMGET', scfg_key, 'layout', 'fence', 'ttl_ms', 'first_use_ms', 'abandon_ms', 'one_order',
    'notified_first_use_ms')
  local refused = sub_refusal(cfg[1], layout)
  if refused then return refused end
  -- Only the tick that sealed this sub-shard last writes it.
  if tonumber(cfg[2] or '0') ~= fence then
    return {'STALE'}
  end
  local ttl_ms = math.floor(tonumber(cfg[3]))
  local first_ms = math.min(math.floor(tonumber(cfg[4] or cfg[3])), ttl_ms)
  local abandon_s = abandon_secs(cfg[5])
  local now = now_ms()
  local s = math.floor(now / 1000)

  -- The other sub-shards' leavers count in positions here from now on;
  -- those at or before the head matter no more.
  for i = leavers_at, leavers_at + n_leavers - 1, batch do
    local args = {}
    for j = i, math.min(i + batch - 1, leavers_at + n_leavers - 1) do
      args[#args + 1] = ARGV[j]
      args[#args + 1] = ARGV[j]
    end
    redis.call('ZADD', mirror_key, unpack(args))
  end
  redis.call('HSET', scfg_key, 'head', head)
  redis.call('ZREMRANGEBYSCORE', mirror_key, '-inf', head)

  -- The other sub-shards' units (stock): sold only grows (a Complete's
  -- push may have told more already), used is this tick's.
  if n_figures > 0 then
    local sold_fields = {}
    for i = 0, n_figures - 1 do
      if i ~= self then
        sold_fields[#sold_fields + 1] = 's' .. i
      end
    end
    local known = redis.call('HMGET', units_key, unpack(sold_fields))
    local writes, k = {}, 0
    for i = 0, n_figures - 1 do
      if i ~= self then
        k = k + 1
        local sold, used = tonumber(ARGV[figures_at + 2 * i]), tonumber(ARGV[figures_at + 2 * i + 1])
        push_all(writes, 's' .. i, math.max(sold, tonumber(known[k] or '0')), 'u' .. i, used)
      end
    end
    redis.call('HSET', units_key, unpack(writes))
  end

  -- Pop every user up to the cutoff ticket: the merge picked them, in the
  -- room's ticket order. One silent past abandon_after has gone: dropped,
  -- counted, no token.
  local out = {'OK', 0, 0, 0}
  if n_tokens == 0 then
    out[3] = redis.call('ZCARD', q_key)
    out[4] = tonumber(redis.call('HGET', stats_key, 'admitted') or '0')
    return out
  end
  local popped = redis.call('ZRANGEBYSCORE', q_key, '-inf', '(' .. (cutoff + 1), 'WITHSCORES', 'LIMIT', 0, n_tokens)
  -- No token for a user who ordered already (one order per buyer: queued
  -- again by a failover that lost the admission, or while the setting
  -- was off): it leaves the queue, as admit drops it.
  local bought = {}
  if cfg[6] == '1' then
    for i = 1, #popped, 2 * batch do
      local names = {}
      for j = i, math.min(i + 2 * batch - 1, #popped), 2 do
        names[#names + 1] = popped[j]
      end
      push_all(bought, unpack(redis.call('SMISMEMBER', buyers_key, unpack(names))))
    end
  end
  -- Users who asked to be told of their turn (NoticeStore): their
  -- notices, read only while the sub-shard keeps any; each popped user's
  -- is forgotten, whatever its turn brings, and an admitted user's comes
  -- back with its admission. Such a user may be silent for longer
  -- (notice_silence).
  local kept = {}
  local notices = redis.call('EXISTS', notice_key) == 1
  for i = 1, #popped, 2 * batch do
    local names = {}
    for j = i, math.min(i + 2 * batch - 1, #popped), 2 do
      names[#names + 1] = popped[j]
    end
    redis.call('ZREM', q_key, unpack(names))
    if notices then
      push_all(kept, unpack(redis.call('HMGET', notice_key, unpack(names))))
      redis.call('HDEL', notice_key, unpack(names))
    end
  end
  local users, tickets, asked, skipped, told_abandoned = {}, {}, {}, 0, {}
  for i = 1, #popped, 2 do
    local score, channels = tonumber(popped[i + 1]), kept[(i + 1) / 2]
    local limit = abandon_s
    if channels then
      limit = notice_silence(abandon_s)
    end
    if is_gone(score, s, limit) then
      skipped = skipped + 1
      if events then told_abandoned[#told_abandoned + 1] = popped[i] end
    elseif bought[(i + 1) / 2] ~= 1 then -- one who ordered leaves the queue, uncounted
      users[#users + 1] = popped[i]
      tickets[#tickets + 1] = math.floor(score)
      asked[#users] = channels or false
    end
  end
  if skipped > 0 then
    redis.call('HINCRBY', stats_key, 'abandoned', skipped)
  end

  -- A new token lives until the first-use deadline unless its holder
  -- confirms or claims it; then until the end of its TTL (admit's entry).
  -- Right after an opening both count from the end of the early
  -- arrivals' first polls (spread_token_start).
  local start = spread_token_start(scfg_key, now)
  local expires_at = start + first_ms
  local suffix = format_entry({token = '', state = 'new', lease = '', lease_until = start + ttl_ms, expires_at = expires_at})
  -- A buyer who asked to be told is not watching: its first-use deadline
  -- runs from the notice (notified), notified_first_use_within at most
  -- meanwhile, in an entry with its link and an active entry of its own,
  -- as admit issues it.
  local told_ms = math.min(math.floor(tonumber(cfg[7] or math.min(DEFAULT_NOTIFIED_FIRST_USE_MS, ttl_ms))), ttl_ms)
  local issued = 0
  for from = 1, #users, batch do
    local to = math.min(from + batch - 1, #users)
    local entries, named = {}, {}
    for i = from, to do
      issued = issued + 1
      local token = ARGV[tokens_at + issued - 1]
      entries[#entries + 1] = users[i]
      if asked[i] then
        local e = {token = token, state = 'new', lease = '', lease_until = start + ttl_ms, expires_at = start + told_ms, link = 'n'}
        entries[#entries + 1] = format_entry(e)
        redis.call('ZADD', active_key, e.expires_at, users[i])
      else
        entries[#entries + 1] = token .. suffix
        named[#named + 1] = users[i]
      end
      out[#out + 1] = users[i]
      out[#out + 1] = tickets[i]
      out[#out + 1] = asked[i] or ''
    end
    issue_tokens(tok_key, entries)
    if #named > 0 then
      redis.call('ZADD', active_key, expires_at, ' ' .. table.concat(named, ' '))
    end
  end
  out[4] = redis.call('HINCRBY', stats_key, 'admitted', issued)
  out[2], out[3] = skipped, redis.call('ZCARD', q_key)
  -- In the sub-shard's own outbox, in this step: an admitter killed after
  -- it loses none of these users' events.
  if events then
    tell(out_key, stats_key, now, {{}, {}, told_abandoned, users})
  end
  return out
end
