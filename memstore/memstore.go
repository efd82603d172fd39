// Package memstore is the in-process waitroom.Store: the embedded default
// when no Redis is configured. It keeps the same semantics as redisstore,
// each operation one critical section under its room's mutex, with Enter,
// Status and Leave in O(log n) at any queue length.
package memstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/waitroom/waitroom"
)

// Options configures a Store; the zero value is ready to use.
type Options struct {
	// Now is the store's clock; nil means time.Now. Tests pass a fake one
	// to drive admissions, expiry and leases exactly.
	Now func() time.Time
}

// Store keeps rooms in memory. It is safe for concurrent use.
type Store struct {
	now func() time.Time

	mu    sync.RWMutex // guards rooms, not what is in them
	rooms map[string]*room

	admittersMu sync.Mutex
	admitters   map[string]time.Time // id → alive until

	wakesMu sync.Mutex
	wakes   map[chan string]struct{}
}

var _ waitroom.Store = (*Store)(nil)

// New returns an empty store.
func New(opts Options) *Store {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Store{now: now, rooms: make(map[string]*room), admitters: make(map[string]time.Time),
		wakes: make(map[chan string]struct{})}
}

// room is one room's state; mu makes each operation on it one atomic step.
// Operations read the clock inside that step, so that, as with the Redis
// clock inside a script, a room sees time only move forward.
type room struct {
	mu  sync.Mutex
	cfg waitroom.RoomConfig
	// version changes at every write of cfg (RoomVersions).
	version string
	queue   *queue
	tokens  *tokenSet
	bucket  bucket
	stats   waitroom.Stats // counters only; Waiting, Active and Pace are computed
	pace    waitroom.PaceSums
	// sinceTick gathers the arrivals and leaves between admission ticks
	// for the pace.
	sinceTick waitroom.PaceTick
	// paceNoShows is stats.NoShows when the pace last took them: the
	// no-shows found by any operation count.
	paceNoShows int64
	// buyers are the users whose order completed while OneOrderPerUser
	// was on.
	buyers map[string]struct{}
	// passes by id, and their ids oldest first.
	passes    map[string]*waitroom.Pass
	passOrder []string
	// pre holds the users who came before a scheduled opening, in arrival
	// order, until the draw moves them to the head of queue.
	pre  *queue
	draw drawRecord
	// notices are the channels kept for queued users who asked to be
	// told of their turn (notices.go), until it comes.
	notices map[string][]byte
	// page is the room's own page archive (PageStore); nil: none.
	page []byte
	// out is the room's outbox (outbox.go), written while outboxOn.
	out outbox
	// history is the room's samples (HistoryStore), oldest first, at most
	// waitroom.HistoryKeep.
	history []waitroom.Sample
}

// drawRecord is a scheduled room's draw: the seed and its commitment from
// the moment the room is scheduled (the commitment is published from then
// on), the order used, the entrants, their digest and their places once
// it is done.
type drawRecord struct {
	seed       string
	commitment string
	done       bool
	order      waitroom.PrequeueOrder
	entrants   []waitroom.Entrant
	digest     string
	drawnAt    time.Time
	took       time.Duration
}

// schedule gives a scheduled room its seed and stores the commitment to
// it, once: from here on the commitment is published as stored.
func (d *drawRecord) schedule(cfg waitroom.RoomConfig) {
	if cfg.OpensAt.IsZero() || d.seed != "" {
		return
	}
	d.seed = waitroom.NewSeed()
	d.commitment, _ = waitroom.Commitment(d.seed) // a fresh seed is well formed
}

// CreateRoom stores cfg, with defaults applied, unless the room exists.
func (s *Store) CreateRoom(ctx context.Context, name string, cfg waitroom.RoomConfig) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := checkRoomName(name); err != nil {
		return false, err
	}
	cfg, err := cfg.Stored()
	if err != nil {
		return false, err
	}
	if err := waitroom.ShardsRefusal(cfg); err != nil {
		return false, err // every room of the process is one critical section
	}
	if err := waitroom.PageChangeRefusal(waitroom.RoomConfig{}, cfg); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.rooms[name]; ok {
		return false, nil
	}
	r := &room{cfg: cfg, version: waitroom.NewToken(), queue: newQueue(), tokens: newTokenSet(), buyers: make(map[string]struct{}), pre: newQueue(), notices: map[string][]byte{}}
	r.draw.schedule(cfg)
	s.rooms[name] = r
	return true, nil
}

