package redisstore

import (
	"context"
	"sync"
	"time"

	"github.com/waitroom/waitroom"
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
	// counter no longer counts, less the Spent ones.
	Tokens int64
	// Spent is how many of those lost issues were of tokens this Store had
	// seen completed (their orders stand): used, not lost, so not in
	// Tokens. A token spent through another instance is not known here
	// and counts in Tokens.
	Spent int64
}

// maxRecentIssues bounds the admissions a Store remembers per room to tell
// a spent token from a lost one: more than Redis can lose in the seconds
// of a failover at MaxTickQuota per slice.
const maxRecentIssues = 4096

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
	// replicas is how many replicas the room's primary had when Admit
	// last read it, at replicasAt (zero: read it again); replicasUnknown:
	// that read found no count, which is warned about once a run.
	replicas        int64
	replicasAt      time.Time
	replicasUnknown bool
	// issued are this Store's latest admissions in the room by number
	// (the admitted counter's value that counted each), oldest first;
	// spent has the token of each, true once this Store completed it.
	issued []issue
	spent  map[string]bool
}

// issue is one admission: the admitted counter's value that counted it
// and its token.
type issue struct {
	n     int64
	token string
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

// marks are a room's watermarks before a call.
type marks struct{ seq, admitted watermark }

// marks returns the room's watermarks as they are now, before a call.
func (w *roomWatch) marks() marks {
	w.mu.Lock()
	defer w.mu.Unlock()
	return marks{w.seq, w.admitted}
}

// issuedNow remembers admissions numbered from first on.
func (w *roomWatch) issuedNow(first int64, admitted []waitroom.Admission) {
	if len(admitted) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.spent == nil {
		w.spent = make(map[string]bool)
	}
	for i, a := range admitted {
		w.issued = append(w.issued, issue{first + int64(i), a.Token})
		w.spent[a.Token] = false
	}
	if drop := len(w.issued) - maxRecentIssues; drop > 0 {
		for _, old := range w.issued[:drop] {
			delete(w.spent, old.token)
		}
		w.issued = append(w.issued[:0], w.issued[drop:]...)
	}
}

// spend notes that token was completed, if this Store issued it lately.
func (w *roomWatch) spend(token string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.spent[token]; ok {
		w.spent[token] = true
	}
}

// spentIn counts the spent tokens among the admissions numbered in
// (from, to]. Called with mu held.
func (w *roomWatch) spentIn(from, to int64) (n int64) {
	for _, i := range w.issued {
		if i.n > from && i.n <= to && w.spent[i.token] {
			n++
		}
	}
	return n
}

// observe checks a reply's readings against the watermarks taken before
// the call (admitted is nil when the reply has none) and reports a loss.
func (s *Store) observe(ctx context.Context, room string, w *roomWatch, at marks, seq reading, admitted *reading) {
	var loss Loss
	w.mu.Lock()
	loss.Places = w.seq.observe(at.seq, seq)
	if admitted != nil {
		// The issues numbered just above what the counter now shows are
		// the lost ones; the spent among them are not lost tokens.
		issued := w.admitted.observe(at.admitted, *admitted)
		loss.Spent = w.spentIn(admitted.before, admitted.before+issued)
		loss.Tokens = issued - loss.Spent
	}
	w.mu.Unlock()
	if loss == (Loss{}) {
		return
	}
	s.lostPlaces.Add(loss.Places)
	s.lostTokens.Add(loss.Tokens)
	s.lostSpent.Add(loss.Spent)
	s.log.WarnContext(ctx, "redisstore: Redis lost acknowledged writes (a failover to a replica that lacked them, or a restart without persistence)",
		"room", room, "places", loss.Places, "tokens", loss.Tokens, "spent_tokens", loss.Spent)
	if s.onLost != nil {
		s.onLost(room, loss)
	}
}

// Lost returns the losses this Store has found since it was made, over all
// rooms.
func (s *Store) Lost() Loss {
	return Loss{Places: s.lostPlaces.Load(), Tokens: s.lostTokens.Load(), Spent: s.lostSpent.Load()}
}
