// Package redisstore is the waitroom.Store on Redis (7.0 or later).
//
// Every operation is one Lua function run with FCALL, so it is atomic and
// takes one round trip; the functions are one Redis Functions library
// (library.go), loaded by the Store when Redis does not have it. Every key a script
// touches is passed in KEYS and built by keys, with one hash tag per room
// (wr:{ROOM}:…), so a room's scripts run unchanged on Redis Cluster and
// different rooms spread over the slots. Time decisions (token bucket,
// expiry, leases) read the Redis clock with TIME inside the scripts, so all
// instances agree on one clock.
//
// Keys of a room:
//
//	wr:{ROOM}:cfg     hash   live settings: rate, slice_ms, quota, max_queue, ttl_ms, lease_ms, max_active, state, stock, one_order,
//	                         abandon_ms, first_use_ms, invite_only, opens_at_ms, prequeue, closes_at_ms,
//	                         units (units_per_order), shop_url,
//	                         had_opening ("1" once the room had an opening time: its draw's keys matter)
//	wr:{ROOM}:ver     string the settings' version: a fresh random value at every write of cfg (RoomVersions)
//	wr:{ROOM}:q       zset   user → arrival sequence + last seen second / 2^20: the queue
//	wr:{ROOM}:seq     string INCR: the arrival sequence
//	wr:{ROOM}:tok     hash   user → "token|state|lease|lease_until_ms|expires_at_ms": entry tokens; and
//	                         " hashtable" (no user id has a space), which keeps it a hash table
//	wr:{ROOM}:active  zset   user → max(expires_at, lease_until + settle window) ms: tokens not yet cleaned up; a new
//	                         token is in its Admit call's entry instead, " user1 user2 …" → expires_at
//	wr:{ROOM}:bucket  hash   last_us, carry, made_up: the admission token bucket; the pace:
//	                         p_* (decayed sums), a_* (measured since their fold at f_us),
//	                         m_* (the counters at that fold)
//	wr:{ROOM}:stats   hash   counters: entered, full, admitted, completed, sold (units), released, expired,
//	                         no_shows, abandoned
//	wr:{ROOM}:buyers  set    users whose order completed while one_order was on
//	wr:{ROOM}:passes  hash   pass id → "n|uses|left|expires_ms|revoked": passes (passes.go)
//	wr:{ROOM}:pre     zset   user → arrival sequence: early arrivals of a scheduled
//	                         room until the draw (negative: left during the draw)
//	wr:{ROOM}:drawn   zset   user → place: the drawn early arrivals, queued ahead of q
//	wr:{ROOM}:ent     zset   pre, renamed when the draw is done: the draw's entrants
//	wr:{ROOM}:places  hash   user → place the draw gave each entrant
//	wr:{ROOM}:draw    hash   seed, state (drawing, done), lock, lock_until, entrants,
//	                         drawn_at_ms, took_ms: the draw's record
//	wr:rooms          set    room names (no hash tag: not part of any room's atomic state)
//
// Entry tokens live in one hash per room rather than one key per user,
// because Admit creates tokens for users it pops from the queue and so
// cannot name their keys in KEYS beforehand. Redis 7.0 has no per-field
// TTL, so a token's expiry is its stored expires_at compared with the Redis
// clock by every script that reads it; Admit also deletes tokens whose
// active score has passed, a bounded batch per call. A held token's active
// score is the later of its expiry and its lease, so cleanup never removes a
// token while an order holding it may still complete.
//
// The tokens one Admit call issues share one active entry: they have one
// expiry, and an entry per user would cost the call a sorted-set insert
// per user, which was a fifth of its time. A token leaves that entry when
// its active score changes (confirmed, claimed, released): it then gets an
// entry of its own, and cleanup of the call's entry passes it by. The live
// count (max_active, stock) is the token hash's length, which includes
// tokens past their time until cleanup reaches them, at most a tick later:
// a reservation is released late, never early.
//
// # Topologies
//
// Open makes the client from one URL; the same scripts run on all three,
// and every read goes to a primary (read-your-writes: a user's status sees
// the place Enter just gave it, Claim the token Admit just issued).
//
//	URL                                               client
//	redis://[user:pass@]host:port[/db]                *redis.Client: one Redis
//	rediss://…, unix:///path/redis.sock[?db=N]        the same over TLS, on a Unix socket
//	redis+sentinel://[user:pass@]s1:p,s2:p,s3:p/NAME  *redis.Client from redis.NewFailoverClient:
//	  [?db=N&sentinel_password=…]                       the primary the sentinels name NAME
//	redis+cluster://[user:pass@]h1:p,h2:p,h3:p        *redis.ClusterClient: Redis Cluster,
//	  or go-redis's redis://h1:p?addr=h2:p&addr=h3:p    rooms spread over the shards
//
// Timeouts are 1 s (dial, read, write, pool wait) with one retry, so an
// unreachable Redis is STORE_UNAVAILABLE within about a second; query
// options such as ?read_timeout=2s override them (see Open).
//
// # What a failover can lose
//
// Redis replicates asynchronously: a primary acknowledges a write before
// its replicas have it. When the primary dies, the replica Sentinel or the
// cluster promotes has every write up to its replication offset and none
// after: typically the last milliseconds of writes, more if the link was
// lagging. For a room that means, from the last moments before the crash:
// places given by Enter (those users are no longer queued and get
// NOT_IN_QUEUE; entering again queues them at the back), users who left
// (they are queued again), tokens given back by Release or spent by
// Complete (a spent token becomes claimable again: the order API's
// idempotency key, the token, keeps a second order out), claims (the
// token is ready again) and admission-bucket updates (one tick may admit
// up to one extra tick's quota). Tokens issued by Admit are safe
// once Admit returns, when a replica acknowledged them in time: Admit
// WAITs for one replica (Options.WaitTimeout) on a primary that has
// replicas. A restart without persistence loses everything, rooms
// included; RoomKeeper re-creates the rooms.
//
// A loss is never silent: every Store watches each room's arrival sequence
// and admitted counter, which only grow, and reports a reading lower than
// one it has already seen as a Loss of places and tokens, to the log and
// to Options.OnLostWrites (see Loss).
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom"
)