// UpdateRoom replaces an existing room's settings with to if they are still
// from (ErrRoomChanged otherwise). A smaller MaxQueue refuses new entries
// but keeps everyone already queued.
func (s *Store) UpdateRoom(ctx context.Context, name string, from, to waitroom.RoomConfig) error {
	if err := checkRoomName(name); err != nil {
		return err
	}
	to, err := to.Stored()
	if err != nil {
		return err
	}
	if err := waitroom.ShardsRefusal(to); err != nil {
		return err
	}
	r, err := s.lockedRoom(ctx, name)
	if err != nil {
		return err
	}
	defer r.mu.Unlock()
	if r.cfg != from.WithDefaults() {
		return waitroom.ErrRoomChanged
	}
	if err := waitroom.PageChangeRefusal(from, to); err != nil {
		return err
	}
	if err := r.drawSettingsRefusal(to); err != nil {
		return err
	}
	r.cfg, r.version = to, waitroom.NewToken()
	r.draw.schedule(to)
	return nil
}

// drawSettingsRefusal refuses a change that would rewrite the draw's
// record or its fairness; r.mu is held. The order cannot change once the
// commitment is published; an opening cannot be set over a queue, whose
// users the early arrivals would be placed ahead of.
func (r *room) drawSettingsRefusal(to waitroom.RoomConfig) error {
	if r.draw.commitment != "" && to.Order() != r.cfg.Order() {
		return waitroom.ErrDrawPublished
	}
	if !to.OpensAt.IsZero() && !to.OpensAt.Equal(r.cfg.OpensAt) && r.queue.Len() > 0 {
		return waitroom.ErrQueueNotEmpty
	}
	return nil
}

// RoomVersions returns each room's settings version, "" for a room that
// does not exist.
func (s *Store) RoomVersions(ctx context.Context, rooms []string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := waitroom.CheckWorkRooms(rooms); err != nil {
		return nil, err
	}
	out := make([]string, len(rooms))
	for i, name := range rooms {
		s.mu.RLock()
		r := s.rooms[name]
		s.mu.RUnlock()
		if r != nil {
			r.mu.Lock()
			out[i] = r.version
			r.mu.Unlock()
		}
	}
	return out, nil
}

// RoomConfig returns a room's live settings.
func (s *Store) RoomConfig(ctx context.Context, name string) (waitroom.RoomConfig, error) {
	r, err := s.lockedRoom(ctx, name)
	if err != nil {
		return waitroom.RoomConfig{}, err
	}
	defer r.mu.Unlock()
	return r.cfg, nil
}

// Rooms lists the room names in order.
func (s *Store) Rooms(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	names := make([]string, 0, len(s.rooms))
	for name := range s.rooms {
		names = append(names, name)
	}
	s.mu.RUnlock()
	slices.Sort(names)
	return names, nil
}

// Enter queues user or returns the standing it already has.
func (s *Store) Enter(ctx context.Context, name, user string) (waitroom.Status, error) {
	if err := waitroom.CheckUserID(user); err != nil {
		return waitroom.Status{}, err
	}
	r, err := s.userRoom(ctx, name, user)
	if err != nil {
		return waitroom.Status{}, err
	}
	defer r.mu.Unlock()
	now := s.now()
	if st, ok := r.standing(user, now); ok {
		return st, nil
	}
	if r.cfg.ClosedAt(now) {
		return waitroom.Status{}, waitroom.ErrRoomClosed
	}
	if r.cfg.InviteOnly {
		return waitroom.Status{}, waitroom.ErrInviteOnly
	}
	if soldOut, _, _ := r.cfg.Units(0, r.stats.Sold, 0); soldOut {
		return waitroom.Status{}, waitroom.ErrSoldOut
	}
	if r.queue.Len()+r.pre.Len() >= r.cfg.MaxQueue {
		r.stats.Full++
		return waitroom.Status{}, waitroom.ErrQueueFull
	}
	r.stats.Entered++
	if r.scheduled() && now.Before(r.cfg.OpensAt) {
		return r.early(r.pre.Push(user, now.UnixNano()), now), nil
	}
	r.sinceTick.Arrivals++
	position := r.ahead() + r.queue.Push(user, now.UnixNano())
	if position == 1 {
		s.wake(name)
	}
	return r.waiting(position, now), nil
}

