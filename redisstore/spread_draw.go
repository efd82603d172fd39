package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom"
)

// The scheduled opening of a spread room (lua/spread_draw.lua).
//
// Before the opening an ENTER takes no ticket: spread_ticket hands out
// arrival numbers instead (from the room's draw record, so their order
// is one across the sub-shards), and each early arrival waits in its
// sub-shard's pre, scored by its number:
//
//	wr:{ROOM#n}:pre   zset  early arrival → arrival number (negative: left
//	                        after the seal)
//
// At the opening the admitter draws, as on one shard (drawOpening) and
// with its code for the order and the record: it takes the draw's lock
// (draw_begin), seals every pre and sets the room's ticket counter past
// the entrants (spreadOpen: the record's base; an ENTER that meets the
// opening first does the same, so nobody waits for the drawer), reads
// every pre, orders the entrants with waitroom.DrawPlaces, then writes
// the places in chunks: the record on the room's own shard (places, ent,
// under the lock) and each entrant's ticket base + place on its
// sub-shard, where a leaver's ticket is gone instead. Each sub-shard is
// then marked drawn, and the record published (draw_done). Admission
// waits for that: positions are exact from the first ticket on.
//
// A drawer that dies is taken over when its lock lapses: the snapshot is
// read again (the sealed pre only changes sign), the places are the same,
// and writing them again changes nothing.

// spreadDrawEnterScript places early arrivals in a sub-shard's pre.
//
// KEYS    the sub-shard's cfg, pre, q, tok, active, stats, mirror, buyers, units
// ARGV[1] layout id
// ARGV[2] opens_at ms (the room's)
// ARGV[3 ..] user, arrival number, …
//
// Returns {"ROOM_NOT_FOUND"}, {"RESHARDED"} or {"OK", standing × n,
// score × n}: {"SCHEDULED", opens_in_ms, position} (fifo: the place
// among this sub-shard's early arrivals; else 0), {"ADMITTED", token,
// ms_left}, a position (queued before the room was scheduled),
// {"ALREADY_ORDERED"}, {"ROOM_CLOSED"}, {"SOLD_OUT"}, {"QUEUE_FULL"} (the
// sub-shard's share of max_queue) or {"OPENED"} (its pre is sealed: the
// user takes a ticket); then each
// user's arrival number in pre (0: none).
var spreadDrawEnterScript = newFunction("spread_draw_enter")

// spreadDrawSealScript seals a sub-shard's pre for the draw.
//
// KEYS    sub cfg, sub pre
// ARGV[1] layout id
//
// Returns {"OK", entrants here}, {"ROOM_NOT_FOUND"} or {"RESHARDED"}.
var spreadDrawSealScript = newFunction("spread_draw_seal")

// spreadDrawBaseScript sets the room's ticket counter past the entrants,
// once.
//
// KEYS    cfg, draw, seq (the room's)
// ARGV[1] entrants: the sealed pre's counts summed
//
// Returns {"OK", base, entrants} (those set first, if they were) or
// {"NOT_YET"} (the opening has not come by the room's clock).
var spreadDrawBaseScript = newFunction("spread_draw_base")

// spreadDrawRecordScript writes a chunk of the draw's record on the
// room's own shard, under the lock.
//
// KEYS    draw, places, ent (the room's)
// ARGV[1] owner, ARGV[2] lease_ms
// ARGV[3 ..] user, place, …
//
// Returns "OK", "DONE" or "LOST", as drawChunkScript.
var spreadDrawRecordScript = newFunction("spread_draw_record")

// spreadDrawPlaceScript queues a chunk's entrants of a sub-shard with
// their tickets (base + place), each once; a leaver's ticket is gone.
//
// KEYS    sub cfg, sub pre, sub q, sub mirror, sub left
// ARGV[1] layout id
// ARGV[2 ..] user, ticket, …
//
// Returns {"OK", gone ticket, …} (for the other sub-shards' positions),
// {"DONE"} (the sub-shard's part was published: nothing written),
// {"ROOM_NOT_FOUND"} or {"RESHARDED"}.
var spreadDrawPlaceScript = newFunction("spread_draw_place")

