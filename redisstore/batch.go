package redisstore

import (
	"context"
	"sync"
	"time"

	"github.com/waitroom/waitroom"
)

// Enter and Status are what every waiting user calls, many at once in a
// drop. Their scripts take many users: the settings, the clock, the
// sequence and the call itself are then paid once per call, not per user.
// A room's calls of each go one at a time through a line: while one is in
// flight, the users of the calls that come meanwhile gather in the next
// batch, and it goes as soon as the one before returns (group commit). A
// lone call goes at once; under load a call carries as many users as came
// during the one before, at most maxBatch.

// maxBatch bounds the users of one call, and so how long one call holds
// Redis (a few µs a user).
const maxBatch = 128

// batchedOp is an operation whose calls take many users.
type batchedOp struct {
	name string
	call func(k *roomKeys) fcall
}

// callLine is a room's batches of one operation: one call in flight at a
// time, the rest waiting in order.
type callLine struct {
	mu      sync.Mutex
	busy    bool         // a call is in flight
	waiting []*userBatch // to send, in order
	dropped bool         // idle and out of Store.lines: whoever still holds it makes a new one
}

// lineKey names a room's line of one operation in Store.lines.
type lineKey struct {
	op   *batchedOp
	room string
}

// line returns room's line of op, busy or not, made when it has none. A
// line leaves Store.lines when it goes idle (sendBatches), so that the
// lines of rooms no longer called do not pile up; a caller that finds the
// line it loaded dropped takes a new one.
func (s *Store) line(op *batchedOp, room string) *callLine {
	key := lineKey{op, room}
	for {
		v, ok := s.lines.Load(key)
		if !ok {
			v, _ = s.lines.LoadOrStore(key, new(callLine))
		}
		l := v.(*callLine)
		l.mu.Lock()
		if !l.dropped {
			return l // locked
		}
		l.mu.Unlock()
	}
}

// userBatch is one call: users in the order their calls came.
type userBatch struct {
	users   []string
	gaveUp  []bool // its caller gave up before the call was sent: left out
	sent    bool
	results []userResult
	err     error         // the call's own failure, every user's
	done    chan struct{} // closed by finish
	// The bound its callers' waits share (EnterWithin, StatusWithin): one
	// timer a call, not one a caller, which finishes the wait late when
	// it fires first. within is 0 for no bound of its own.
	within   time.Duration
	opened   time.Time
	timer    *time.Timer
	finished bool // l.mu
	late     bool // the bound ran out before the answer came
}

// batchJoinable is the share of its bound for which a batch takes
// callers: a caller after it opens the next batch, so that every caller
// waits at least (batchJoinable-1)/batchJoinable of its bound, never
// more than all of it. Calls take a millisecond or so against a bound of
// a second: only a stalled call behind it leaves a batch open that long.
const batchJoinable = 8

// openBatch makes a batch of l whose callers wait at most within (none:
// 0).
func (l *callLine) openBatch(within time.Duration, now time.Time) *userBatch {
	b := &userBatch{done: make(chan struct{}), within: within}
	if within > 0 {
		b.opened = now
		b.timer = time.AfterFunc(within, func() { l.finish(b, true) })
	}
	return b
}

// joinable reports whether a caller bound by within may join b now.
func (b *userBatch) joinable(within time.Duration, now time.Time) bool {
	return b.within == within && (within <= 0 || now.Sub(b.opened) < within/batchJoinable)
}

// finish ends the wait of b's callers, once: its call answered, or
// (late) its bound ran out first. One channel for both, so a caller
// waits on two, not three (a select's cost grows with its cases); a
// late batch not sent yet goes without its callers.
func (l *callLine) finish(b *userBatch, late bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b.finished {
		return
	}
	b.finished, b.late = true, late
	if late && !b.sent {
		for i := range b.gaveUp {
			b.gaveUp[i] = true
		}
	}
	close(b.done)
}

type userResult struct {
	st  waitroom.Status
	err error
}