// Options configure a Store. The zero value is a valid configuration.
type Options struct {
	// Prefix starts every key; default "wr". Stores with different
	// prefixes share nothing.
	Prefix string
	// Logger receives unexpected script replies, lost writes and lost
	// releases; default discards.
	Logger *slog.Logger
	// OnLostWrites, if set, is told every loss the Store finds (see Loss),
	// e.g. to count it in a metric. It runs on the caller's goroutine, so
	// it must not block.
	OnLostWrites func(room string, loss Loss)
	// WaitTimeout bounds the WAIT for one replica after an Admit issued
	// tokens, on a primary that has replicas; default 50 ms, negative: no
	// WAIT. A standalone Redis has no replicas and never waits.
	WaitTimeout time.Duration
	// AutoPipeline sends Enter, Status, Claim, Complete and Release
	// through go-redis's automatic pipelining (autopipeline.go), so that
	// concurrent requests share a write and a read. It is also on when the
	// client was made with AutoPipelineOptions, which Open sets unless the
	// URL says autopipeline=false.
	AutoPipeline bool
}

// DefaultWaitTimeout is Options.WaitTimeout's default: a replica on the
// same network acknowledges in well under a millisecond; 50 ms bounds a
// tick that waits for a slow one.
const DefaultWaitTimeout = 50 * time.Millisecond

// Store is the waitroom.Store on Redis. It is safe for concurrent use; many
// Stores in many processes may share one Redis.
type Store struct {
	id          string // this Store's own id: the owner of a draw's lock
	client      redis.UniversalClient
	ap          *redis.AutoPipeliner // nil: the hot path uses client
	prefix      string
	log         *slog.Logger
	onLost      func(room string, loss Loss)
	waitTimeout time.Duration

	// ticks keeps what each room's last Admit reply said about the next
	// call: how many tokens to generate for it (tokensWanted).
	ticks sync.Map // room → tickState
	// keyCache holds the keys of rooms served (keys), at most
	// maxCachedRooms of them.
	keyCache   sync.Map // room → *roomKeys
	keysCached atomic.Int64
	// watches holds each room's counter watermarks (lost.go).
	watches                           sync.Map // room → *roomWatch
	lostPlaces, lostTokens, lostSpent atomic.Int64

	// clock estimates the Redis clock for Admitters.
	clock serverClock

	// loads counts the times this Store loaded the Lua library
	// (library.go); loadMu makes callers that found it missing load it once.
	loads  atomic.Uint64
	loadMu sync.Mutex
}

