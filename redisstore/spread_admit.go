package redisstore

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"

	"github.com/waitroom/waitroom"
)

// spreadBeginScript begins an admission tick of a spread room on its
// control shard: the tick's fence, the last stable ticket and the share
// of the bucket it takes.
//
// KEYS[1] cfg
// KEYS[2] bucket
// KEYS[3] seq
// KEYS[4] inflight
// KEYS[5] fence
// ARGV[1] layout id
//
// Returns {"OK", fence, n (users it may admit, no-shows made up
// included; 0 when paused), regular (of them, the rate's share), stable
// ticket, now ms, elapsed µs since the last tick (-1: the first), stock
// (0: not tracked), units per order, events (1: the room's outbox is
// on)}, {"ROOM_NOT_FOUND"} or {"RESHARDED"}.
var spreadBeginScript = newFunction("spread_begin")

// spreadHeadScript seals a sub-shard for a tick and reads its head.
//
// KEYS[1] sub cfg
// KEYS[2] sub q
// KEYS[3] sub tok
// KEYS[4] sub active
// KEYS[5] sub stats
// KEYS[6] sub left
// KEYS[7] sub mirror
// KEYS[8] sub units
// KEYS[9] sub notice
// KEYS[10] sub out: the sub-shard's outbox
// ARGV[1] layout id
// ARGV[2] fence
// ARGV[3] quota: head entries read, at most
// ARGV[4] stable ticket: none after it is read
// ARGV[5] trim_to: the leavers every mirror has (0: none known)
// ARGV[6] events: "1" names the no-shows, expired and abandoned it drops
// in the sub-shard's outbox (outbox.go)
//
// Users silent past abandon_after at the head (past MaxNoticeSilence,
// who asked to be told of their turn) are dropped there (at most
// waitroom.MaxSkipsPerAdmit), so they take no share of the tick.
//
// Returns {"OK", live tokens, waiting, left_base, no_shows, head,
// skipped, left, left_after, entered, admitted, sold (units sold here),
// told sold, told used (the other sub-shards' units as this one was
// told: spread.lua, told_units), n_leavers, leaver ticket × n_leavers,
// user, ticket, …} (entered and admitted only grow: the lost-write watch
// of the sub-shard reads them),
// {"STALE"} (a later tick sealed it), {"ROOM_NOT_FOUND"} or {"RESHARDED"}.
var spreadHeadScript = newFunction("spread_head")

// headKeys are spread_head's KEYS, in their order.
func (k *subKeys) headKeys() []string {
	return []string{k.cfg, k.q, k.tok, k.active, k.stats, k.left, k.mirror, k.units, k.notice, k.out}
}

// spreadPopScript admits a sub-shard's users up to the tick's cutoff and
// publishes the head and the other sub-shards' leavers into it.
//
// KEYS[1] sub cfg
// KEYS[2] sub q
// KEYS[3] sub tok
// KEYS[4] sub active
// KEYS[5] sub stats
// KEYS[6] sub mirror
// KEYS[7] sub buyers (one order per buyer: a buyer popped gets no token)
// KEYS[8] sub units
// KEYS[9] sub notice: a popped user's request is handed back and forgotten
// KEYS[10] sub out: the sub-shard's outbox
// ARGV[1] layout id
// ARGV[2] fence: the one the sub-shard was sealed with
// ARGV[3] cutoff ticket
// ARGV[4] head ticket to publish
// ARGV[5] n_tokens, ARGV[6] n_leavers
// ARGV[7] this sub-shard's index, ARGV[8] n_figures (0, or the shards)
// ARGV[9] events: "1" names the users it admits and skips in the
// sub-shard's outbox
// ARGV[10 ..] tokens × n_tokens, then leaver tickets × n_leavers, then
// sold, used × n_figures: every sub-shard's units sold, and sold or
// reserved by its live tokens, after the tick, told into units (sold
// kept when it knows more)
//
// Returns {"OK", skipped (abandoned), waiting, admitted (the counter
// after), user, ticket, notice (its channels; empty: none), …},
// {"STALE"}, {"ROOM_NOT_FOUND"} or {"RESHARDED"}.
var spreadPopScript = newFunction("spread_pop")

// spreadPopTokensAt is where spread_pop's ARGV (from 0) holds its first
// token.
const spreadPopTokensAt = 9