// userRoom is the room user enters or asks about, locked for the caller
// to unlock; a buyer who has ordered in a one-order room is told so.
func (s *Store) userRoom(ctx context.Context, name, user string) (*room, error) {
	r, err := s.lockedRoom(ctx, name)
	if err != nil {
		return nil, err
	}
	if r.bought(user) {
		r.mu.Unlock()
		return nil, waitroom.ErrAlreadyOrdered
	}
	return r, nil
}

// scheduled reports whether the room waits for its draw; r.mu is held.
func (r *room) scheduled() bool {
	return !r.cfg.OpensAt.IsZero() && !r.draw.done
}

// ahead is how many early arrivals wait before the queue; r.mu is held.
// Until the draw, every one of them is ahead of everyone in the queue.
func (r *room) ahead() int {
	return r.pre.Len()
}

// early is the standing of an early arrival, position-th to come.
func (r *room) early(position int, now time.Time) waitroom.Status {
	st := waitroom.Status{State: waitroom.StateScheduled, OpensIn: max(0, r.cfg.OpensAt.Sub(now))}
	if r.cfg.Order() == waitroom.PrequeueFIFO {
		st.Position = int64(position)
	}
	return st
}

// Status returns user's standing: admitted, waiting, or ErrNotInQueue.
func (s *Store) Status(ctx context.Context, name, user string) (waitroom.Status, error) {
	r, err := s.userRoom(ctx, name, user)
	if err != nil {
		return waitroom.Status{}, err
	}
	defer r.mu.Unlock()
	if st, ok := r.standing(user, s.now()); ok {
		return st, nil
	}
	return waitroom.Status{}, waitroom.ErrNotInQueue
}

// standing is the user's live token, else its place; r.mu is held. A
// token wins: an admitted user is no longer queued. A queued user is marked
// seen, unless it had been silent for longer than AbandonAfter: then it has
// gone, is counted abandoned and dropped, and has no standing any more.
func (r *room) standing(user string, now time.Time) (waitroom.Status, bool) {
	if st, ok := r.admitted(user, now); ok {
		return st, true
	}
	// An early arrival waits for the opening, silent or not.
	if pos, ok := r.pre.Position(user); ok {
		return r.early(pos, now), true
	}
	seen, ok := r.queue.Seen(user)
	switch {
	case !ok:
		return waitroom.Status{}, false
	case r.abandoned(user, seen, now):
		r.queue.Remove(user)
		delete(r.notices, user)
		r.stats.Abandoned++
		return waitroom.Status{}, false
	}
	r.queue.Touch(user, now.UnixNano())
	pos, _ := r.queue.Position(user)
	return r.waiting(r.ahead()+pos, now), true
}

// abandoned reports whether a user last seen at seen (unix ns) has gone:
// silent longer than AbandonAfter, or, having asked to be told of its
// turn, than MaxNoticeSilence.
func (r *room) abandoned(user string, seen int64, now time.Time) bool {
	limit := r.cfg.AbandonAfter
	if _, ok := r.notices[user]; ok {
		limit = waitroom.MaxNoticeSilence
	}
	return now.UnixNano()-seen > int64(limit)
}