var _ waitroom.Store = (*Store)(nil)

// New returns a Store on client. A redis.UniversalClient lets the same Store
// run on a single Redis, Sentinel or Cluster (see Open).
func New(client redis.UniversalClient, opts Options) *Store {
	if opts.Prefix == "" {
		opts.Prefix = "wr"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.WaitTimeout == 0 {
		opts.WaitTimeout = DefaultWaitTimeout
	}
	s := &Store{
		id:          waitroom.NewToken(),
		client:      client,
		prefix:      opts.Prefix,
		log:         opts.Logger,
		onLost:      opts.OnLostWrites,
		waitTimeout: opts.WaitTimeout,
	}
	if opts.AutoPipeline || clientAutoPipelines(client) != nil {
		ap, err := newAutoPipeliner(client)
		if err != nil {
			s.log.Warn("redisstore: automatic pipelining is off", "err", err)
		}
		s.ap = ap
	}
	return s
}

// AutoPipelined reports whether the hot path goes through go-redis's
// automatic pipelining.
func (s *Store) AutoPipelined() bool { return s.ap != nil }

// roomKeys are the keys of one room; every field carries the same hash tag.
// enter and status are the KEYS of the two hottest scripts, made once.
type roomKeys struct {
	cfg, ver, q, seq, tok, active, bucket, stats, buyers, passes string
	pre, drawn, ent, places, draw                                string
	// The calls of Enter and Status, their command lines made once.
	enter, status fcall
	// The lines gather concurrent Enters, and Status calls, into calls
	// (batch.go); a room whose keys are not cached gets lines per call,
	// and so calls of one user.
	enterLine, statusLine callLine
}

// maxCachedRooms bounds the rooms whose keys a Store keeps: far more than
// a deployment runs at once; the keys of rooms beyond it are built per call.
const maxCachedRooms = 1024

// keys returns every key of room, from the cache when the Store has served
// room before. It is the only place key names are made; callers must not
// modify what it returns.
func (s *Store) keys(room string) *roomKeys {
	if k, ok := s.keyCache.Load(room); ok {
		return k.(*roomKeys)
	}
	p := s.prefix + ":{" + room + "}:"
	k := &roomKeys{
		cfg:    p + "cfg",
		ver:    p + "ver",
		q:      p + "q",
		seq:    p + "seq",
		tok:    p + "tok",
		active: p + "active",
		bucket: p + "bucket",
		stats:  p + "stats",
		buyers: p + "buyers",
		passes: p + "passes",
		pre:    p + "pre",
		drawn:  p + "drawn",
		ent:    p + "ent",
		places: p + "places",
		draw:   p + "draw",
	}
	k.enter = prepare(enterScript, k.cfg, k.q, k.seq, k.tok, k.stats, k.active, k.buyers, k.pre, k.drawn, k.draw)
	k.status = prepare(statusScript, k.cfg, k.q, k.tok, k.seq, k.stats, k.active, k.buyers, k.pre, k.drawn, k.draw)
	if s.keysCached.Add(1) <= maxCachedRooms {
		if prev, loaded := s.keyCache.LoadOrStore(room, k); loaded {
			s.keysCached.Add(-1)
			return prev.(*roomKeys)
		}
	} else {
		s.keysCached.Add(-1)
	}
	return k
}

// roomsKey is the set of room names. It has no hash tag: it spans rooms and
// is written outside any room's script.
func (s *Store) roomsKey() string { return s.prefix + ":rooms" }

// checkRoom rejects names that could break the hash tag (braces, empty) or
// the key layout; the server validates the same rule at the edge.
func checkRoom(room string) error {
	if !waitroom.ValidRoomName(room) {
		return waitroom.BadRequest(fmt.Sprintf("bad room name %q", room))
	}
	return nil
}

// Ping reports whether Redis is reachable.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return s.fail("ping", err)
	}
	return nil
}

