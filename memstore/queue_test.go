package memstore

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// queueModel is the obviously correct queue the real one is checked against.
type queueModel struct{ users []string }

func (m *queueModel) position(user string) (int, bool) {
	i := slices.Index(m.users, user)
	return i + 1, i >= 0
}

func (m *queueModel) remove(user string) bool {
	i := slices.Index(m.users, user)
	if i < 0 {
		return false
	}
	m.users = slices.Delete(m.users, i, i+1)
	return true
}

func (m *queueModel) popFront(n int) []string {
	n = min(n, len(m.users))
	if n <= 0 {
		return nil
	}
	out := slices.Clone(m.users[:n])
	m.users = m.users[n:]
	return out
}

// queueOps applies one operation, chosen by op and arg, to both queues and
// fails on the first difference. Users are drawn from a small pool so that
// pushes of queued users and removals of absent ones both happen.
type queueOps struct {
	t     testing.TB
	q     *queue
	model queueModel
	fresh int
}

func (o *queueOps) apply(op, arg byte) {
	user := "u" + strconv.Itoa(int(arg)%40)
	switch op % 5 {
	case 0, 1: // push: pushes outnumber removals so the queue grows and compacts
		user = "n" + strconv.Itoa(o.fresh)
		o.fresh++
		require.Equal(o.t, len(o.model.users)+1, o.q.Push(user, 0))
		o.model.users = append(o.model.users, user)
	case 2:
		if _, queued := o.model.position(user); !queued {
			require.Equal(o.t, len(o.model.users)+1, o.q.Push(user, 0))
			o.model.users = append(o.model.users, user)
		}
	case 3:
		require.Equal(o.t, o.model.remove(user), o.q.Remove(user), "remove %s", user)
	case 4:
		n := int(arg) % 8
		require.Equal(o.t, o.model.popFront(n), o.q.PopFront(n), "pop %d", n)
	}
	o.check(user)
}

func (o *queueOps) check(user string) {
	require.Equal(o.t, len(o.model.users), o.q.Len())
	wantPos, wantOK := o.model.position(user)
	pos, ok := o.q.Position(user)
	require.Equal(o.t, wantOK, ok, "queued %s", user)
	require.Equal(o.t, wantPos, pos, "position of %s", user)
	if len(o.model.users) > 0 {
		last := o.model.users[len(o.model.users)-1]
		pos, ok := o.q.Position(last)
		require.True(o.t, ok)
		require.Equal(o.t, len(o.model.users), pos, "position of last %s", last)
	}
}

func (o *queueOps) checkAll() {
	for i, user := range o.model.users {
		pos, ok := o.q.Position(user)
		require.True(o.t, ok, user)
		require.Equal(o.t, i+1, pos, user)
	}
}

func TestQueueMatchesModel(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	ops := &queueOps{t: t, q: newQueue()}
	for i := range 50_000 {
		ops.apply(byte(rng.IntN(256)), byte(rng.IntN(256)))
		if i%1000 == 0 {
			ops.checkAll()
		}
	}
	ops.checkAll()
}

func TestQueueLeaveFromEverywhere(t *testing.T) {
	t.Parallel()
	q := newQueue()
	const n = 1000
	for i := range n {
		require.Equal(t, i+1, q.Push(strconv.Itoa(i), 0))
	}
	// Every other user leaves: the rest close ranks in order.
	for i := 0; i < n; i += 2 {
		require.True(t, q.Remove(strconv.Itoa(i)))
	}
	require.False(t, q.Remove("0"))
	for i := 1; i < n; i += 2 {
		pos, ok := q.Position(strconv.Itoa(i))
		require.True(t, ok)
		require.Equal(t, (i+1)/2, pos)
	}
	require.Equal(t, []string{"1", "3", "5"}, q.PopFront(3))
	pos, _ := q.Position("7")
	require.Equal(t, 1, pos)
	require.Equal(t, n/2-3, q.Len())
}

func TestQueueWindowShrinksAfterDrain(t *testing.T) {
	t.Parallel()
	q := newQueue()
	for i := range 10_000 {
		q.Push(strconv.Itoa(i), 0)
	}
	q.PopFront(9_990)
	// The next compaction sizes the window to what is left, not to the peak.
	for i := range 20_000 {
		q.Push("again"+strconv.Itoa(i), 0)
		q.PopFront(1)
	}
	require.Equal(t, 10, q.Len())
	require.LessOrEqual(t, len(q.users), 2*minQueueWindow)
}

// While the head stays (a paused room), users who come and go behind it
// leave empty slots that sliding cannot reclaim: compaction renumbers.
func TestQueueChurnBehindStuckHead(t *testing.T) {
	t.Parallel()
	q := newQueue()
	q.Push("stuck", 0)
	for i := range 100_000 {
		u := strconv.Itoa(i)
		require.Equal(t, 2, q.Push(u, 0))
		require.True(t, q.Remove(u))
	}
	q.Push("last", 0)
	require.LessOrEqual(t, len(q.users), 2*minQueueWindow, "the window stays the size of the queue")
	pos, _ := q.Position("last")
	require.Equal(t, 2, pos)
	require.Equal(t, []string{"stuck", "last"}, q.PopFront(5))
	q.Push("again", 0)
	pos, _ = q.Position("again")
	require.Equal(t, 1, pos)
}

func FuzzQueue(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 3, 1, 4, 2})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 4, 200, 3, 3, 2, 5})
	f.Fuzz(func(t *testing.T, program []byte) {
		ops := &queueOps{t: t, q: newQueue()}
		for i := 0; i+1 < len(program); i += 2 {
			ops.apply(program[i], program[i+1])
		}
		ops.checkAll()
	})
}
