package waitroom

import (
	"context"
	"hash/fnv"
	"time"
)

// A room's recent history: one sample of its figures a second, kept by
// the store, so that the operator's dashboard draws the last ten minutes
// whichever instance serves it and whether or not one was open. The
// Admitter records the rooms it owns (Admitter.Run); a quiet room, whose
// figures cannot change, only every QuietHistoryEvery.

// Bounds of the history a store keeps.
const (
	// HistoryEvery is the step of the samples: the Admitter records once
	// a second, and a store keeps at most one sample per room and second.
	HistoryEvery = time.Second
	// HistoryWindow is how far back History answers.
	HistoryWindow = 10 * time.Minute
	// HistoryKeep is the samples a store keeps per room: the window at one
	// a second.
	HistoryKeep = int(HistoryWindow / HistoryEvery)
	// QuietHistoryEvery is how often the Admitter records a quiet room:
	// parked, nobody waiting and no token held at its last probe, and no
	// wake since. Its figures stay as they are until it wakes, when it is
	// recorded every second again.
	QuietHistoryEvery = time.Minute
	// MaxHistoryRoomsBatch bounds the rooms of one RecordSamples call, and
	// so how long one call holds the store.
	MaxHistoryRoomsBatch = 500
	// PerSecondGap is the longest span between two samples whose admitted
	// counters still measure a rate: across a longer one the growth spans
	// a time nobody saw.
	PerSecondGap = 3 * HistoryEvery
)

// Sample is a room's figures at one second.
type Sample struct {
	At         time.Time // a whole second
	Rate       float64   // the room's admission rate setting
	Waiting    int64     // Stats.Waiting
	LiveTokens int64     // Stats.Active
	Admitted   int64     // Stats.Admitted: a counter that only grows
}

// PerSecond is the admissions per second from prev to s: false when prev
// is not a sample shortly before s (PerSecondGap), or the counter went
// back (a store that lost writes).
func (s Sample) PerSecond(prev Sample) (float64, bool) {
	gap := s.At.Sub(prev.At)
	if prev.At.IsZero() || gap <= 0 || gap > PerSecondGap || s.Admitted < prev.Admitted {
		return 0, false
	}
	return float64(s.Admitted-prev.Admitted) / gap.Seconds(), true
}

// Quiet reports whether the figures of s could only be what they are
// until the room wakes: nobody waits and no token is held.
func (s Sample) Quiet() bool { return s.Waiting == 0 && s.LiveTokens == 0 }

// HistoryStore is a Store that keeps each room's recent samples.
// memstore and redisstore implement it; with a store that does not, the
// dashboard draws the samples its own instance took while it was open.
type HistoryStore interface {
	// RecordSamples reads the figures of each of rooms (at most
	// MaxHistoryRoomsBatch) and appends one sample at now, truncated to
	// the second, to each room's history, in one round trip. A room that
	// does not exist is left out. A room that has a sample at that second
	// already keeps one (two admitters recording during a handover), and
	// one with a later sample gets none: a history is in time order. Each
	// room keeps its last HistoryKeep samples; a store may forget a
	// history not recorded for HistoryWindow (redisstore: a key TTL, so
	// that a deleted room's goes too).
	RecordSamples(ctx context.Context, now time.Time, rooms []string) error
	// History returns room's samples after since, oldest first, within
	// HistoryWindow of its newest; none for a room without any (or
	// without the room).
	History(ctx context.Context, room string, since time.Time) ([]Sample, error)
}

// CheckHistoryRooms validates RecordSamples' rooms: at most
// MaxHistoryRoomsBatch valid room names.
func CheckHistoryRooms(rooms []string) error { return checkRoomBatch(rooms, MaxHistoryRoomsBatch) }

// HistoryOf returns store's HistoryStore: a GuardedStore's guarded one,
// or store itself when it keeps history; ok is false otherwise.
func HistoryOf(store Store) (HistoryStore, bool) {
	if g, ok := store.(*GuardedStore); ok {
		return g.History()
	}
	h, ok := store.(HistoryStore)
	return h, ok
}

// History returns the store's HistoryStore, guarded like every other
// call; ok is false when the store keeps no history.
func (g *GuardedStore) History() (HistoryStore, bool) {
	if _, ok := g.store.(HistoryStore); !ok {
		return nil, false
	}
	return guardedHistory{g}, true
}

type guardedHistory struct{ g *GuardedStore }

func (h guardedHistory) inner() HistoryStore { return h.g.store.(HistoryStore) }

func (h guardedHistory) RecordSamples(ctx context.Context, now time.Time, rooms []string) error {
	return guardedErr(ctx, h.g, "", func(ctx context.Context) error { return h.inner().RecordSamples(ctx, now, rooms) })
}

func (h guardedHistory) History(ctx context.Context, room string, since time.Time) ([]Sample, error) {
	return guarded(ctx, h.g, "", func(ctx context.Context) ([]Sample, error) { return h.inner().History(ctx, room, since) })
}

// quietDue is the second after now at which a quiet room is recorded
// next: the same second of every minute for every admitter (a hash of the
// room's name), so that rooms gone quiet together are not all recorded
// in one second, and a quiet room handed over to another admitter keeps
// its minute.
func quietDue(room string, now time.Time) time.Time {
	h := fnv.New32a()
	h.Write([]byte(room))
	every := int64(QuietHistoryEvery / HistoryEvery)
	s := now.Unix()
	due := s - s%every + int64(h.Sum32()%uint32(every))
	if due <= s {
		due += every
	}
	return time.Unix(due, 0)
}