// fail wraps an error of the client. Network errors, timeouts and Redis
// saying it cannot serve now (OOM, MISCONF, LOADING, READONLY, …) wrap
// waitroom.ErrStoreUnavailable, so callers can tell an outage from a bug;
// the cause stays in the chain for the log.
func (s *Store) fail(op string, err error) error {
	if unavailable(err) {
		return fmt.Errorf("%w: redisstore %s: %w", waitroom.ErrStoreUnavailable, op, err)
	}
	return fmt.Errorf("redisstore %s: %w", op, err)
}

// unavailable reports whether err means Redis could not serve the request,
// as opposed to the caller giving up or a reply Redis rejected.
func unavailable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false // the caller went away; Redis may be fine
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		// Server replies that mean "not now" rather than "wrong": out of
		// memory (OOM), writes stopped after a failed save (MISCONF), a
		// dataset loading, a replica or a cluster between states, a script
		// running too long (BUSY), too many clients.
		for _, p := range []string{"OOM", "MISCONF", "LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "BUSY", "NOREPLICAS", "ERR max number of clients"} {
			if strings.HasPrefix(rerr.Error(), p) {
				return true
			}
		}
		return false
	}
	// Dial and I/O errors, timeouts (context.DeadlineExceeded included),
	// pool timeouts, a closed client.
	return true
}

// unexpected reports a script reply the Go side does not know; it means
// the script and the code disagree, so it is logged loudly.
func (s *Store) unexpected(ctx context.Context, op string, reply any) error {
	s.log.ErrorContext(ctx, "redisstore: unexpected script reply", "op", op, "reply", fmt.Sprint(reply))
	return fmt.Errorf("redisstore %s: unexpected script reply %v", op, reply)
}

// do runs f for op and reads its reply: a failed call is fail's error, a
// code that stands for one of waitroom's errors (refusals) is that error,
// a reply with no code is unexpected. Any other code, with its values, is
// the caller's to decode.
func (s *Store) do(ctx context.Context, op string, f *function, keys []string, args ...any) (reply, error) {
	return s.doCall(ctx, op, fcall{f: f, keys: keys}, args...)
}

// doCall is do for a call already made up (prepare).
func (s *Store) doCall(ctx context.Context, op string, c fcall, args ...any) (reply, error) {
	res, err := s.run(ctx, c, args...)
	if err != nil {
		return nil, s.fail(op, err)
	}
	r, ok := asReply(res)
	if !ok {
		return nil, s.unexpected(ctx, op, res)
	}
	if err, ok := refusals[r.code()]; ok {
		return nil, err
	}
	return r, nil
}

// refusals are the errors a function answers with their code alone: a
// code means the same error in every function. Not here: NOT_IN_QUEUE
// (a user's standing in a status call, not the call's) and NO_DRAW (no
// error to a tick; Draw decides).
var refusals = func() map[string]error {
	m := make(map[string]error)
	for _, err := range []*waitroom.Error{
		waitroom.ErrRoomNotFound, waitroom.ErrRoomClosed, waitroom.ErrRoomChanged, waitroom.ErrInviteOnly,
		waitroom.ErrQueueFull, waitroom.ErrSoldOut, waitroom.ErrAlreadyOrdered, waitroom.ErrNoFreeSlot,
		waitroom.ErrTokenNotFound, waitroom.ErrTokenInvalid, waitroom.ErrTokenInUse,
		waitroom.ErrPassInvalid, waitroom.ErrPassUsedUp, waitroom.ErrTooManyPasses,
		waitroom.ErrDrawPublished, waitroom.ErrQueueNotEmpty,
	} {
		m[err.Code] = err
	}
	return m
}()

// reply is a function's reply: a code string followed by values; a bare
// string reply is its code alone.
type reply []any

func asReply(v any) (reply, bool) {
	if code, ok := v.(string); ok {
		return reply{code}, true
	}
	r, ok := v.([]any)
	if !ok || len(r) == 0 {
		return nil, false
	}
	if _, ok := r[0].(string); !ok {
		return nil, false
	}
	return r, true
}

func (r reply) code() string { return r[0].(string) }

// str returns element i as a string, "" when absent or not a string.
func (r reply) str(i int) (string, bool) {
	if i >= len(r) {
		return "", false
	}
	v, ok := r[i].(string)
	return v, ok
}