// Leave removes user from the queue, if there. Leaving a room that does
// not exist is no error either: the user is not queued there.
func (s *Store) Leave(ctx context.Context, name, user string) error {
	r, err := s.room(ctx, name)
	if errors.Is(err, waitroom.ErrRoomNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.queue.Seen(user); ok {
		r.sinceTick.Left++
		r.sinceTick.LeftAfter += r.queue.ArrivedAfter(user)
		r.queue.Remove(user)
	}
	r.pre.Remove(user)
	delete(r.notices, user)
	return nil
}

// Admit drops expired tokens, then turns as many users from the head of the
// queue into token holders as the bucket, the tick quota and MaxActive allow.
func (s *Store) Admit(ctx context.Context, name string) ([]waitroom.Admission, error) {
	r, err := s.lockedRoom(ctx, name)
	if err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	now := s.now()
	// The per-user events of a room that asks for them (SetOutbox), each
	// list in the order met, written to its outbox as Admit returns.
	var told *toldUsers
	var onGone func(*entryToken)
	if r.out.on {
		told = &toldUsers{}
		defer r.out.tell(now, told)
		onGone = told.gone
	}
	expired, noShows := r.tokens.dropExpired(now, onGone)
	r.stats.Expired += int64(expired)
	r.stats.NoShows += int64(noShows)
	if r.scheduled() {
		// Nobody goes before the opening, and nothing is saved up for it:
		// the bucket starts empty at the opening, as after a pause.
		r.bucket.refill(now.UnixMicro(), waitroom.RoomConfig{State: waitroom.RoomPaused}, 0)
		if now.Before(r.cfg.OpensAt) {
			return nil, nil
		}
		if err := r.drawPlaces(now); err != nil {
			return nil, fmt.Errorf("memstore draw of %q: %w", name, err)
		}
	}

	// No-shows not yet made up are admitted again, at most at the rate
	// again (refill). With MaxActive the slots they free are refilled
	// within the rate instead, and with nobody waiting there is nobody to
	// make them up with: then nothing is owed.
	if r.cfg.MaxActive > 0 || r.queue.Len() == 0 {
		r.bucket.madeUp = r.stats.NoShows
	}
	measuring, since := r.bucket.started && r.cfg.State != waitroom.RoomPaused, r.bucket.last
	allow, extra := r.bucket.refill(now.UnixMicro(), r.cfg, r.stats.NoShows-r.bucket.madeUp)
	n := min((allow+extra)/picosPerUser, int64(r.cfg.TickQuota())+extra/picosPerUser, int64(r.queue.Len()))
	if r.cfg.MaxActive > 0 {
		n = min(n, int64(r.cfg.MaxActive-len(r.tokens.byUser)))
	}
	// Every token left after dropExpired is live: a reservation of an
	// order's units.
	if left := r.cfg.TokensLeft(r.stats.Sold, int64(len(r.tokens.byUser))); left >= 0 {
		n = min(n, left)
	}
	n = max(n, 0)
	admitted := make([]waitroom.Admission, 0, n)
	// Users silent at the head have gone: skipped, counted, dropped,
	// taking no share of the rate; at most MaxSkipsPerAdmit per call, so
	// one call stays short after a crowd left.
	skipped := 0
	for int64(len(admitted)) < n && skipped < waitroom.MaxSkipsPerAdmit {
		user, seen, ok := r.queue.Head()
		if !ok {
			break
		}
		r.queue.Remove(user)
		gone := r.abandoned(user, seen, now)
		notice, asked := r.notices[user]
		delete(r.notices, user) // kept until the turn, whatever it brings
		if gone {
			skipped++
			if told != nil {
				told.abandoned = append(told.abandoned, user)
			}
			continue
		}
		if r.bought(user) {
			continue // ordered already: leaves the queue without a token
		}
		if t, ok := r.tokens.byUser[user]; ok && (t.expiresAt.After(now) || t.unsettled(now)) {
			// Let in by a pass while still waiting for the draw, or an
			// order holds its token and may yet complete it: it keeps
			// that token and takes no share of the rate.
			continue
		}
		// Until confirmed or claimed, a token lives to the first-use
		// deadline only; a no-show's unit of stock comes back with it.
		// Right after an opening both count from the end of the early
		// arrivals' first polls (waitroom.TokenStart).
		// A buyer who asked to be told is not watching: its deadline
		// runs from the notice (Notified), at most this long before it.
		start := waitroom.TokenStart(now, r.cfg.OpensAt, int64(len(r.draw.entrants)))
		firstUse := r.cfg.FirstUseWithin
		if asked {
			firstUse = r.cfg.NotifiedFirstUseWithin
		}
		t := &entryToken{user: user, value: waitroom.NewToken(), notice: asked,
			expiresAt: start.Add(firstUse), ttlEnd: start.Add(r.cfg.TokenTTL)}
		// An expired token may linger under a lease that outlives it;
		// the new token supersedes it, and the old one counts as gone
		// unused.
		if old := r.tokens.put(t); old != nil {
			r.countGone(old)
			if told != nil {
				told.gone(old)
			}
		}
		if told != nil {
			told.admitted = append(told.admitted, user)
		}
		admitted = append(admitted, waitroom.Admission{User: user, Token: t.value, Notice: notice})
	}
	r.stats.Abandoned += int64(skipped)
	madeUp := r.bucket.settle(len(admitted), allow, r.cfg, r.queue.Len() > 0)
	r.bucket.madeUp += int64(madeUp)
	tick := r.sinceTick
	tick.Admitted, tick.Regular, tick.Skipped = len(admitted), len(admitted)-madeUp, skipped
	tick.NoShows = int(r.stats.NoShows - r.paceNoShows)
	r.sinceTick, r.paceNoShows = waitroom.PaceTick{}, r.stats.NoShows
	if measuring {
		r.pace.Add(float64(now.UnixMicro()-since)/1e6, tick, r.cfg.Rate, r.queue.Len() > 0)
	}
	if len(admitted) == 0 {
		return nil, nil
	}
	r.stats.Admitted += int64(len(admitted))
	return admitted, nil
}

// Claim holds user's token for the room's lease. In a room that does not
// exist there is no token either: the gate gets ErrTokenNotFound.
func (s *Store) Claim(ctx context.Context, name, user, token string) (waitroom.Hold, error) {
	r, err := s.tokenRoom(ctx, name, waitroom.ErrTokenNotFound)
	if err != nil {
		return waitroom.Hold{}, err
	}
	defer r.mu.Unlock()
	now := s.now()
	t, ok := r.tokens.byUser[user]
	if !ok {
		return waitroom.Hold{}, waitroom.ErrTokenNotFound
	}
	if !t.expiresAt.After(now) && !t.unsettled(now) {
		// Expired, and no order holds it that may yet complete it: drop
		// it now. One that may is in use (below).
		r.tokens.remove(t)
		r.countGone(t)
		return waitroom.Hold{}, waitroom.ErrTokenNotFound
	}
	if t.value != token {
		return waitroom.Hold{}, waitroom.ErrTokenInvalid
	}
	if t.unsettled(now) {
		return waitroom.Hold{}, waitroom.ErrTokenInUse
	}
	// Not held, or abandoned: its lease and the settle window ran out.
	// Claiming is using: an unconfirmed token gets its full TTL.
	t.confirmed, t.expiresAt = true, t.ttlEnd
	r.tokens.setLease(t, waitroom.NewToken(), now.Add(r.cfg.Lease))
	return waitroom.Hold{Room: name, User: user, Token: token, Lease: t.lease, LeaseFor: r.cfg.Lease,
		OneOrderPerUser: r.cfg.OneOrderPerUser, Units: r.cfg.UnitsPerOrder}, nil
}

// tokenRoom is the room a token lives in, locked for the caller to
// unlock; nil with missing (ErrTokenNotFound, or nil for nothing to do)
// when the room does not exist, since a missing room holds no token.
func (s *Store) tokenRoom(ctx context.Context, name string, missing error) (*room, error) {
	r, err := s.room(ctx, name)
	if errors.Is(err, waitroom.ErrRoomNotFound) {
		return nil, missing
	}
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	return r, nil
}

// Renew extends h's lease to the room's lease from now, if h still holds
// the token. A lease that ran out but was not claimed again is still h's:
// nobody else took the token meanwhile.
func (s *Store) Renew(ctx context.Context, h waitroom.Hold) error {
	r, err := s.tokenRoom(ctx, h.Room, waitroom.ErrTokenNotFound)
	if err != nil {
		return err
	}
	defer r.mu.Unlock()
	t, ok := r.tokens.byUser[h.User]
	if !ok || t.value != h.Token || t.lease == "" || t.lease != h.Lease {
		return waitroom.ErrTokenNotFound
	}
	r.tokens.setLease(t, t.lease, s.now().Add(r.cfg.Lease))
	return nil
}

// Complete spends the token while it is still stored, whatever became of
// the lease or the expiry: the order succeeded, so the token must not buy a
// second one, and it counts as completed rather than expired, with h.Units
// sold.
func (s *Store) Complete(ctx context.Context, h waitroom.Hold) error {
	r, err := s.tokenRoom(ctx, h.Room, waitroom.ErrTokenNotFound)
	if err != nil {
		return err
	}
	defer r.mu.Unlock()
	t, ok := r.tokens.byUser[h.User]
	switch {
	case !ok:
		return waitroom.ErrTokenNotFound
	case t.value != h.Token:
		return waitroom.ErrTokenInvalid
	}
	r.tokens.remove(t)
	r.stats.Completed++
	r.stats.Sold += int64(max(h.Units, 1))
	if r.cfg.OneOrderPerUser {
		r.buyers[h.User] = struct{}{}
	}
	return nil
}

// Release makes a token held under h's lease usable again with the expiry
// it had, or drops it if that has passed meanwhile. A hold that is no
// longer the token's (spent, dropped, or claimed again after its lease ran
// out) releases nothing, and that is no error.
func (s *Store) Release(ctx context.Context, h waitroom.Hold) error {
	r, err := s.tokenRoom(ctx, h.Room, nil)
	if r == nil {
		return err
	}
	defer r.mu.Unlock()
	now := s.now()
	t, ok := r.tokens.byUser[h.User]
	if !ok || t.value != h.Token || t.lease == "" || t.lease != h.Lease {
		return nil
	}
	if !t.expiresAt.After(now) {
		r.tokens.remove(t)
		r.stats.Expired++
		return nil
	}
	r.tokens.setLease(t, "", time.Time{})
	r.stats.Released++
	return nil
}

// Work tells what each room holds for the admitter.
func (s *Store) Work(ctx context.Context, rooms []string) ([]waitroom.Work, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := waitroom.CheckWorkRooms(rooms); err != nil {
		return nil, err
	}
	work := make([]waitroom.Work, len(rooms))
	for i, name := range rooms {
		s.mu.RLock()
		r, ok := s.rooms[name]
		s.mu.RUnlock()
		if !ok {
			continue
		}
		r.mu.Lock()
		switch {
		case r.queue.Len() > 0 || r.pre.Len() > 0:
			work[i] = waitroom.WorkQueue
		case len(r.tokens.byUser) > 0:
			work[i] = waitroom.WorkTokens
		}
		r.mu.Unlock()
	}
	return work, nil
}

// Admitters keeps id alive for ttl and lists the admitters alive now.
func (s *Store) Admitters(ctx context.Context, id string, ttl time.Duration) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := waitroom.CheckAdmitter(id, ttl); err != nil {
		return nil, err
	}
	s.admittersMu.Lock()
	defer s.admittersMu.Unlock()
	now := s.now()
	s.admitters[id] = now.Add(ttl)
	ids := make([]string, 0, len(s.admitters))
	for a, until := range s.admitters {
		if !until.After(now) {
			delete(s.admitters, a)
			continue
		}
		ids = append(ids, a)
	}
	slices.Sort(ids)
	return ids, nil
}

