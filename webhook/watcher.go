package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/waitroom/waitroom"
)

// Watcher relays each room's outbox (waitroom.OutboxStore: the users the
// store's admission let in, found no-show or expired, or skipped as
// gone, written in the admission's own atomic step) to the log, and tells
// what the store decides without telling Go: the no-shows, expired
// tokens and leavers found outside an admission, as counts (unnamed), a
// room selling out and a scheduled opening's draw. Every instance runs
// one, each watching the rooms its dispatcher owns (Owns); an outbox
// event's id follows from the room and its entries (OutboxEvents), so a
// room that changes hands, or a relay that dies between its append and
// its trim, appends it once (Log.AppendOnce), and the log's counters
// (Log.Advance) make each other change told once.
//
// A room's admission writes its outbox only while the Watcher marks it
// (SetOutbox): while an endpoint (Endpoints) wants one of OutboxTypes
// there; any other room's admission pays nothing for it.
type Watcher struct {
	Store   waitroom.Store
	Log     Log
	Emitter *Emitter
	// Owns says whether this instance watches room; nil: every room.
	Owns func(room string) bool
	// Endpoints are the endpoints to tell; nil: one that wants every
	// event of every room.
	Endpoints func() []Endpoint
	// Every is Run's interval; default DefaultWatchEvery.
	Every time.Duration
	// Now is the clock of the scheduled opening and closing, of the
	// appends and of when a second's outbox entries are told
	// (OutboxEvents); nil: time.Now.
	Now func() time.Time
	// Logger; default discards.
	Logger *slog.Logger

	mu     sync.Mutex
	told   map[string]bool       // once's names this watcher saw told
	marked map[string]outboxMark // room → what this watcher last found of its outbox
	// advanced: a Log counter's name → the total this watcher last
	// advanced it to (the outbox's Lost, the unnamed counts)
	advanced map[string]int64
	ticks    int64
	swept    bool // with no endpoint, every room's mark was taken off
	losses   atomic.Int64
}

// outboxMark is what a watcher last found of a room's outbox: drained
// (its read found nothing), at which tick.
type outboxMark struct {
	drained bool
	tick    int64
}

// lookEvery is how many ticks a drained outbox that no endpoint wants is
// left unread (a read also checks its mark).
const lookEvery = 30

// relayBatch is how many entries of a room one read relays, and
// relayReads how many reads a tick makes of one room at most.
const (
	relayBatch = 256
	relayReads = 16
)

// OutboxLost is how many outbox entries this watcher found dropped
// unrelayed (a room's outbox full while its relay could not append).
func (w *Watcher) OutboxLost() int64 { return w.losses.Load() }

// DefaultWatchEvery is Watcher.Every's default: two store calls a room a
// second, over all instances, and a third (the outbox's read) in a room an
// endpoint wants per-user events of.
const DefaultWatchEvery = time.Second

// Run ticks every Every until ctx is done.
func (w *Watcher) Run(ctx context.Context) error {
	return every(ctx, w.Every, DefaultWatchEvery, func() {
		_ = w.Tick(ctx) // a failed room is looked at again next tick
	})
}

// every calls f at once and then every d (def when d is not positive)
// until ctx is done; it returns ctx's error.
func every(ctx context.Context, d, def time.Duration, f func()) error {
	if d <= 0 {
		d = def
	}
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		f()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Tick looks at every room this instance watches once.
func (w *Watcher) Tick(ctx context.Context) error {
	w.mu.Lock()
	w.ticks++
	w.mu.Unlock()
	active := w.Emitter.Active == nil || w.Emitter.Active()
	outbox, hasOutbox := outboxOf(w.Store)
	if !active && (w.swept || !hasOutbox) {
		return nil
	}
	rooms, err := w.Store.Rooms(ctx)
	if err != nil {
		return err
	}
	var errs []error
	owned := 0
	for _, room := range rooms {
		if w.Owns != nil && !w.Owns(room) {
			w.forget(room) // another watcher marks it now
			continue
		}
		owned++
		if active {
			errs = append(errs, w.room(ctx, outbox, room))
		} else if hasOutbox {
			_, _, err := w.relay(ctx, outbox, room, false)
			errs = append(errs, err)
		}
	}
	err = errors.Join(errs...)
	// Without an endpoint the marks come off once, when this watcher owns
	// rooms (before its dispatcher's first step it owns none) or there
	// are none.
	w.swept = !active && err == nil && (owned > 0 || len(rooms) == 0)
	return err
}

// outboxOf is the store's OutboxStore, guarded when the store is.
func outboxOf(s waitroom.Store) (waitroom.OutboxStore, bool) {
	if g, ok := s.(interface {
		Outbox() (waitroom.OutboxStore, bool)
	}); ok {
		return g.Outbox()
	}
	o, ok := s.(waitroom.OutboxStore)
	return o, ok
}

// wantsOutbox reports whether an endpoint wants one of OutboxTypes of
// room.
func (w *Watcher) wantsOutbox(room string) bool {
	if w.Endpoints == nil {
		return true
	}
	for _, ep := range w.Endpoints() {
		for _, typ := range OutboxTypes {
			if ep.Wants(typ, room) {
				return true
			}
		}
	}
	return false
}

func (w *Watcher) forget(room string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.marked, room)
}

