-- admit: the Go method that calls it (admit.go) says its KEYS, ARGV and
-- replies.

return function(KEYS, ARGV)
  local max_skips = MAX_SKIPS -- abandoned users skipped per call, at most
  local max_pace_step_s = MAX_PACE_STEP_S -- waitroom.MaxPaceStep
  local pace_fold_us = 1000000 -- the pace sums take a second's ticks at a time

  local cfg_key    = KEYS[1]
  local bucket_key = KEYS[2]
  local q_key      = KEYS[3]
  local tok_key    = KEYS[4]
  local active_key = KEYS[5]
  local stats_key  = KEYS[6]
  local seq_key    = KEYS[7]
  local buyers_key = KEYS[8]
  local drawn_key  = KEYS[9]
  local draw_key   = KEYS[10]
  local notice_key = KEYS[11]
  local out_key    = KEYS[12]
  local tokens     = ARGV

  local cfg = redis.call('HMGET', cfg_key, 'state', 'rate', 'slice_ms', 'quota', 'ttl_ms', 'max_active', 'stock', 'one_order',
    'abandon_ms', 'first_use_ms', 'opens_at_ms', 'had_opening', 'units')
  local state = cfg[1]
  if not state then
    return {'ROOM_NOT_FOUND'}
  end
  local rate       = tonumber(cfg[2]) -- users per second
  local slice_ms   = tonumber(cfg[3])
  local quota      = tonumber(cfg[4]) -- per-call cap: ceil(rate × slice)
  local ttl_ms     = math.floor(tonumber(cfg[5]))
  local max_active = tonumber(cfg[6]) -- 0: no cap
  local stock      = tonumber(cfg[7] or '0') -- units in all; 0: not tracked
  local one_order  = cfg[8] == '1'
  local abandon_s  = abandon_secs(cfg[9])
  local first_ms   = math.min(math.floor(tonumber(cfg[10] or cfg[5])), ttl_ms)
  local opens_at   = tonumber(cfg[11] or '0') -- ms; 0: not scheduled
  -- Users per batched command: unpack must stay below Lua's C stack limit
  -- (8000 values).
  local batch = 500

  -- Microseconds keep the bucket exact at high rates and short ticks.
  local now_us = clock_us()
  local now = math.floor(now_us / 1000)

  local b = redis.call('HMGET', bucket_key, 'last_us', 'carry', 'made_up', 'a_time', 'a_regular', 'a_admitted', 'a_abandoned', 'f_us',
    HASH_TABLE_FIELD, 'notices', 'outbox')

  -- The per-user events (OutboxStore): only a room whose bucket asks for
  -- them (set_outbox) names its users, each list in the order met, and
  -- writes them to its outbox as it returns (tell); any other room pays
  -- one more field of the HMGET above and a test of events here and there.
  local events = b[11] == '1'
  local told_no_show, told_expired, told_abandoned, told_admitted
  if events then
    told_no_show, told_expired, told_abandoned, told_admitted = {}, {}, {}, {}
  end

  -- Clean up tokens whose expiry (and lease, when held) has passed.
  -- Batched commands, not one per user: a big tick blocks Redis for less
  -- time. One that was never confirmed nor claimed is a no-show.
  local due, gone, gone_entries = due_tokens(tok_key, active_key, now, math.max(1000, 2 * quota))
  local no_shows = 0
  for i = 1, #gone_entries do
    local gone_state = gone_entries[i].state
    if gone_state == 'new' or gone_state == 'shown' then
      no_shows = no_shows + 1
      if events then told_no_show[#told_no_show + 1] = gone[i] end
    elseif events then
      told_expired[#told_expired + 1] = gone[i]
    end
  end
  drop_tokens(tok_key, active_key, gone, due)
  local expired = #gone - no_shows
  if no_shows > 0 then
    redis.call('HINCRBY', stats_key, 'no_shows', no_shows)
  end

  -- The counters this call reads, in one command.
  local counts = redis.call('HMGET', stats_key, 'admitted', 'no_shows', 'completed', 'left', 'left_after', 'sold')
  local admitted_before = tonumber(counts[1] or '0')
  local out = {'OK', quota, counter(seq_key), admitted_before, admitted_before, 0, math.floor(rate * 1000000), 0, 0}
  local slice_users = rate * slice_ms / 1000 -- one slice's worth of users

  -- No-shows not yet made up: each is admitted again, at most as fast again
  -- as the rate (so never above 2 × rate). With max_active the slots they
  -- free are refilled within the rate instead, and with nobody waiting there
  -- is nobody to make them up with: then nothing is owed.
  local made_up = tonumber(b[3] or '0')
  -- The drawn early arrivals go first, then the queue; a room that never
  -- had an opening has nobody drawn.
  local stage = draw_stage(cfg[12], opens_at, draw_key)
  local waiting = redis.call('ZCARD', q_key)
  if stage ~= 'none' then
    waiting = waiting + redis.call('ZCARD', drawn_key)
  end
  local no_shows_total = tonumber(counts[2] or '0')
  if max_active > 0 or waiting == 0 then
    made_up = no_shows_total
  end
  local owed = math.max(0, no_shows_total - made_up)
  if owed > 0 then
    -- The next call may admit up to twice as many: ask for the tokens.
    out[2] = 2 * quota
    out[7] = math.floor(2 * rate * 1000000)
  end

  -- A scheduled room admits nobody until its draw is done: before the
  -- opening it waits, after it the Store makes the draw (DRAW) first.
  local scheduled = opens_at > 0 and stage ~= 'done'
  if state == 'paused' or scheduled then
    -- Admit nobody and save nothing up, so resuming does not burst.
    redis.call('HSET', bucket_key, 'last_us', now_us, 'carry', 0, 'made_up', made_up)
    out[1] = 'PAUSED'
    if scheduled then
      out[1] = 'SCHEDULED'
      if now >= opens_at then out[1] = 'DRAW' end
    end
  else
    local allow, extra
    if not b[1] then
      -- First call ever: start the clock with an empty bucket.
      allow, extra = 0, 0
    else
      -- A clock that stepped back (failover) counts as no time passed.
      local elapsed_us = math.max(0, now_us - tonumber(b[1]))
      allow = tonumber(b[2]) + elapsed_us * rate / 1000000
      -- Making up no-shows at most doubles this call's share of the rate.
      extra = math.min(owed, math.min(elapsed_us * rate / 1000000, slice_users))
    end

    -- The epsilon absorbs float error (14.999999… users is 15).
    local n = math.min(math.floor(allow + extra + 1e-9), quota + math.floor(extra + 1e-9), waiting)
    if max_active > 0 or stock > 0 then
      local live = live_tokens(tok_key)
      if max_active > 0 then
        n = math.min(n, math.max(0, max_active - live))
      end
      if stock > 0 then
        -- Each live token reserves an order's units: reservations + sales
        -- stay within the stock.
        n = math.min(n, tokens_left(stock, units_sold(counts[6], counts[3]), live, per_order(cfg[13])))
      end
    end
    if n > 0 and #tokens == 0 then
      -- The Store expected nobody to be admitted: ask for the tokens rather
      -- than lose this tick. The bucket is left as it was.
      if expired > 0 then
        redis.call('HINCRBY', stats_key, 'expired', expired)
      end
      if events then
        tell(out_key, bucket_key, now, {told_no_show, told_expired, told_abandoned, told_admitted})
      end
      return {'MORE', n}
    end
    -- Of the rate's share, what a call with enough tokens would admit: a
    -- short call carries the users it could not issue, beyond the cap, for
    -- the Store's next call to admit.
    local share = math.min(n, math.floor(allow + 1e-9))
    if n > #tokens then
      out[9] = 1
      n = #tokens
    end

    local issued, skipped, late_no_shows = 0, 0, 0
    if n > 0 then
      -- Users who asked to be told of their turn (NoticeStore): only a room
      -- whose bucket says some may have (set_notice) reads the notices, and
      -- forgets the mark once there are none.
      local notices = b[10] == '1'
      if notices and redis.call('EXISTS', notice_key) == 0 then
        notices = false
        redis.call('HDEL', bucket_key, 'notices')
      end
      -- Pop the head; users silent past abandon_after have gone (past
      -- notice_silence, who asked to be told): they are dropped and
      -- counted, and take no share of the rate. Each pop is O(log N); at
      -- most max_skips are skipped per call. Every popped user's notice is
      -- forgotten: it was kept until the turn, whatever the turn brings;
      -- an admitted user's comes back with its admission (asked).
      local users, asked, told = {}, {}, {}
      local s = math.floor(now_us / 1000000)
      while #users < n and skipped < max_skips do
        local want = math.min(n - #users, max_skips - skipped)
        local popped = {} -- user, score, …
        if stage ~= 'none' then
          popped = redis.call('ZPOPMIN', drawn_key, want)
        end
        if #popped == 0 then
          popped = redis.call('ZPOPMIN', q_key, want)
        end
        waiting = waiting - #popped / 2
        if #popped == 0 then
          break
        end
        if not notices then
          for i = 1, #popped, 2 do
            if is_gone(tonumber(popped[i + 1]), s, abandon_s) then
              skipped = skipped + 1
              if events then told_abandoned[#told_abandoned + 1] = popped[i] end
            else
              users[#users + 1] = popped[i]
            end
          end
        else
          local names = {}
          for i = 1, #popped, 2 do
            names[#names + 1] = popped[i]
          end
          local kept = redis.call('HMGET', notice_key, unpack(names)) -- false: none
          for i = 1, #popped, 2 do
            local user, channels, limit = popped[i], kept[(i + 1) / 2], abandon_s
            if channels then
              told[#told + 1] = user
              limit = notice_silence(abandon_s)
            end
            if is_gone(tonumber(popped[i + 1]), s, limit) then
              skipped = skipped + 1
              if events then told_abandoned[#told_abandoned + 1] = user end
            else
              users[#users + 1] = user
              asked[user] = channels or nil
            end
          end
        end
      end
      if skipped > 0 then
        redis.call('HINCRBY', stats_key, 'abandoned', skipped)
      end
      for from = 1, #told, batch do
        redis.call('HDEL', notice_key, unpack(told, from, math.min(from + batch - 1, #told)))
      end
      -- Every new entry is its token followed by the same ready state and
      -- expiry: format that tail once.
      -- A new token lives until the first-use deadline unless its holder
      -- confirms it or claims it; then until the end of its TTL, kept in
      -- lease_until meanwhile. Right after an opening both count from the
      -- end of the early arrivals' first polls (token_start).
      -- The entrants are read only right after an opening.
      local early = after_opening(now, opens_at) and tonumber(redis.call('HGET', draw_key, 'entrants') or '0') or 0
      local start = token_start(now, opens_at, early)
      local expires_at = start + first_ms
      local suffix = format_entry({token = '', state = 'new', lease = '', lease_until = start + ttl_ms, expires_at = expires_at})
      -- A buyer who asked to be told is not watching: its first-use
      -- deadline runs from the notice (notified), at most
      -- notified_first_use_within from now meanwhile; its entry has its
      -- link (shared.lua) and an active entry of its own, as notified moves it.
      local told_ms -- read for the first such buyer
      for from = 1, #users, batch do
        local to = math.min(from + batch - 1, #users)
        local olds = redis.call('HMGET', tok_key, unpack(users, from, to))
        local bought = {}
        if one_order then
          bought = redis.call('SMISMEMBER', buyers_key, unpack(users, from, to))
        end
        local entries, named = {}, {}
        for i = from, to do
          local user = users[i]
          local old = parse_entry(olds[i - from + 1])
          -- No token for a user who ordered already (queued again by a
          -- failover that lost the admission): it leaves the queue. None
          -- either for one who holds a live token (Enter does not queue
          -- such users), or one an order holds that may yet be completed:
          -- it keeps that one and takes no share of the rate.
          if bought[i - from + 1] ~= 1 and not (old and (old.expires_at > now or unsettled(old, now))) then
            if old and (old.state == 'new' or old.state == 'shown') then
              late_no_shows = late_no_shows + 1 -- a stale entry cleanup had not reached
              if events then told_no_show[#told_no_show + 1] = user end
            elseif old then
              expired = expired + 1
              if events then told_expired[#told_expired + 1] = user end
            end
            if events then told_admitted[#told_admitted + 1] = user end
            issued = issued + 1
            local token = tokens[issued]
            entries[#entries + 1] = user
            if asked[user] then
              told_ms = told_ms or math.min(math.floor(tonumber(redis.call('HGET', cfg_key, 'notified_first_use_ms')
                or math.min(DEFAULT_NOTIFIED_FIRST_USE_MS, ttl_ms))), ttl_ms)
              local e = {token = token, state = 'new', lease = '', lease_until = start + ttl_ms, expires_at = start + told_ms, link = 'n'}
              entries[#entries + 1] = format_entry(e)
              redis.call('ZADD', active_key, e.expires_at, user)
              out[#out + 1] = {user, asked[user]}
            else
              entries[#entries + 1] = token .. suffix
              named[#named + 1] = user
              out[#out + 1] = user
            end
          end
        end
        if #entries > 0 then
          issue_tokens(tok_key, entries)
        end
        if #named > 0 then
          -- One active entry for them all (due_tokens reads it): they
          -- share the expiry, and one entry costs what one user's would.
          redis.call('ZADD', active_key, expires_at, ' ' .. table.concat(named, ' '))
        end
      end
      if late_no_shows > 0 then
        redis.call('HINCRBY', stats_key, 'no_shows', late_no_shows)
      end
      if issued > 0 then
        out[5] = redis.call('HINCRBY', stats_key, 'admitted', issued)
      end
    end
    -- Carry what was allowed but not admitted, as memstore's carryCap: with
    -- users still waiting at most one slice's worth plus one user (the
    -- fraction towards the next admission, which a slow room needs whole,
    -- and what a late tick's quota left), with nobody waiting at most one
    -- user (idle time saves up no burst). Admissions beyond the allowance
    -- made up no-shows.
    local regular = math.min(issued, math.floor(allow + 1e-9))
    local carry_cap = 1
    if waiting > 0 then
      carry_cap = slice_users + 1
    end
    local unissued = 0
    if out[9] == 1 then
      unissued = math.max(0, share - regular)
    end
    local carry = unissued + math.min(allow - regular - unissued, carry_cap)
    out[6] = math.floor(carry * 1000000)
    -- Those waiting now: the count before, less those popped above.
    out[8] = waiting

    -- The pace (waitroom.PaceSums). What this tick did, when users still
    -- wait after it, adds to what was measured since the last fold (a_*);
    -- once a pace_fold_us, or when the room has kept up, that is folded into
    -- the decayed sums (p_*), with the arrivals, leaves and no-shows the
    -- counters grew by since the fold's marks (m_*). Ten ticks a second
    -- write four numbers each and the fold the eight floats once: the
    -- ticks of one fold decay together, which shifts the sums by less than
    -- a tenth of that second's share of the window. Stats folds what is
    -- pending as it reads (pace_fold).
    local writes = {'last_us', now_us, 'carry', carry, 'made_up', made_up + issued - regular}
    local a_time, a_regular = tonumber(b[4] or '0'), tonumber(b[5] or '0')
    local a_admitted, a_abandoned = tonumber(b[6] or '0'), tonumber(b[7] or '0')
    if b[1] and waiting > 0 then
      a_time = a_time + math.min(math.max(0, now_us - tonumber(b[1])) / 1000000, max_pace_step_s)
      a_regular = a_regular + regular / rate
      a_admitted = a_admitted + issued
      a_abandoned = a_abandoned + skipped
    end
    if b[1] and waiting > 0 and now_us - tonumber(b[8] or '0') < pace_fold_us then
      push_all(writes, 'a_time', a_time, 'a_regular', a_regular, 'a_admitted', a_admitted, 'a_abandoned', a_abandoned)
    else
      local seq_now = out[3]
      local left_now, left_after_now = tonumber(counts[4] or '0'), tonumber(counts[5] or '0')
      local no_shows_now = no_shows_total + late_no_shows
      pace_fold_writes(bucket_key, writes, {a_time, a_regular, a_admitted, a_abandoned},
        {seq_now, left_now, left_after_now, no_shows_now}, now_us)
    end
    redis.call('HSET', bucket_key, unpack(writes))
  end
  if not b[9] then
    keep_hash_table(bucket_key) -- a new bucket, or one written before buckets were kept hash tables
  end

  if expired > 0 then
    redis.call('HINCRBY', stats_key, 'expired', expired)
  end
  if events then
    tell(out_key, bucket_key, now, {told_no_show, told_expired, told_abandoned, told_admitted})
  end
  return out
end
