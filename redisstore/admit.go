package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom"
)

// admitScript cleans up expired tokens, then turns the head of the queue
// into token holders as the room's token bucket allows.
//
// The bucket keeps the Redis time of the last admission (µs) and a
// fractional carry of users allowed but not yet admitted. A call may admit
// carry + elapsed × rate users, at most quota (= ceil(rate × slice)), as
// many as are queued, within max_active, within the stock (live tokens ×
// units per order + units sold never exceed it), and no more than tokens were
// supplied. What it may admit but does not is carried, up to one slice's
// worth plus one user (rate × slice + 1) while users wait: a fraction of a
// user adds up to a whole one at any rate (0.5/s in 100 ms ticks admits one
// every 20th tick), a late tick's excess is made up, so the average rate is
// exact (175/s in 100 ms ticks admits 17, 18, 17, 18, …), while a stall
// longer than a slice or a pause cannot save up a burst. With nobody
// waiting at most one user is carried: idle time saves up nothing more. The first call ever only starts the
// bucket, empty: it admits nobody, like the first call after a pause, so a
// room's admissions never exceed rate × time since its first call. A paused
// room admits nobody and keeps its bucket empty, so resuming starts at the
// rate, not with a burst. All instances share the bucket, so together they
// admit the room's rate once.
//
// Users at the head silent for longer than abandon_after have gone: the
// script drops them, counts them abandoned and admits the next instead, at
// most waitroom.MaxSkipsPerAdmit per call.
//
// Expired tokens are those whose active score (expiry, or lease if later)
// has passed; at most max(1000, 2 × quota) per call go, more
// than a call can issue, so cleanup keeps up. The tokens one call issues
// share one active entry (due_tokens), not one each.
//
// The bucket also keeps the room's pace (waitroom.PaceSums, p_*) and the
// counters the previous call saw (m_*: arrival sequence, leaves, no-shows),
// so that each call adds what happened since, whichever operation did it.
//
// KEYS[1] cfg
// KEYS[2] bucket
// KEYS[3] q
// KEYS[4] tok
// KEYS[5] active
// KEYS[6] stats
// KEYS[7] seq
// KEYS[8] buyers
// KEYS[9] drawn
// KEYS[10] draw
// ARGV    fresh tokens, one per user this call may admit
//
// Returns one of
//
//	{"OK", quota, seq, admitted_before, admitted_after,
//	 carry_micro, rate_micro, waiting, short,
//	 user1, user2, …}  admitted, in arrival order: the nth has ARGV[n]
//	{"PAUSED", quota, seq, admitted, admitted, 0, rate_micro, 0, 0}  the room is paused
//	{"SCHEDULED", …}  the same shape: a scheduled room before its opening
//	{"DRAW", …}       the same shape: the opening has come and the early
//	                  arrivals wait for their draw (drop.go) before anyone
//	{"MORE", n}  no tokens were supplied but n users can be admitted:
//	             call again with n; nothing but cleanup was written
//	{"ROOM_NOT_FOUND"}
//
// carry_micro and rate_micro are the bucket's carry after the call and the
// rate, in millionths of a user (per second), and waiting the queue's length
// after it, short 1 when the call could have admitted more than the tokens
// it brought: from them the Store supplies the next call about as many
// tokens as it will admit (the quota after a short call, whose allowance
// the carry kept), so that ticks that admit nobody generate none.
//
// seq is the arrival sequence and admitted_before/after the admitted
// counter when the script began and ended; the Store watches them for lost
// writes (lost.go).
var admitScript = newFunction("admit", `
local max_skips = `+strconv.Itoa(waitroom.MaxSkipsPerAdmit)+` -- abandoned users skipped per call, at most
local max_pace_step_s = `+strconv.FormatFloat(waitroom.MaxPaceStep.Seconds(), 'f', -1, 64)+` -- waitroom.MaxPaceStep
local pace_fold_us = 1000000 -- the pace sums take a second's ticks at a time
local opening_spread_ms = `+strconv.FormatInt(waitroom.OpeningSpread.Milliseconds(), 10)+` -- waitroom.OpeningSpread
local max_poll_ms = `+strconv.FormatInt(waitroom.MaxPoll.Milliseconds(), 10)+` -- waitroom.MaxPoll
local opening_poll_ns = `+strconv.FormatInt(int64(time.Second/waitroom.OpeningPolls), 10)+` -- the spread per early arrival: time.Second / waitroom.OpeningPolls

-- token_start: when a token issued now starts its clock (first-use
-- deadline and TTL), as waitroom.TokenStart: right after an opening, at the
-- end of the span over which the early arrivals (the draw's entrants) make
-- their first polls, since a drawn user learns of its token only then.
local function token_start(now, opens_at, draw_key)
  if opens_at <= 0 or now < opens_at or now >= opens_at + max_poll_ms then
    return now
  end
  local early = tonumber(redis.call('HGET', draw_key, 'entrants') or '0')
  local span = math.min(max_poll_ms, math.max(opening_spread_ms, math.floor(early * opening_poll_ns / 1000000)))
  if now < opens_at + span then
    return opens_at + span
  end
  return now
end

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
local tokens     = ARGV

local cfg = redis.call('HMGET', cfg_key, 'state', 'rate', 'slice_ms', 'quota', 'ttl_ms', 'max_active', 'stock', 'one_order', 'abandon_ms', 'first_use_ms', 'opens_at_ms', 'had_opening', 'units')
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

-- Clean up tokens whose expiry (and lease, when held) has passed.
-- Batched commands, not one per user: a big tick blocks Redis for less
-- time. One that was never confirmed nor claimed is a no-show.
local due, gone, gone_entries = due_tokens(tok_key, active_key, now, math.max(1000, 2 * quota))
local no_shows = 0
for i = 1, #gone_entries do
  local state = gone_entries[i].state
  if state == 'new' or state == 'shown' then
    no_shows = no_shows + 1
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
local b = redis.call('HMGET', bucket_key, 'last_us', 'carry', 'made_up', 'a_time', 'a_regular', 'a_admitted', 'a_abandoned', 'f_us', '`+hashTableField+`')
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
    return {'MORE', n}
  end
  -- Of the rate's share, what a call with enough tokens would admit: a
  -- short call carries the users it could not issue, beyond the cap, for
  -- the Store's next call to admit.
  local due = math.min(n, math.floor(allow + 1e-9))
  if n > #tokens then
    out[9] = 1
    n = #tokens
  end

  local issued, skipped, late_no_shows = 0, 0, 0
  if n > 0 then
    -- Pop the head; users silent past abandon_after have gone: they are
    -- dropped and counted, and take no share of the rate. Each pop is
    -- O(log N); at most max_skips are skipped per call.
    local users = {}
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
      for i = 1, #popped, 2 do
        if is_gone(tonumber(popped[i + 1]), s, abandon_s) then
          skipped = skipped + 1
        else
          users[#users + 1] = popped[i]
        end
      end
    end
    if skipped > 0 then
      redis.call('HINCRBY', stats_key, 'abandoned', skipped)
    end
    -- Every new entry is its token followed by the same ready state and
    -- expiry: format that tail once.
    -- A new token lives until the first-use deadline unless its holder
    -- confirms it or claims it; then until the end of its TTL, kept in
    -- lease_until meanwhile. Right after an opening both count from the
    -- end of the early arrivals' first polls (token_start).
    local start = token_start(now, opens_at, draw_key)
    local expires_at = start + first_ms
    local suffix = format_entry({token = '', state = 'new', lease = '', lease_until = start + ttl_ms, expires_at = expires_at})
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
        if bought[i - from + 1] == 1 then
          -- Ordered already (queued again by a failover that lost the
          -- admission): leaves the queue without a token.
        elseif old and (old.expires_at > now or unsettled(old, now)) then
          -- Already holds a live token (Enter does not queue such users),
          -- or one an order holds that may yet be completed: it keeps
          -- that one and takes no share of the rate.
        else
          if old and (old.state == 'new' or old.state == 'shown') then
            late_no_shows = late_no_shows + 1 -- a stale entry cleanup had not reached
          elseif old then
            expired = expired + 1
          end
          issued = issued + 1
          local token = tokens[issued]
          entries[#entries + 1] = user
          entries[#entries + 1] = token .. suffix
          named[#named + 1] = user
          out[#out + 1] = user
        end
      end
      if #entries > 0 then
        issue_tokens(tok_key, entries)
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
    unissued = math.max(0, due - regular)
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
    if a_time > 0 then
      -- Something measured: fold it. A room that keeps up has nothing
      -- pending at its ticks and only moves the marks.
      local m = redis.call('HMGET', bucket_key, 'p_time', 'p_regular', 'p_admitted', 'p_abandoned', 'p_no_shows', 'p_arrivals', 'p_left', 'p_left_after',
        'm_seq', 'm_left', 'm_left_after', 'm_no_shows')
      local p = pace_fold(m, {a_time, a_regular, a_admitted, a_abandoned}, {m[9], m[10], m[11], m[12]},
        {seq_now, left_now, left_after_now, no_shows_now})
      if p then
        push_all(writes, 'p_time', p[1], 'p_regular', p[2], 'p_admitted', p[3], 'p_abandoned', p[4], 'p_no_shows', p[5],
          'p_arrivals', p[6], 'p_left', p[7], 'p_left_after', p[8])
      end
      push_all(writes, 'a_time', 0, 'a_regular', 0, 'a_admitted', 0, 'a_abandoned', 0)
    end
    push_all(writes, 'f_us', now_us, 'm_seq', seq_now, 'm_left', left_now, 'm_left_after', left_after_now, 'm_no_shows', no_shows_now)
  end
  redis.call('HSET', bucket_key, unpack(writes))
end
if not b[9] then
  keep_hash_table(bucket_key) -- a new bucket, or one written before buckets were kept hash tables
end

if expired > 0 then
  redis.call('HINCRBY', stats_key, 'expired', expired)
end
return out
`)

