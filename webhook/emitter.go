package webhook

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
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
	batches map[batchKey]*batch // the settled tokens gathered
	begun   uint64
	dropped atomic.Int64
	failing bool
}

type batchKey struct{ typ, room string }

type batch struct {
	items []TokenData
	since time.Time
	seq   uint64 // the order batches were begun in
}

func (e *Emitter) init() {
	e.once.Do(func() {
		e.ch = make(chan Entry, EmitBuffer)
		e.batches = map[batchKey]*batch{}
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
	// What the room's users did before it goes first: its events stay in
	// the order they happened.
	e.flushBatches(true, room)
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

// Settled gathers a settled hold into token.spent events when its order
// succeeded, token.released when it failed: pass it as the gate's
// OnSettled.
func (e *Emitter) Settled(h waitroom.Hold, outcome string) {
	typ := TokenReleased
	if outcome == waitroom.OutcomeCompleted {
		typ = TokenSpent
	}
	e.gather(typ, h.Room, TokenData{User: h.User, Units: max(h.Units, 1)})
}

// gather adds items to room's batch of typ, each batch an event of at
// most MaxBatchUsers items, appended once full or BatchWindow after its
// first item.
func (e *Emitter) gather(typ, room string, items ...TokenData) {
	if len(items) == 0 || !e.active() {
		return
	}
	e.init()
	now := e.now()
	key := batchKey{typ, room}
	e.mu.Lock()
	var full [][]TokenData
	b := e.batches[key]
	for _, it := range items {
		if b == nil {
			e.begun++
			b = &batch{since: now, seq: e.begun}
			e.batches[key] = b
		}
		b.items = append(b.items, it)
		if len(b.items) >= MaxBatchUsers {
			full = append(full, b.items)
			delete(e.batches, key)
			b = nil
		}
	}
	e.mu.Unlock()
	for _, items := range full {
		e.pushBatch(key, items, now)
	}
}

// pushBatch queues the event of a batch.
func (e *Emitter) pushBatch(key batchKey, items []TokenData, now time.Time) {
	data := TokensData{Count: len(items), Tokens: items}
	e.push(NewEntry(NewEvent(key.typ, key.room, now, data), now))
}

// flushBatches queues the gathered batches older than BatchWindow, or all
// of them with all (only room's when room is set), oldest first.
func (e *Emitter) flushBatches(all bool, room string) {
	e.init()
	now := e.now()
	type ready struct {
		key batchKey
		b   *batch
	}
	var out []ready
	e.mu.Lock()
	for key, b := range e.batches {
		if (room == "" || key.room == room) && (all || now.Sub(b.since) >= BatchWindow) {
			out = append(out, ready{key, b})
			delete(e.batches, key)
		}
	}
	e.mu.Unlock()
	slices.SortFunc(out, func(x, y ready) int { return cmp.Compare(x.b.seq, y.b.seq) })
	for _, r := range out {
		e.pushBatch(r.key, r.b.items, now)
	}
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
		// A full batch waiting for the log takes nothing more from the
		// buffer, which alone bounds what is held.
		in := e.ch
		if len(batch) >= appendBatch {
			in = nil
		}
		select {
		case <-ctx.Done():
			e.flushBatches(true, "")
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			defer cancel()
			_ = e.append(fctx, e.drain(batch, -1))
			return ctx.Err()
		case en := <-in:
			batch = append(batch, en)
		case <-t.C:
			e.flushBatches(false, "")
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
	e.flushBatches(true, "")
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
