package waitroom

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Admitter runs the admission tick: every tick it asks the store to admit
// what each room's token bucket allows. The bucket lives in the store, so
// any number of instances may run an Admitter at once: together they admit
// each room's rate once, and a late or skipped tick is made up by the next.
//
// What it costs follows the users, not rooms × instances. The instances
// running an Admitter split the rooms among themselves (Store.Admitters,
// Owner): each room is ticked by one of them, and when that one falls
// silent another takes its rooms over within about a default slice. A room
// whose ticks admitted nobody for a slice is parked: no store call per
// tick. A parked room with users (paused, or at MaxActive) has a share of
// one batched Store.Work probe per slice, which wakes it when it can admit
// again. A parked room nobody waits in is woken by Store.Wakes when a user
// enters it, and probed only once a second, in case a wake was lost (and
// for Admit to clean up tokens past their time).
//
// With a store that keeps history (HistoryStore), it records the rooms it
// owns once a second, in one batched call, for the operator's dashboard.
// A quiet room (parked, with nothing at all at its last probe: nobody
// waiting, no token held; and no wake since) is recorded only every
// QuietHistoryEvery, as its figures cannot change until it wakes, so that
// rooms nobody is in cost next to nothing; a wake makes it recorded every
// second again.
type Admitter struct {
	Store Store
	// Every is the tick; default DefaultTick, a quarter of the default
	// slice. A tick never admits more than its room's slice quota, and a
	// tick that runs late (a busy machine, a GC pause) is made up only up
	// to one quota; ticking several times per slice therefore keeps the
	// rate exact under scheduling jitter, and splits each slice's quota
	// into smaller, smoother batches for the protected API.
	Every time.Duration
	// ID names this admitter among those sharing the store; default a
	// random one. Two admitters must not share an ID.
	ID string
	// Logger; default slog.Default().
	Logger *slog.Logger
	// OnAdmit, if set, is told every non-empty admission. Rooms tick on
	// goroutines of their own, so it must be safe for concurrent use.
	OnAdmit func(room string, admitted []Admission)
}

// Bounds of Run. Each room ticks on its own, so a room whose store shard
// hangs delays only itself; one tick waits at most admitTimeout for its
// store (generous next to a slice: a timed-out Admit may still have run,
// and its users would then be admitted unannounced to OnAdmit).
const (
	roomsRefresh = time.Second
	admitTimeout = time.Second
	// A room is parked after this many ticks in a row admitted nobody:
	// at the default tick, one slice.
	parkAfter = 4
	// probeTicks: parked rooms with users are probed every probeTicks
	// ticks, so a paused room that opens again waits at most about a
	// slice longer.
	probeTicks = 4
	// emptyProbeEvery: parked rooms nobody waits in are probed this often;
	// a user entering one wakes it at once (Store.Wakes), unless the wake
	// is lost, when it waits at most this much longer.
	emptyProbeEvery = time.Second
	// An admitter is taken for gone once it has not renewed its place for
	// leaseTicks ticks.
	leaseTicks = 2
	// cleanupEvery: a parked room holding tokens gets one tick this often,
	// for Admit to clean up tokens past their time.
	cleanupEvery = time.Second
)

