package memstore

import (
	"container/heap"
	"time"

	"github.com/waitroom/waitroom"
)

// entryToken is one admitted user's entry token.
type entryToken struct {
	user  string
	value string
	// expiresAt is the first-use deadline until the token is confirmed
	// (its holder's second look at it) or claimed, then ttlEnd.
	expiresAt time.Time
	ttlEnd    time.Time
	shown     bool // its holder was told of it once
	confirmed bool
	// notice: its holder asked to be told; linkNonce is the one return
	// link that may still restore it (NoticeStore).
	notice    bool
	linkNonce string
	// lease and leaseUntil are set by Claim; the token is held while
	// leaseUntil is after now, and unsettled within the settle window
	// after it.
	lease      string
	leaseUntil time.Time
	// deadline is when the token may be dropped: its expiry, or when its
	// hold is abandoned (the settle window after the lease) if that is
	// later, so that an order in flight can still complete. Kept rather
	// than computed: it orders the heap.
	deadline time.Time
	index    int // in tokenSet.byDeadline
}

// confirm gives t its full TTL: its holder came back for it.
func (s *tokenSet) confirm(t *entryToken) {
	if t.confirmed {
		return
	}
	t.confirmed, t.expiresAt = true, t.ttlEnd
	s.setLease(t, t.lease, t.leaseUntil) // recomputes the deadline
}

// unsettled reports whether a claim holds t and may still settle it: its
// lease runs, or ran out less than waitroom.SettleWindow ago (a gate
// retrying a Complete). Until then t keeps its unit and nobody else may
// claim it.
func (t *entryToken) unsettled(now time.Time) bool {
	return t.lease != "" && t.leaseUntil.Add(waitroom.SettleWindow).After(now)
}

// tokenSet holds a room's entry tokens by user and by deadline, so that
// expiry costs O(log n) per dropped token rather than a scan of all tokens.
// A token stays until it is spent or dropped; past its expiry it is no
// longer live (Enter, Status and Claim see none), but a late Complete of
// its order still finds it, as in redisstore.
type tokenSet struct {
	byUser     map[string]*entryToken
	byDeadline deadlineHeap
}

func newTokenSet() *tokenSet {
	return &tokenSet{byUser: make(map[string]*entryToken)}
}

// put adds t, replacing the user's previous token, which it returns.
func (s *tokenSet) put(t *entryToken) (replaced *entryToken) {
	if old, ok := s.byUser[t.user]; ok {
		s.remove(old)
		replaced = old
	}
	t.deadline = t.expiresAt
	s.byUser[t.user] = t
	heap.Push(&s.byDeadline, t)
	return replaced
}

func (s *tokenSet) remove(t *entryToken) {
	delete(s.byUser, t.user)
	heap.Remove(&s.byDeadline, t.index)
}

// setLease holds t under lease until the given time, or, with an empty
// lease, makes it ready again with its own expiry.
func (s *tokenSet) setLease(t *entryToken, lease string, until time.Time) {
	t.lease, t.leaseUntil = lease, until
	t.deadline = t.expiresAt
	if abandoned := until.Add(waitroom.SettleWindow); lease != "" && abandoned.After(t.expiresAt) {
		t.deadline = abandoned
	}
	heap.Fix(&s.byDeadline, t.index)
}

// dropExpired removes every token whose deadline is not after now and
// returns how many it removed, the confirmed ones and the no-shows apart;
// each, if set, is handed every token removed, in deadline order.
func (s *tokenSet) dropExpired(now time.Time, each func(*entryToken)) (expired, noShows int) {
	for len(s.byDeadline) > 0 && !s.byDeadline[0].deadline.After(now) {
		t := heap.Pop(&s.byDeadline).(*entryToken)
		delete(s.byUser, t.user)
		if each != nil {
			each(t)
		}
		if t.confirmed {
			expired++
		} else {
			noShows++
		}
	}
	return expired, noShows
}

// liveCount is the number of tokens before their deadline at now. It visits
// only the expired tokens dropExpired has not yet removed and their
// children, without removing them: Stats reads, it does not expire.
func (s *tokenSet) liveCount(now time.Time) int {
	expired := 0
	var visit func(i int)
	visit = func(i int) {
		if i >= len(s.byDeadline) || s.byDeadline[i].deadline.After(now) {
			return
		}
		expired++
		visit(2*i + 1)
		visit(2*i + 2)
	}
	visit(0)
	return len(s.byUser) - expired
}

// deadlineHeap is a min-heap of tokens by deadline, for container/heap.
type deadlineHeap []*entryToken

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }

func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *deadlineHeap) Push(x any) {
	t := x.(*entryToken)
	t.index = len(*h)
	*h = append(*h, t)
}

func (h *deadlineHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.index = -1
	return t
}