// int returns element i as an integer; Lua numbers come back as integers.
func (r reply) int(i int) (int64, bool) {
	if i >= len(r) {
		return 0, false
	}
	v, ok := r[i].(int64)
	return v, ok
}

// reading returns elements i and i+1 as a counter's reading.
func (r reply) reading(i int) (reading, bool) {
	before, ok1 := r.int(i)
	after, ok2 := r.int(i + 1)
	return reading{before, after}, ok1 && ok2
}

// luaLib is the top of the Lua library (library.go), shared by its
// functions: one place for the token entry format and the Redis clock.
//
// An entry is "token|state|lease|lease_until_ms|expires_at_ms", state being
// "new" (issued, its holder not told yet), "shown" (told once), "ready"
// (confirmed) or "held" (claimed). Unconfirmed (new, shown), expires_at is
// the first-use deadline and lease_until the end of the full TTL that a
// confirmation or a claim gives it; ready, lease and lease_until are empty
// and 0.
var luaLib = `
local PACE_WINDOW_S = ` + paceWindowSeconds + ` -- waitroom.PaceWindow
local TOK_HASH_TABLE = '` + tokHashTableField + `'
local SETTLE_WINDOW_MS = ` + settleWindowMS + ` -- waitroom.SettleWindow
-- keep_hash_table: a hash read many fields at a time (HMGET of the
-- settings, the bucket) stays a hash table. Redis keeps a small hash as a
-- listpack, where every field read scans the list; one value longer than
-- hash-max-listpack-value (64 bytes by default) turns it into a hash table
-- for good, where a read is one lookup.
local function keep_hash_table(key)
  redis.call('HSET', key, '` + hashTableField + `', '` + hashTableNote + `')
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

-- counter: a counter key's value; 0 when absent.
local function counter(key)
  return tonumber(redis.call('GET', key) or '0')
end

-- clock_us: the Redis clock in microseconds; the one clock of all
-- instances, and the only place the library reads it.
local function clock_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- now_ms: the Redis clock in milliseconds.
local function now_ms()
  return math.floor(clock_us() / 1000)
end

-- parse_entry splits a stored entry; nil when absent.
local function parse_entry(v)
  if not v then return nil end
  local token, state, lease, lease_until, expires_at =
    string.match(v, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)$')
  if not token then return nil end
  return {token = token, state = state, lease = lease,
          lease_until = tonumber(lease_until), expires_at = tonumber(expires_at)}
end

-- format_entry is parse_entry's inverse; %d keeps all digits of the
-- millisecond times (Lua's default number format keeps only 14).
local function format_entry(e)
  return string.format('%s|%s|%s|%d|%d', e.token, e.state, e.lease, e.lease_until, e.expires_at)
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
  entries[#entries + 1] = '` + hashTableNote + `'
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
-- same counts, read once.
local function units(stock, stats_key, tok_key, position, counts)
  if stock <= 0 then return false, -1 end
  if not counts.sold then
    local c = redis.call('HMGET', stats_key, 'sold', 'completed')
    counts.sold = units_sold(c[1], c[2])
  end
  if stock - counts.sold < counts.per then return true, -1 end
  if position == 0 then return false, -1 end
  if not counts.live then
    counts.live = live_tokens(tok_key)
  end
  local left = math.max(0, stock - counts.sold - counts.live * counts.per)
  if left < position * counts.per then return false, left end
  return false, -1
end

-- confirmed: the entry as its holder's own call finds it. The first call
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
    e.state, e.expires_at, e.lease_until = 'ready', e.lease_until, 0
    redis.call('HSET', tok_key, user, format_entry(e))
    redis.call('ZADD', active_key, e.expires_at, user)
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

-- waiting: the answer to a waiting user at position: the bare position
-- while the units are not short (one number to send and decode), else
-- {'WAITING', position, units_left}; {'QUEUED_SOLD_OUT'} once the stock is
-- all sold (the place is kept for a restock).
local function waiting(position, stock, stats_key, tok_key, counts)
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
-- it (waiting), the user marked seen now (its score's fraction, rewritten only when the
-- second changed: the place is the same). nil when it is not queued, or
-- was silent past abandon_s: then it has gone, out of the queue and
-- counted abandoned, as the admitter would find it.
local function queued_standing(q_key, pre_key, drawn_key, stats_key, tok_key, stage, stock, user, now, abandon_s, counts)
  local s = math.floor(now / 1000)
  local key, score, ahead = queued_in(q_key, pre_key, drawn_key, stage, user)
  if not score then return nil end
  if is_gone(score, s, abandon_s) then
    redis.call('ZREM', key, user)
    redis.call('HINCRBY', stats_key, 'abandoned', 1)
    return nil
  end
  local fresh = queue_score(math.floor(score), s)
  if fresh ~= score then
    redis.call('ZADD', key, 'XX', fresh, user)
  end
  return waiting(ahead + redis.call('ZRANK', key, user) + 1, stock, stats_key, tok_key, counts)
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
`