// Wakes delivers the rooms a user entered while nobody waited in them.
func (s *Store) Wakes(ctx context.Context) <-chan string {
	ch := make(chan string, waitroom.WakesBuffer)
	s.wakesMu.Lock()
	s.wakes[ch] = struct{}{}
	s.wakesMu.Unlock()
	context.AfterFunc(ctx, func() {
		s.wakesMu.Lock()
		defer s.wakesMu.Unlock()
		delete(s.wakes, ch)
		close(ch)
	})
	return ch
}

// wake tells every reader of Wakes that room has users again; a reader
// that is behind misses it.
func (s *Store) wake(room string) {
	s.wakesMu.Lock()
	defer s.wakesMu.Unlock()
	for ch := range s.wakes {
		select {
		case ch <- room:
		default:
		}
	}
}

// Stats returns a room's figures.
func (s *Store) Stats(ctx context.Context, name string) (waitroom.Stats, error) {
	r, err := s.lockedRoom(ctx, name)
	if err != nil {
		return waitroom.Stats{}, err
	}
	defer r.mu.Unlock()
	now := s.now()
	st := r.stats
	st.Waiting, st.Active = r.present(now)
	st.Pace = r.pace.Pace(r.cfg.MaxActive == 0)
	return st, nil
}

// present is who is in r at now: users waiting, live tokens.
func (r *room) present(now time.Time) (waiting, active int64) {
	return int64(r.queue.Len() + r.pre.Len()), int64(r.tokens.liveCount(now))
}