// Run ticks the rooms this admitter owns until ctx is done; it returns
// ctx's error. The rooms are read from the store every second, so a room
// another instance created is admitted too; while the list cannot be read
// (its key lives on one cluster shard) the rooms already known go on.
// While the admitters' list cannot be read, this admitter ticks every
// room: double ticks cost time, never the rate. Failures are logged when
// they start and when they end, not once per tick.
func (a *Admitter) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	id := a.ID
	if id == "" {
		id = "admitter-" + NewToken()
	}
	every := a.every()
	ttl := min(max(leaseTicks*every, MinAdmitterTTL), MaxAdmitterTTL)
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	wakes := a.Store.Wakes(ctx)
	emptyProbeTicks := max(probeTicks, int(emptyProbeEvery/every))

	rooms := map[string]*roomTicker{}
	var names []string
	var listed time.Time
	var listing, peering, probing, recording outage
	history, keepsHistory := HistoryOf(a.Store)
	var recorded time.Time // the second of the last recording round
	for tick := 0; ; tick++ {
		if listed.IsZero() || time.Since(listed) >= roomsRefresh {
			listed = time.Now()
			list, err := a.Store.Rooms(ctx)
			listing.note(ctx, a.logger(), err, "listing rooms failed; admitting the rooms already known", "listing rooms recovered")
			for _, room := range list {
				if rooms[room] == nil {
					rooms[room] = &roomTicker{room: room, wake: make(chan struct{}, 1)}
					names = append(names, room)
				}
			}
		}

		actx, acancel := context.WithTimeout(ctx, admitTimeout)
		peers, err := a.Store.Admitters(actx, id, ttl)
		acancel()
		peering.note(ctx, a.logger(), err, "reading the admitters failed; ticking every room", "reading the admitters recovered")
		gained := false
		for _, room := range names {
			r := rooms[room]
			owned := err != nil || Owner(room, peers) == id
			if owned != r.owned.Load() {
				if owned {
					// Taken over, or new: parked until the probe below
					// says whether it has work. An admitter whose lease
					// flaps on a loaded machine then costs one probe,
					// not a slice of ticks in every room it took.
					r.parked.Store(true)
					gained = true
					// Its history so far is the last owner's.
					r.quietNext, r.recordedBusy = time.Time{}, false
				}
				r.owned.Store(owned)
			}
			if owned && !r.started {
				r.started = true
				wg.Go(func() { a.runRoom(ctx, r) })
			}
		}

		if gained || tick%probeTicks == probeTicks-1 {
			withEmpty := tick%emptyProbeTicks == emptyProbeTicks-1
			probing.note(ctx, a.logger(), a.probe(ctx, rooms, names, withEmpty), "probing idle rooms failed; ticking them", "probing idle rooms recovered")
		}

		// The first tick of each second records it (a clock set back
		// records its seconds again, which the store refuses until they
		// are new).
		if now := time.Now().Truncate(HistoryEvery); keepsHistory && !now.Equal(recorded) {
			recorded = now
			recording.note(ctx, a.logger(), a.record(ctx, history, rooms, names, now), "recording the rooms' history failed", "recording the rooms' history recovered")
		}

		for ticked := false; !ticked; {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case room := <-wakes:
				// A user entered an empty room: tick it now, if it is ours.
				if r := rooms[room]; r != nil && r.owned.Load() {
					r.empty = false
					r.unpark(parkAfter)
				}
			case <-ticker.C:
				ticked = true
			}
		}
	}
}

// probe asks the store what the owned parked rooms hold (those nobody
// waited in at their last probe only withEmpty) and wakes those with
// work; it returns the store's error. When the store fails, it wakes
// them all: their own ticks then find out, room by room, so rooms on a
// healthy cluster shard go on when another shard fails.
func (a *Admitter) probe(ctx context.Context, rooms map[string]*roomTicker, names []string, withEmpty bool) error {
	var parked []*roomTicker
	var batch []string
	for _, room := range names {
		if r := rooms[room]; r.owned.Load() && r.parked.Load() && (withEmpty || !r.empty) {
			parked = append(parked, r)
			batch = append(batch, room)
		}
	}
	var errs []error
	for from := 0; from < len(batch); from += MaxWorkRoomsBatch {
		to := min(from+MaxWorkRoomsBatch, len(batch))
		pctx, cancel := context.WithTimeout(ctx, admitTimeout)
		work, err := a.Store.Work(pctx, batch[from:to])
		cancel()
		errs = append(errs, err)
		for i, r := range parked[from:to] {
			r.empty = err == nil && work[i] != WorkQueue
			r.nothing = err == nil && work[i] == WorkNone
			switch {
			case err != nil, work[i] == WorkQueue:
				r.unpark(parkAfter)
			case work[i] == WorkTokens && time.Since(r.cleaned) >= cleanupEvery:
				r.cleaned = time.Now()
				r.unpark(1)
			}
		}
	}
	return errors.Join(errs...)
}

// record records the second now of the owned rooms that are due: every
// room but a quiet one each second; a quiet one when it turns quiet under
// this admitter (the sample the chart draws its quiet spell from) and at
// its second of each minute (quietDue). A room gained quiet is not
// recorded at once: the last owner recorded it quiet, and it keeps its
// minute, so a handover (an admitter joining, leaving, or whose lease
// flaps on a loaded machine) costs no sample of every room it moves. It
// returns the store's error.
func (a *Admitter) record(ctx context.Context, history HistoryStore, rooms map[string]*roomTicker, names []string, now time.Time) error {
	var batch []string
	for _, room := range names {
		r := rooms[room]
		if !r.owned.Load() {
			continue
		}
		switch quiet := r.nothing && r.parked.Load(); {
		case !quiet:
			r.quietNext, r.recordedBusy = time.Time{}, true
		case r.quietNext.IsZero():
			r.quietNext = quietDue(room, now)
			if !r.recordedBusy {
				continue // gained quiet
			}
			r.recordedBusy = false
		case now.Before(r.quietNext):
			continue
		default:
			r.quietNext = quietDue(room, now)
		}
		batch = append(batch, room)
	}
	var errs []error
	for from := 0; from < len(batch); from += MaxHistoryRoomsBatch {
		rctx, cancel := context.WithTimeout(ctx, admitTimeout)
		errs = append(errs, history.RecordSamples(rctx, now, batch[from:min(from+MaxHistoryRoomsBatch, len(batch))]))
		cancel()
	}
	return errors.Join(errs...)
}

// outage logs when a repeated call starts failing and when it recovers,
// not on every failure.
type outage struct{ failing bool }

