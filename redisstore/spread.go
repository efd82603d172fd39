package redisstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom"
)

// A room spread over K shards (RoomConfig.Shards > 1, Redis Cluster only).
//
// The room's own keys (wr:{ROOM}:…, the control shard) keep its settings
// with the layout (shards, tags: the K sub-shards' hash tags, layout: an
// id that changes at every reshard), the ticket counter (seq), the tickets
// in flight (inflight), the bucket and the admitters' fence (fence). Each
// user lives in sub-shard fnv32a(user) mod K, tag {ROOM#n} (spreadTags
// picks n so the tags land on different primaries), with its place
// (q, scored by its ticket), its token (tok, active), its counters
// (stats) and the sub-shard's copy of the settings (cfg, lua/spread.lua),
// so Status, Claim, Complete, Release and Renew are one call on one shard.
//
//	wr:{ROOM}:inflight  zset  first ticket of an ENTER call → when taken (ms)
//	wr:{ROOM}:fence     string INCR: the last admission tick begun
//	wr:{ROOM#n}:mirror  zset  tickets gone (left, abandoned, never placed) after
//	                         the head, of every sub-shard: positions subtract them
//	wr:{ROOM#n}:left    list  this sub-shard's gone tickets not yet copied into
//	                         every mirror (cfg left_base: how many were trimmed)
//	wr:{ROOM#n}:buyers  set   this sub-shard's buyers (one order per buyer:
//	                         a user's orders are all on its sub-shard)
//	wr:{ROOM#n}:units   hash  s<i>, u<i>: units sold on sub-shard i (only
//	                         grows) and used there (sold or reserved) after
//	                         the last tick, as this one was told: its "sold
//	                         out" and units left
//
// Enter takes two steps: a ticket from the control shard, then the
// sub-shard's script; a ticket whose second step fails is a gap, never a
// reorder. Admit merges the K heads in ticket order (spreadAdmit).

// spreadLayout is how a room lies over the shards: shards 1 for a room
// on one hash tag.
type spreadLayout struct {
	shards int
	id     string
	subs   []*subKeys
	read   time.Time // when this Store read it (layoutMaxAge)
}

// subKeys are the keys of one sub-shard, all with its hash tag.
type subKeys struct {
	tag                                                          string // the sub-shard's hash tag, ROOM#n: its name in the lost-write watch
	cfg, q, tok, active, stats, buyers, mirror, left, units, pre string // pre: early arrivals (spread_draw.go)
	notice                                                       string // its users' notice requests (notice.go)
	out                                                          string // its outbox (outbox.go)
	claim, complete, release, renew                              fcall
}

func (s *Store) subKeys(tag string) *subKeys {
	p := s.prefix + ":{" + tag + "}:"
	k := &subKeys{tag: tag, cfg: p + "cfg", q: p + "q", tok: p + "tok", active: p + "active", stats: p + "stats",
		buyers: p + "buyers", mirror: p + "mirror", left: p + "left", units: p + "units", notice: p + "notice", pre: p + "pre", out: p + "out"}
	// The gate's functions are the room's own, on the sub-shard's keys.
	k.claim = prepare(claimScript, k.cfg, k.tok, k.active, k.stats)
	k.complete = prepare(completeScript, k.tok, k.active, k.stats, k.cfg, k.buyers)
	k.release = prepare(releaseScript, k.tok, k.active, k.stats)
	k.renew = prepare(renewScript, k.cfg, k.tok, k.active)
	return k
}

// hot is the KEYS of spread_enter and spread_status, in their order.
func (k *subKeys) hot() []string {
	return []string{k.cfg, k.q, k.tok, k.active, k.stats, k.mirror, k.left, k.buyers, k.units, k.notice, k.pre}
}

// of returns the sub-shard user lives in: always the same one, so one
// order per user, its place and its token never split.
func (l *spreadLayout) of(user string) int {
	h := fnv.New32a()
	h.Write([]byte(user))
	return int(h.Sum32() % uint32(l.shards))
}

// plainLayout is every room on one shard (and every room off Cluster).
var plainLayout = &spreadLayout{shards: 1}

// errResharded: the layout the caller used is no longer the room's.
var errResharded = errors.New("redisstore: the room was resharded meanwhile")

// errStale: a later admission tick of the room sealed the sub-shard; this
// one stops there, which is no failure.
var errStale = errors.New("redisstore: a later tick sealed the sub-shard")

// onlyStale reports whether err is errStale alone (joined, any number).
func onlyStale(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !onlyStale(e) {
				return false
			}
		}
		return true
	}
	return err == errStale
}

// layouts caches each room's layout; a call that finds it changed
// (RESHARDED, or SPREAD from a room's own functions) forgets it, and
// every entry is read again after layoutMaxAge: an instance that still
// takes a room resharded by another for one on a single shard would
// otherwise tick it, and answer its gate, on keys that hold nothing.
type layoutCache struct{ m sync.Map } // room → *spreadLayout