// relay marks room's outbox on or off as want says (when its read finds
// the mark otherwise), then appends what it holds to the log and trims
// it, oldest first, relayBatch at a time. An outbox that no endpoint
// wants is read until it is found empty, then once every lookEvery
// ticks. It returns what its first read found named, and whether it read.
func (w *Watcher) relay(ctx context.Context, outbox waitroom.OutboxStore, room string, want bool) (named waitroom.OutboxNamed, read bool, err error) {
	w.mu.Lock()
	mark, ok := w.marked[room]
	ticks := w.ticks
	w.mu.Unlock()
	if ok && !want && mark.drained && ticks-mark.tick < lookEvery {
		return named, false, nil
	}
	mark = outboxMark{tick: ticks}
	defer func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.marked == nil {
			w.marked = map[string]outboxMark{}
		}
		w.marked[room] = mark
	}()
	for i := range relayReads {
		got, err := outbox.ReadOutbox(ctx, room, relayBatch)
		if err != nil {
			return named, read, err
		}
		if i == 0 {
			named, read = got.Named, true
			if got.On != want {
				if err := outbox.SetOutbox(ctx, room, want); err != nil {
					return named, read, err
				}
			}
		}
		if err := w.noteLost(ctx, room, got.Lost); err != nil {
			return named, read, err
		}
		if len(got.Entries) == 0 {
			mark.drained = true
			return named, read, nil
		}
		// Each stream (a spread room's sub-shards have one each) is told
		// and trimmed on its own: an event groups one stream's entries, so
		// its id never depends on how far another stream was trimmed.
		now := nowOf(w.Now)
		var entries []Entry
		var throughs []string
		full, drained := false, true
		for _, es := range byStream(got.Entries) {
			cut := len(es) == relayBatch
			events, through := OutboxEvents(room, es, now, cut)
			for _, ev := range events {
				entries = append(entries, NewEntry(ev, now))
			}
			if through != "" {
				throughs = append(throughs, through)
			}
			full = full || cut
			drained = drained && through == es[len(es)-1].ID
		}
		if len(entries) == 0 {
			return named, read, nil // the last second's entries may have company yet
		}
		if _, err := w.Log.AppendOnce(ctx, entries); err != nil {
			return named, read, err
		}
		// A relay that dies here appends the same ids again: left out.
		for _, through := range throughs {
			if err := outbox.TrimOutbox(ctx, room, through); err != nil {
				return named, read, err
			}
		}
		if !full {
			mark.drained = drained
			return named, read, nil
		}
	}
	return named, read, nil
}

// byStream splits entries by their stream, each in its order, the
// streams in the order they first come.
func byStream(entries []waitroom.OutboxEntry) [][]waitroom.OutboxEntry {
	var out [][]waitroom.OutboxEntry
	at := map[string]int{}
	for _, e := range entries {
		i, ok := at[e.Stream]
		if !ok {
			i = len(out)
			at[e.Stream] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], e)
	}
	return out
}

// Mark turns the outbox of each of rooms on or off as the endpoints
// want, whoever watches it: for the rooms an instance starts with, before
// its admitter does, and for one the operator creates, before anyone is
// queued there. Until then a room's admissions would write nothing.
func (w *Watcher) Mark(ctx context.Context, rooms ...string) error {
	active := w.Emitter.Active == nil || w.Emitter.Active()
	return w.setOutboxes(ctx, rooms, func(room string) bool { return active && w.wantsOutbox(room) })
}

// Unmark turns the outbox of each of rooms off, whatever the endpoints
// want: for an instance whose webhooks stop while its admitter goes on
// (a benchmark's side without them), whose admissions then cost what
// they cost with no endpoint.
func (w *Watcher) Unmark(ctx context.Context, rooms ...string) error {
	return w.setOutboxes(ctx, rooms, func(string) bool { return false })
}