func (o *outage) note(ctx context.Context, log *slog.Logger, err error, failed, recovered string, attrs ...any) {
	switch {
	case err != nil && ctx.Err() == nil && !o.failing:
		log.ErrorContext(ctx, failed, append(attrs, "err", err)...)
		o.failing = true
	case err == nil && o.failing:
		log.InfoContext(ctx, recovered, attrs...)
		o.failing = false
	}
}

// roomTicker is one room's ticking state. Run owns started, cleaned,
// empty, nothing, quietNext and recordedBusy; owned and parked are shared
// with the room's goroutine.
type roomTicker struct {
	room    string
	started bool
	cleaned time.Time
	// empty: nobody waited at the last probe, so the room is probed only
	// every emptyProbeEvery and otherwise waits for a wake.
	empty bool
	// nothing: nobody waited and no token was held at the last probe, and
	// the room was not unparked since; parked too, it is quiet (record).
	nothing bool
	// quietNext is when a quiet room is recorded next; zero while it is
	// not quiet.
	quietNext time.Time
	// recordedBusy: recorded as not quiet since this admitter gained it,
	// so turning quiet is worth a sample.
	recordedBusy bool
	owned        atomic.Bool
	parked       atomic.Bool
	// budget is how many empty ticks in a row park the room again; set
	// before wake is sent.
	budget atomic.Int64
	wake   chan struct{}
}

// unpark makes the room tick again until budget ticks in a row admitted
// nobody.
func (r *roomTicker) unpark(budget int64) {
	r.nothing = false
	r.budget.Store(budget)
	r.parked.Store(false)
	select {
	case r.wake <- struct{}{}:
	default: // a wake is already pending
	}
}

// runRoom ticks one room until ctx is done, while this admitter owns it
// and it is not parked; otherwise it waits for a wake, costing nothing.
func (a *Admitter) runRoom(ctx context.Context, r *roomTicker) {
	every := a.every()
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	var ticking outage
	var sliced time.Time
	empty := int64(0)
	for {
		if time.Since(sliced) >= roomsRefresh {
			// A room's slice may be shorter than the tick: each tick admits
			// at most one slice's quota, so such a room must tick at least
			// twice per slice to be admitted at its rate.
			sliced = time.Now()
			if tick := a.roomTick(ctx, r.room); tick != every {
				every = tick
				ticker.Reset(every)
			}
		}
		if !r.owned.Load() || r.parked.Load() {
			ticker.Stop()
			select {
			case <-ctx.Done():
				return
			case <-r.wake:
			}
			// Set here too: the room may have parked itself after the
			// wake was sent.
			r.parked.Store(false)
			empty = 0
			ticker.Reset(every)
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
			r.parked.Store(false)
			empty = 0 // unparked again while ticking: a fresh budget
			continue
		case <-ticker.C:
		}
		n, err := a.admit(ctx, r.room)
		ticking.note(ctx, a.logger(), err, "admission tick failed", "admission tick recovered", "room", r.room)
		// A failing room keeps ticking: its errors are what tells.
		if err == nil && n == 0 {
			empty++
			if empty >= r.budget.Load() {
				r.parked.Store(true)
			}
		} else {
			empty = 0
		}
	}
}

// roomTick is how often room ticks: the admitter's tick, or, for a room
// whose slice is shorter than that, half its slice. A room whose settings
// cannot be read keeps the admitter's tick; its Admit tells what is wrong.
func (a *Admitter) roomTick(ctx context.Context, room string) time.Duration {
	ctx, cancel := context.WithTimeout(ctx, admitTimeout)
	defer cancel()
	cfg, err := a.Store.RoomConfig(ctx, room)
	if err != nil {
		return a.every()
	}
	if slice := cfg.WithDefaults().Slice; slice < a.every() {
		return max(slice/2, time.Millisecond)
	}
	return a.every()
}

// Tick admits once in every room, one after the other, and returns how
// many users it admitted: a whole tick in one call, for tests and tools
// that drive admission step by step.
func (a *Admitter) Tick(ctx context.Context) (int, error) {
	rooms, err := a.Store.Rooms(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	var errs []error
	for _, room := range rooms {
		n, err := a.admit(ctx, room)
		total += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
}

// admit runs one bounded admission in room and reports it to OnAdmit.
func (a *Admitter) admit(ctx context.Context, room string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, admitTimeout)
	defer cancel()
	admitted, err := a.Store.Admit(ctx, room)
	if err != nil {
		return 0, err
	}
	if len(admitted) > 0 && a.OnAdmit != nil {
		a.OnAdmit(room, admitted)
	}
	return len(admitted), nil
}

// DefaultTick is Admitter.Every's default.
const DefaultTick = DefaultSlice / 4

func (a *Admitter) every() time.Duration {
	if a.Every > 0 {
		return a.Every
	}
	return DefaultTick
}

func (a *Admitter) logger() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}