// popKeys are spread_pop's KEYS, in their order.
func (k *subKeys) popKeys() []string {
	return []string{k.cfg, k.q, k.tok, k.active, k.stats, k.mirror, k.buyers, k.units, k.notice, k.out}
}

// spreadCommitScript ends a tick: what it took of the bucket and did not
// admit goes back, unless a later tick began meanwhile.
//
// KEYS[1] cfg
// KEYS[2] bucket
// KEYS[3] fence
// KEYS[4] seq
// KEYS[5] stats
// ARGV[1] fence
// ARGV[2] unused: users the tick took and did not admit
// ARGV[3] waiting after the tick
// ARGV[4] no-shows counted in all
// ARGV[5] made up: admitted beyond the rate's share
// ARGV[6] the stable ticket the tick read up to
// ARGV[7] elapsed µs the tick measured (-1: none)
// ARGV[8] regular: admitted on the rate's share; ARGV[9] issued on this tick's share
// ARGV[10] abandoned at the heads; ARGV[11] left, ARGV[12] left_after: the
//
//	sub-shards' counters, summed
//
// ARGV[13] units sold over the sub-shards (as their heads read them)
//
// The users the tick admitted and dropped are in the sub-shards' own
// outboxes already (spread_head, spread_pop). The pace is measured as admitScript measures it, into the same bucket
// fields, and the summed counters are mirrored into the room's stats hash
// for statsScript's fold.
//
// Returns "OK" or "STALE".
var spreadCommitScript = newFunction("spread_commit")

// subHead is what spread_head read of one sub-shard.
type subHead struct {
	live, waiting, base, noShows, head int64
	skipped, left, leftAfter           int64
	entered, admitted                  int64
	sold, toldSold, toldUsed           int64
	leavers                            []any
	users                              []string
	tickets                            []int64
}

