package memstore

// queue is a room's FIFO of waiting users that answers "what is my
// position?" in O(log n) while users leave from anywhere, and the admitter
// pops from the head.
//
// Users take sequence numbers from a counter, never a clock, so arrival
// order is sequence order. The numbers in [base, base+len(users)) have a
// slot each in a window, and a Fenwick tree over the window counts the
// slots still occupied: a user's position is the prefix sum up to its slot.
// When the window fills up, compact slides it past the users who have gone
// (or, when most of it is holes, renumbers the waiting users in order);
// each compaction costs what the pushes since the previous one paid for,
// so Push is amortized O(1), and sizes the window to at most four times
// the queue.
type queue struct {
	seqOf map[string]int // user → sequence number
	base  int            // sequence number of slot 0
	users []string       // slot → user; "" once the user has gone
	seen  []int64        // slot → the user's last enter or status, unix ns
	// arrival is slot → how many pushes came before the user's: the
	// arrivals after a user are pushed − its arrival.
	arrival []int64
	pushed  int64
	tree    []int32 // Fenwick tree, 1-based: tree[i] counts occupied slots in (i−lowbit(i), i]
	head    int     // no occupied slot lies before head
	end     int     // the next free slot
}

// minQueueWindow keeps tiny queues from compacting on every few pushes.
const minQueueWindow = 64

func newQueue() *queue {
	return &queue{
		seqOf:   make(map[string]int),
		users:   make([]string, minQueueWindow),
		seen:    make([]int64, minQueueWindow),
		arrival: make([]int64, minQueueWindow),
		tree:    make([]int32, minQueueWindow+1),
	}
}

// Len is the number of waiting users.
func (q *queue) Len() int { return len(q.seqOf) }

// Position returns user's 1-based place in the queue.
func (q *queue) Position(user string) (int, bool) {
	seq, ok := q.seqOf[user]
	if !ok {
		return 0, false
	}
	return q.occupiedThrough(seq - q.base), true
}

// Seen returns when user last entered or asked for its status.
func (q *queue) Seen(user string) (int64, bool) {
	seq, ok := q.seqOf[user]
	if !ok {
		return 0, false
	}
	return q.seen[seq-q.base], true
}

// Touch records that user, which must be queued, was seen at now (unix ns).
func (q *queue) Touch(user string, now int64) {
	q.seen[q.seqOf[user]-q.base] = now
}

// ArrivedAfter returns how many users were pushed after user, which must
// be queued.
func (q *queue) ArrivedAfter(user string) int64 {
	return q.pushed - 1 - q.arrival[q.seqOf[user]-q.base]
}

// Head returns the user at the head of the queue and when it was last seen.
func (q *queue) Head() (user string, seen int64, ok bool) {
	if q.Len() == 0 {
		return "", 0, false
	}
	return q.users[q.head], q.seen[q.head], true
}

// Push appends user, which must be non-empty and not queued, seen at now
// (unix ns), and returns its position: the last.
func (q *queue) Push(user string, now int64) int {
	if q.end == len(q.users) {
		q.compact()
	}
	slot := q.end
	q.end++
	q.users[slot] = user
	q.seen[slot] = now
	q.arrival[slot] = q.pushed
	q.pushed++
	q.seqOf[user] = q.base + slot
	q.add(slot, 1)
	return len(q.seqOf)
}

// Remove takes user out of the queue and reports whether it was there.
func (q *queue) Remove(user string) bool {
	seq, ok := q.seqOf[user]
	if !ok {
		return false
	}
	delete(q.seqOf, user)
	slot := seq - q.base
	q.users[slot] = ""
	q.add(slot, -1)
	// Each empty slot is stepped over once, so this is amortized O(1).
	for q.head < q.end && q.users[q.head] == "" {
		q.head++
	}
	return true
}

// PopFront removes and returns up to n users from the head, in arrival order.
func (q *queue) PopFront(n int) []string {
	n = min(n, q.Len())
	if n <= 0 {
		return nil
	}
	out := make([]string, 0, n)
	for range n {
		user := q.users[q.head]
		q.Remove(user)
		out = append(out, user)
	}
	return out
}

// occupiedThrough counts the occupied slots in [0, slot].
func (q *queue) occupiedThrough(slot int) int {
	var sum int32
	for i := slot + 1; i > 0; i -= i & -i {
		sum += q.tree[i]
	}
	return int(sum)
}

func (q *queue) add(slot int, delta int32) {
	for i := slot + 1; i < len(q.tree); i += i & -i {
		q.tree[i] += delta
	}
}

// compact makes room at the end of a full window. Usually it slides the
// window past the empty slots before head, copying the rest as they are,
// into a window twice their span. When most of that span is empty too
// (many left from the middle while the head stayed, as in a long pause), it
// renumbers the waiting users from base instead, order kept, into a window
// twice their number: rewriting sequence numbers costs a map write each,
// which is why it is kept for when the queue is at most half the span.
func (q *queue) compact() {
	live := q.Len()
	span := q.end - q.head
	renumber := span > 2*live
	var window int
	if renumber {
		window = max(2*live, minQueueWindow)
	} else {
		window = max(2*span, minQueueWindow)
	}
	// A queue of steady length slides into a window of the same size:
	// reuse it rather than allocate, moving users down in place (each is
	// written at or before where it is read).
	users, seen, arrival, tree := q.users, q.seen, q.arrival, q.tree
	if window != len(users) {
		users, seen, arrival, tree = make([]string, window), make([]int64, window), make([]int64, window), make([]int32, window+1)
	}
	next := 0
	for i := q.head; i < q.end; i++ {
		user := q.users[i]
		if renumber {
			if user == "" {
				continue
			}
			q.seqOf[user] = q.base + q.head + next
		}
		users[next] = user
		seen[next] = q.seen[i]
		arrival[next] = q.arrival[i]
		next++
	}
	clear(users[next:])
	// Linear-time Fenwick build.
	clear(tree)
	for i := 1; i <= window; i++ {
		if i <= next && users[i-1] != "" {
			tree[i]++
		}
		if j := i + i&-i; j <= window {
			tree[j] += tree[i]
		}
	}
	q.base += q.head
	q.users, q.seen, q.arrival, q.tree, q.head, q.end = users, seen, arrival, tree, 0, next
}