func (w *Watcher) setOutboxes(ctx context.Context, rooms []string, on func(room string) bool) error {
	outbox, ok := outboxOf(w.Store)
	if !ok {
		return nil
	}
	var errs []error
	for _, room := range rooms {
		errs = append(errs, outbox.SetOutbox(ctx, room, on(room)))
	}
	return errors.Join(errs...)
}

// advance is Log.Advance, left out when this watcher advanced name to
// total or beyond already (the log's counter never moves back): one
// call only when a counter grew.
func (w *Watcher) advance(ctx context.Context, name string, total int64) (int64, error) {
	w.mu.Lock()
	seen, ok := w.advanced[name]
	w.mu.Unlock()
	if ok && total <= seen {
		return 0, nil
	}
	n, err := w.Log.Advance(ctx, name, total)
	if err != nil {
		return 0, err
	}
	w.mu.Lock()
	if w.advanced == nil {
		w.advanced = map[string]int64{}
	}
	w.advanced[name] = total
	w.mu.Unlock()
	return n, nil
}

// noteLost warns, once per growth over all watchers, of outbox entries a
// room dropped unrelayed.
func (w *Watcher) noteLost(ctx context.Context, room string, total int64) error {
	n, err := w.advance(ctx, room+"\x00outbox_lost", total)
	if err != nil {
		return err
	}
	if n > 0 {
		w.losses.Add(n)
		loggerOf(w.Logger).Error("webhook outbox entries were dropped unrelayed: the room's outbox was full while its relay could not append to the log",
			"room", room, "entries", n, "max_entries", waitroom.OutboxMaxEntries)
	}
	return nil
}

// OutboxEvents are the events of room's oldest outbox entries, and the
// id of the last entry they tell. Consecutive entries of one type that
// the store wrote in the same second are one event of at most
// MaxBatchUsers users, as the Emitter gathered them for a second: at
// 140 admissions a second in ticks of 25 ms a room's user.admitted is
// one message a second, not 40. An event's id follows from the room and
// its first and last entries' ids, so a relay that dies after its
// append, or two that race, give the same webhook-id for it, which the
// receiver drops a second one by; its timestamp is when the store wrote
// its first entry.
//
// The last second's entries are told once now (the relay's clock) is
// past that second, or full says the read was cut short (more entries
// follow it). A relay whose clock runs ahead of the store's may tell a
// second's entries before the last of them: those come in an event of
// their own (a new first entry, a new id), never lost.
func OutboxEvents(room string, entries []waitroom.OutboxEntry, now time.Time, full bool) (events []Event, through string) {
	type group struct {
		first, last waitroom.OutboxEntry
		users       []string
	}
	var groups []group
	for _, e := range entries {
		if n := len(groups); n > 0 {
			g := &groups[n-1]
			if g.first.Type == e.Type && g.first.At.Unix() == e.At.Unix() && len(g.users)+len(e.Users) <= MaxBatchUsers {
				g.last, g.users = e, append(g.users, e.Users...)
				continue
			}
		}
		groups = append(groups, group{first: e, last: e, users: slices.Clone(e.Users)})
	}
	// The last group may grow while its second lasts, unless it is full
	// or the read was.
	if g := groups[len(groups)-1]; !full && len(g.users) < MaxBatchUsers && now.Unix() <= g.first.At.Unix() {
		groups = groups[:len(groups)-1]
	}
	for _, g := range groups {
		var data any = CountData{Count: int64(len(g.users)), Users: g.users}
		if g.first.Type == UserAdmitted {
			data = AdmittedData{Count: len(g.users), Users: g.users}
		}
		ev := NewEvent(g.first.Type, room, g.first.At, data)
		sum := sha256.Sum256([]byte("outbox\x00" + room + "\x00" + g.first.ID + "\x00" + g.last.ID))
		ev.ID = "msg_" + hex.EncodeToString(sum[:16])
		events = append(events, ev)
		through = g.last.ID
	}
	return events, through
}

// room relays room's outbox (outbox nil: the store keeps none) and
// tells what its figures say: the users found gone without being named,
// a sale's end, a scheduled opening or closing, the opening's draw.
func (w *Watcher) room(ctx context.Context, outbox waitroom.OutboxStore, room string) error {
	cfg, err := w.Store.RoomConfig(ctx, room)
	var st waitroom.Stats
	if err == nil {
		// Stats before the outbox's named counters: see unnamed.
		st, err = w.Store.Stats(ctx, room)
	}
	want := w.wantsOutbox(room)
	var named waitroom.OutboxNamed
	read, relayErr := true, error(nil) // a store with no outbox names nobody
	if outbox != nil {
		named, read, relayErr = w.relay(ctx, outbox, room, want)
	}
	if err != nil {
		return errors.Join(err, relayErr) // the relay goes on without the figures
	}
	if read && relayErr == nil {
		if err := w.unnamed(ctx, room, st, named, want); err != nil {
			return err
		}
	}
	return errors.Join(relayErr, w.figures(ctx, room, cfg, st))
}