// Ping reports that the store is reachable, which in process it always is.
func (s *Store) Ping(ctx context.Context) error {
	return ctx.Err()
}

// lockedRoom is room, locked for the caller to unlock.
func (s *Store) lockedRoom(ctx context.Context, name string) (*room, error) {
	r, err := s.room(ctx, name)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	return r, nil
}

// room finds a room by name: BAD_REQUEST for a name no room can have (as
// redisstore, whose keys it would break), ErrRoomNotFound when absent.
func (s *Store) room(ctx context.Context, name string) (*room, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkRoomName(name); err != nil {
		return nil, err
	}
	s.mu.RLock()
	r, ok := s.rooms[name]
	s.mu.RUnlock()
	if !ok {
		return nil, waitroom.ErrRoomNotFound
	}
	return r, nil
}

// bought reports whether user ordered in a room with one order per user;
// r.mu is held.
func (r *room) bought(user string) bool {
	if !r.cfg.OneOrderPerUser {
		return false
	}
	_, ok := r.buyers[user]
	return ok
}

// admitted returns user's standing if it holds an unexpired token. The
// first look at an unconfirmed token marks it shown, the next confirms it
// (its page shows "your turn", or an API client asks again): the full TTL.
// The holder is told the full TTL from the start.
func (r *room) admitted(user string, now time.Time) (waitroom.Status, bool) {
	t, ok := r.tokens.byUser[user]
	if !ok || !t.expiresAt.After(now) {
		return waitroom.Status{}, false
	}
	switch {
	case t.confirmed:
	case !t.shown:
		t.shown = true
	default:
		r.tokens.confirm(t)
	}
	return waitroom.Status{State: waitroom.StateAdmitted, Token: t.value, ExpiresIn: t.ttlEnd.Sub(now)}, true
}

