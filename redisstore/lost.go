package redisstore

import (
	"context"
	"sync"
)

// Loss is what a Store found missing from Redis: writes Redis acknowledged
// and then no longer had. Replication is asynchronous, so a replica
// promoted after its primary died lacks the primary's last writes; a Redis
// restarted without persistence lacks everything.
//
// How a loss is seen: a room's arrival sequence (wr:{room}:seq) and its
// admitted counter (stats.admitted) only ever grow. Every Enter and Status
// reply carries the sequence, every Admit reply both counters, read in the
// same script as the rest of the reply. The Store keeps, per room, the
// highest value each has shown it (a watermark). A reply that shows less
// than the watermark had been before the call was sent means Redis lost
// what lies between: since that earlier reply had been received, the
// counter cannot legitimately be lower. Comparing with the watermark at
// send time, not at receipt, keeps concurrent calls whose replies arrive
// out of order from looking like a loss. After a loss the watermark starts
// again from the new reply under a new generation; of the replies to calls
// sent before it, only one lower than any seen since counts, and only by
// how much lower (a call the new primary ran first), so one loss is
// counted once per Store, in full.
//
// Each Store sees the counters through its own calls, so each instance
// reports what it saw: the loss is at least the largest report of any
// instance, not their sum. Losses older than the Store (the process
// restarted too) are not seen.
type Loss struct {
	// Places is how many arrival sequence numbers Enter handed out that the
	// room's sequence no longer covers: queue places (and anything that
	// happened to those users afterwards) that may be gone.
	Places int64
	// Tokens is how many entry tokens Admit issued that the room's admitted
	// counter no longer counts.
	Tokens int64
}

// roomWatch holds a room's watermarks.
type roomWatch struct {
	mu            sync.Mutex
	seq, admitted watermark
	// hadReplicas: an Admit found the primary with replicas, so one with
	// none connected is a risk worth a warning.
	hadReplicas bool
	// unreplicated: the last Admit found no replica caught up; it makes
	// the warning one per run of failures.
	unreplicated bool
}

// watermark is the highest value a counter has shown, in a generation that
// changes whenever a loss is found.
type watermark struct {
	high int64
	gen  uint64
	// floor is the lowest value a reply has shown since the last loss was
	// found: the counter the new primary started from, as far as seen.
	floor int64
}

// reading is a counter as a script found it (before) and left it (after).
type reading struct{ before, after int64 }

// observe takes a reading from a call sent when the watermark was at and
// returns how many counts were lost.
func (w *watermark) observe(at watermark, r reading) int64 {
	if at.gen != w.gen {
		// A loss was found since this call was sent. A reply below the
		// floor comes from the new primary, which ran this call before the
		// one that found the loss: the loss reaches that much further
		// down. Any other reply may come from the old primary and would
		// raise the watermark wrongly.
		if r.before < w.floor {
			lost := w.floor - r.before
			w.floor = r.before
			w.high = max(w.high, r.after)
			return lost
		}
		return 0
	}
	if r.before < at.high {
		lost := at.high - r.before
		w.high, w.floor, w.gen = r.after, r.before, w.gen+1
		return lost
	}
	w.high = max(w.high, r.after)
	return 0
}

func (s *Store) watch(room string) *roomWatch {
	if w, ok := s.watches.Load(room); ok {
		return w.(*roomWatch)
	}
	w, _ := s.watches.LoadOrStore(room, &roomWatch{})
	return w.(*roomWatch)
}

// marks returns the room's watermarks as they are now, before a call.
func (w *roomWatch) marks() (seq, admitted watermark) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seq, w.admitted
}

// observe checks a reply's readings against the watermarks taken before
// the call (admitted is nil when the reply has none) and reports a loss.
func (s *Store) observe(ctx context.Context, room string, w *roomWatch, atSeq, atAdmitted watermark, seq reading, admitted *reading) {
	var loss Loss
	w.mu.Lock()
	loss.Places = w.seq.observe(atSeq, seq)
	if admitted != nil {
		loss.Tokens = w.admitted.observe(atAdmitted, *admitted)
	}
	w.mu.Unlock()
	if loss == (Loss{}) {
		return
	}
	s.lostPlaces.Add(loss.Places)
	s.lostTokens.Add(loss.Tokens)
	s.log.WarnContext(ctx, "redisstore: Redis lost acknowledged writes (a failover to a replica that lacked them, or a restart without persistence)",
		"room", room, "places", loss.Places, "tokens", loss.Tokens)
	if s.onLost != nil {
		s.onLost(room, loss)
	}
}

// Lost returns the losses this Store has found since it was made, over all
// rooms.
func (s *Store) Lost() Loss {
	return Loss{Places: s.lostPlaces.Load(), Tokens: s.lostTokens.Load()}
}
