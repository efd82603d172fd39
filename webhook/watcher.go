package webhook

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/waitroom/waitroom"
)

// Watcher tells what the store's scripts decide without telling Go: the
// no-shows, leavers and expired tokens the admission script counts, a
// room selling out, and a scheduled opening's draw. Every instance runs
// one, each watching the rooms its dispatcher owns (Owns); the log's
// counters (Log.Advance, Log.First) make each growth told once when a
// room changes hands.
type Watcher struct {
	Store   waitroom.Store
	Log     Log
	Emitter *Emitter
	// Owns says whether this instance watches room; nil: every room.
	Owns func(room string) bool
	// Every is Run's interval; default DefaultWatchEvery.
	Every time.Duration
	// Now is the clock of the scheduled opening and closing; nil:
	// time.Now.
	Now func() time.Time

	mu   sync.Mutex
	told map[string]bool // once's names this watcher saw told
}

// DefaultWatchEvery is Watcher.Every's default: two store calls a room a
// second, over all instances.
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
	if w.Emitter.Active != nil && !w.Emitter.Active() {
		return nil
	}
	rooms, err := w.Store.Rooms(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, room := range rooms {
		if w.Owns == nil || w.Owns(room) {
			errs = append(errs, w.room(ctx, room))
		}
	}
	return errors.Join(errs...)
}

func (w *Watcher) room(ctx context.Context, room string) error {
	cfg, err := w.Store.RoomConfig(ctx, room)
	if err != nil {
		return err
	}
	st, err := w.Store.Stats(ctx, room)
	if err != nil {
		return err
	}
	for _, c := range []struct {
		typ   string
		total int64
	}{{UserNoShow, st.NoShows}, {UserAbandoned, st.Abandoned}, {TokenExpired, st.Expired}} {
		n, err := w.Log.Advance(ctx, room+"\x00"+c.typ, c.total)
		if err != nil {
			return err
		}
		if n > 0 {
			w.Emitter.Emit(c.typ, room, CountData{Count: n})
		}
	}
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
