package waitroom

import (
	"context"
	"time"
)

// The per-user events a store's admission writes to a room's outbox, for
// a relay (package webhook's Watcher) to tell: named as the webhook
// events they become.
const (
	OutboxAdmitted  = "user.admitted"
	OutboxNoShow    = "user.no_show"
	OutboxAbandoned = "user.abandoned"
	OutboxExpired   = "token.expired"
)

// Bounds of a room's outbox.
const (
	// OutboxMaxUsers bounds the users of one outbox entry.
	OutboxMaxUsers = 1000
	// OutboxMaxEntries bounds a room's outbox: at an admission every
	// 25 ms, 40 minutes of a relay that cannot write its log (a few MB).
	// The oldest beyond it are dropped unrelayed, and counted
	// (OutboxRead.Lost).
	OutboxMaxEntries = 100_000
)

// OutboxEntry is one entry of a room's outbox: users of one event type,
// written by one admission call.
type OutboxEntry struct {
	// ID is the store's id of the entry, unique in the room and growing
	// within its stream ("ms-n", as a Redis stream's, after "STREAM/" for
	// a stream other than the room's own).
	ID string
	// Stream names the part of the outbox the entry is in: "" the room's
	// own; a room spread over shards has one more per sub-shard, each
	// written by its sub-shard's own steps, in order within itself only.
	Stream string
	// Type is one of the Outbox* types.
	Type string
	// At is when the store wrote it.
	At time.Time
	// Users in the order the admission met them (admitted: admission
	// order).
	Users []string
}

// OutboxRead is what ReadOutbox found.
type OutboxRead struct {
	Entries []OutboxEntry
	// Lost is how many entries the room's outbox ever dropped unrelayed
	// because it was full: a counter that only grows.
	Lost int64
	// On: the room's admission writes the outbox (SetOutbox).
	On bool
	// Named is how many users the room's admissions ever named in the
	// outbox, of the types Stats counts too.
	Named OutboxNamed
}

// OutboxNamed counts the users a room's admissions named in its outbox
// as no-shows, expired and abandoned: counters that only grow, moved in
// the admission's own step with Stats' NoShows, Expired and Abandoned,
// and only while the outbox is on. Stats less Named is who was found
// without being named (a silent user dropped by its own late poll, a
// token found run out by a claim, a release or a pass, an admission while
// the outbox was off), for a relay to tell as a count.
type OutboxNamed struct {
	NoShows, Expired, Abandoned int64
}

// OutboxStore is a Store whose admission writes the per-user events of a
// room that asks for them to the room's outbox, in the same atomic step
// as the admission itself, so an instance that dies right after Admit
// loses none of them. memstore and redisstore implement it.
type OutboxStore interface {
	// SetOutbox turns room's outbox on (its Admit writes entries) or off
	// (it writes none and costs what it costs without one); what the
	// outbox holds stays until trimmed.
	SetOutbox(ctx context.Context, room string, on bool) error
	// ReadOutbox returns up to count of the oldest entries of each of
	// room's streams (OutboxEntry.Stream), each stream's in its order.
	ReadOutbox(ctx context.Context, room string, count int) (OutboxRead, error)
	// TrimOutbox removes the entries of id's stream up to and including
	// id.
	TrimOutbox(ctx context.Context, room, id string) error
}

// Outbox returns the store's OutboxStore, guarded like every other call;
// ok is false when the store keeps no outbox.
func (g *GuardedStore) Outbox() (OutboxStore, bool) {
	if _, ok := g.store.(OutboxStore); !ok {
		return nil, false
	}
	return guardedOutbox{g}, true
}

type guardedOutbox struct{ g *GuardedStore }

func (o guardedOutbox) inner() OutboxStore { return o.g.store.(OutboxStore) }

func (o guardedOutbox) SetOutbox(ctx context.Context, room string, on bool) error {
	return guardedErr(ctx, o.g, room, func(ctx context.Context) error { return o.inner().SetOutbox(ctx, room, on) })
}

func (o guardedOutbox) ReadOutbox(ctx context.Context, room string, count int) (OutboxRead, error) {
	return guarded(ctx, o.g, room, func(ctx context.Context) (OutboxRead, error) { return o.inner().ReadOutbox(ctx, room, count) })
}

func (o guardedOutbox) TrimOutbox(ctx context.Context, room, id string) error {
	return guardedErr(ctx, o.g, room, func(ctx context.Context) error { return o.inner().TrimOutbox(ctx, room, id) })
}