// spreadDrawDoneScript marks a sub-shard's part of the draw written.
//
// KEYS    sub cfg, sub pre
// ARGV[1] layout id, ARGV[2] entrants (the room's)
//
// Returns "OK", {"ROOM_NOT_FOUND"} or {"RESHARDED"}.
var spreadDrawDoneScript = newFunction("spread_draw_done")

// Early arrivals' calls are of the request path: through the automatic
// pipeliner, as the rest of a spread room's ENTER and STATUS.
func init() {
	for _, f := range []*function{spreadDrawEnterScript} {
		hotPath[f] = true
	}
}

// spreadTicket runs spread_ticket for n users. A room whose opening has
// come but whose counter the draw has not set yet is opened here
// (spreadOpen) and asked again; before the opening early is the
// arrival numbers' reply.
func (s *Store) spreadTicket(ctx context.Context, room string, l *spreadLayout, n int) (r, early reply, err error) {
	k := s.keys(room)
	for try := 0; ; try++ {
		r, err := s.do(ctx, "ticket", spreadTicketScript, []string{k.cfg, k.seq, k.inflight, k.bucket, k.draw}, l.id, n)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case r.code() == "SCHEDULED":
			return nil, r, nil
		case r.code() == "DRAWING" && try == 0:
			if _, _, err := s.spreadOpen(ctx, room, l); err != nil {
				return nil, nil, err
			}
			continue
		case r.code() == "DRAWING":
			return nil, nil, fmt.Errorf("%w: redisstore enter: the room is opening", waitroom.ErrStoreUnavailable)
		}
		r, err = s.spreadCode(ctx, "ticket", r, nil)
		return r, nil, err
	}
}

// spreadEnterEarly places a batch's users in their sub-shards' pre,
// numbered from early's first arrival number in the batch's order. Those
// whose pre was sealed meanwhile (the opening came) enter again, with
// tickets.
func (s *Store) spreadEnterEarly(ctx context.Context, room string, l *spreadLayout, users []string, groups [][]int, out []userResult, early reply) error {
	opensAt, ok1 := early.int(2)
	first, ok2 := early.int(3)
	if !ok1 || !ok2 {
		return s.unexpected(ctx, "enter", early)
	}
	// Numbers in the batch's order, each user's first naming one.
	sent := make([]bool, len(users))
	for _, idx := range groups {
		for _, i := range idx {
			sent[i] = true
		}
	}
	number := make(map[int]int64)
	next := first
	for i := range users {
		if sent[i] {
			number[i] = next
			next++
		}
	}
	if ctx.Value(reenteredKey{}) != nil {
		// Sealed on a sub-shard, yet the room's clock is before the
		// opening (it was moved): no ticket and no pre; try again.
		return fmt.Errorf("%w: redisstore enter: the room's opening moved meanwhile", waitroom.ErrStoreUnavailable)
	}
	var mu sync.Mutex
	opened := make([][]int, l.shards)
	scores := make([][]any, l.shards)
	err := s.eachSub(l, groups, func(g int, idx []int) error {
		sk := l.subs[g]
		args := []any{l.id, opensAt}
		for _, i := range idx {
			args = append(args, users[i], number[i])
		}
		standings, numbers, err := s.earlyCall(ctx, "enter", spreadDrawEnterScript,
			[]string{sk.cfg, sk.pre, sk.q, sk.tok, sk.active, sk.stats, sk.mirror, sk.buyers, sk.units}, args, len(idx))
		if err != nil {
			return err
		}
		scores[g] = numbers
		for j, i := range idx {
			if sr, ok := asReply(standings[j]); ok && sr.code() == "OPENED" {
				mu.Lock()
				opened[g] = append(opened[g], i)
				mu.Unlock()
				continue
			}
			out[i] = s.userStanding(ctx, "enter", standings[j])
		}
		return nil
	})
	if err != nil {
		return err
	}
	// fifo: counted once every sub-shard has the batch's early arrivals,
	// so one told its place counts those of the batch before it.
	if err := s.eachSub(l, groups, func(g int, idx []int) error { return s.fifoPlaces(ctx, l, g, idx, scores[g], out) }); err != nil {
		return err
	}
	if slices.ContainsFunc(opened, func(idx []int) bool { return len(idx) > 0 }) {
		return s.spreadEnter(context.WithValue(ctx, reenteredKey{}, true), room, l, users, opened, out)
	}
	return nil
}