// defaultQuota is how many tokens the first Admit of a room supplies before
// the store has learned the room's quota.
var defaultQuota = waitroom.RoomConfig{}.WithDefaults().TickQuota()

// Admit turns the head of the queue into token holders, as the room's token
// bucket allows, and returns them in arrival order.
//
// Tokens come from crypto/rand in Go (Lua has no secure random source) and
// go to the script as arguments: as many as the room's quota, learned from
// the previous reply. When the quota grew since, a call admits at most the
// tokens it brought; the bucket carries the rest to the next call.
//
// When it issued tokens on a primary with replicas, Admit waits (WAIT 1,
// at most Options.WaitTimeout) until one replica has them, so a failover
// right after cannot take back tokens users were told about. It knows the
// replicas from INFO replication, read at most once a second per room
// (replicaCountFresh) and after a WAIT that failed: a replica that
// attaches is waited for within a second, and it receives everything by
// its full synchronization anyway. Admit runs a
// few times a second per room, so the wait costs no user request anything.
// A WAIT that times out or fails does not fail Admit, whose tokens were
// issued; it is logged, and should the primary die before its replica
// caught up, the lost tokens are reported as a Loss.
func (s *Store) Admit(ctx context.Context, room string) ([]waitroom.Admission, error) {
	if err := checkRoom(room); err != nil {
		return nil, err
	}
	w := s.watch(room)
	at := w.marks()

	// WAIT covers the writes of its own connection only, so the scripts
	// and the WAIT share one connection to the room's primary.
	k := s.keys(room)
	conn := s.primaryConn(ctx, k.cfg)
	defer func() {
		if conn != nil {
			_ = conn.Close() // back to the pool
		}
	}()
	run := func(keys []string, tokens []any) (any, error) {
		if conn != nil {
			res, err := s.call(ctx, conn, admitScript, keys, tokens...).Result()
			if !redirected(err) {
				return res, err
			}
			// The slot moved (a failover or resharding): the script did
			// not run; the cluster client follows the redirect, without
			// WAIT.
			_ = conn.Close()
			conn = nil
		}
		return s.call(ctx, s.client, admitScript, keys, tokens...).Result()
	}

	// Usually one call. A second when the call brought fewer tokens than
	// the bucket allowed: none (MORE), or some (short), so that saving
	// tokens never loses a tick's admissions.
	var admitted []waitroom.Admission
	n := s.tokensWanted(room)
	for call := 0; ; call++ {
		keys, tokens := s.admitArgs(room, n)
		res, err := run(keys, tokens)
		if err != nil && len(admitted) > 0 {
			break // the first call's admissions stand; the next tick retries
		}
		if err != nil {
			return nil, s.fail("admit", err)
		}
		r, ok := asReply(res)
		if ok && r.code() == "MORE" && len(tokens) == 0 && call == 0 {
			more, ok := r.int(1)
			if !ok || more < 1 || more > waitroom.MaxTickQuota {
				return nil, s.unexpected(ctx, "admit", res)
			}
			n = int(more)
			continue
		}
		got, err := s.admitted(ctx, room, res, tokens)
		if err != nil {
			return nil, err
		}
		if r.code() == "DRAW" && call == 0 {
			// Nobody was admitted: the opening's draw comes first, then
			// this tick, unless another instance is making the draw.
			done, err := s.drawOpening(ctx, room)
			if err != nil || !done {
				return nil, err
			}
			continue
		}
		admitted = append(admitted, got...)
		seq, _ := r.int(2)
		counts, _ := r.reading(3)
		s.observe(ctx, room, w, at, reading{seq, seq}, &counts)
		w.issuedNow(counts.before+1, got)
		// Short: the rest of the quota, so that one Admit stays within it.
		if short, _ := r.int(8); short == 1 && call < 2 {
			quota, _ := r.int(1)
			if n = int(quota) - len(admitted); n > 0 {
				continue
			}
		}
		break
	}
	if len(admitted) > 0 && conn != nil && s.waitTimeout > 0 {
		s.waitReplica(ctx, room, w, conn, len(admitted))
	}
	return admitted, nil
}