// layoutMaxAge bounds how long a Store trusts a room's cached layout: one
// HMGET a second per room it serves.
const layoutMaxAge = time.Second

// layout returns room's layout, read from its settings when not cached.
// Off Cluster every room is on one shard and nothing is read.
func (s *Store) layout(ctx context.Context, room string) (*spreadLayout, error) {
	if _, ok := s.client.(*redis.ClusterClient); !ok {
		return plainLayout, nil
	}
	if l, ok := s.layouts.m.Load(room); ok && time.Since(l.(*spreadLayout).read) < layoutMaxAge {
		return l.(*spreadLayout), nil
	}
	v, err := s.client.HMGet(ctx, s.keys(room).cfg, "shards", "tags", "layout").Result()
	if err != nil {
		return nil, s.fail("layout", err)
	}
	return s.keepLayout(room, v)
}

// keepLayout makes room's layout of its cfg's shards, tags and layout
// fields (v) and caches it.
func (s *Store) keepLayout(room string, v []any) (*spreadLayout, error) {
	l := &spreadLayout{shards: 1, read: time.Now()}
	if n, _ := strconv.Atoi(str(v[0])); n > 1 {
		tags := strings.Fields(str(v[1]))
		if len(tags) != n || str(v[2]) == "" {
			return nil, fmt.Errorf("redisstore layout %q: %d shards, tags %q", room, n, str(v[1]))
		}
		l.shards, l.id = n, str(v[2])
		if old, ok := s.layouts.m.Load(room); ok && old.(*spreadLayout).id == l.id {
			l.subs = old.(*spreadLayout).subs // the same layout: its calls are made
		} else {
			for _, tag := range tags {
				l.subs = append(l.subs, s.subKeys(tag))
			}
		}
	}
	if s.keysCached.Load() <= maxCachedRooms {
		s.layouts.m.Store(room, l)
	}
	return l, nil
}

func str(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}

// spreadTags picks the hash tags of a room's sub-shards: ROOM#n for the
// smallest n whose slot is on a primary no earlier tag took, the room's
// own primary last (it also hands out the tickets), round robin once
// every primary has one. A cluster resharded later may move a tag; the
// room still works, only less spread.
func (s *Store) spreadTags(ctx context.Context, room string, shards int) ([]string, error) {
	cluster := s.client.(*redis.ClusterClient)
	slots, err := cluster.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, s.fail("cluster slots", err)
	}
	primaryOf := func(slot int) string {
		for _, r := range slots {
			if slot >= r.Start && slot <= r.End && len(r.Nodes) > 0 {
				return r.Nodes[0].Addr
			}
		}
		return ""
	}
	var primaries []string
	for _, r := range slots {
		if len(r.Nodes) > 0 && !slices.Contains(primaries, r.Nodes[0].Addr) {
			primaries = append(primaries, r.Nodes[0].Addr)
		}
	}
	// The other primaries first, the room's own last: the ticket counter
	// is there.
	own := primaryOf(keySlot(s.keys(room).cfg))
	if k := slices.Index(primaries, own); k >= 0 {
		primaries = append(slices.Delete(primaries, k, k+1), own)
	}
	tags := make([]string, 0, shards)
	used := map[string]bool{}
	for len(tags) < shards {
		want := primaries[len(tags)%len(primaries)]
		for n := 0; ; n++ {
			tag := room + "#" + strconv.Itoa(n)
			if !used[tag] && (primaryOf(keySlot(tag)) == want || n > 100_000) {
				used[tag] = true
				tags = append(tags, tag)
				break
			}
		}
	}
	return tags, nil
}

// spreadSettings are the fields a sub-shard's cfg copies: the settings,
// and its share of max_queue (cap), split so the shares add up to it.
func spreadSettings(cfg waitroom.RoomConfig, i int) []any {
	share := cfg.MaxQueue / cfg.Shards
	if i < cfg.MaxQueue%cfg.Shards {
		share++
	}
	return append(configArgs(cfg), "cap", strconv.Itoa(share))
}

// spreadSyncScript writes a sub-shard's settings.
//
// KEYS[1] sub cfg
// KEYS[2] sub q
// KEYS[3] sub tok
// KEYS[4] sub stats
// KEYS[5] sub buyers
// KEYS[6] sub units
// KEYS[7] sub out (a reshard waits for its events to be relayed)
// ARGV[1] layout: the layout id written
// ARGV[2] expected: the layout id the sub-shard may hold besides it ("" any)
// ARGV[3] need_empty: "1" when it must hold nobody, no sale and no buyer
// (a reshard; its units hash is cleared)
// ARGV[4 ..] field, value, … (spreadSettings)
//
// Returns "OK", "ROOM_CHANGED" (another layout holds it) or
// "SHARDS_NOT_EMPTY" (nothing written).
var spreadSyncScript = newFunction("spread_sync")

