package waitroom

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultStoreTimeout is GuardOptions.Timeout's default.
const DefaultStoreTimeout = time.Second

// outageSettle × Timeout after an outage ends, a failure is still its tail
// (storeOutage).
const outageSettle = 4

// GuardOptions configures Guard.
type GuardOptions struct {
	// Timeout bounds each store call; default DefaultStoreTimeout. A call
	// that gets no answer within it is ErrStoreUnavailable.
	Timeout time.Duration
	// Logger receives the start and the end of each outage; default
	// discards.
	Logger *slog.Logger
	// Rooms are the declared rooms the keeper brings back when the store
	// loses them (RoomKeeper.Rooms).
	Rooms map[string]RoomConfig
}

// GuardedStore is the one Store every part of a server shares: the HTTP
// handlers, the gate, the admitter, the keeper and the rate tuner. Around
// each call of the store it guards it
//
//   - bounds the call by Timeout (Enter and Status of a WaitBounder
//     bound themselves, given it), and turns a call that ran out of it (not
//     out of the caller's own deadline) into ErrStoreUnavailable: the one
//     place that decides a timeout means the store is down;
//   - re-creates a room the store lost and tries the call once more, when
//     the keeper knows the room (RoomKeeper.retry);
//   - watches for outages: it logs when one starts and when it ends, once
//     each, and Down reports it;
//   - remembers each room's last rate (LastRate), for the failure policy;
//   - counts and logs every draw refused for a replaced seed
//     (ErrDrawSeedMismatch): tampering is never quiet.
//
// Every method is one line around guarded, so a method added to Store is a
// one-liner here; there is no embedded Store, so one left out does not
// compile.
type GuardedStore struct {
	store   Store
	bounder WaitBounder // store, when it bounds its Enter and Status itself
	timeout time.Duration
	log     *slog.Logger
	keeper  *RoomKeeper
	// rates holds each room's last rate the store answered or was given
	// (room → float64), which the failure policy needs while it is down.
	rates  sync.Map
	outage storeOutage
	// seedMismatches counts the calls the store refused because a draw's
	// seed no longer matches its published commitment (CheckSeed).
	seedMismatches atomic.Int64
}

var _ Store = (*GuardedStore)(nil)