// spreadAdmit is Admit for a spread room. One tick: begin on the control
// shard (fence, stable ticket, the bucket's share), seal and read every
// sub-shard's head at once, merge them in ticket order, pop each
// sub-shard up to the cutoff at once, commit. The fence makes two
// admitters ticking the room at once (a handover) safe: a sub-shard
// sealed by the later tick refuses the earlier one, and the later one
// read it after sealing, so it counts every token the earlier one issued
// there; each took its own share of the bucket. A tick that fails on
// some sub-shards admits the others' users: those left are the smallest
// tickets of the next tick.
func (s *Store) spreadAdmit(ctx context.Context, room string, l *spreadLayout, cfg waitroom.RoomConfig) ([]waitroom.Admission, error) {
	k := s.keys(room)
	r, err := s.do(ctx, "admit", spreadBeginScript, []string{k.cfg, k.bucket, k.seq, k.inflight, k.fence}, l.id)
	if err != nil {
		return nil, err
	}
	switch r.code() {
	case "RESHARDED":
		return nil, errResharded
	case "OK":
	default:
		return nil, s.unexpected(ctx, "admit", r)
	}
	var v [9]int64 // fence, n, regular, stable, now, elapsed, stock, per, events
	for i := range v {
		var ok bool
		if v[i], ok = r.int(i + 1); !ok {
			return nil, s.unexpected(ctx, "admit", r)
		}
	}
	fence, n, regular, stable, elapsed, stock, per := v[0], v[1], v[2], v[3], v[5], v[6], max(v[7], 1)
	events := v[8] == 1

	ts := s.spreadTrims(room)
	heads := make([]*subHead, l.shards)
	err = s.eachShard(l, func(i int, sk *subKeys) error {
		w := s.watch(sk.tag)
		at := w.marks()
		r, err := s.spreadCall(ctx, "admit", spreadHeadScript, sk.headKeys(),
			l.id, fence, cfg.TickQuota(), stable, ts.trimTo(i), boolArg(events))
		if errors.Is(err, waitroom.ErrRoomNotFound) {
			// Its settings were lost: written again, the next tick
			// admits there.
			s.repairSub(ctx, room, l, i)
		}
		if err != nil {
			return err
		}
		h, ok := readHead(r)
		if !ok {
			return s.unexpected(ctx, "admit", r)
		}
		heads[i] = h
		// A sub-shard's counters only grow: lower than seen is a loss,
		// reported under the sub-shard's tag (a spread room loses what
		// the primary that failed held).
		s.observe(ctx, sk.tag, w, at, reading{h.entered, h.entered}, &reading{h.admitted, h.admitted})
		return nil
	})
	if onlyStale(err) {
		return nil, nil // a later tick is admitting: it took its own share
	}
	if err != nil {
		return nil, err
	}

	var live, noShows, head, skipped, left, leftAfter, sold int64
	type entry struct {
		user   string
		ticket int64
		shard  int
	}
	var entries []entry
	for i, h := range heads {
		live += h.live
		noShows += h.noShows
		skipped += h.skipped
		left += h.left
		leftAfter += h.leftAfter
		sold += h.sold
		head = max(head, h.head)
		for j, u := range h.users {
			entries = append(entries, entry{u, h.tickets[j], i})
		}
	}
	// The room's slots and units left, over every sub-shard: each was
	// sealed before it was read, so its live tokens and units sold count
	// every token an older tick issued or will issue there; only this
	// tick issues more, and a Complete, a release or an expiry meanwhile
	// never adds to what they reserve. So max_active and the stock hold
	// over the room as on one shard.
	roomLeft := int64(math.MaxInt64)
	if cfg.MaxActive > 0 {
		roomLeft = max(0, int64(cfg.MaxActive)-live)
	}
	if stock > 0 {
		roomLeft = min(roomLeft, waitroom.RoomConfig{Stock: int(stock), UnitsPerOrder: int(per)}.TokensLeft(sold, live))
	}
	slices.SortFunc(entries, func(a, b entry) int { return int(a.ticket - b.ticket) })
	// Users at or before the head are owed: a tick that stopped part way
	// (a later one sealed some sub-shards first) admitted up to its cutoff
	// on the others and published it there, so they go now, before anyone
	// behind them, on that tick's share of the bucket, within the slots
	// and units left.
	owed := int64(0)
	for _, e := range entries {
		if e.ticket <= head {
			owed++
		}
	}
	entries = entries[:min(int64(len(entries)), owed+n, roomLeft)]
	cutoff := head
	count := make([]int, l.shards)
	for _, e := range entries {
		cutoff = max(cutoff, e.ticket)
		count[e.shard]++
	}

	// With stock every sub-shard is told the others' units after this
	// tick (used: sold, and reserved by the live tokens as read and this
	// tick's), for its answers.
	var figures []any
	used := make([]int64, l.shards)
	var allSold, allUsed int64
	if stock > 0 {
		for i, h := range heads {
			used[i] = h.sold + (h.live+int64(count[i]))*per
			figures = append(figures, h.sold, used[i])
			allSold += h.sold
			allUsed += used[i]
		}
	}

	if s.tickCut != nil {
		s.tickCut()
	}
	pops := make([][]waitroom.Admission, l.shards)
	popTickets := make([][]int64, l.shards)
	var waiting int64
	var mu sync.Mutex
	err = s.eachShard(l, func(i int, sk *subKeys) error {
		var leavers []any
		for j, h := range heads {
			if j != i {
				leavers = append(leavers, h.leavers...)
			}
		}
		h := heads[i]
		told := stock <= 0 || (h.toldSold >= allSold-h.sold && h.toldUsed == allUsed-used[i])
		if count[i] == 0 && len(leavers) == 0 && cutoff == h.head && told {
			mu.Lock()
			waiting += h.waiting
			mu.Unlock()
			return nil // nothing to write here this tick
		}
		args := []any{l.id, fence, cutoff, cutoff, count[i], len(leavers), i, len(figures) / 2, boolArg(events)}
		for range count[i] {
			args = append(args, waitroom.NewToken())
		}
		args = append(args, leavers...)
		args = append(args, figures...)
		w := s.watch(sk.tag)
		at := w.marks()
		// On one connection to the sub-shard's primary, so that the WAIT
		// below covers the tokens it issues.
		primary := s.onPrimary(ctx, sk.cfg)
		defer primary.close()
		res, err := primary.call(ctx, spreadPopScript, sk.popKeys(), args...)
		r, err := s.spreadReply(ctx, "admit", res, err)
		if err != nil {
			return err
		}
		_, ok1 := r.int(1)
		waitingHere, ok2 := r.int(2)
		admittedAfter, ok3 := r.int(3)
		if !ok1 || !ok2 || !ok3 || (len(r)-4)%3 != 0 {
			return s.unexpected(ctx, "admit", r)
		}
		for j := 4; j < len(r); j += 3 {
			u, ok1 := r.str(j)
			t, ok2 := r.int(j + 1)
			notice, ok3 := r.str(j + 2)
			if !ok1 || !ok2 || !ok3 {
				return s.unexpected(ctx, "admit", r)
			}
			a := waitroom.Admission{User: u, Token: args[spreadPopTokensAt+(j-4)/3].(string)}
			if notice != "" {
				a.Notice = []byte(notice)
			}
			pops[i] = append(pops[i], a)
			popTickets[i] = append(popTickets[i], t)
		}
		issuedHere := int64(len(pops[i]))
		w.issuedNow(admittedAfter-issuedHere+1, pops[i])
		s.observe(ctx, sk.tag, w, at, reading{heads[i].entered, heads[i].entered}, &reading{admittedAfter - issuedHere, admittedAfter})
		// The sub-shards wait at once: a tick waits for one replica round.
		primary.waitReplica(ctx, sk.tag, w, "issued tokens", len(pops[i]))
		mu.Lock()
		waiting += waitingHere
		mu.Unlock()
		return nil
	})
	// Every sub-shard took the others' leavers: their lists may be
	// trimmed at the next tick.
	ts.copied(heads, err == nil)

	// In ticket order across the sub-shards.
	var out []waitroom.Admission
	var order []int64
	for i := range pops {
		out = append(out, pops[i]...)
		order = append(order, popTickets[i]...)
	}
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return int(order[a] - order[b]) })
	sorted := make([]waitroom.Admission, len(out))
	for i, j := range idx {
		sorted[i] = out[j]
	}
	issued := int64(0) // on this tick's share: the owed are not
	for _, t := range order {
		if t > head {
			issued++
		}
	}
	madeUp := max(0, issued-regular)
	onRate := min(issued, regular)
	unused := regular - onRate
	args := []any{fence, unused, waiting, noShows, madeUp, stable, elapsed, onRate, issued, skipped, left, leftAfter, sold}
	if cerr := s.call(ctx, s.client, spreadCommitScript, []string{k.cfg, k.bucket, k.fence, k.seq, k.stats}, args...).Err(); cerr != nil {
		err = errors.Join(err, s.fail("admit", cerr))
	}
	if onlyStale(err) {
		err = nil
	}
	if err != nil && len(sorted) == 0 {
		return nil, err
	}
	if err != nil {
		s.log.WarnContext(ctx, "redisstore: a spread room's tick admitted on some shards only", "room", room, "err", err)
	}
	return sorted, nil
}