// reenteredKey marks the ENTER of users whose pre was sealed: once.
type reenteredKey struct{}

// earlyCall runs an early arrivals' function on a sub-shard for n users
// and splits its reply: their standings, then their arrival numbers.
func (s *Store) earlyCall(ctx context.Context, op string, f *function, keys []string, args []any, n int) (standings, scores []any, err error) {
	r, err := s.spreadCall(ctx, op, f, keys, args...)
	if err != nil {
		return nil, nil, err
	}
	if len(r) != 1+2*n {
		return nil, nil, s.unexpected(ctx, op, r)
	}
	return r[1 : 1+n], r[1+n:], nil
}

// fifoPlaces adds to the place a fifo room tells each early arrival of
// sub-shard g (idx, with its arrival number in scores) the early
// arrivals before it on the other sub-shards.
func (s *Store) fifoPlaces(ctx context.Context, l *spreadLayout, g int, idx []int, scores []any, out []userResult) error {
	var need []int // of idx
	for j, i := range idx {
		if score, _ := scores[j].(int64); score > 0 && out[i].err == nil && out[i].st.State == waitroom.StateScheduled && out[i].st.Position > 0 {
			need = append(need, j)
		}
	}
	if len(need) == 0 || l.shards < 2 {
		return nil
	}
	counts := make([][]*redis.IntCmd, len(need))
	if _, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for n, j := range need {
			for h, sk := range l.subs {
				if h != g {
					counts[n] = append(counts[n], p.ZCount(ctx, sk.pre, "(0", fmt.Sprint(scores[j])))
				}
			}
		}
		return nil
	}); err != nil {
		return s.fail("status", err)
	}
	for n, j := range need {
		for _, c := range counts[n] {
			out[idx[j]].st.Position += c.Val()
		}
	}
	return nil
}

// earlyStatus takes the arrival number off sub-shard g's standing of
// an early arrival in a Status batch ({"SCHEDULED", opens_in_ms,
// position, arrival}, spread_status) into scores, so a fifo room's
// place can count the other sub-shards' early arrivals before it.
func earlyStatus(standing any) (any, int64) {
	if r, ok := asReply(standing); ok && r.code() == "SCHEDULED" && len(r) == 4 {
		arrival, _ := r.int(3)
		return []any(r[:3]), arrival
	}
	return standing, 0
}

// spreadOpen seals every sub-shard's pre and sets the ticket counter past
// their entrants, once: whoever comes first (the drawer, or an ENTER
// after the opening), the same base and count, since a sealed pre's
// count never changes.
func (s *Store) spreadOpen(ctx context.Context, room string, l *spreadLayout) (base, entrants int64, err error) {
	counts := make([]int64, l.shards)
	if err := s.eachShard(l, func(i int, sk *subKeys) error {
		r, err := s.spreadCall(ctx, "draw", spreadDrawSealScript, []string{sk.cfg, sk.pre}, l.id)
		if err != nil {
			return err
		}
		var ok bool
		if counts[i], ok = r.int(1); !ok {
			return s.unexpected(ctx, "draw", r)
		}
		return nil
	}); err != nil {
		return 0, 0, err
	}
	var sum int64
	for _, c := range counts {
		sum += c
	}
	k := s.keys(room)
	r, err := s.do(ctx, "draw", spreadDrawBaseScript, []string{k.cfg, k.draw, k.seq}, sum)
	if err != nil {
		return 0, 0, err
	}
	if r.code() == "NOT_YET" {
		return 0, 0, fmt.Errorf("%w: redisstore draw of %q: the opening moved", waitroom.ErrStoreUnavailable, room)
	}
	base, ok1 := r.int(1)
	entrants, ok2 := r.int(2)
	if r.code() != "OK" || !ok1 || !ok2 {
		return 0, 0, s.unexpected(ctx, "draw", r)
	}
	return base, entrants, nil
}