// Guard returns store guarded by o. Its Keeper works on the guarded store.
func Guard(store Store, o GuardOptions) *GuardedStore {
	g := &GuardedStore{store: store, timeout: o.Timeout, log: o.Logger}
	g.bounder, _ = store.(WaitBounder)
	if g.timeout <= 0 {
		g.timeout = DefaultStoreTimeout
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	g.outage.settle = outageSettle * g.timeout
	g.keeper = &RoomKeeper{Store: g, Rooms: o.Rooms, Logger: g.log}
	return g
}

// Keeper is the RoomKeeper of the guarded store's rooms; run it beside the
// admitter.
func (g *GuardedStore) Keeper() *RoomKeeper { return g.keeper }

// Down reports whether the last call that settled the question found the
// store unavailable.
func (g *GuardedStore) Down() bool {
	g.outage.mu.Lock()
	defer g.outage.mu.Unlock()
	return g.outage.down
}

// LastRate is room's rate as the store last answered it (RoomConfig) or
// was given it (UpdateRoom) through g; false before either.
func (g *GuardedStore) LastRate(room string) (float64, bool) {
	v, ok := g.rates.Load(room)
	if !ok {
		return 0, false
	}
	return v.(float64), true
}

// Timeout is the bound of each call.
func (g *GuardedStore) Timeout() time.Duration { return g.timeout }

// guarded runs one call of the store under g. room names the room a lost
// room's re-creation brings back; "" for calls that are not retried.
func guarded[T any](ctx context.Context, g *GuardedStore, room string, call func(context.Context) (T, error)) (T, error) {
	epoch := g.outage.begin()
	bounded := ctx
	// A caller whose own deadline comes first has bounded the call already
	// (the admitter's ticks): WithTimeout would only add a context that
	// ends with it. Otherwise the call gets a context and a timer of its
	// own.
	if d, ok := ctx.Deadline(); !ok || !d.Before(time.Now().Add(g.timeout)) {
		var cancel context.CancelFunc
		bounded, cancel = context.WithTimeout(ctx, g.timeout)
		defer cancel()
	}
	v, err := call(bounded)
	if room != "" && g.keeper.retry(bounded, room, err) {
		v, err = call(bounded)
	}
	timedOut := ctx.Err() == nil && errors.Is(bounded.Err(), context.DeadlineExceeded)
	return v, g.settle(ctx, epoch, timedOut, err)
}

// WaitBounder is a Store whose Enter and Status bound their callers' wait
// themselves, for less than a context and a timer per call: redisstore's
// callers that share one call share one timer. These two are the crowd's
// calls, thousands a second; a context.WithTimeout per request was a
// tenth of what serve spent on an ENTER besides net/http's own work.
type WaitBounder interface {
	// EnterWithin and StatusWithin are Enter and Status whose wait for
	// the answer ends within d with an error that wraps
	// context.DeadlineExceeded, or with ctx; d ≤ 0 leaves it to ctx.
	EnterWithin(ctx context.Context, room, user string, d time.Duration) (Status, error)
	StatusWithin(ctx context.Context, room, user string, d time.Duration) (Status, error)
}

// guardedWithin is guarded for a call that bounds its own wait by the
// duration it is given (WaitBounder): Timeout, or what is left of it.
func guardedWithin[T any](ctx context.Context, g *GuardedStore, room string, call func(context.Context, time.Duration) (T, error)) (T, error) {
	epoch := g.outage.begin()
	start := time.Now()
	v, err := call(ctx, g.timeout)
	if room != "" && errors.Is(err, ErrRoomNotFound) {
		// The store lost the room (rare): the keeper's restore and the
		// call again get what is left of the one bound, as in guarded.
		deadline := start.Add(g.timeout)
		rctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		if g.keeper.retry(rctx, room, err) {
			v, err = call(rctx, time.Until(deadline))
		}
	}
	timedOut := ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded)
	return v, g.settle(ctx, epoch, timedOut, err)
}

// settle ends a guarded call with its error err: a call that ran out of
// Timeout (timedOut; not out of the caller's own deadline) is
// ErrStoreUnavailable, and the outage watch hears of it.
func (g *GuardedStore) settle(ctx context.Context, epoch uint64, timedOut bool, err error) error {
	if err != nil && timedOut && !errors.Is(err, ErrStoreUnavailable) {
		err = fmt.Errorf("%w: no answer within %s: %w", ErrStoreUnavailable, g.timeout, err)
	}
	if errors.Is(err, ErrDrawSeedMismatch) {
		g.seedMismatches.Add(1)
		g.log.ErrorContext(ctx, "the draw's seed does not match its published commitment: the draw and its record are refused", "err", err)
	}
	g.outage.observe(ctx, g.log, epoch, err)
	return err
}

// DrawSeedMismatches is how many calls this process saw refused because a
// draw's seed no longer matches its published commitment.
func (g *GuardedStore) DrawSeedMismatches() int64 { return g.seedMismatches.Load() }

// guardedErr is guarded for calls that return only an error.
func guardedErr(ctx context.Context, g *GuardedStore, room string, call func(context.Context) error) error {
	_, err := guarded(ctx, g, room, func(ctx context.Context) (struct{}, error) { return struct{}{}, call(ctx) })
	return err
}

func (g *GuardedStore) CreateRoom(ctx context.Context, room string, cfg RoomConfig) (bool, error) {
	return guarded(ctx, g, "", func(ctx context.Context) (bool, error) { return g.store.CreateRoom(ctx, room, cfg) })
}