func (s *Store) syncSub(ctx context.Context, k *subKeys, layout, expected string, needEmpty bool, fields []any) error {
	args := append([]any{layout, expected, boolArg(needEmpty)}, fields...)
	r, err := s.do(ctx, "sync shard", spreadSyncScript, []string{k.cfg, k.q, k.tok, k.stats, k.buyers, k.units, k.out}, args...)
	if err != nil {
		return err
	}
	switch r.code() {
	case "OK":
		return nil
	case waitroom.ErrShardsNotEmpty.Code:
		return waitroom.ErrShardsNotEmpty
	case waitroom.ErrRoomChanged.Code:
		return waitroom.ErrRoomChanged
	}
	return s.unexpected(ctx, "sync shard", r)
}

// spreadFields are the control shard's layout fields for cfg: shards 1
// keeps none but the count.
func (s *Store) spreadFields(ctx context.Context, room string, cfg waitroom.RoomConfig) ([]any, *spreadLayout, error) {
	if cfg.Shards <= 1 {
		return []any{"shards", "1", "tags", "", "layout", ""}, plainLayout, nil
	}
	tags, err := s.spreadTags(ctx, room, cfg.Shards)
	if err != nil {
		return nil, nil, err
	}
	l := &spreadLayout{shards: cfg.Shards, id: waitroom.NewToken()}
	for _, tag := range tags {
		l.subs = append(l.subs, s.subKeys(tag))
	}
	return []any{"shards", strconv.Itoa(cfg.Shards), "tags", strings.Join(tags, " "), "layout", l.id}, l, nil
}

// checkSpread refuses shards above 1 off Cluster.
func (s *Store) checkSpread(cfg waitroom.RoomConfig) error {
	if _, ok := s.client.(*redis.ClusterClient); !ok {
		return waitroom.ShardsRefusal(cfg)
	}
	return nil
}

// repairSub writes again the settings of sub-shard i of room, found
// without them (ROOM_NOT_FOUND from a room the caller knows): its
// primary restarted without its data, or failed over to a replica that
// never had them. Only while the room still has layout l (read afresh),
// so a room deleted or resharded meanwhile is not given them back; and
// spread_sync writes nothing over another layout's. Reports whether it
// wrote them. What the sub-shard held is lost, and the lost-write watch
// reports it.
func (s *Store) repairSub(ctx context.Context, room string, l *spreadLayout, i int) bool {
	s.forgetLayout(room)
	now, err := s.layout(ctx, room)
	if err != nil || now.id != l.id {
		return false
	}
	cfg, err := s.RoomConfig(ctx, room)
	if err != nil {
		return false
	}
	if err := s.syncSub(ctx, l.subs[i], l.id, l.id, false, spreadSettings(cfg, i)); err != nil {
		s.log.WarnContext(ctx, "redisstore: a sub-shard of a spread room lost its settings; writing them again failed", "room", room, "shard", l.subs[i].tag, "err", err)
		return false
	}
	s.log.WarnContext(ctx, "redisstore: a sub-shard of a spread room had lost its settings (its primary restarted without its data); written again", "room", room, "shard", l.subs[i].tag)
	return true
}