// spreadDrawOpening is the opening of a spread room at an admission
// tick: whether admission may go on (no opening, or its draw is
// published). It makes the draw when the opening has come and no other
// instance is making it, within drawTimeout whatever the caller's
// deadline, as drawOpening.
func (s *Store) spreadDrawOpening(ctx context.Context, room string, l *spreadLayout, cfg waitroom.RoomConfig) (bool, error) {
	if cfg.OpensAt.IsZero() {
		return true, nil
	}
	if id, ok := s.drawn.Load(room); ok && id == l.id {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drawTimeout)
	defer cancel()
	began := time.Now()
	// The room's own pre holds nobody: draw_begin takes the lock, keeps
	// the seed and records the order, as on one shard.
	d, code, err := s.beginDraw(ctx, room)
	switch {
	case err != nil:
		return false, err
	case code == "DONE", code == "NO_DRAW":
		s.drawn.Store(room, l.id)
		return true, nil
	case code != "DRAW":
		return false, nil
	}
	base, entrants, err := s.spreadOpen(ctx, room, l)
	if err != nil {
		return false, err
	}
	users, err := s.spreadEntrants(ctx, l, entrants)
	if err != nil {
		// A rival that held the lock before this one published the draw
		// meanwhile and dropped the snapshots: the opening is done.
		if d, derr := s.Draw(ctx, room); derr == nil && d.State == waitroom.DrawDone {
			s.drawn.Store(room, l.id)
			return true, nil
		}
		return false, err
	}
	placed, err := waitroom.DrawPlaces(d.order, d.seed, users)
	if err != nil {
		return false, fmt.Errorf("redisstore draw of %q: %w", room, err)
	}
	for from, chunk := 0, 0; from < len(placed); from, chunk = from+drawChunk, chunk+1 {
		if s.drawCut != nil && s.drawCut(chunk) {
			return false, nil
		}
		to := min(from+drawChunk, len(placed))
		if done, err := s.spreadDrawChunk(ctx, room, l, placed[from:to], from, base); err != nil || done != "" {
			return done == "DONE", err
		}
	}
	if err := s.eachShard(l, func(_ int, sk *subKeys) error {
		_, err := s.spreadCall(ctx, "draw", spreadDrawDoneScript, []string{sk.cfg, sk.pre}, l.id, entrants)
		return err
	}); err != nil {
		return false, err
	}
	done, err := s.publishDraw(ctx, room, d, placed, began, "shards", l.shards)
	if done {
		s.drawn.Store(room, l.id)
		// The snapshots are read no more (they expire anyway).
		_ = s.eachShard(l, func(_ int, sk *subKeys) error { return s.client.Del(ctx, sk.pre).Err() })
	}
	return done, err
}

