package webhook

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/waitroom/waitroom"
)

// EmitBuffer bounds the events waiting to be appended: while the log
// cannot be written (Redis down) the newest beyond it are dropped, and
// counted, rather than held up or kept without bound.
const EmitBuffer = 65_536

// appendBatch bounds the entries of one Append.
const appendBatch = 512

// Emitter turns state changes into events and appends them to the log
// off the path that made them: an emit is a channel send, never a store
// call, so ENTER, STATUS and the gate do not wait for it. Events emitted
// while no endpoint exists (Active false) are not kept.
type Emitter struct {
	Log Log
	// Active, if set, says whether any endpoint exists; nil: always.
	Active func() bool
	// Now is the events' clock; nil: time.Now.
	Now func() time.Time
	// Logger; default discards.
	Logger *slog.Logger

	once    sync.Once
	ch      chan Entry
	mu      sync.Mutex
	batches map[string]*admitted // room → admissions gathered
	dropped atomic.Int64
	failing bool
}

type admitted struct {
	users []string
	since time.Time
}

func (e *Emitter) init() {
	e.once.Do(func() {
		e.ch = make(chan Entry, EmitBuffer)
		e.batches = map[string]*admitted{}
	})
}

func (e *Emitter) now() time.Time { return nowOf(e.Now) }

func (e *Emitter) logger() *slog.Logger { return loggerOf(e.Logger) }

func (e *Emitter) active() bool { return e.Active == nil || e.Active() }

// Dropped is how many events were dropped because the buffer was full.
func (e *Emitter) Dropped() int64 { return e.dropped.Load() }

// Emit queues an event of typ in room with data.
func (e *Emitter) Emit(typ, room string, data any) {
	if !e.active() {
		return
	}
	now := e.now()
	e.push(NewEntry(NewEvent(typ, room, now, data), now))
}

func (e *Emitter) push(en Entry) {
	e.init()
	select {
	case e.ch <- en:
	default:
		if e.dropped.Add(1) == 1 {
			e.logger().Error("webhook events are being dropped: the log cannot keep up or cannot be written", "type", en.Event.Type, "room", en.Event.Room)
		}
	}
}

// Admitted gathers room's admissions into user.admitted events of at
// most MaxBatchUsers, each appended once full or BatchWindow after its
// first user: pass it as the Admitter's OnAdmit.
func (e *Emitter) Admitted(room string, list []waitroom.Admission) {
	if len(list) == 0 || !e.active() {
		return
	}
	e.init()
	now := e.now()
	e.mu.Lock()
	var full [][]string
	b := e.batches[room]
	for _, a := range list {
		if b == nil {
			b = &admitted{since: now}
			e.batches[room] = b
		}
		b.users = append(b.users, a.User)
		if len(b.users) >= MaxBatchUsers {
			full = append(full, b.users)
			delete(e.batches, room)
			b = nil
		}
	}
	e.mu.Unlock()
	for _, users := range full {
		e.pushAdmitted(room, users, now)
	}
}

func (e *Emitter) pushAdmitted(room string, users []string, now time.Time) {
	e.push(NewEntry(NewEvent(UserAdmitted, room, now, AdmittedData{Count: len(users), Users: users}), now))
}

// flushAdmitted queues the gathered admissions older than BatchWindow,
// or all of them with all.
func (e *Emitter) flushAdmitted(all bool) {
	e.init()
	now := e.now()
	e.mu.Lock()
	type out struct {
		room  string
		users []string
	}
	var ready []out
	for room, b := range e.batches {
		if all || now.Sub(b.since) >= BatchWindow {
			ready = append(ready, out{room, b.users})
			delete(e.batches, room)
		}
	}
	e.mu.Unlock()
	for _, r := range ready {
		e.pushAdmitted(r.room, r.users, now)
	}
}

// Settled tells a settled hold: token.spent when its order succeeded,
// token.released when it failed. Pass it as the gate's OnSettled.
func (e *Emitter) Settled(h waitroom.Hold, outcome string) {
	typ := TokenReleased
	if outcome == waitroom.OutcomeCompleted {
		typ = TokenSpent
	}
	e.Emit(typ, h.Room, TokenData{User: h.User, Units: max(h.Units, 1)})
}

// RoomChanged tells what an operator's change of a room's settings
// (created: a new room) means: opened, paused, resumed, closed,
// restocked.
func (e *Emitter) RoomChanged(room string, from, to waitroom.RoomConfig, created bool) {
	state := func(c waitroom.RoomConfig) waitroom.RoomState {
		if c.State == "" {
			return waitroom.RoomOpen
		}
		return c.State
	}
	was, is := state(from), state(to)
	switch {
	case created && is == waitroom.RoomOpen:
		e.Emit(RoomOpened, room, RoomData{State: string(is)})
	case created || was == is:
	case is == waitroom.RoomPaused:
		e.Emit(RoomPaused, room, RoomData{State: string(is)})
	case is == waitroom.RoomClosed:
		e.Emit(RoomClosed, room, RoomData{State: string(is)})
	case was == waitroom.RoomPaused:
		e.Emit(RoomResumed, room, RoomData{State: string(is)})
	default:
		e.Emit(RoomOpened, room, RoomData{State: string(is)})
	}
	if !created && to.Stock > from.Stock && from.Stock > 0 {
		e.Emit(RoomRestocked, room, StockData{Stock: to.Stock, PreviousStock: from.Stock})
	}
}

// Run appends queued events until ctx is done, gathering what is queued
// into one Append; a failed Append is retried, its events kept, while
// newer ones wait in the buffer. Then it appends what is left, within a
// second.
func (e *Emitter) Run(ctx context.Context) error {
	e.init()
	t := time.NewTicker(BatchWindow / 10)
	defer t.Stop()
	var batch []Entry
	for {
		select {
		case <-ctx.Done():
			e.flushAdmitted(true)
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			_ = e.append(fctx, e.drain(batch, -1))
			return ctx.Err()
		case en := <-e.ch:
			batch = append(batch, en)
		case <-t.C:
			e.flushAdmitted(false)
		}
		batch = e.drain(batch, appendBatch)
		if e.append(ctx, batch) == nil {
			batch = batch[:0]
		}
	}
}

// Flush appends everything queued and gathered now: a whole step of Run,
// for tests and a shutdown.
func (e *Emitter) Flush(ctx context.Context) error {
	e.flushAdmitted(true)
	for {
		batch := e.drain(nil, appendBatch)
		if len(batch) == 0 {
			return nil
		}
		if err := e.append(ctx, batch); err != nil {
			return err
		}
	}
}

// drain adds queued entries to batch up to limit (-1: all).
func (e *Emitter) drain(batch []Entry, limit int) []Entry {
	e.init()
	for limit < 0 || len(batch) < limit {
		select {
		case en := <-e.ch:
			batch = append(batch, en)
		default:
			return batch
		}
	}
	return batch
}

func (e *Emitter) append(ctx context.Context, batch []Entry) error {
	if len(batch) == 0 {
		return nil
	}
	err := e.Log.Append(ctx, batch)
	switch {
	case err != nil && !e.failing:
		e.failing = true
		e.logger().Error("appending webhook events failed; retrying", "events", len(batch), "err", err)
	case err == nil && e.failing:
		e.failing = false
		e.logger().Info("appending webhook events recovered")
	}
	if err != nil {
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return err
}