// syncSubs copies cfg into every sub-shard of l.
func (s *Store) syncSubs(ctx context.Context, l *spreadLayout, cfg waitroom.RoomConfig, expected string, needEmpty bool) error {
	errs := make([]error, len(l.subs))
	var wg sync.WaitGroup
	for i, k := range l.subs {
		wg.Go(func() { errs[i] = s.syncSub(ctx, k, l.id, expected, needEmpty, spreadSettings(cfg, i)) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// cachedShards is room's shards as far as this Store knows without asking
// (1 when it does not): a spread room's batch of Enters or Status calls
// carries up to maxBatch users per sub-shard, as a room on one shard's
// carries maxBatch.
func (s *Store) cachedShards(room string) int {
	if l, ok := s.layouts.m.Load(room); ok {
		return l.(*spreadLayout).shards
	}
	return 1
}

// The spread functions of the request path go through the automatic
// pipeliner, as the room's own do (hotPath).
func init() {
	for _, f := range []*function{spreadEnterScript, spreadStatusScript, spreadTicketScript, spreadDoneScript,
		spreadLeaveScript, spreadMirrorScript} {
		hotPath[f] = true
	}
}

// forgetLayout drops room's cached layout: the next call reads it.
func (s *Store) forgetLayout(room string) { s.layouts.m.Delete(room) }

// spreadTicketScript hands out the tickets of one ENTER call.
//
// KEYS[1] cfg (the room's)
// KEYS[2] seq
// KEYS[3] inflight
// KEYS[4] bucket (w_waiting, w_seq: the room's size at the last tick;
// w_sold: its units sold then)
// KEYS[5] draw (a scheduled opening's record: spread_draw.go)
// ARGV[1] layout id
// ARGV[2] n: tickets wanted
//
// Returns {"OK", first ticket, taken at (ms, the control shard's clock),
// granted, refusal}: the first granted of the n get tickets, the rest
// none, and refusal ("QUEUE_FULL", "ROOM_CLOSED", "INVITE_ONLY" or "SOLD_OUT") is what
// those without a standing are told; {"ROOM_NOT_FOUND"} or {"RESHARDED"}; before a
// scheduled opening {"SCHEDULED", now ms, opens_at ms, first arrival
// number} (no ticket: n arrival numbers), from the opening until its draw
// set the counter {"DRAWING"} (spreadTicket).
var spreadTicketScript = newFunction("spread_ticket")

// spreadDoneScript says the tickets of a call from first on are placed or
// gone: the admitter may pass them.
//
// KEYS[1] inflight
// ARGV[1] first ticket
//
// Returns "OK".
var spreadDoneScript = newFunction("spread_done")

// spreadEnterScript places users with their tickets in a sub-shard, or
// answers the standing they have. The clock of the sub-shard judges a
// ticket late (SpreadLate): the primaries' clocks must agree within it.
//
// KEYS      spread hot keys: cfg, q, tok, active, stats, mirror, left, buyers, units, notice, pre (the sub-shard's)
// ARGV[1]   layout id
// ARGV[2]   the tickets' time, ms (the counter's clock)
// ARGV[3]   what a user without a ticket and without a standing is told:
//
//	QUEUE_FULL (counted full), ROOM_CLOSED, INVITE_ONLY or SOLD_OUT
//
// ARGV[4 ..] user, ticket (0: none), …
//
// Returns {"ROOM_NOT_FOUND"}, {"RESHARDED"} or {"OK", standing, …,
// first, gone ticket, …}, a standing per user: position (a number:
// waiting), {"WAITING", position, units_left}, {"QUEUED_SOLD_OUT"},
// {"ADMITTED", token, ms_left}, {"ALREADY_ORDERED"}, {"ROOM_CLOSED"},
// {"SOLD_OUT"}, {"QUEUE_FULL"} or {"LATE"} (the ticket is too old to
// place); the stock's answers count the units of the whole room as this
// sub-shard knows them (spread.lua, told_units); first: 1
// when the call placed the sub-shard's first users (the caller wakes the
// admitter when the others are empty too); then the tickets the call
// found gone (re-entries' and refused users' tickets, users abandoned),
// which the caller tells the other sub-shards (pushGone).
var spreadEnterScript = newFunction("spread_enter")

// spreadStatusScript reads users' standings in a sub-shard, as statusScript,
// early arrivals of a scheduled opening (its pre) included: one call
// whatever the user is.
//
// KEYS    spread hot keys
// ARGV[1] layout id
// ARGV[2 ..] users
//
// Returns {"ROOM_NOT_FOUND"}, {"RESHARDED"} or {"OK", standing, …, gone
// ticket, …}: position, {"WAITING", position, units_left},
// {"QUEUED_SOLD_OUT"}, {"ADMITTED", token, ms_left}, {"ALREADY_ORDERED"},
// {"SCHEDULED", opens_in_ms, position, arrival number} (an early arrival;
// position: fifo's place among this sub-shard's early arrivals, else 0)
// or {"NOT_IN_QUEUE"}, then the tickets of users it found abandoned.
var spreadStatusScript = newFunction("spread_status")

// SpreadLate is how old a ticket may be when its place is written; the
// admitter holds back no ticket longer than SpreadInFlight, so a ticket
// placed after the admitter passed it cannot be.
const (
	SpreadLate     = 5 * time.Second
	SpreadInFlight = 10 * time.Second
	// SpreadMaxCopy bounds the leavers one tick copies from a sub-shard
	// into the others' positions: 10 ticks a second copy 10,000 a second.
	SpreadMaxCopy = 1000
)

// spreadBatch answers a batch of Enters or Status calls of a spread room:
// the users grouped by sub-shard, each group one call (Enter: a check,
// the tickets for those new, the places), the groups at once.
func (s *Store) spreadBatch(ctx context.Context, op *batchedOp, room string, l *spreadLayout, users []string) ([]userResult, error) {
	out := make([]userResult, len(users))
	groups := make([][]int, l.shards)
	first := map[string]int{} // a user named twice is answered once
	var dups [][2]int
	for i, u := range users {
		if j, ok := first[u]; ok {
			dups = append(dups, [2]int{i, j})
			continue
		}
		first[u] = i
		g := l.of(u)
		groups[g] = append(groups[g], i)
	}
	var err error
	if op == enterOp {
		err = s.spreadEnter(ctx, room, l, users, groups, out)
	} else {
		err = s.eachSub(l, groups, func(g int, idx []int) error {
			args := []any{l.id}
			for _, i := range idx {
				args = append(args, users[i])
			}
			standings, gone, err := s.usersCall(ctx, "status", spreadStatusScript, l.subs[g], args, len(idx), 0)
			if err != nil {
				return err
			}
			arrivals := make([]any, len(idx))
			for j, i := range idx {
				var standing any
				standing, arrivals[j] = earlyStatus(standings[j]) // early arrivals (spread_draw.go)
				out[i] = s.userStanding(ctx, "status", standing)
			}
			s.pushGone(ctx, l, g, gone)
			return s.fifoPlaces(ctx, l, g, idx, arrivals, out)
		})
	}
	for _, d := range dups {
		out[d[0]] = out[d[1]]
	}
	return out, err
}

// eachSub runs fn for every non-empty group at once.
func (s *Store) eachSub(l *spreadLayout, groups [][]int, fn func(g int, idx []int) error) error {
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for g, idx := range groups {
		if len(idx) > 0 {
			wg.Go(func() { errs[g] = fn(g, idx) })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// usersCall runs spread_enter or spread_status on a sub-shard for n users
// and splits its reply: their standings, then what follows (at least
// extra values: gone tickets, and enter's flag before them).
func (s *Store) usersCall(ctx context.Context, op string, f *function, k *subKeys, args []any, n, extra int) (standings, rest []any, err error) {
	r, err := s.spreadCall(ctx, op, f, k.hot(), args...)
	if err != nil {
		return nil, nil, err
	}
	if len(r) < 1+n+extra {
		return nil, nil, s.unexpected(ctx, op, r)
	}
	return r[1 : 1+n], r[1+n:], nil
}

// spreadCall runs a spread function and reads its reply: RESHARDED is
// errResharded.
func (s *Store) spreadCall(ctx context.Context, op string, f *function, keys []string, args ...any) (reply, error) {
	r, err := s.do(ctx, op, f, keys, args...)
	return s.spreadCode(ctx, op, r, err)
}

// spreadReply is spreadCall's reading of a call run elsewhere (on a
// primaryCaller): its result res and error err.
func (s *Store) spreadReply(ctx context.Context, op string, res any, err error) (reply, error) {
	r, err := s.reply(ctx, op, res, err)
	return s.spreadCode(ctx, op, r, err)
}

// spreadCode reads the codes of a spread function's reply r.
func (s *Store) spreadCode(ctx context.Context, op string, r reply, err error) (reply, error) {
	if err != nil {
		return nil, err
	}
	switch r.code() {
	case "OK":
		return r, nil
	case "RESHARDED":
		return nil, errResharded
	case "STALE":
		return nil, errStale
	}
	return nil, s.unexpected(ctx, op, r)
}

// spreadEnter takes tickets for all of a batch's users at once, in the
// batch's order (its arrival order), then sends each sub-shard its users
// with their tickets: who has a standing keeps it and its ticket is a
// gap, who is new takes its place. One call on the counter and one on
// each sub-shard, whatever the users are; a re-entry costs a gap.
func (s *Store) spreadEnter(ctx context.Context, room string, l *spreadLayout, users []string, groups [][]int, out []userResult) error {
	k := s.keys(room)
	n := 0
	for _, idx := range groups {
		n += len(idx)
	}
	r, early, err := s.spreadTicket(ctx, room, l, n)
	if err != nil {
		return err
	}
	if early != nil { // before a scheduled opening (spread_draw.go)
		return s.spreadEnterEarly(ctx, room, l, users, groups, out, early)
	}
	firstTicket, ok1 := r.int(1)
	takenAt, ok2 := r.int(2)
	granted, ok3 := r.int(3)
	refusal, ok4 := r.str(4)
	if !ok1 || !ok2 || !ok3 || !ok4 || granted < 0 || granted > int64(n) {
		return s.unexpected(ctx, "ticket", r)
	}
	// Tickets in the batch's order, as far as granted; the rest come with
	// none, and are refused unless they have a standing.
	sent := make([]bool, len(users)) // each user's first naming
	for _, idx := range groups {
		for _, i := range idx {
			sent[i] = true
		}
	}
	ticketOf := make(map[int]int64, n)
	next := firstTicket
	for i := range users {
		if sent[i] && next-firstTicket < granted {
			ticketOf[i] = next
			next++
		}
	}
	err = s.eachSub(l, groups, func(g int, idx []int) error {
		args := []any{l.id, takenAt, refusal}
		for _, i := range idx {
			args = append(args, users[i], ticketOf[i])
		}
		standings, rest, err := s.usersCall(ctx, "enter", spreadEnterScript, l.subs[g], args, len(idx), 1)
		if errors.Is(err, waitroom.ErrRoomNotFound) && s.repairSub(ctx, room, l, g) {
			standings, rest, err = s.usersCall(ctx, "enter", spreadEnterScript, l.subs[g], args, len(idx), 1)
		}
		if err != nil {
			return err
		}
		s.pushGone(ctx, l, g, rest[1:])
		if first, _ := rest[0].(int64); first == 1 {
			s.wakeIfEmpty(ctx, l, g, k.q)
		}
		for j, i := range idx {
			if sr, ok := asReply(standings[j]); ok && sr.code() == "LATE" {
				out[i] = userResult{err: fmt.Errorf("%w: redisstore enter: the ticket was too late to place", waitroom.ErrStoreUnavailable)}
				continue
			}
			out[i] = s.userStanding(ctx, "enter", standings[j])
		}
		return nil
	})
	if granted > 0 {
		// Placed or not, the tickets are no longer in flight: a failed
		// place leaves gaps, which the admitter passes.
		if doneErr := s.call(context.WithoutCancel(ctx), s.client, spreadDoneScript, []string{k.inflight}, firstTicket).Err(); doneErr != nil {
			s.log.WarnContext(ctx, "redisstore: tickets stay in flight until they time out", "room", room, "err", doneErr)
		}
	}
	return err
}

// wakeIfEmpty wakes the admitter of a room whose sub-shard from got its
// first users, when no other sub-shard has any: a room nobody waited in.
// Two sub-shards filled at the same moment may each see the other's user
// and wake nobody: the admitter's probe finds the room within a second.
func (s *Store) wakeIfEmpty(ctx context.Context, l *spreadLayout, from int, wake string) {
	qs := make([]*redis.IntCmd, len(l.subs))
	if _, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range l.subs {
			if i != from {
				qs[i] = p.Exists(ctx, k.q)
			}
		}
		return nil
	}); err != nil {
		return // best effort, as every wake
	}
	for _, c := range qs {
		if c != nil && c.Val() > 0 {
			return
		}
	}
	_ = s.client.Publish(ctx, wake, "").Err()
}

// spreadLeaveScript takes a user out of its sub-queue; its ticket is gone.
// An early arrival of a scheduled opening gives its entry up (before the
// seal it goes; after it its score turns negative: spread_draw.go).
//
// KEYS[1] sub q
// KEYS[2] sub stats
// KEYS[3] sub mirror
// KEYS[4] sub left
// KEYS[5] sub notice: the user's notice request is forgotten
// KEYS[6] sub cfg
// KEYS[7] sub pre
// ARGV[1] user
// ARGV[2] the room's ticket counter now (the arrivals after it: left_after)
//
// Returns {"OK"}, or {"OK", ticket} when the user was queued.
var spreadLeaveScript = newFunction("spread_leave")

func (s *Store) spreadLeave(ctx context.Context, room string, l *spreadLayout, user string) error {
	seq, err := s.client.Get(ctx, s.keys(room).seq).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return s.fail("leave", err)
	}
	g := l.of(user)
	k := l.subs[g]
	r, err := s.do(ctx, "leave", spreadLeaveScript, []string{k.q, k.stats, k.mirror, k.left, k.notice, k.cfg, k.pre}, user, seq)
	if err != nil {
		return err
	}
	if r.code() != "OK" {
		return s.unexpected(ctx, "leave", r)
	}
	s.pushGone(ctx, l, g, r[1:])
	return nil
}

// spreadMirrorScript counts tickets gone on another sub-shard in this
// one's positions.
//
// KEYS[1] sub cfg (its head: tickets at or before it are left out)
// KEYS[2] sub mirror
// ARGV    tickets
//
// Returns "OK".
var spreadMirrorScript = newFunction("spread_mirror")

// pushGone tells every sub-shard but from of tickets gone there, so that
// positions behind them are exact at once. Best effort: a push that
// fails is made by the next admission tick (the sub-shard's left list).
func (s *Store) pushGone(ctx context.Context, l *spreadLayout, from int, tickets []any) {
	if len(tickets) == 0 {
		return
	}
	_ = s.eachShard(l, func(i int, k *subKeys) error {
		if i == from {
			return nil
		}
		if err := s.call(ctx, s.client, spreadMirrorScript, []string{k.cfg, k.mirror}, tickets...).Err(); err != nil {
			s.log.WarnContext(ctx, "redisstore: positions count a leaver from the next tick on", "err", err)
		}
		return nil
	})
}

// spreadSoldScript tells a sub-shard the units sold on another.
//
// KEYS[1] sub units
// ARGV[1] from: the index of the sub-shard that sold
// ARGV[2] sold: the units sold there in all
//
// Returns "OK" (a lower figure than it knows changes nothing).
var spreadSoldScript = newFunction("spread_sold")

// pushSold tells every sub-shard of a spread room but user's own of the
// units sold there now (sold), so that each says "sold out" and the
// units left at once. Best effort: a push that fails is made by the next
// admission tick (spread_pop), and the admission itself counts the units
// of every sub-shard, so a lost push only delays what a waiting user is
// told.
func (s *Store) pushSold(ctx context.Context, room, user string, sold int64) {
	l, err := s.layout(ctx, room)
	if err != nil || l.shards <= 1 {
		return
	}
	from := l.of(user)
	_ = s.eachShard(l, func(i int, k *subKeys) error {
		if i == from {
			return nil
		}
		if err := s.call(ctx, s.client, spreadSoldScript, []string{k.units}, from, sold).Err(); err != nil {
			s.log.WarnContext(ctx, "redisstore: a sub-shard counts a sale from the next tick on", "room", room, "err", err)
		}
		return nil
	})
}

// gateCall is the gate's call (claim, complete, release, renew) of room
// for user: on its sub-shard in a spread room; and the name its tokens
// are watched under for lost writes (the room, or the sub-shard's tag).
func (s *Store) gateCall(ctx context.Context, room, user string, plain func(*roomKeys) fcall, spread func(*subKeys) fcall) (fcall, string, error) {
	l, err := s.layout(ctx, room)
	if err != nil {
		return fcall{}, "", err
	}
	if l.shards > 1 {
		k := l.subs[l.of(user)]
		return spread(k), k.tag, nil
	}
	return plain(s.keys(room)), room, nil
}

// spreadStats sums a spread room's figures over its sub-shards; the pace
// is not measured there (Stats.Pace is empty: the ETA falls back to the
// rate).
func (s *Store) spreadStats(ctx context.Context, l *spreadLayout, control waitroom.Stats) (waitroom.Stats, error) {
	type sub struct {
		stats         *redis.MapStringStringCmd
		waiting, live *redis.IntCmd
	}
	subs := make([]sub, len(l.subs))
	if _, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range l.subs {
			subs[i] = sub{p.HGetAll(ctx, k.stats), p.ZCard(ctx, k.q), p.HLen(ctx, k.tok)}
		}
		return nil
	}); err != nil {
		return waitroom.Stats{}, s.fail("stats", err)
	}
	// Those max_queue refused are counted by the ticket counter.
	st := waitroom.Stats{Pace: control.Pace, Full: control.Full}
	for _, sb := range subs {
		m := sb.stats.Val()
		n := func(f string) int64 { v, _ := strconv.ParseInt(m[f], 10, 64); return v }
		st.Waiting += sb.waiting.Val()
		if live := sb.live.Val(); live > 0 {
			st.Active += live - 1 // the hash's tokHashTableField
		}
		st.Entered += n("entered")
		st.Full += n("full")
		st.Admitted += n("admitted")
		st.Completed += n("completed")
		st.Sold += n("sold")
		st.Released += n("released")
		st.Expired += n("expired")
		st.NoShows += n("no_shows")
		st.Abandoned += n("abandoned")
	}
	early, err := s.spreadEarlyWaiting(ctx, l) // spread_draw.go
	st.Waiting += early
	return st, err
}

// spreadWork is Work for a spread room: what its sub-shards hold.
func (s *Store) spreadWork(ctx context.Context, l *spreadLayout) (waitroom.Work, error) {
	qs := make([]*redis.IntCmd, len(l.subs))
	toks := make([]*redis.IntCmd, len(l.subs))
	if _, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range l.subs {
			qs[i], toks[i] = p.Exists(ctx, k.q, k.pre), p.Exists(ctx, k.tok) // pre: early arrivals (spread_draw.go)
		}
		return nil
	}); err != nil {
		return waitroom.WorkNone, s.fail("work", err)
	}
	w := waitroom.WorkNone
	for i := range l.subs {
		if qs[i].Val() > 0 {
			return waitroom.WorkQueue, nil
		}
		if toks[i].Val() > 0 {
			w = waitroom.WorkTokens
		}
	}
	return w, nil
}