// spreadEntrants reads every sealed pre in slices: the entrants in
// arrival order (a leaver's score is its number, negated).
func (s *Store) spreadEntrants(ctx context.Context, l *spreadLayout, entrants int64) ([]string, error) {
	type arrival struct {
		user string
		n    float64
	}
	read := make([][]arrival, l.shards)
	if err := s.eachShard(l, func(i int, sk *subKeys) error {
		pre := sk.pre
		for from := int64(0); ; from += drawReadSlice {
			zs, err := s.client.ZRangeWithScores(ctx, pre, from, from+drawReadSlice-1).Result()
			if err != nil {
				return s.fail("draw", err)
			}
			for _, z := range zs {
				read[i] = append(read[i], arrival{z.Member.(string), math.Abs(z.Score)})
			}
			if len(zs) < drawReadSlice {
				return nil
			}
		}
	}); err != nil {
		return nil, err
	}
	all := slices.Concat(read...)
	if int64(len(all)) != entrants {
		return nil, fmt.Errorf("%w: redisstore draw: %d entrants read, %d sealed", waitroom.ErrStoreUnavailable, len(all), entrants)
	}
	slices.SortFunc(all, func(a, b arrival) int { return int(a.n - b.n) })
	users := make([]string, len(all))
	for i, a := range all {
		users[i] = a.user
	}
	return users, nil
}

// spreadDrawChunk writes one chunk of places (users at places from+1 …,
// tickets base+from+1 …): the record, then each sub-shard's tickets,
// each followed by WAIT 1 on its primary when it has replicas, as the
// tick's tokens are, so a failover takes back no drawn place. It
// returns "" to go on, or "DONE" or "LOST" (the record's answer: the draw
// is published, or another owner holds the lock).
func (s *Store) spreadDrawChunk(ctx context.Context, room string, l *spreadLayout, users []string, from int, base int64) (string, error) {
	k := s.keys(room)
	args := []any{s.id, drawLease.Milliseconds()}
	groups := make([][]any, l.shards)
	for j, u := range users {
		place := int64(from + j + 1)
		args = append(args, u, place)
		g := l.of(u)
		groups[g] = append(groups[g], u, base+place)
	}
	r, err := s.do(ctx, "draw", spreadDrawRecordScript, []string{k.draw, k.places, k.ent}, args...)
	if err != nil {
		return "", err
	}
	switch r.code() {
	case "OK":
	case "DONE", "LOST":
		return r.code(), nil
	default:
		return "", s.unexpected(ctx, "draw", r)
	}
	return "", s.eachShard(l, func(g int, sk *subKeys) error {
		if len(groups[g]) == 0 {
			return nil
		}
		// On one connection to the sub-shard's primary, so that the WAIT
		// below covers the places, as the tick's pops are covered.
		primary := s.onPrimary(ctx, sk.cfg)
		defer primary.close()
		res, err := primary.call(ctx, spreadDrawPlaceScript, []string{sk.cfg, sk.pre, sk.q, sk.mirror, sk.left},
			append([]any{l.id}, groups[g]...)...)
		r, err := s.reply(ctx, "draw", res, err)
		if err != nil {
			return err
		}
		if r.code() == "DONE" {
			return nil // published by another drawer: its places stand
		}
		if r, err = s.spreadCode(ctx, "draw", r, nil); err != nil {
			return err
		}
		// The sub-shards wait at once: a chunk waits for one replica round.
		primary.waitReplica(ctx, sk.tag, s.watch(sk.tag), "drawn places", len(groups[g])/2)
		s.pushGone(ctx, l, g, r[1:])
		return nil
	})
}

// spreadEarlyWaiting is how many early arrivals wait in l's sub-shards
// and are not queued yet (Stats.Waiting counts them, as one shard's
// ahead of its queue).
func (s *Store) spreadEarlyWaiting(ctx context.Context, l *spreadLayout) (int64, error) {
	type sub struct {
		pre  *redis.IntCmd
		done *redis.SliceCmd
	}
	subs := make([]sub, len(l.subs))
	if _, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sk := range l.subs {
			subs[i] = sub{p.ZCard(ctx, sk.pre), p.HMGet(ctx, sk.cfg, "drawn", "placed")}
		}
		return nil
	}); err != nil {
		return 0, s.fail("stats", err)
	}
	var n int64
	for _, sb := range subs {
		v := sb.done.Val()
		if len(v) == 2 && str(v[0]) == "1" {
			continue
		}
		var placed int64
		fmt.Sscan(str(v[1]), &placed)
		n += max(0, sb.pre.Val()-placed)
	}
	return n, nil
}