// batched runs op for user in room: it joins the room's open batch and
// waits for its result, for ctx, or at most within (when > 0).
func (s *Store) batched(ctx context.Context, op *batchedOp, room, user string, within time.Duration) (waitroom.Status, error) {
	if err := checkRoom(room); err != nil {
		return waitroom.Status{}, err
	}
	if err := ctx.Err(); err != nil {
		return waitroom.Status{}, s.fail(op.name, err)
	}
	k := s.keys(room)
	var now time.Time
	if within > 0 {
		now = time.Now()
	}
	l := s.line(op, room) // locked
	var b *userBatch
	if n := len(l.waiting); n > 0 && len(l.waiting[n-1].users) < maxBatch*s.cachedShards(room) && l.waiting[n-1].joinable(within, now) {
		b = l.waiting[n-1]
	} else {
		b = l.openBatch(within, now)
		l.waiting = append(l.waiting, b)
	}
	i := len(b.users)
	b.users, b.gaveUp = append(b.users, user), append(b.gaveUp, false)
	var next *userBatch
	if !l.busy {
		l.busy = true
		next = l.take()
	}
	l.mu.Unlock()
	if next != nil {
		// Its own goroutine: the call outlives a caller that gives up, and
		// sends the batches that gather meanwhile.
		go s.sendBatches(context.WithoutCancel(ctx), op, room, k, l, next)
	}
	select {
	case <-b.done:
		switch {
		case b.late:
			// Only finish's fields: the call may still be writing its own.
			return waitroom.Status{}, s.fail(op.name, context.DeadlineExceeded)
		case b.err != nil:
			return waitroom.Status{}, b.err
		}
		return b.results[i].st, b.results[i].err
	case <-ctx.Done():
		l.mu.Lock()
		if !b.sent {
			b.gaveUp[i] = true // not sent yet: the call leaves this user out
		}
		l.mu.Unlock()
		return waitroom.Status{}, s.fail(op.name, ctx.Err())
	}
}

// take removes the first waiting batch to send it; l.mu is held.
func (l *callLine) take() *userBatch {
	b := l.waiting[0]
	l.waiting[0] = nil
	l.waiting = l.waiting[1:]
	b.sent = true
	return b
}

// sendBatches sends b, then the batches that gathered meanwhile on l, one
// call at a time, until none waits; then l is dropped.
func (s *Store) sendBatches(ctx context.Context, op *batchedOp, room string, k *roomKeys, l *callLine, b *userBatch) {
	for b != nil {
		s.callBatch(ctx, op, room, k, b)
		if b.timer != nil {
			b.timer.Stop()
		}
		l.finish(b, false)
		l.mu.Lock()
		b = nil
		if len(l.waiting) > 0 {
			b = l.take()
		} else {
			l.busy, l.dropped = false, true
			s.lines.CompareAndDelete(lineKey{op, room}, l)
		}
		l.mu.Unlock()
	}
}

// callBatch makes b's call and sets its results. The reply is {"OK",
// seq_before, seq_after, standing, …}: the arrival sequence the call began
// and ended with, which the Store watches for lost writes (lost.go), and a
// standing per user.
func (s *Store) callBatch(ctx context.Context, op *batchedOp, room string, k *roomKeys, b *userBatch) {
	// Pointers into b.users, which no caller appends to once the batch is
	// taken: boxing a string would allocate once per user, a pointer does
	// not, and go-redis writes a *string as the string.
	users := make([]any, 0, len(b.users))
	for i := range b.users {
		if !b.gaveUp[i] {
			users = append(users, &b.users[i])
		}
	}
	if len(users) == 0 {
		return // every caller gave up
	}
	if s.spreadBatched(ctx, op, room, b) {
		return
	}
	w := s.watch(room)
	at := w.marks()
	r, err := s.doCall(ctx, op.name, op.call(k), users...)
	if err == nil && r.code() == "SPREAD" {
		// Spread since this Store read the layout: again, spread.
		s.forgetLayout(room)
		if s.spreadBatched(ctx, op, room, b) {
			return
		}
	}
	if err != nil {
		b.err = err
		return
	}
	seq, ok := r.reading(1)
	if !ok || r.code() != "OK" || len(r) != 3+len(users) {
		b.err = s.unexpected(ctx, op.name, r)
		return
	}
	s.observe(ctx, room, w, at, seq, nil)
	b.results = make([]userResult, len(b.users))
	j := 3
	for i := range b.users {
		if b.gaveUp[i] {
			continue
		}
		b.results[i] = s.userStanding(ctx, op.name, r[j])
		j++
	}
}

// userStanding decodes one user's standing: a refusal, NOT_IN_QUEUE, a
// standing, or a bare position (waiting, units not short).
func (s *Store) userStanding(ctx context.Context, op string, v any) userResult {
	if pos, ok := v.(int64); ok {
		if pos < 1 {
			return userResult{err: s.unexpected(ctx, op, v)}
		}
		return userResult{st: waitroom.Status{State: waitroom.StateWaiting, Position: pos}}
	}
	r, ok := asReply(v)
	if !ok {
		return userResult{err: s.unexpected(ctx, op, v)}
	}
	if err, ok := refusals[r.code()]; ok {
		return userResult{err: err}
	}
	if r.code() == "NOT_IN_QUEUE" && len(r) == 1 {
		return userResult{err: waitroom.ErrNotInQueue}
	}
	st, next, ok := standing(r)
	if !ok || next != len(r) {
		return userResult{err: s.unexpected(ctx, op, r)}
	}
	return userResult{st: st}
}