// unnamed tells, as count-only events (CountData without users), the
// no-shows, expired tokens and leavers of room that its figures (st)
// count and its admissions did not name in the outbox (named): a silent
// user dropped by its own late poll, a token found run out by a claim, a
// release or a pass, or any of them while the outbox was off. Each
// growth of Stats less Named is told once over all watchers
// (Log.Advance), when an endpoint wants these events of room (want).
//
// st was read before named. An admission names a user and counts it in
// Stats in one atomic step, so named read later is at least what it was
// when st was read: st less a later named is at most the true
// difference at any moment since, never more. A concurrent admission
// only makes it smaller for one look (the next catches up), and Advance
// never moves back, so no user is told both by name and as a count.
// Read the other way round, an admission between the reads would count
// its named users again. Below zero (an admission named more between the
// reads than st counted unnamed) is zero: what all looks tell, the last
// value less the first, stays within the users counted unnamed.
func (w *Watcher) unnamed(ctx context.Context, room string, st waitroom.Stats, named waitroom.OutboxNamed, want bool) error {
	for _, c := range []struct {
		typ          string
		total, named int64
	}{{UserNoShow, st.NoShows, named.NoShows}, {TokenExpired, st.Expired, named.Expired}, {UserAbandoned, st.Abandoned, named.Abandoned}} {
		n, err := w.advance(ctx, room+"\x00"+c.typ+"\x00unnamed", max(0, c.total-c.named))
		if err != nil {
			return err
		}
		if n > 0 && want {
			w.Emitter.Emit(c.typ, room, CountData{Count: n})
		}
	}
	return nil
}

// figures tells what room's settings and figures say once: a sale's end,
// a scheduled opening or closing, the opening's draw.
func (w *Watcher) figures(ctx context.Context, room string, cfg waitroom.RoomConfig, st waitroom.Stats) error {
	// Sold out: once per stock level (a restock to a new level can sell
	// out again).
	if soldOut, _, _ := cfg.Units(0, st.Sold, 0); soldOut {
		if first, err := w.once(ctx, room+"\x00"+RoomSoldOut+"\x00"+strconv.Itoa(cfg.Stock)); err != nil {
			return err
		} else if first {
			w.Emitter.Emit(RoomSoldOut, room, StockData{Stock: cfg.Stock, Sold: st.Sold})
		}
	}
	// A scheduled opening or closing that has come, once per time set.
	now := nowOf(w.Now)
	for _, at := range []struct {
		typ   string
		when  time.Time
		state waitroom.RoomState
	}{{RoomOpened, cfg.OpensAt, waitroom.RoomOpen}, {RoomClosed, cfg.ClosesAt, waitroom.RoomClosed}} {
		if at.when.IsZero() || now.Before(at.when) {
			continue
		}
		if first, err := w.once(ctx, room+"\x00"+at.typ+"\x00"+at.when.UTC().Format(time.RFC3339Nano)); err != nil {
			return err
		} else if first {
			w.Emitter.Emit(at.typ, room, RoomData{State: string(at.state)})
		}
	}
	if !cfg.OpensAt.IsZero() {
		d, err := w.Store.Draw(ctx, room)
		if err != nil || d.State != waitroom.DrawDone || d.Seed == "" {
			return nil // not drawn yet, or no draw: nothing to tell
		}
		if first, err := w.once(ctx, room+"\x00"+RoomDrawRevealed+"\x00"+d.Commitment); err != nil || !first {
			return err
		}
		w.Emitter.Emit(RoomDrawRevealed, room, DrawData{Commitment: d.Commitment, Seed: d.Seed, Entrants: d.Entrants})
	}
	return nil
}

// once reports whether this is the first call for name by any watcher:
// the counter is made at 0, then moved to 1, which grows it only once.
func (w *Watcher) once(ctx context.Context, name string) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.told[name] {
		return false, nil
	}
	if w.told == nil {
		w.told = map[string]bool{}
	}
	if _, err := w.Log.Advance(ctx, name, 0); err != nil {
		return false, err
	}
	n, err := w.Log.Advance(ctx, name, 1)
	if err == nil {
		w.told[name] = true
	}
	return n > 0, err
}