// updateSpread is UpdateRoom on Cluster. The same number of shards: the
// room's settings compared and set, then copied into every sub-shard.
// Another number (a reshard): only while nobody waits or holds a token
// anywhere in the room. The old sub-shards are retired first, each
// checked empty in the same step, so a call with the old layout finds
// RESHARDED from then on; then the room's own settings with the new
// layout (its own queue, tokens, sales and buyers checked empty in that
// step); then the new sub-shards. A refusal gives the retired sub-shards
// their layout back.
func (s *Store) updateSpread(ctx context.Context, room string, from, to waitroom.RoomConfig) error {
	s.forgetLayout(room)
	old, err := s.layout(ctx, room)
	if err != nil {
		return err
	}
	if from.Shards == to.Shards {
		if err := s.updateOpening(ctx, room, old, from, to); err != nil { // spread_draw.go
			return err
		}
		if old.shards > 1 {
			return s.syncSubs(ctx, old, to, old.id, false)
		}
		return nil
	}
	fields, next, err := s.spreadFields(ctx, room, to)
	if err != nil {
		return err
	}
	if err := s.spreadEarlyOverReshard(ctx, room, old); err != nil { // spread_draw.go
		return err
	}
	retired := next.id
	if retired == "" {
		retired = waitroom.NewToken() // back to one shard: the sub-shards keep no layout
	}
	if old.shards > 1 {
		retiredLayout := &spreadLayout{shards: old.shards, id: retired, subs: old.subs}
		if err := s.syncSubs(ctx, retiredLayout, to, old.id, true); err != nil {
			s.restoreSubs(ctx, old, from, retired)
			return err
		}
	}
	err = s.updateControl(ctx, room, from, to, fields, true, "")
	s.forgetLayout(room)
	if err != nil {
		if old.shards > 1 {
			s.restoreSubs(ctx, old, from, retired)
		}
		return err
	}
	if next.shards > 1 {
		return s.syncSubs(ctx, next, to, retired, false)
	}
	return nil
}