func (g *GuardedStore) UpdateRoom(ctx context.Context, room string, from, to RoomConfig) error {
	// Re-created as last seen, which may not be from: then the caller reads
	// again (ErrRoomChanged), as after any change.
	err := guardedErr(ctx, g, room, func(ctx context.Context) error { return g.store.UpdateRoom(ctx, room, from, to) })
	if err == nil {
		g.rates.Store(room, to.WithDefaults().Rate)
	}
	return err
}

func (g *GuardedStore) RoomConfig(ctx context.Context, room string) (RoomConfig, error) {
	cfg, err := guarded(ctx, g, room, func(ctx context.Context) (RoomConfig, error) { return g.store.RoomConfig(ctx, room) })
	if err == nil {
		g.rates.Store(room, cfg.Rate)
	}
	return cfg, err
}

func (g *GuardedStore) Rooms(ctx context.Context) ([]string, error) {
	return guarded(ctx, g, "", g.store.Rooms)
}

func (g *GuardedStore) RoomVersions(ctx context.Context, rooms []string) ([]string, error) {
	return guarded(ctx, g, "", func(ctx context.Context) ([]string, error) { return g.store.RoomVersions(ctx, rooms) })
}

func (g *GuardedStore) Enter(ctx context.Context, room, user string) (Status, error) {
	if g.bounder != nil {
		return guardedWithin(ctx, g, room, func(ctx context.Context, d time.Duration) (Status, error) {
			return g.bounder.EnterWithin(ctx, room, user, d)
		})
	}
	return guarded(ctx, g, room, func(ctx context.Context) (Status, error) { return g.store.Enter(ctx, room, user) })
}

func (g *GuardedStore) Status(ctx context.Context, room, user string) (Status, error) {
	if g.bounder != nil {
		return guardedWithin(ctx, g, room, func(ctx context.Context, d time.Duration) (Status, error) {
			return g.bounder.StatusWithin(ctx, room, user, d)
		})
	}
	return guarded(ctx, g, room, func(ctx context.Context) (Status, error) { return g.store.Status(ctx, room, user) })
}

func (g *GuardedStore) Leave(ctx context.Context, room, user string) error {
	return guardedErr(ctx, g, "", func(ctx context.Context) error { return g.store.Leave(ctx, room, user) })
}

func (g *GuardedStore) Admit(ctx context.Context, room string) ([]Admission, error) {
	return guarded(ctx, g, "", func(ctx context.Context) ([]Admission, error) { return g.store.Admit(ctx, room) })
}

func (g *GuardedStore) CreatePass(ctx context.Context, room string, p Pass) error {
	return guardedErr(ctx, g, "", func(ctx context.Context) error { return g.store.CreatePass(ctx, room, p) })
}

func (g *GuardedStore) RevokePass(ctx context.Context, room, id string) error {
	return guardedErr(ctx, g, "", func(ctx context.Context) error { return g.store.RevokePass(ctx, room, id) })
}

func (g *GuardedStore) Passes(ctx context.Context, room string) ([]Pass, error) {
	return guarded(ctx, g, "", func(ctx context.Context) ([]Pass, error) { return g.store.Passes(ctx, room) })
}

func (g *GuardedStore) EnterWithPass(ctx context.Context, room, user, id string) (Status, error) {
	return guarded(ctx, g, room, func(ctx context.Context) (Status, error) { return g.store.EnterWithPass(ctx, room, user, id) })
}

func (g *GuardedStore) Claim(ctx context.Context, room, user, token string) (Hold, error) {
	return guarded(ctx, g, room, func(ctx context.Context) (Hold, error) { return g.store.Claim(ctx, room, user, token) })
}

func (g *GuardedStore) Complete(ctx context.Context, h Hold) error {
	return guardedErr(ctx, g, "", func(ctx context.Context) error { return g.store.Complete(ctx, h) })
}

func (g *GuardedStore) Release(ctx context.Context, h Hold) error {
	return guardedErr(ctx, g, "", func(ctx context.Context) error { return g.store.Release(ctx, h) })
}