// paceWindowSeconds is waitroom.PaceWindow in Lua.
var paceWindowSeconds = strconv.FormatFloat(waitroom.PaceWindow.Seconds(), 'f', -1, 64)

var settleWindowMS = strconv.FormatInt(waitroom.SettleWindow.Milliseconds(), 10)

// hashTableField is the field that keeps a hash read many fields at a
// time a hash table (keep_hash_table); hashTableNote, its value, says why
// to whoever reads the hash, and is longer than Redis's default
// hash-max-listpack-value (64).
const (
	hashTableField = "hashtable"
	hashTableNote  = "kept a hash table: HMGET of many fields scans a listpack, a hash table looks each up"
)

// tokHashTableField keeps a room's token hash a hash table (issue_tokens).
// Its other fields are user ids, and no user id has a space.
const tokHashTableField = " hashtable"

// roomConfigFields are the cfg hash fields, in the order configArgs gives
// their values.
var roomConfigFields = []string{"rate", "slice_ms", "quota", "max_queue", "ttl_ms", "lease_ms", "max_active", "state", "stock", "one_order", "abandon_ms", "first_use_ms", "invite_only",
	"opens_at_ms", "prequeue", "closes_at_ms", "units", "shop_url"}

// configArgs flattens cfg into field, value pairs for HSET. Durations are
// kept in (possibly fractional) milliseconds, what the scripts compute in.
func configArgs(cfg waitroom.RoomConfig) []any {
	vals := []string{
		strconv.FormatFloat(cfg.Rate, 'g', -1, 64),
		formatMillis(cfg.Slice.Nanoseconds()),
		strconv.Itoa(cfg.TickQuota()),
		strconv.Itoa(cfg.MaxQueue),
		formatMillis(cfg.TokenTTL.Nanoseconds()),
		formatMillis(cfg.Lease.Nanoseconds()),
		strconv.Itoa(cfg.MaxActive),
		string(cfg.State),
		strconv.Itoa(cfg.Stock),
		boolArg(cfg.OneOrderPerUser),
		formatMillis(cfg.AbandonAfter.Nanoseconds()),
		formatMillis(cfg.FirstUseWithin.Nanoseconds()),
		boolArg(cfg.InviteOnly),
		unixMillis(cfg.OpensAt),
		string(cfg.PrequeueOrder),
		unixMillis(cfg.ClosesAt),
		strconv.Itoa(cfg.UnitsPerOrder),
		cfg.ShopURL,
	}
	args := make([]any, 0, 2*len(vals))
	for i, v := range vals {
		args = append(args, roomConfigFields[i], v)
	}
	return args
}

// openingArgs is the had_opening field of the cfg hash, which tells the
// scripts whether a room's draw keys (pre, drawn, draw) can hold anything:
// "1" once the room had an opening time, and never cleared since, because
// its drawn users still wait ahead of the queue after the time is gone.
// CreateRoom writes it "0" or "1", UpdateRoom only ever "1".
func openingArgs(cfg waitroom.RoomConfig, create bool) []any {
	switch {
	case !cfg.OpensAt.IsZero():
		return []any{"had_opening", "1"}
	case create:
		return []any{"had_opening", "0"}
	}
	return nil
}

// unixMillis is how the cfg hash keeps a time: Unix milliseconds, "0"
// for none.
func unixMillis(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// boolArg is how the cfg hash keeps a flag: "1" or "0".
func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func formatMillis(ns int64) string {
	return strconv.FormatFloat(float64(ns)/1e6, 'f', -1, 64)
}
