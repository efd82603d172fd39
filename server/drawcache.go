package server

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/waitroom/waitroom"
)

// drawCache answers GET /rooms/{room}/draw, which is public, without a
// store call per request: a room's draw record changes at most twice in
// its life (the commitment, published when the room is scheduled; the
// seed, revealed at the draw). No instance is told when another one draws,
// so each record is kept only as long as it cannot have changed unseen:
//
//   - pending, before the opening: until the opening by the store's clock
//     (Draw.OpensIn, counted from when the read was sent, so never past
//     it) and at most drawPendingFor, the time an opening moved by an
//     operator on another instance takes to show;
//   - pending, the opening come: not kept, since the seed may be revealed
//     any moment; requests at the same time share one store read;
//   - done: drawDoneFor (it is final; the bound lets a cleared opening
//     time show);
//   - NO_DRAW (a room without an opening): drawPendingFor.
//
// Only answers about rooms the store knows are kept, so made-up names do
// not grow it; the operator API forgets a room it changes.
type drawCache struct {
	mu    sync.Mutex
	rooms map[string]*drawEntry
	// now is the clock the bounds are counted on; nil: time.Now. Tests
	// whose store runs on a fake clock set the same one.
	now func() time.Time
}

const (
	drawPendingFor = time.Second
	drawDoneFor    = time.Minute
)

// drawEntry is one room's kept answer. mu is held while the store is
// read, so one read at a time per room serves everyone who asked before
// it was sent.
type drawEntry struct {
	mu sync.Mutex
	// reads counts the store reads begun: one begun after a request
	// arrived is as fresh as the request's own would be.
	reads atomic.Int64
	kept  bool
	until time.Time // counted from when the read kept was sent
	d     waitroom.Draw
	err   error // nil or ErrNoDraw
}

// get returns room's draw record, from the cache or read from store.
func (c *drawCache) get(ctx context.Context, store waitroom.Store, room string) (waitroom.Draw, error) {
	now := c.now
	if now == nil {
		now = time.Now
	}
	c.mu.Lock()
	if c.rooms == nil {
		c.rooms = make(map[string]*drawEntry)
	}
	e := c.rooms[room]
	if e == nil {
		e = &drawEntry{}
		c.rooms[room] = e
	}
	c.mu.Unlock()

	seen := e.reads.Load()
	e.mu.Lock()
	defer e.mu.Unlock()
	// Reads run under e.mu: one begun since this request arrived is done.
	if e.kept && (now().Before(e.until) || e.reads.Load() > seen) {
		return e.d, e.err
	}
	e.reads.Add(1)
	asked := now()
	d, err := store.Draw(ctx, room)
	if err != nil && !errors.Is(err, waitroom.ErrNoDraw) {
		if !e.kept {
			c.forgetEntry(room, e)
		}
		return d, err
	}
	e.kept, e.d, e.err = true, d, err
	e.until = asked.Add(keepDraw(d, err))
	return d, err
}

// keepDraw is how long an answer of the store's Draw may be served.
func keepDraw(d waitroom.Draw, err error) time.Duration {
	switch {
	case err != nil: // NO_DRAW
		return drawPendingFor
	case d.State == waitroom.DrawDone:
		return drawDoneFor
	default:
		return min(drawPendingFor, d.OpensIn)
	}
}

// forget drops room's answer: this instance changed the room.
func (c *drawCache) forget(room string) {
	c.mu.Lock()
	delete(c.rooms, room)
	c.mu.Unlock()
}

// forgetEntry drops e if it is still room's.
func (c *drawCache) forgetEntry(room string, e *drawEntry) {
	c.mu.Lock()
	if c.rooms[room] == e {
		delete(c.rooms, room)
	}
	c.mu.Unlock()
}