func (g *GuardedStore) Renew(ctx context.Context, h Hold) error {
	return guardedErr(ctx, g, "", func(ctx context.Context) error { return g.store.Renew(ctx, h) })
}

func (g *GuardedStore) Work(ctx context.Context, rooms []string) ([]Work, error) {
	return guarded(ctx, g, "", func(ctx context.Context) ([]Work, error) { return g.store.Work(ctx, rooms) })
}

func (g *GuardedStore) Admitters(ctx context.Context, id string, ttl time.Duration) ([]string, error) {
	return guarded(ctx, g, "", func(ctx context.Context) ([]string, error) { return g.store.Admitters(ctx, id, ttl) })
}

// Wakes is the store's own: a subscription outlives any one call's
// timeout, and a lost wake is no outage (the admitter probes anyway).
func (g *GuardedStore) Wakes(ctx context.Context) <-chan string { return g.store.Wakes(ctx) }

func (g *GuardedStore) Draw(ctx context.Context, room string) (Draw, error) {
	return guarded(ctx, g, room, func(ctx context.Context) (Draw, error) { return g.store.Draw(ctx, room) })
}

func (g *GuardedStore) Entrants(ctx context.Context, room string) ([]Entrant, error) {
	return guarded(ctx, g, room, func(ctx context.Context) ([]Entrant, error) { return g.store.Entrants(ctx, room) })
}

func (g *GuardedStore) Stats(ctx context.Context, room string) (Stats, error) {
	return guarded(ctx, g, "", func(ctx context.Context) (Stats, error) { return g.store.Stats(ctx, room) })
}

func (g *GuardedStore) Ping(ctx context.Context) error {
	return guardedErr(ctx, g, "", g.store.Ping)
}

// storeOutage tracks whether the store is down, so that an outage is two log
// lines (its start and its end) however many calls fail meanwhile.
//
// A call's outcome counts only if the call began after the last change of
// state: when a frozen store resumes, the calls that waited on it through
// the freeze settle out of order, failures after the first success, and
// must not be taken for a new outage (nor a late success of a call begun
// before an outage for its end). And a store that resumes works off the
// backlog of the freeze for a moment, so some calls still run out of time:
// a failure within settle of the end is the same outage's tail, counted
// (Down) but not logged as a new one.
type storeOutage struct {
	settle  time.Duration
	mu      sync.Mutex
	down    bool
	relapse bool      // down again within settle of the end: not logged
	since   time.Time // start of the outage
	ended   time.Time // end of the last outage
	epoch   uint64    // bumped at every change of state
}

// begin returns the epoch a call starts in.
func (o *storeOutage) begin() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.epoch
}

// observe takes one call's outcome into account.
func (o *storeOutage) observe(ctx context.Context, log *slog.Logger, epoch uint64, err error) {
	var failed bool
	switch {
	case errors.Is(err, ErrStoreUnavailable):
		failed = true
	case err == nil || ErrorCode(err) != "INTERNAL":
		// An answer, even a refusal, means the store is reachable.
	default:
		return // a bug or a cancelled caller says nothing about the store
	}
	o.mu.Lock()
	if failed == o.down || epoch != o.epoch {
		o.mu.Unlock()
		return
	}
	now := time.Now() // only for a change of state: a clock read is not free
	o.down, o.epoch = failed, o.epoch+1
	quiet := o.relapse
	switch {
	case failed && !o.ended.IsZero() && now.Sub(o.ended) < o.settle:
		o.relapse, quiet = true, true
	case failed:
		o.since = now
	default:
		o.relapse, o.ended = false, now
	}
	since := o.since
	o.mu.Unlock()
	switch {
	case quiet:
	case failed:
		log.WarnContext(ctx, "store unavailable; answering 503 until it is back", "err", err)
	default:
		log.InfoContext(ctx, "store reachable again", "down_for", now.Sub(since).Round(time.Millisecond))
	}
}
