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
//	                         units (units_per_order), shop_url, notified_first_use_ms, shop_name, product_name,
//	                         page (the version of the room's page archive, which only set_page writes)
//	                         had_opening ("1" once the room had an opening time: its draw's keys matter)
//	wr:{ROOM}:ver     string the settings' version: a fresh random value at every write of cfg (RoomVersions)
//	wr:{ROOM}:q       zset   user → arrival sequence + last seen second / 2^20: the queue
//	wr:{ROOM}:seq     string INCR: the arrival sequence
//	wr:{ROOM}:tok     hash   user → "token|state|lease|lease_until_ms|expires_at_ms[|link]": entry
//	                         tokens (link: a told buyer's, lua/shared.lua); and
//	                         " hashtable" (no user id has a space), which keeps it a hash table
//	wr:{ROOM}:active  zset   user → max(expires_at, lease_until + settle window) ms: tokens not yet cleaned up; a new
//	                         token is in its Admit call's entry instead, " user1 user2 …" → expires_at
//	wr:{ROOM}:bucket  hash   last_us, carry, made_up: the admission token bucket; the pace:
//	                         p_* (decayed sums), a_* (measured since their fold at f_us),
//	                         m_* (the counters at that fold); notices ("1": notice may
//	                         exist, so Admit reads it; unset, Admit pays nothing for notices)
//	                         outbox ("1": Admit writes the outbox), out_lost (its entries dropped unrelayed),
//	                         named_no_shows, named_expired, named_abandoned (the users it named there)
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
//	wr:{ROOM}:page    hash   v (the version the cfg's page names), archive: the room's own page (page.go)
//	wr:{ROOM}:notice  hash   user → channels (opaque, at most waitroom.MaxNoticeBytes): the
//	                         queued users who asked to be told of their turn (notice.go)
//	wr:{ROOM}:out     stream the outbox: t (type), at (ms), u (users, space-separated), at most
//	                         waitroom.OutboxMaxEntries; written by Admit only while the bucket has outbox "1" (outbox.go)
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
	// lines gathers each room's concurrent Enters, and Status calls, into
	// calls (batch.go); a line is dropped when it goes idle, so they are
	// not bounded like the key cache, and every room batches.
	lines sync.Map // lineKey → *callLine
	// watches holds each room's counter watermarks (lost.go).
	watches                           sync.Map // room → *roomWatch
	lostPlaces, lostTokens, lostSpent atomic.Int64

	// layouts caches how each room lies over the shards, trims what each
	// spread room's last tick copied (spread.go, spread_admit.go).
	layouts layoutCache
	trims   sync.Map // room → *spreadTrim
	drawn   sync.Map // room → layout id: spread rooms whose draw this Store saw published
	// drawCut, nil but in tests, stops a spread room's drawer before
	// chunk (from 0) of its places, as a process killed mid-draw stops.
	drawCut func(chunk int) bool
	// tickCut, nil but in tests, runs in a spread room's tick between
	// reading the sub-shards' heads and popping them; passCut in a pass
	// use on a spread room after it sealed the sub-shards, passBusy when
	// such a use is told to wait.
	tickCut, passCut, passBusy func()

	// clock estimates the Redis clock for Admitters.
	clock serverClock

	// loads counts the times this Store loaded the Lua library
	// (library.go); loadMu makes callers that found it missing load it once.
	loads  atomic.Uint64
	loadMu sync.Mutex
}

var (
	_ waitroom.Store       = (*Store)(nil)
	_ waitroom.WaitBounder = (*Store)(nil)
)

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
// enter and status are the calls of the two hottest functions, on the same
// KEYS, made once.
type roomKeys struct {
	cfg, ver, q, seq, tok, active, bucket, stats, buyers, passes string
	pre, drawn, ent, places, draw, page, notice, hist            string
	out                                                          string // the outbox (outbox.go)
	inflight, fence, passLock                                    string // a spread room's (spread.go, passes.go)
	// The calls of the hot path, their KEYS bound and command lines made
	// once: Enter and Status (one KEYS order for both), the gate's claim,
	// complete, release and renew.
	enter, status, claim, complete, release, renew fcall
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
		cfg:      p + "cfg",
		ver:      p + "ver",
		q:        p + "q",
		seq:      p + "seq",
		tok:      p + "tok",
		active:   p + "active",
		bucket:   p + "bucket",
		stats:    p + "stats",
		buyers:   p + "buyers",
		passes:   p + "passes",
		pre:      p + "pre",
		drawn:    p + "drawn",
		ent:      p + "ent",
		places:   p + "places",
		draw:     p + "draw",
		page:     p + "page",
		notice:   p + "notice",
		out:      p + "out",
		hist:     p + "hist",
		inflight: p + "inflight",
		fence:    p + "fence",
		passLock: p + "passlock",
	}
	// enter and status take the same KEYS, in one order.
	hot := []string{k.cfg, k.q, k.seq, k.tok, k.stats, k.active, k.buyers, k.pre, k.drawn, k.draw, k.notice}
	k.enter = prepare(enterScript, hot...)
	k.status = prepare(statusScript, hot...)
	k.claim = prepare(claimScript, k.cfg, k.tok, k.active, k.stats)
	k.complete = prepare(completeScript, k.tok, k.active, k.stats, k.cfg, k.buyers)
	k.release = prepare(releaseScript, k.tok, k.active, k.stats)
	k.renew = prepare(renewScript, k.cfg, k.tok, k.active)
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

// reading returns elements i and i+1 as a counter's reading.
func (r reply) reading(i int) (reading, bool) {
	before, ok1 := r.int(i)
	after, ok2 := r.int(i + 1)
	return reading{before, after}, ok1 && ok2
}

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
	"opens_at_ms", "prequeue", "closes_at_ms", "units", "shop_url", "notified_first_use_ms",
	"shop_name", "product_name", "page", "shards"}

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
		formatMillis(cfg.NotifiedFirstUseWithin.Nanoseconds()),
		cfg.ShopName,
		cfg.ProductName,
		cfg.Page,
		strconv.Itoa(cfg.Shards),
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