// admitHeader is how many elements precede the admissions in admitScript's
// reply.
const admitHeader = 9

// tickState is what a room's last admitScript reply told about its next
// call.
type tickState struct {
	quota   int
	carry   float64 // users the bucket carried
	rate    float64 // users per second
	waiting int64
	short   bool      // the call could have admitted more than it brought
	at      time.Time // when the reply came
}

// tokensWanted is how many tokens the next Admit of room should supply:
// as many as the bucket will likely allow by then (from the last reply and
// the time since, with a quarter to spare), never more than the quota or
// the users waiting. The default quota before the first reply, and the
// quota after a call that was short of tokens: the time since a reply
// underestimates the Redis time since its call when replies are slow, and
// a short call carries the users it could not issue for the next. Too few
// cost nothing otherwise, and a call that brought none when some could go
// gets a second run (MORE).
func (s *Store) tokensWanted(room string) int {
	v, ok := s.ticks.Load(room)
	if !ok {
		return defaultQuota
	}
	st := v.(tickState)
	if st.short {
		return st.quota
	}
	allow := st.carry + st.rate*s.now().Sub(st.at).Seconds()*1.25
	return int(min(int64(st.quota), st.waiting, int64(allow+1e-9)))
}

// primaryConn returns one connection to the primary that serves key (the
// caller closes it), or nil when the client offers none; then Admit runs
// without WAIT.
func (s *Store) primaryConn(ctx context.Context, key string) *redis.Conn {
	switch c := s.client.(type) {
	case *redis.Client: // standalone, or a Sentinel failover client
		return c.Conn()
	case *redis.ClusterClient:
		node, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil // the cluster client's own call reports the cause
		}
		return node.Conn()
	}
	return nil
}