// spreadSettledScript reads a spread room's ticket counter when no ticket
// is in flight: every ticket handed out so far is placed in its
// sub-queue, or never will be.
//
// KEYS[1] seq
// KEYS[2] inflight
//
// Returns {"OK", ticket counter} or {"IN_FLIGHT"}.
var spreadSettledScript = newFunction("spread_settled", "no-writes")

// errTicketed: an update of a spread room's opening met a ticket handed
// out since it found every sub-queue empty.
var errTicketed = errors.New("redisstore: a ticket was handed out meanwhile")

// updateOpening is updateControl for a spread room whose layout stays.
// A new opening time is refused while anyone waits in its sub-queues
// (ErrQueueNotEmpty), as update_room refuses it on one shard, and in
// one step with the write: the sub-queues are read empty after the
// ticket counter was read with no ticket in flight, and update_room
// writes only while the counter is still there, so no ticket of before
// the opening is placed after it, ahead of the early arrivals. One that
// met a ticket meanwhile looks again, twice.
func (s *Store) updateOpening(ctx context.Context, room string, l *spreadLayout, from, to waitroom.RoomConfig) error {
	if l.shards <= 1 || to.OpensAt.IsZero() || to.OpensAt.Equal(from.OpensAt) {
		return s.updateControl(ctx, room, from, to, nil, false, "")
	}
	for try := 0; ; try++ {
		tickets, err := s.spreadQueuesEmpty(ctx, room, l)
		if err == nil {
			err = s.updateControl(ctx, room, from, to, nil, false, tickets)
		}
		if errors.Is(err, errTicketed) && try < 2 {
			continue
		}
		if errors.Is(err, errTicketed) {
			return waitroom.ErrQueueNotEmpty
		}
		return err
	}
}

// spreadQueuesEmpty returns the ticket counter of room when no ticket is
// in flight and, read after it, every sub-queue of l is empty;
// ErrQueueNotEmpty when one is not, errTicketed when a ticket is in
// flight.
func (s *Store) spreadQueuesEmpty(ctx context.Context, room string, l *spreadLayout) (string, error) {
	k := s.keys(room)
	r, err := s.do(ctx, "update room", spreadSettledScript, []string{k.seq, k.inflight})
	if err != nil {
		return "", err
	}
	if r.code() == "IN_FLIGHT" {
		return "", errTicketed
	}
	seq, ok := r.int(1)
	if r.code() != "OK" || !ok {
		return "", s.unexpected(ctx, "update room", r)
	}
	qs := make([]*redis.IntCmd, len(l.subs))
	if _, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sk := range l.subs {
			qs[i] = p.Exists(ctx, sk.q)
		}
		return nil
	}); err != nil {
		return "", s.fail("update room", err)
	}
	for _, c := range qs {
		if c.Val() > 0 {
			return "", waitroom.ErrQueueNotEmpty
		}
	}
	return strconv.FormatInt(seq, 10), nil
}

// spreadEarlyOverReshard refuses a reshard (ErrShardsNotEmpty) while
// early arrivals wait for the room's draw, in its own pre (one shard) or
// in its sub-shards' (not drawn yet): the new layout would not hold them.
func (s *Store) spreadEarlyOverReshard(ctx context.Context, room string, l *spreadLayout) error {
	if l.shards <= 1 {
		n, err := s.client.Exists(ctx, s.keys(room).pre).Result()
		if err != nil {
			return s.fail("update room", err)
		}
		if n > 0 {
			return waitroom.ErrShardsNotEmpty
		}
		return nil
	}
	early, err := s.spreadEarlyWaiting(ctx, l)
	if err != nil {
		return err
	}
	if early > 0 {
		return waitroom.ErrShardsNotEmpty
	}
	return nil
}