// countGone counts a token dropped unused: a no-show when never confirmed.
func (r *room) countGone(t *entryToken) {
	if t.confirmed {
		r.stats.Expired++
	} else {
		r.stats.NoShows++
	}
}

func checkRoomName(name string) error {
	if !waitroom.ValidRoomName(name) {
		return waitroom.BadRequest(fmt.Sprintf("bad room name %q", name))
	}
	return nil
}

// waiting is the standing of a user queued at position; r.mu is held. In a
// sold-out room it is sold_out, keeping the place for a restock.
func (r *room) waiting(position int, now time.Time) waitroom.Status {
	st := waitroom.Status{State: waitroom.StateWaiting, Position: int64(position)}
	if r.cfg.Stock == 0 {
		return st
	}
	soldOut, left, few := r.cfg.Units(st.Position, r.stats.Sold, int64(r.tokens.liveCount(now)))
	if soldOut {
		return waitroom.Status{State: waitroom.StateSoldOut}
	}
	st.UnitsLeft, st.FewLeft = left, few
	return st
}

// drawPlaces places the early arrivals at the opening, in one critical
// section: by the draw or in arrival order at the head of the queue, the
// later arrivals behind them in arrival order. The seed is revealed.
func (r *room) drawPlaces(now time.Time) error {
	// A seed that no longer matches the published commitment draws
	// nothing: the early arrivals wait, the operator is told.
	if err := waitroom.CheckSeed(r.draw.seed, r.draw.commitment); err != nil {
		return err
	}
	began := time.Now()
	users := make([]string, 0, r.pre.Len())
	for r.pre.Len() > 0 {
		users = append(users, r.pre.PopFront(min(r.pre.Len(), 4096))...)
	}
	order, err := waitroom.DrawPlaces(r.cfg.Order(), r.draw.seed, users)
	if err != nil {
		return err
	}
	// The early arrivals are seen at the opening: silence counts from it.
	q := newQueue()
	entrants := make([]waitroom.Entrant, len(order))
	for i, u := range order {
		q.Push(u, now.UnixNano())
		entrants[i] = waitroom.Entrant{User: u, Place: int64(i + 1)}
	}
	for {
		u, seen, ok := r.queue.Head()
		if !ok {
			break
		}
		r.queue.Remove(u)
		q.Push(u, seen)
	}
	r.queue = q
	digest, err := waitroom.DrawnDigest(r.draw.seed, order)
	if err != nil {
		return err
	}
	r.draw = drawRecord{seed: r.draw.seed, commitment: r.draw.commitment, done: true, order: r.cfg.Order(),
		entrants: entrants, digest: digest, drawnAt: now, took: time.Since(began)}
	return nil
}

