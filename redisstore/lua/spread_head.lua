-- spread_head: the Go method that calls it (spread.go) says its KEYS,
-- ARGV and replies.
return function(KEYS, ARGV)
  local max_copy = SPREAD_MAX_COPY -- leavers handed to the other sub-shards per tick
  local max_skips = MAX_SKIPS -- abandoned users skipped per tick, at most
  local scfg_key   = KEYS[1]
  local q_key      = KEYS[2]
  local tok_key    = KEYS[3]
  local active_key = KEYS[4]
  local stats_key  = KEYS[5]
  local left_key   = KEYS[6]
  local mirror_key = KEYS[7]
  local units_key  = KEYS[8]
  local notice_key = KEYS[9]
  local out_key    = KEYS[10]
  local layout, fence, quota = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
  local stable, trim_to = tonumber(ARGV[4]), tonumber(ARGV[5])
  local events = ARGV[6] == '1' -- the room's outbox is on: name what it drops

  local cfg = redis.call('HMGET', scfg_key, 'layout', 'fence', 'left_base', 'head', 'abandon_ms')
  local refused = sub_refusal(cfg[1], layout)
  if refused then return refused end
  -- Seal: no tick with an older fence writes here any more, so what this
  -- reads is all an older tick will ever have done here.
  if tonumber(cfg[2] or '0') > fence then
    return {'STALE'}
  end
  redis.call('HSET', scfg_key, 'fence', fence)
  local now = now_ms()

  -- Clean up tokens past their time, as admit does, so the live count is
  -- what max_active checks; one never confirmed nor claimed is a no-show.
  local due, gone, gone_entries = due_tokens(tok_key, active_key, now, math.max(1000, 2 * quota))
  local no_shows = 0
  local told_no_show, told_expired = {}, {}
  for i = 1, #gone_entries do
    local st = gone_entries[i].state
    if st == 'new' or st == 'shown' then
      no_shows = no_shows + 1
      if events then told_no_show[#told_no_show + 1] = gone[i] end
    elseif events then
      told_expired[#told_expired + 1] = gone[i]
    end
  end
  drop_tokens(tok_key, active_key, gone, due)
  if no_shows > 0 then
    redis.call('HINCRBY', stats_key, 'no_shows', no_shows)
  end
  if #gone - no_shows > 0 then
    redis.call('HINCRBY', stats_key, 'expired', #gone - no_shows)
  end

  -- The head of this sub-queue up to the last stable ticket: scores are
  -- ticket + a fraction (queue_score), so below stable + 1. Users silent
  -- too long (has_gone) have gone: dropped, counted, their tickets gone,
  -- so they take no share of the tick (at most max_skips a tick).
  local abandon_s, s = abandon_secs(cfg[5]), math.floor(now / 1000)
  local heads, skipped, told_abandoned = {}, 0, {}
  while #heads < 2 * quota and skipped < max_skips do
    local want = quota - #heads / 2
    local page = redis.call('ZRANGEBYSCORE', q_key, '-inf', '(' .. (stable + 1), 'WITHSCORES', 'LIMIT', #heads / 2, want)
    local silent = {}
    for i = 1, #page, 2 do
      local score = tonumber(page[i + 1])
      if has_gone(notice_key, page[i], score, s, abandon_s) then
        silent[#silent + 1] = page[i]
        spread_gone(mirror_key, left_key, math.floor(score))
      else
        heads[#heads + 1] = page[i]
        heads[#heads + 1] = score
      end
    end
    if #silent == 0 then break end
    redis.call('ZREM', q_key, unpack(silent))
    skipped = skipped + #silent
    if events then push_all(told_abandoned, unpack(silent)) end
  end
  if skipped > 0 then
    redis.call('HINCRBY', stats_key, 'abandoned', skipped)
  end
  -- Named in the sub-shard's own outbox, in the step that counts them
  -- (tell: its named counters beside its stats), so a relay's counts of
  -- the unnamed stay exact and an admitter killed now loses none.
  if events then
    tell(out_key, stats_key, now, {told_no_show, told_expired, told_abandoned, {}})
  end

  -- The leavers every sub-shard has copied (the caller's last tick) leave
  -- the list; the list's first entry is leaver number left_base.
  local base = tonumber(cfg[3] or '0')
  if trim_to > base then
    redis.call('LTRIM', left_key, trim_to - base, -1)
    base = trim_to
    redis.call('HSET', scfg_key, 'left_base', base)
  end
  local leavers = redis.call('LRANGE', left_key, 0, max_copy - 1)

  -- The units: sold here, and what this sub-shard was told of the
  -- others (the tick tells it again when that is behind).
  local c = redis.call('HMGET', stats_key, 'no_shows', 'left', 'left_after', 'entered', 'admitted', 'sold', 'completed')
  local told_sold, told_used = told_units(units_key)
  local out = {'OK', live_tokens(tok_key), redis.call('ZCARD', q_key), base, tonumber(c[1] or '0'),
    tonumber(cfg[4] or '0'), skipped, tonumber(c[2] or '0'), tonumber(c[3] or '0'),
    tonumber(c[4] or '0'), tonumber(c[5] or '0'), units_sold(c[6], c[7]), told_sold, told_used, #leavers}
  for i = 1, #leavers do
    out[#out + 1] = leavers[i]
  end
  for i = 1, #heads, 2 do
    out[#out + 1] = heads[i]
    out[#out + 1] = math.floor(tonumber(heads[i + 1]))
  end
  return out
end