// redirected reports a MOVED or ASK reply: the command went to a node that
// does not serve its slot (any more), and did not run.
func redirected(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ")
}

// waitReplica waits until one replica has the writes conn made, when the
// primary has replicas, and warns once per run of failures when none has
// them in time, or when a primary that had replicas has none connected.
func (s *Store) waitReplica(ctx context.Context, room string, w *roomWatch, conn *redis.Conn, issued int) {
	replicas := s.replicasOf(ctx, w, conn)
	w.mu.Lock()
	had := w.hadReplicas
	w.hadReplicas = had || replicas > 0
	w.mu.Unlock()
	var acked int64
	var err error
	switch {
	case replicas > 0:
		acked, err = conn.Wait(ctx, 1, s.waitTimeout).Result()
	case !had:
		return // a standalone Redis: nothing to wait for
	}
	ok := err == nil && acked >= 1
	w.mu.Lock()
	was := w.unreplicated
	w.unreplicated = !ok
	if !ok && replicas > 0 {
		w.replicasAt = time.Time{} // no replica answered: read the count again next time
	}
	w.mu.Unlock()
	switch {
	case !ok && !was:
		s.log.WarnContext(ctx, "redisstore: issued tokens are not on a replica yet; a failover now would lose them",
			"room", room, "tokens", issued, "replicas_connected", replicas, "wait", s.waitTimeout, "acked", acked, "err", err)
	case ok && was:
		s.log.InfoContext(ctx, "redisstore: a replica acknowledges issued tokens again", "room", room)
	}
}