// restoreSubs gives the sub-shards of a refused reshard their layout back.
func (s *Store) restoreSubs(ctx context.Context, old *spreadLayout, cfg waitroom.RoomConfig, retired string) {
	if err := s.syncSubs(context.WithoutCancel(ctx), old, cfg, retired, false); err != nil {
		s.log.ErrorContext(ctx, "redisstore: a refused reshard left sub-shards retired; update the room again", "err", err)
	}
}

// spreadBatched answers b when room is spread, and reports whether it
// did. A reshard met meanwhile reads the layout again, once.
func (s *Store) spreadBatched(ctx context.Context, op *batchedOp, room string, b *userBatch) bool {
	l, err := s.layout(ctx, room)
	if err != nil {
		b.err = err
		return true
	}
	if l.shards <= 1 {
		return false
	}
	var users []string
	var at []int
	for i, u := range b.users {
		if !b.gaveUp[i] {
			users, at = append(users, u), append(at, i)
		}
	}
	res, err := s.spreadBatch(ctx, op, room, l, users)
	if errors.Is(err, errResharded) {
		s.forgetLayout(room)
		if l, err = s.layout(ctx, room); err == nil {
			if l.shards <= 1 {
				return false
			}
			res, err = s.spreadBatch(ctx, op, room, l, users)
		}
	}
	if errors.Is(err, errResharded) {
		err = fmt.Errorf("%w: redisstore %s: the room is being resharded", waitroom.ErrStoreUnavailable, op.name)
	}
	if err != nil {
		b.err = err
		return true
	}
	b.results = make([]userResult, len(b.users))
	for j, i := range at {
		b.results[i] = res[j]
	}
	return true
}