// Draw returns the room's draw record: the commitment before the draw,
// the seed and the figures after it. ErrNoDraw for a room without an
// opening time.
func (s *Store) Draw(ctx context.Context, name string) (waitroom.Draw, error) {
	r, err := s.room(ctx, name)
	if err != nil {
		return waitroom.Draw{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cfg.OpensAt.IsZero() && !r.draw.done {
		return waitroom.Draw{}, waitroom.ErrNoDraw
	}
	if err := waitroom.CheckSeed(r.draw.seed, r.draw.commitment); err != nil {
		return waitroom.Draw{}, fmt.Errorf("memstore draw of %q: %w", name, err)
	}
	d := waitroom.Draw{Order: r.cfg.Order(), OpensAt: r.cfg.OpensAt, OpensIn: max(0, r.cfg.OpensAt.Sub(s.now())),
		State: waitroom.DrawPending, Commitment: r.draw.commitment}
	if r.draw.done {
		d.Order, d.OpensIn, d.State, d.Seed = r.draw.order, 0, waitroom.DrawDone, r.draw.seed
		d.Entrants, d.Digest, d.DrawnAt, d.Took = int64(len(r.draw.entrants)), r.draw.digest, r.draw.drawnAt, r.draw.took
	}
	return d, nil
}

// Entrants returns the early arrivals and their places, once drawn;
// ErrDrawPending before.
func (s *Store) Entrants(ctx context.Context, name string) ([]waitroom.Entrant, error) {
	r, err := s.room(ctx, name)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.draw.done {
		if r.cfg.OpensAt.IsZero() {
			return nil, waitroom.ErrNoDraw
		}
		return nil, waitroom.ErrDrawPending
	}
	if err := waitroom.CheckSeed(r.draw.seed, r.draw.commitment); err != nil {
		return nil, fmt.Errorf("memstore entrants of %q: %w", name, err)
	}
	return slices.Clone(r.draw.entrants), nil
}

var _ waitroom.PageStore = (*Store)(nil)

// SetPage keeps archive as room's own page (waitroom.PageStore).
func (s *Store) SetPage(ctx context.Context, name string, archive []byte, version string) (waitroom.RoomConfig, error) {
	if err := waitroom.CheckPage(archive, version); err != nil {
		return waitroom.RoomConfig{}, err
	}
	r, err := s.lockedRoom(ctx, name)
	if err != nil {
		return waitroom.RoomConfig{}, err
	}
	defer r.mu.Unlock()
	r.page = nil
	if version != "" {
		r.page = bytes.Clone(archive)
	}
	r.cfg.Page, r.version = version, waitroom.NewToken()
	return r.cfg, nil
}

// Page returns room's page archive and its version.
func (s *Store) Page(ctx context.Context, name string) ([]byte, string, error) {
	r, err := s.lockedRoom(ctx, name)
	if err != nil {
		return nil, "", err
	}
	defer r.mu.Unlock()
	return bytes.Clone(r.page), r.cfg.Page, nil
}