// replicaCountFresh is how long Admit trusts the count of replicas it read
// from a room's primary (INFO replication): replicas come and go rarely,
// and reading the count in the admission script cost it a twentieth of
// its time. A WAIT that finds no replica in time has it read again.
const replicaCountFresh = time.Second

// replicasOf is how many replicas the primary behind conn has, as read at
// most replicaCountFresh ago.
func (s *Store) replicasOf(ctx context.Context, w *roomWatch, conn *redis.Conn) int64 {
	w.mu.Lock()
	n, at := w.replicas, w.replicasAt
	w.mu.Unlock()
	if !at.IsZero() && s.now().Sub(at) < replicaCountFresh {
		return n
	}
	info, err := conn.Info(ctx, "replication").Result()
	if err != nil {
		return n // the last count; the WAIT on the same connection says what failed
	}
	n, err = strconv.ParseInt(InfoField(info, "connected_slaves"), 10, 64)
	w.mu.Lock()
	warn := err != nil && !w.replicasUnknown
	w.replicasUnknown = err != nil
	w.replicas, w.replicasAt = max(n, 0), s.now() // unknown: none, read again in a second
	w.mu.Unlock()
	if warn {
		s.log.WarnContext(ctx, "redisstore: INFO replication has no replica count; issued tokens are not waited for", "err", err)
	}
	return max(n, 0)
}

// admitArgs returns admitScript's KEYS and ARGV for room with n fresh
// tokens. Apart from Admit so that a test can run the script inside a
// transaction.
func (s *Store) admitArgs(room string, n int) (keys []string, tokens []any) {
	tokens = make([]any, n)
	for i := range tokens {
		tokens[i] = waitroom.NewToken()
	}
	k := s.keys(room)
	return []string{k.cfg, k.bucket, k.q, k.tok, k.active, k.stats, k.seq, k.buyers, k.drawn, k.draw}, tokens
}

// admitted decodes admitScript's reply to a call that brought tokens, and
// learns the room's quota.
func (s *Store) admitted(ctx context.Context, room string, res any, tokens []any) ([]waitroom.Admission, error) {
	r, ok := asReply(res)
	if !ok {
		return nil, s.unexpected(ctx, "admit", res)
	}
	switch r.code() {
	case "OK", "PAUSED", "SCHEDULED", "DRAW":
	case "ROOM_NOT_FOUND":
		return nil, waitroom.ErrRoomNotFound
	default:
		return nil, s.unexpected(ctx, "admit", res)
	}
	quota, ok1 := r.int(1)
	carry, ok2 := r.int(5)
	rate, ok3 := r.int(6)
	waiting, ok4 := r.int(7)
	short, ok5 := r.int(8)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || len(r) < admitHeader || len(r)-admitHeader > len(tokens) {
		return nil, s.unexpected(ctx, "admit", res)
	}
	s.ticks.Store(room, tickState{
		quota: int(quota), carry: float64(carry) / 1e6, rate: float64(rate) / 1e6,
		waiting: waiting, short: short == 1, at: s.now(),
	})

	// The nth user admitted has the nth token.
	var admitted []waitroom.Admission
	for i := admitHeader; i < len(r); i++ {
		user, ok := r.str(i)
		if !ok {
			return nil, s.unexpected(ctx, "admit", res)
		}
		admitted = append(admitted, waitroom.Admission{User: user, Token: tokens[i-admitHeader].(string)})
	}
	return admitted, nil
}
