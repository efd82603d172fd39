-- The top of the Lua library (library.go), shared by its functions: one
-- place for the token entry format and the Redis clock. constants.lua,
-- loaded before it, holds the Go constants the code needs.
--
-- An entry is "token|state|lease|lease_until_ms|expires_at_ms", state being
-- "new" (issued, its holder not told yet), "shown" (told once), "ready"
-- (confirmed) or "held" (claimed). Unconfirmed (new, shown), expires_at is
-- the first-use deadline and lease_until the end of the full TTL that a
-- confirmation or a claim gives it; ready, lease and lease_until are empty
-- and 0. The token of a buyer who asked to be told of its turn, or was sent
-- a return link, has a sixth field, its link (NoticeStore): "n" when it
-- came with a notice (Notified starts its first-use deadline), "w" when
-- its holder was watching, followed by the return link's nonce once one
-- was sent. Every other entry has five fields, so it pays nothing for it.

-- keep_hash_table: a hash read many fields at a time (HMGET of the
-- settings, the bucket) stays a hash table. Redis keeps a small hash as a
-- listpack, where every field read scans the list; one value longer than
-- hash-max-listpack-value (64 bytes by default) turns it into a hash table
-- for good, where a read is one lookup.
local function keep_hash_table(key)
  redis.call('HSET', key, HASH_TABLE_FIELD, HASH_TABLE_NOTE)
end

-- push_all appends its other arguments to t.
local function push_all(t, ...)
  for i = 1, select('#', ...) do
    t[#t + 1] = select(i, ...)
  end
end

-- pace_fold: the pace sums p (its first 8 values, in waitroom.PaceSums'
-- order, strings or nil) with what Admit measured since it last folded
-- them, as waitroom.PaceSums.Add: a, its ticks' sums (a_time, a_regular,
-- a_admitted, a_abandoned: numbers), whose a_time decays p; and the
-- counters' growth from the fold's marks (m_seq, m_left, m_left_after,
-- m_no_shows: strings or nil) to now (seq, left, left_after, no_shows).
-- nil without an arrival mark (a bucket older than the marks): nothing to
-- fold into. Another mark missing counts no growth.
local function pace_fold(p, a, marks, now)
  if not marks[1] then return nil end
  local function grown(i) return now[i] - tonumber(marks[i] or now[i]) end
  local d = math.exp(-a[1] / PACE_WINDOW_S)
  local added = {a[1], a[2], a[3], a[4], grown(4), grown(1), grown(2), grown(3)}
  local out = {}
  for i = 1, 8 do
    out[i] = tonumber(p[i] or '0') * d + added[i]
  end
  return out
end