// eachShard runs fn for every sub-shard of l at once.
func (s *Store) eachShard(l *spreadLayout, fn func(i int, k *subKeys) error) error {
	errs := make([]error, len(l.subs))
	var wg sync.WaitGroup
	for i, k := range l.subs {
		wg.Go(func() { errs[i] = fn(i, k) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func readHead(r reply) (*subHead, bool) {
	var v [14]int64
	for i := range v {
		var ok bool
		if v[i], ok = r.int(i + 1); !ok {
			return nil, false
		}
	}
	h := &subHead{live: v[0], waiting: v[1], base: v[2], noShows: v[3], head: v[4], skipped: v[5], left: v[6], leftAfter: v[7],
		entered: v[8], admitted: v[9], sold: v[10], toldSold: v[11], toldUsed: v[12]}
	at := 15 + int(v[13])
	if at > len(r) || (len(r)-at)%2 != 0 {
		return nil, false
	}
	h.leavers = r[15:at]
	for j := at; j < len(r); j += 2 {
		u, ok1 := r.str(j)
		t, ok2 := r.int(j + 1)
		if !ok1 || !ok2 {
			return nil, false
		}
		h.users, h.tickets = append(h.users, u), append(h.tickets, t)
	}
	return h, true
}

// spreadTrim remembers, per room, how far each sub-shard's list of
// leavers was copied into every mirror by this Store's last tick, so the
// next tick trims it. A Store that never ticked the room trims nothing
// and copies again: copying a leaver twice changes nothing.
type spreadTrim struct {
	mu sync.Mutex
	to []int64
}

func (s *Store) spreadTrims(room string) *spreadTrim {
	v, _ := s.trims.LoadOrStore(room, &spreadTrim{})
	return v.(*spreadTrim)
}

func (t *spreadTrim) trimTo(i int) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if i < len(t.to) {
		return t.to[i]
	}
	return 0
}

func (t *spreadTrim) copied(heads []*subHead, all bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.to = make([]int64, len(heads))
	if !all {
		return
	}
	for i, h := range heads {
		t.to[i] = h.base + int64(len(h.leavers))
	}
}