// admitSpread is Admit of a spread room, read again once after a reshard.
func (s *Store) admitSpread(ctx context.Context, room string, l *spreadLayout) ([]waitroom.Admission, error) {
	cfg, err := s.RoomConfig(ctx, room)
	if err != nil {
		return nil, err
	}
	if open, err := s.spreadDrawOpening(ctx, room, l, cfg); err != nil || !open { // spread_draw.go
		return nil, err
	}
	got, err := s.spreadAdmit(ctx, room, l, cfg)
	if errors.Is(err, errResharded) {
		s.forgetLayout(room)
		return nil, fmt.Errorf("%w: redisstore admit: the room is being resharded", waitroom.ErrStoreUnavailable)
	}
	return got, err
}

// workSpread sets work for the spread rooms among rooms (their own keys
// hold no queue or token, so Work's probe of them leaves it). It asks
// only for the layouts of rooms it has never seen, all in one pipeline,
// and takes the others from the cache however old: a probe of many idle
// rooms stays a few commands. A room spread since wakes its admitter
// when its first user enters (the wake is on the room's own channel),
// and that tick reads the layout again.
func (s *Store) workSpread(ctx context.Context, rooms []string, work []waitroom.Work) error {
	if _, ok := s.client.(*redis.ClusterClient); !ok {
		return nil
	}
	layouts := make([]*spreadLayout, len(rooms))
	var unseen []int
	for i, room := range rooms {
		if l, ok := s.layouts.m.Load(room); ok {
			layouts[i] = l.(*spreadLayout)
		} else {
			unseen = append(unseen, i)
		}
	}
	if len(unseen) > 0 {
		reads := make([]*redis.SliceCmd, len(unseen))
		if _, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for j, i := range unseen {
				reads[j] = p.HMGet(ctx, s.keys(rooms[i]).cfg, "shards", "tags", "layout")
			}
			return nil
		}); err != nil {
			return s.fail("work", err)
		}
		for j, i := range unseen {
			l, err := s.keepLayout(rooms[i], reads[j].Val())
			if err != nil {
				return err
			}
			layouts[i] = l
		}
	}
	for i, l := range layouts {
		if l.shards > 1 {
			var err error
			if work[i], err = s.spreadWork(ctx, l); err != nil {
				return err
			}
		}
	}
	return nil
}