-- pace_fold_writes adds to writes (the bucket's HSET) the fold of a, a
-- tick's measured sums (a_time, a_regular, a_admitted, a_abandoned), into
-- the bucket's decayed sums, and the fold's new marks: the counters now
-- (seq, left, left_after, no_shows) at now_us. Something measured is
-- folded; a room that keeps up has nothing pending at its ticks and only
-- moves the marks.
local function pace_fold_writes(bucket_key, writes, a, now, now_us)
  if a[1] > 0 then
    local m = redis.call('HMGET', bucket_key, 'p_time', 'p_regular', 'p_admitted', 'p_abandoned', 'p_no_shows', 'p_arrivals', 'p_left', 'p_left_after',
      'm_seq', 'm_left', 'm_left_after', 'm_no_shows')
    local p = pace_fold(m, a, {m[9], m[10], m[11], m[12]}, now)
    if p then
      push_all(writes, 'p_time', p[1], 'p_regular', p[2], 'p_admitted', p[3], 'p_abandoned', p[4], 'p_no_shows', p[5],
        'p_arrivals', p[6], 'p_left', p[7], 'p_left_after', p[8])
    end
    push_all(writes, 'a_time', 0, 'a_regular', 0, 'a_admitted', 0, 'a_abandoned', 0)
  end
  push_all(writes, 'f_us', now_us, 'm_seq', now[1], 'm_left', now[2], 'm_left_after', now[3], 'm_no_shows', now[4])
end

-- counter: a counter key's value; 0 when absent.
local function counter(key)
  return tonumber(redis.call('GET', key) or '0')
end

-- clock_us: the Redis clock in microseconds, the one clock of all
-- instances. It is the library's only reading of the time: every function
-- takes the time from it (or from now_ms, which reads it).
local function clock_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- now_ms: the Redis clock (clock_us) in whole milliseconds.
local function now_ms()
  return math.floor(clock_us() / 1000)
end

-- parse_entry splits a stored entry; nil when absent. Only an entry with
-- a link (its sixth field) is matched a second time.
local function parse_entry(v)
  if not v then return nil end
  local token, state, lease, lease_until, expires_at =
    string.match(v, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)$')
  local link
  if not token then
    token, state, lease, lease_until, expires_at, link =
      string.match(v, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)$')
    if not token then return nil end
  end
  return {token = token, state = state, lease = lease,
          lease_until = tonumber(lease_until), expires_at = tonumber(expires_at), link = link}
end

-- format_entry is parse_entry's inverse; %d keeps all digits of the
-- millisecond times (Lua's default number format keeps only 14).
local function format_entry(e)
  local v = string.format('%s|%s|%s|%d|%d', e.token, e.state, e.lease, e.lease_until, e.expires_at)
  if e.link then
    return v .. '|' .. e.link
  end
  return v
end

-- unsettled: a hold whose order may still be settled: its lease runs,
-- or ran out less than SETTLE_WINDOW_MS ago, while its gate may still be
-- retrying a Complete that met an outage. Until then the token keeps its
-- unit, is not cleaned up and no other claim may take it.
local function unsettled(e, now)
  return e.state == 'held' and e.lease_until + SETTLE_WINDOW_MS > now
end

-- active_score: cleanup may drop an entry only once its expiry has passed
-- and its hold, if any, is abandoned (unsettled), so a sold unit cannot
-- be handed back before its order's Complete lands.
local function active_score(e)
  if e.state == 'held' then return math.max(e.expires_at, e.lease_until + SETTLE_WINDOW_MS) end
  return e.expires_at
end

-- live_tokens: the token entries not spent, given up or cleaned up yet:
-- the live tokens, each a reservation of an order's units when stock is
-- tracked, and those past their time that cleanup has not reached, which
-- Admit cleans up before it counts (every tick of a room with tokens, at
-- least once a second). So between an expiry and that cleanup a token
-- still reserves its units: never fewer units reserved than live tokens
-- take. The hash's one other field is TOK_HASH_TABLE (issue_tokens),
-- absent from a hash written before it existed.
local function live_tokens(tok_key)
  local n = redis.call('HLEN', tok_key)
  if n == 0 then return 0 end
  return n - redis.call('HEXISTS', tok_key, TOK_HASH_TABLE)
end

-- issue_tokens writes token entries (user, entry, user, entry, …) and
-- keeps the token hash a hash table: every Enter, Status and Admit reads
-- its users' entries in it, and Redis keeps a hash of up to
-- hash-max-listpack-entries (512 by default) short entries as a listpack,
-- where each read scans the list (keep_hash_table). Its field
-- TOK_HASH_TABLE starts with a space, which no user id has.
local function issue_tokens(tok_key, entries)
  entries[#entries + 1] = TOK_HASH_TABLE
  entries[#entries + 1] = HASH_TABLE_NOTE
  redis.call('HSET', tok_key, unpack(entries))
end

-- drop_tokens deletes the token entries of users and the active entries
-- members (each a user's own, or an Admit call's). When no token is left,
-- the whole active index goes: its other entries (Admit calls' whose
-- tokens are all gone) index nothing, and a room without tokens gets no
-- cleanup tick that would remove them (Work).
local function drop_tokens(tok_key, active_key, users, members)
  for from = 1, #users, 500 do
    redis.call('HDEL', tok_key, unpack(users, from, math.min(from + 499, #users)))
  end
  if #users > 0 and live_tokens(tok_key) == 0 then
    redis.call('DEL', tok_key, active_key)
    return
  end
  for from = 1, #members, 500 do
    redis.call('ZREM', active_key, unpack(members, from, math.min(from + 499, #members)))
  end
end

-- due_tokens reads what cleanup may remove at now (read only): the active
-- entries due (score passed), oldest first, as many as hold at most budget
-- users (at least one entry), and the users among them whose token is past
-- its time, with their entries. A due entry is a user, or a batch (a space,
-- then the users one Admit call issued tokens to, space-separated: user ids
-- have no spaces); a user in it whose entry has a later active score since
-- (confirmed, claimed, or issued again) is indexed by a later entry, and
-- stays.
local function due_tokens(tok_key, active_key, now, budget)
  local members, users, seen = {}, {}, {}
  -- Pages of a few entries: an entry may name 500 users of 128
  -- characters, so the budget in entries could be a reply of megabytes.
  local offset, full = 0, false
  while not full and #users < budget do
    local page = math.min(64, budget - #users)
    local due = redis.call('ZRANGEBYSCORE', active_key, '-inf', now, 'LIMIT', offset, page)
    if #due == 0 and offset == 0 then
      return due, due, due -- most calls: nothing due, no tables to make
    end
    for i = 1, #due do
      local m = due[i]
      local named = {m}
      if string.byte(m, 1) == 32 then
        named = {}
        for u in string.gmatch(m, '%S+') do
          named[#named + 1] = u
        end
      end
      if #members > 0 and #users + #named > budget then
        full = true
        break
      end
      members[#members + 1] = m
      for _, u in ipairs(named) do
        if not seen[u] then
          seen[u] = true
          users[#users + 1] = u
        end
      end
    end
    if #due < page then
      break
    end
    offset = offset + #due
  end
  local gone, entries = {}, {}
  for from = 1, #users, 500 do
    local to = math.min(from + 499, #users)
    local got = redis.call('HMGET', tok_key, unpack(users, from, to))
    for i = 1, #got do
      local e = parse_entry(got[i])
      if e and active_score(e) <= now then
        gone[#gone + 1] = users[from + i - 1]
        entries[#entries + 1] = e
      end
    end
  end
  return members, gone, entries
end

-- per_order: the units one token reserves and one order sells (cfg
-- units); a room written before the setting existed has one.
local function per_order(units)
  return tonumber(units or '1')
end

-- units_sold: the room's units sold (stats sold, which Complete grows by
-- each order's units); a room whose orders were all completed before it
-- was counted has one unit per completed order.
local function units_sold(sold, completed)
  return tonumber(sold or completed or '0')
end

-- tokens_left: how many more tokens the stock lets live at once: one per
-- whole order's units neither sold nor reserved by the live tokens (so
-- with a stock that is no multiple of per the rest is never reserved).
-- RoomConfig.TokensLeft is the same rule.
local function tokens_left(stock, sold, live, per)
  return math.floor(math.max(0, stock - sold - live * per) / per)
end

-- units: where the stock stands for a user at position (0: not queued).
-- Returns sold_out (fewer units unsold than one order takes), and the
-- units neither sold nor reserved (each live token reserves counts.per)
-- when they are fewer than the orders up to position take, else -1.
-- stock 0: not tracked, never sold out. RoomConfig.Units is the same
-- rule.
--
-- counts keeps what it read for the rest of the call (a table the call
-- makes with per, the room's per_order): an Enter or Status call sells no
-- unit and issues or drops no token, so every user of its batch sees the
-- same counts, read once. A spread room's call fills in sold and used
-- (sold, and reserved by live tokens) of the whole room (spread_counts).
local function units(stock, stats_key, tok_key, position, counts)
  if stock <= 0 then return false, -1 end
  if not counts.sold then
    local c = redis.call('HMGET', stats_key, 'sold', 'completed')
    counts.sold = units_sold(c[1], c[2])
  end
  if stock - counts.sold < counts.per then return true, -1 end
  if position == 0 then return false, -1 end
  if not counts.used then
    counts.used = counts.sold + live_tokens(tok_key) * counts.per
  end
  local left = math.max(0, stock - counts.used)
  if left < position * counts.per then return false, left end
  return false, -1
end

-- confirm writes user's entry e confirmed, when it was not: its full TTL,
-- indexed by an active entry of its own.
local function confirm(tok_key, active_key, user, e)
  if e.state == 'new' or e.state == 'shown' then
    e.state, e.expires_at, e.lease_until = 'ready', e.lease_until, 0
    redis.call('ZADD', active_key, e.expires_at, user)
  end
  redis.call('HSET', tok_key, user, format_entry(e))
end

-- holder_sees: the entry as its holder's own call finds it. The first call
-- that tells the user of an unconfirmed token marks it shown; the next one
-- (a page showing "your turn", an API client's status after admission)
-- confirms it: the full TTL. Returns the live entry, or nil; writes only
-- when the state moves.
local function holder_sees(tok_key, active_key, user, now)
  local e = parse_entry(redis.call('HGET', tok_key, user))
  if not e or e.expires_at <= now then
    return nil
  end
  if e.state == 'new' then
    e.state = 'shown'
    redis.call('HSET', tok_key, user, format_entry(e))
  elseif e.state == 'shown' then
    confirm(tok_key, active_key, user, e)
  end
  return e
end

-- held_entry: user's entry while the hold of token under lease still
-- holds it; nil once it does not (spent, gone, or claimed again after the
-- lease ran out). A lease that ran out but was not claimed again is still
-- this holder's: nobody took the token meanwhile.
local function held_entry(tok_key, user, token, lease)
  local e = parse_entry(redis.call('HGET', tok_key, user))
  if not e or e.token ~= token or e.state ~= 'held' or e.lease ~= lease then
    return nil
  end
  return e
end

-- count_gone counts an expired entry as it is cleaned up: a no-show when
-- its holder never confirmed it, else expired.
local function count_gone(stats_key, e)
  if e.state == 'new' or e.state == 'shown' then
    redis.call('HINCRBY', stats_key, 'no_shows', 1)
  else
    redis.call('HINCRBY', stats_key, 'expired', 1)
  end
end

-- time_left: what the holder is told its token has: the full TTL, also
-- before it confirms (its page confirms as it shows it).
local function time_left(e, now)
  if e.state == 'new' or e.state == 'shown' then
    return e.lease_until - now
  end
  return e.expires_at - now
end

-- A queued user's score is its arrival sequence plus, in the fraction, the
-- second it was last seen (enter or status) modulo 2^20 (about 12 days):
-- the integer part alone orders the queue, so refreshing the fraction never
-- moves anyone, and "last seen" costs no extra key or member. A double
-- keeps the fraction exact while the sequence is below 2^32.
local SEEN_UNITS = 1048576

-- abandon_secs: the room's abandon_after (cfg abandon_ms) in whole
-- seconds, rounded up; rooms written before the setting existed have the
-- default, 5 minutes.
local function abandon_secs(abandon_ms)
  return math.ceil(tonumber(abandon_ms or '300000') / 1000)
end

-- queue_score: the score of a user with sequence seq, seen at second s.
local function queue_score(seq, s)
  return seq + (s % SEEN_UNITS) / SEEN_UNITS
end

-- silent_for: whole seconds since the user with this score was last seen.
local function silent_for(score, s)
  local seen = math.floor((score - math.floor(score)) * SEEN_UNITS + 0.5)
  return (s - seen) % SEEN_UNITS
end

-- is_gone: a user silent for longer than abandon_s seconds has left. Both
-- seconds are whole (rounded down), so the silence really is more than
-- silent_for − 1 ≥ abandon_s: nobody is dropped early.
local function is_gone(score, s, abandon_s)
  return silent_for(score, s) > abandon_s
end

-- notice_silence: how long (whole seconds) a user who asked to be told of
-- its turn may be silent: MaxNoticeSilence, never less than abandon_s.
local function notice_silence(abandon_s)
  return math.max(abandon_s, MAX_NOTICE_SILENCE_S)
end

-- has_gone: whether a queued user with this score has left for silence
-- at second s: silent past abandon_s and, when it asked to be told of its
-- turn (its notice kept in notice_key), past notice_silence; such a
-- user's notice is forgotten. Only a user silent past abandon_s costs a
-- read of the notices.
local function has_gone(notice_key, user, score, s, abandon_s)
  if not is_gone(score, s, abandon_s) then
    return false
  end
  local asked = redis.call('HEXISTS', notice_key, user) == 1
  if asked and not is_gone(score, s, notice_silence(abandon_s)) then
    return false
  end
  if asked then
    redis.call('HDEL', notice_key, user)
  end
  return true
end

-- mark_seen: a queued user (in key, with score) marked seen at second s,
-- or, gone for silence (has_gone), dropped: out of key, counted
-- abandoned. Returns whether it still waits.
local function mark_seen(key, notice_key, stats_key, user, score, s, abandon_s)
  if has_gone(notice_key, user, score, s, abandon_s) then
    redis.call('ZREM', key, user)
    redis.call('HINCRBY', stats_key, 'abandoned', 1)
    return false
  end
  local fresh = queue_score(math.floor(score), s)
  if fresh ~= score then
    redis.call('ZADD', key, 'XX', fresh, user)
  end
  return true
end

-- draw_stage: where the room stands with an opening's draw: 'none' when
-- it never had an opening time (cfg had_opening '0'), so nobody waits in
-- pre or drawn and there is no draw to read; 'pending' until the draw is
-- published; 'done' after it. A room written before had_opening existed
-- reads its draw record, as one that may have had an opening.
local function draw_stage(had_opening, opens_at, draw_key)
  if had_opening == '0' and opens_at == 0 then return 'none' end
  if redis.call('HGET', draw_key, 'state') == 'done' then return 'done' end
  return 'pending'
end

-- early_arrival: whether user came before a scheduled opening and waits
-- for the draw (in pre with a positive score; negative: left during it).
local function early_arrival(pre_key, stage, user)
  if stage ~= 'pending' then return false end
  local s = redis.call('ZSCORE', pre_key, user)
  return s ~= false and tonumber(s) > 0
end

-- ahead_of_q: how many wait ahead of everyone in q: before the draw is
-- done every early arrival (pre), after it those still in drawn.
local function ahead_of_q(pre_key, drawn_key, stage)
  if stage == 'none' then return 0 end
  if stage == 'done' then return redis.call('ZCARD', drawn_key) end
  return redis.call('ZCARD', pre_key)
end

-- waiting_standing: the answer to a waiting user at position: the bare position
-- while the units are not short (one number to send and decode), else
-- {'WAITING', position, units_left}; {'QUEUED_SOLD_OUT'} once the stock is
-- all sold (the place is kept for a restock).
local function waiting_standing(position, stock, stats_key, tok_key, counts)
  local sold_out, left = units(stock, stats_key, tok_key, position, counts)
  if sold_out then
    return {'QUEUED_SOLD_OUT'}
  end
  if left < 0 then
    return position
  end
  return {'WAITING', position, left}
end

-- queued_in: the zset user is queued in (drawn, after the draw, ahead of
-- q; or q), its score, and how many wait ahead of that zset. nil when the
-- user is not queued.
local function queued_in(q_key, pre_key, drawn_key, stage, user)
  if stage == 'done' then
    local score = redis.call('ZSCORE', drawn_key, user)
    if score then return drawn_key, tonumber(score), 0 end
  end
  local score = redis.call('ZSCORE', q_key, user)
  if score then return q_key, tonumber(score), ahead_of_q(pre_key, drawn_key, stage) end
  return nil, nil, 0
end

-- queued_standing: a queued user's standing as enter and status answer
-- it (waiting_standing), the user marked seen now (its score's fraction, rewritten only when the
-- second changed: the place is the same). nil when it is not queued, or
-- was silent too long (mark_seen): then it has gone, out of the queue and
-- counted abandoned, as the admitter would find it.
local function queued_standing(q_key, pre_key, drawn_key, stats_key, tok_key, notice_key, stage, stock, user, now, abandon_s, counts)
  local key, score, ahead = queued_in(q_key, pre_key, drawn_key, stage, user)
  if not score or not mark_seen(key, notice_key, stats_key, user, score, math.floor(now / 1000), abandon_s) then
    return nil
  end
  return waiting_standing(ahead + redis.call('ZRANK', key, user) + 1, stock, stats_key, tok_key, counts)
end

-- where_users: where one enter or status call's users stand, read with a
-- command each for them all: their scores in q; with one_order whether
-- each is a buyer (1 or 0); and their scores in the zset that waits ahead
-- of q, pre until the opening's draw is done (early), drawn after it. A
-- table the stage does not read is nil.
local function where_users(users, q_key, buyers_key, pre_key, drawn_key, one_order, stage)
  local scores = redis.call('ZMSCORE', q_key, unpack(users))
  local bought, early, drawn
  if one_order then
    bought = redis.call('SMISMEMBER', buyers_key, unpack(users))
  end
  if stage == 'pending' then
    early = redis.call('ZMSCORE', pre_key, unpack(users))
  elseif stage == 'done' then
    drawn = redis.call('ZMSCORE', drawn_key, unpack(users))
  end
  return scores, bought, early, drawn
end

-- told_opening: an early arrival's answer: the time to the opening (0 once
-- it has passed, until its draw) and, fifo, its place among those in pre
-- by arrival (those who left during the draw do not count); 0 when
-- random: its place is not drawn yet. score: its score in pre when the
-- caller has read it already, else nil.
local function told_opening(opens_at, now, prequeue, pre_key, user, score)
  local position = 0
  if prequeue == 'fifo' then
    position = redis.call('ZCOUNT', pre_key, '(0', score or redis.call('ZSCORE', pre_key, user))
  end
  return {'SCHEDULED', math.max(0, opens_at - now), position}
end

-- refuses_entries: whether the room takes no new entry at now (its state
-- closed, or past its closes_at); RoomConfig.ClosedAt is the same rule.
local function refuses_entries(state, closes_at_ms, now)
  local closes_at = tonumber(closes_at_ms or '0')
  return state == 'closed' or (closes_at > 0 and now >= closes_at)
end

-- out_of_draw takes user out of the line of a scheduled opening: out of
-- drawn, and out of pre (before the draw began: not an entrant at all;
-- during it: still an entrant, its place recorded, but with a negative
-- score the draw does not queue it).
local function out_of_draw(pre_key, drawn_key, draw_key, user)
  redis.call('ZREM', drawn_key, user)
  local s = redis.call('ZSCORE', pre_key, user)
  if not s then return end
  if not redis.call('HGET', draw_key, 'state') then
    redis.call('ZREM', pre_key, user)
  elseif tonumber(s) > 0 then
    redis.call('ZADD', pre_key, -tonumber(s), user)
  end
end

-- parse_pass: the pass id of passes_key ("n|uses|left|expires_ms|revoked")
-- as {created, uses, left, expires_ms, revoked}; nil when there is none.
local function parse_pass(passes_key, id)
  local v = redis.call('HGET', passes_key, id)
  local created, uses, left, expires_ms, revoked = string.match(v or '', '^(%d+)|(%d+)|(%d+)|(%d+)|([01])$')
  if not created then
    return nil
  end
  return {created = created, uses = tonumber(uses), left = tonumber(left), expires_ms = expires_ms, revoked = revoked}
end

-- held_standing: what a user has that no new place or token changes:
-- ALREADY_ORDERED (one_order: a buyer, whatever else it has), or its own
-- live token (ADMITTED: it gets that one, not a second); nil otherwise.
local function held_standing(tok_key, active_key, buyers_key, one_order, user, now)
  if one_order and redis.call('SISMEMBER', buyers_key, user) == 1 then
    return {'ALREADY_ORDERED'}
  end
  local e = holder_sees(tok_key, active_key, user, now)
  if e then
    return {'ADMITTED', e.token, time_left(e, now)}
  end
  return nil
end

-- pass_holder_standing: what a user who comes with a pass has already,
-- which the pass does not change: held_standing (a live token: the pass
-- keeps its use), or TOKEN_IN_USE (an order holds its expired token and
-- may yet complete it: a new token would reserve a second unit while the
-- first may be sold); nil and the user's old entry, if any, when the
-- pass may let it in.
local function pass_holder_standing(tok_key, active_key, buyers_key, one_order, user, now)
  local held = held_standing(tok_key, active_key, buyers_key, one_order, user, now)
  if held then
    return held
  end
  local old = parse_entry(redis.call('HGET', tok_key, user))
  if old and unsettled(old, now) then
    return {'TOKEN_IN_USE'}
  end
  return nil, old
end

-- read_pass: the pass id (parse_pass) to use at now in a room in state
-- (closing at closes_at_ms); nil and PASS_INVALID when it is unknown,
-- revoked or expired, PASS_USED_UP when no use is left, ROOM_CLOSED when
-- the room takes nobody in.
local function read_pass(passes_key, id, state, closes_at_ms, now)
  local p = parse_pass(passes_key, id)
  if not p or p.revoked == '1' or tonumber(p.expires_ms) <= now then
    return nil, 'PASS_INVALID'
  end
  if p.left <= 0 then
    return nil, 'PASS_USED_UP'
  end
  if refuses_entries(state, closes_at_ms, now) then
    return nil, 'ROOM_CLOSED'
  end
  return p
end

-- use_pass writes pass p (parse_pass) back with by more uses left (-1:
-- one taken; 1: one given back), never more than it was made with.
local function use_pass(passes_key, id, p, by)
  local left = math.max(0, math.min(p.uses, p.left + by))
  redis.call('HSET', passes_key, id, string.format('%s|%d|%d|%s|%s', p.created, p.uses, left, p.expires_ms, p.revoked))
end

-- no_free_slot: why a pass's token may not be issued now with live
-- tokens and the units sold (stock: per units an order): SOLD_OUT when
-- fewer units are unsold than an order takes, NO_FREE_SLOT when the live
-- tokens hold max_active or every unsold unit; nil when it may.
local function no_free_slot(stock, sold, live, per, max_active)
  if stock > 0 then
    if stock - sold < per then
      return 'SOLD_OUT'
    end
    if tokens_left(stock, sold, live, per) == 0 then
      return 'NO_FREE_SLOT'
    end
  end
  if max_active > 0 and live >= max_active then
    return 'NO_FREE_SLOT'
  end
  return nil
end

-- each_user answers a batch of users (enter, status): user i's standing,
-- in out[i + 3], is fast's, or where fast has none (nil), slow's, which
-- first writes what the fast ones gathered (flush) and after which the
-- fast path starts again (restart). named[user] is set once a user is
-- answered: a user named twice in a call goes the slow way.
local function each_user(users, out, named, fast, slow, flush, restart)
  for i = 1, #users do
    local user = users[i]
    local st = fast(i, user)
    if st == nil then
      flush()
      st = slow(user)
      restart()
    end
    out[i + 3] = st
    named[user] = true
  end
  flush()
end

-- recorded_since reports whether a room's history has a sample of second
-- at_s or a later one (another admitter's, in a handover): then nothing
-- is appended, so the history stays in time order, one sample a second.
local function recorded_since(hist_key, at_s)
  local last = redis.call('LINDEX', hist_key, -1) -- false: no history
  return last ~= false and tonumber(string.match(last, '^%d+')) >= at_s
end

-- push_sample appends entry to a room's history (history.go), keeping at
-- most keep, gone ttl_ms after the last.
local function push_sample(hist_key, entry, keep, ttl_ms)
  if redis.call('RPUSH', hist_key, entry) > keep then
    redis.call('LTRIM', hist_key, -keep, -1)
  end
  redis.call('PEXPIRE', hist_key, ttl_ms)
end

-- tell writes one admission call's per-user events to the room's outbox:
-- lists holds the users of OUTBOX_NO_SHOW, OUTBOX_EXPIRED,
-- OUTBOX_ABANDONED and OUTBOX_ADMITTED, an entry of at most
-- OUTBOX_MAX_USERS each, at now (ms). Bounded: past OUTBOX_MAX_ENTRIES the
-- oldest go unrelayed, counted in the bucket's out_lost (which only
-- grows) for the relay to report. The no-shows, expired and abandoned it
-- names are counted in the bucket's named_* (which only grow), beside
-- the stats' counters this call moves: the relay tells the rest (found
-- by a late poll, a claim, a release or a pass) as counts.
local outbox_types = {OUTBOX_NO_SHOW, OUTBOX_EXPIRED, OUTBOX_ABANDONED, OUTBOX_ADMITTED}
local named_fields = {'named_no_shows', 'named_expired', 'named_abandoned'}
local function tell(out_key, bucket_key, now, lists)
  local wrote = false
  for i, users in ipairs(lists) do
    if named_fields[i] and #users > 0 then
      redis.call('HINCRBY', bucket_key, named_fields[i], #users)
    end
    for from = 1, #users, OUTBOX_MAX_USERS do
      redis.call('XADD', out_key, '*', 't', outbox_types[i], 'at', now, 'u',
        table.concat(users, ' ', from, math.min(from + OUTBOX_MAX_USERS - 1, #users)))
      wrote = true
    end
  end
  if wrote then
    local lost = redis.call('XTRIM', out_key, 'MAXLEN', OUTBOX_MAX_ENTRIES)
    if lost > 0 then
      redis.call('HINCRBY', bucket_key, 'out_lost', lost)
    end
  end
end
