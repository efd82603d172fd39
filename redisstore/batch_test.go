package redisstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redistest"
)

// batchCall runs one call of op for users, as a batch of concurrent calls
// would, and returns each user's standing or refusal.
func batchCall(t *testing.T, s *Store, op *batchedOp, room string, users ...string) []userResult {
	t.Helper()
	b := &userBatch{users: users, gaveUp: make([]bool, len(users)), done: make(chan struct{})}
	s.callBatch(t.Context(), op, room, s.keys(room), b)
	require.NoError(t, b.err)
	return b.results
}

func enterCall(t *testing.T, s *Store, room string, users ...string) []userResult {
	t.Helper()
	return batchCall(t, s, enterOp, room, users...)
}

func waiting(pos int64) userResult {
	return userResult{st: waitroom.Status{State: waitroom.StateWaiting, Position: pos}}
}

// One call serves its users in order, each as a call of its own would:
// new users take places together, a user named twice keeps its one place,
// and a user who is not new (queued, holding a token) or one past the
// queue's limit is served between them without losing their order.
func TestEnterCallServesItsUsersInOrder(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 100, MaxQueue: 5})

	require.Equal(t, []userResult{waiting(1), waiting(2), waiting(1), waiting(3), waiting(2)},
		enterCall(t, s, room, "a", "b", "a", "c", "b"))

	// Everyone queued is admitted: a holds a token when the next call
	// names it.
	_, err := s.Enter(ctx, room, "x")
	require.NoError(t, err)
	admitAll(t, s, room, 4)
	got := enterCall(t, s, room, "d", "a", "e", "f", "g")
	require.Equal(t, waiting(1), got[0], "the queue was empty after the admissions")
	require.Equal(t, waitroom.StateAdmitted, got[1].st.State, "a holds its token")
	require.Equal(t, []userResult{waiting(2), waiting(3), waiting(4)}, got[2:])

	// The limit (5) is reached within a call: the rest are refused, and a
	// queued user named after them keeps its place.
	got = enterCall(t, s, room, "h", "i", "e", "j")
	require.Equal(t, waiting(5), got[0])
	require.ErrorIs(t, got[1].err, waitroom.ErrQueueFull)
	require.Equal(t, waiting(2), got[2])
	require.ErrorIs(t, got[3].err, waitroom.ErrQueueFull)
	stats, err := s.Stats(ctx, room)
	require.NoError(t, err)
	require.EqualValues(t, 2, stats.Full)
	require.EqualValues(t, 9, stats.Entered, "one place each: a, b, c, x, d, e, f, g, h")
}

// Before a scheduled opening one call places new early arrivals together
// as it does new users in a plain room, and serves each user as a call of
// its own would: the same answers, fifo places and refusals as one call a
// user on another room with the same settings, and the same draw entrants.
func TestEnterCallPlacesEarlyArrivals(t *testing.T) {
	for _, order := range []waitroom.PrequeueOrder{waitroom.PrequeueFIFO, waitroom.PrequeueRandom} {
		t.Run(string(order), func(t *testing.T) {
			ctx := t.Context()
			s := newStore(t)
			cfg := waitroom.RoomConfig{Rate: 100, MaxQueue: 6, OpensAt: time.Now().Add(time.Hour), PrequeueOrder: order}
			batched, single := newRoom(t, s, cfg), newRoom(t, s, cfg)
			calls := [][]string{{"a", "b", "a", "c"}, {"d", "b", "e", "f", "g", "c", "h"}}
			for _, users := range calls {
				twinCalls(t, s, enterOp, batched, single, users...)
			}
			got := enterCall(t, s, batched, "b")
			require.Equal(t, waitroom.StateScheduled, got[0].st.State)
			if order == waitroom.PrequeueFIFO {
				require.Equal(t, int64(2), got[0].st.Position, "b keeps its place among the early arrivals")
			}
			for _, room := range []string{batched, single} {
				stats, err := s.Stats(ctx, room)
				require.NoError(t, err)
				require.EqualValues(t, 6, stats.Waiting, "a to f; g and h refused")
				require.EqualValues(t, 2, stats.Full)
			}
		})
	}
}

// After an opening's draw one enter call places new users behind the
// drawn, and one status call serves the drawn and those queued behind
// them, as they serve a plain room's: the same answers as one call a user
// on a twin room (fifo, so the draw gives both the same places), with a
// user named twice and one not queued among them.
func TestStatusCallAfterTheDraw(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	cfg := waitroom.RoomConfig{Rate: 1, MaxQueue: 100, OpensAt: time.Now().Add(time.Hour), PrequeueOrder: waitroom.PrequeueFIFO} // reached by advanceTo
	batched, single := newRoom(t, s, cfg), newRoom(t, s, cfg)
	rooms := []string{batched, single}
	for _, room := range rooms {
		for _, u := range []string{"a", "b", "c", "d", "e"} {
			st, err := s.Enter(ctx, room, u)
			require.NoError(t, err)
			require.Equal(t, waitroom.StateScheduled, st.State)
		}
	}
	advanceTo(t, s, cfg.OpensAt.Add(50*time.Millisecond))
	for _, room := range rooms {
		for d, err := s.Draw(ctx, room); d.State != waitroom.DrawDone; d, err = s.Draw(ctx, room) {
			require.NoError(t, err)
			got, err := s.Admit(ctx, room)
			require.NoError(t, err)
			require.Empty(t, got, "the draw's tick admits nobody")
		}
	}
	// New places go behind the drawn; a drawn user keeps its place.
	got := twinCalls(t, s, enterOp, batched, single, "x", "d", "y", "x")
	require.Equal(t, []userResult{waiting(6), waiting(4), waiting(7), waiting(6)}, got)
	got = twinCalls(t, s, statusOp, batched, single, "d", "x", "a", "d", "nobody", "y", "b")
	require.Equal(t, []userResult{waiting(4), waiting(6), waiting(1), waiting(4)}, got[:4])
	require.ErrorIs(t, got[4].err, waitroom.ErrNotInQueue)
	require.Equal(t, []userResult{waiting(7), waiting(2)}, got[5:])
}

// One status call serves its users in order: the waiting, one not queued,
// one named twice, one holding a token.
func TestStatusCallServesItsUsersInOrder(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 100})
	require.Equal(t, []userResult{waiting(1)}, enterCall(t, s, room, "a"))
	admitAll(t, s, room, 1)
	require.Equal(t, []userResult{waiting(1), waiting(2)}, enterCall(t, s, room, "b", "c"))

	got := batchCall(t, s, statusOp, room, "c", "nobody", "b", "c", "a")
	require.Equal(t, waiting(2), got[0])
	require.ErrorIs(t, got[1].err, waitroom.ErrNotInQueue)
	require.Equal(t, []userResult{waiting(1), waiting(2)}, got[2:4])
	require.Equal(t, waitroom.StateAdmitted, got[4].st.State)
	require.NotEmpty(t, got[4].st.Token)
	_, err := s.Status(ctx, room, "nobody")
	require.ErrorIs(t, err, waitroom.ErrNotInQueue)

	// g, ahead of d and e, was last seen 1,000 s ago: past abandon_after
	// (5 minutes), it has gone when its turn in the call comes, and those
	// after it in the same call move up.
	require.Equal(t, []userResult{waiting(3), waiting(4), waiting(5)}, enterCall(t, s, room, "g", "d", "e"))
	k := s.keys(room)
	score, err := s.client.ZScore(ctx, k.q, "g").Result()
	require.NoError(t, err)
	now, err := s.client.Time(ctx).Result()
	require.NoError(t, err)
	const seenUnits = 1 << 20
	silent := float64(int(score)) + float64((now.Unix()-1000)%seenUnits)/seenUnits
	require.NoError(t, s.client.ZAddXX(ctx, k.q, redis.Z{Score: silent, Member: "g"}).Err())
	got = batchCall(t, s, statusOp, room, "d", "g", "e", "d")
	require.Equal(t, waiting(4), got[0])
	require.ErrorIs(t, got[1].err, waitroom.ErrNotInQueue)
	require.Equal(t, []userResult{waiting(4), waiting(3)}, got[2:])
	stats, err := s.Stats(ctx, room)
	require.NoError(t, err)
	require.EqualValues(t, 1, stats.Abandoned)
}

// admitAll admits everyone queued in room (n of them) and confirms their
// tokens as their own next call would.
func admitAll(t *testing.T, s *Store, room string, n int) {
	t.Helper()
	var got int
	for deadline := time.Now().Add(10 * time.Second); got < n; {
		require.True(t, time.Now().Before(deadline), "admitted %d of %d", got, n)
		adm, err := s.Admit(t.Context(), room)
		require.NoError(t, err)
		got += len(adm)
		advance(t, s, 20*time.Millisecond)
	}
}

// entersShareCalls enters n users of room at once and checks that each got
// a place of its own, 1 to n, in fewer calls than callers.
func entersShareCalls(t *testing.T, s *Store, room string, n int, calls *fcallCounter) ([]int64, []error) {
	t.Helper()
	positions, errs := testenv.EntersAtOnce(t.Context(), s, room, n)
	seen := make(map[int64]bool, n)
	for i := range n {
		require.NoError(t, errs[i])
		require.False(t, seen[positions[i]], "position %d twice", positions[i])
		seen[positions[i]] = true
		require.True(t, positions[i] >= 1 && positions[i] <= int64(n))
	}
	require.Less(t, calls.n.Load(), int64(n/2), "the callers shared calls")
	t.Logf("%d Enters in %d calls", n, calls.n.Load())
	return positions, errs
}

// Concurrent Enters of one room share calls: every caller gets its own
// place, and the calls are fewer than the callers; so do their polls.
func TestConcurrentEntersShareCalls(t *testing.T) {
	ctx := t.Context()
	c := newClient(t)
	calls := &fcallCounter{name: enterScript.Name()}
	c.AddHook(cmdHook(calls.count))
	s := New(c, Options{Prefix: testPrefix(t, c)})
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 100, MaxQueue: 100_000})

	const n = 500
	positions, errs := entersShareCalls(t, s, room, n, calls)

	// Their polls share calls too, and each finds its own place.
	polls := &fcallCounter{name: statusScript.Name()}
	c.AddHook(cmdHook(polls.count))
	got := make([]int64, n)
	testenv.AtOnce(n, func(i int) {
		st, err := s.Status(ctx, room, fmt.Sprintf("u%d", i))
		got[i], errs[i] = st.Position, err
	})
	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, positions[i], got[i], "u%d", i)
	}
	require.Less(t, polls.n.Load(), int64(n/2), "the polls shared calls")
	t.Logf("%d polls in %d calls", n, polls.n.Load())
}

// A room beyond the key cache batches as one inside it: the lines do not
// live in the cache, and an idle line leaves the Store, so the lines of
// many rooms do not pile up.
func TestRoomsBeyondTheKeyCacheShareCalls(t *testing.T) {
	c := newClient(t)
	calls := &fcallCounter{name: enterScript.Name()}
	c.AddHook(cmdHook(calls.count))
	s := New(c, Options{Prefix: testPrefix(t, c)})
	for i := range maxCachedRooms {
		s.keys(fmt.Sprintf("cached-%d", i))
	}
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 100, MaxQueue: 100_000})
	_, cached := s.keyCache.Load(room)
	require.False(t, cached, "the room is past the cache's bound")

	entersShareCalls(t, s, room, 500, calls)

	// Every call returned: the room's line went idle and left.
	require.Eventually(t, func() bool {
		lines := 0
		s.lines.Range(func(any, any) bool { lines++; return true })
		return lines == 0
	}, 10*time.Second, time.Millisecond, "idle lines are dropped")
}

// A caller that gives up before its call is sent does not enter.
func TestEnterGivenUpBeforeSentDoesNotEnter(t *testing.T) {
	s := newStore(t)
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 100})
	k := s.keys(room)
	// A call in flight (held by the line being busy) keeps the next
	// Enter waiting in its batch.
	l := s.line(enterOp, room) // locked
	l.busy = true
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := s.Enter(ctx, room, "gave-up")
	require.ErrorIs(t, err, waitroom.ErrStoreUnavailable)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// The line frees: the batch goes without its only user.
	l.mu.Lock()
	b := l.take()
	l.mu.Unlock()
	s.sendBatches(t.Context(), enterOp, room, k, l, b)
	require.Nil(t, b.results, "nobody was left to enter")
	_, err = s.Status(t.Context(), room, "gave-up")
	require.ErrorIs(t, err, waitroom.ErrNotInQueue)

	st, err := s.Enter(t.Context(), room, "next")
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Position, "the line works on")
}

// Callers bound by EnterWithin share their batch's one timer: behind a
// call that does not return, each caller's wait ends at the bound (the
// context has no deadline of its own), every one as the store's fault
// and none entered; a caller bound otherwise does not join their batch.
func TestBoundedWaitsEndWithTheirBatch(t *testing.T) {
	s := newStore(t)
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 100})
	k := s.keys(room)
	l := s.line(enterOp, room) // locked
	l.busy = true              // a call in flight that does not return
	l.mu.Unlock()
	const n, bound = 50, 800 * time.Millisecond
	errs := make([]error, n)
	testenv.AtOnce(n, func(i int) {
		_, errs[i] = s.EnterWithin(t.Context(), room, fmt.Sprintf("u%d", i), bound)
	})
	for i, err := range errs {
		require.ErrorIs(t, err, waitroom.ErrStoreUnavailable, "u%d", i)
		require.ErrorIs(t, err, context.DeadlineExceeded, "u%d", i)
	}
	l.mu.Lock()
	batches := len(l.waiting)
	l.mu.Unlock()
	require.Less(t, batches, n, "the callers shared batches, and their timers")
	t.Logf("%d callers in %d batches", n, batches)

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := s.Enter(ctx, room, "unbounded")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	l.mu.Lock()
	require.Len(t, l.waiting, batches+1, "a caller without the bound opened a batch of its own")
	l.mu.Unlock()

	// The line frees: the batches go without their users.
	l.mu.Lock()
	b := l.take()
	l.mu.Unlock()
	s.sendBatches(t.Context(), enterOp, room, k, l, b)
	for i := range n {
		_, err := s.Status(t.Context(), room, fmt.Sprintf("u%d", i))
		require.ErrorIs(t, err, waitroom.ErrNotInQueue, "u%d", i)
	}
	st, err := s.EnterWithin(t.Context(), room, "next", bound)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Position, "the line works on")
}

// fcallCounter counts the FCALLs of one function (its count, as a cmdHook).
type fcallCounter struct {
	name string
	n    atomic.Int64
}

func (c *fcallCounter) count(cmd redis.Cmder) {
	if args := cmd.Args(); len(args) > 1 && cmd.Name() == "fcall" && args[1] == c.name {
		c.n.Add(1)
	}
}

// cmdHook is a client hook that calls its function with every command
// the client sends, alone or in a pipeline.
type cmdHook func(redis.Cmder)

func (h cmdHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h cmdHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h(cmd)
		return next(ctx, cmd)
	}
}
func (h cmdHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h(cmd)
		}
		return next(ctx, cmds)
	}
}

// A user's standing in a batch's reply is a table, or a bare position for
// a waiting user of a plain room; a bare number that is no position, or
// anything else, is an unexpected reply, never a standing.
func TestUserStandingDecodesBarePositions(t *testing.T) {
	t.Parallel()
	s := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), Options{Prefix: "decode"})
	ctx := t.Context()
	got := s.userStanding(ctx, "enter", int64(42))
	require.NoError(t, got.err)
	require.Equal(t, waitroom.Status{State: waitroom.StateWaiting, Position: 42}, got.st)
	got = s.userStanding(ctx, "enter", []any{"WAITING", int64(42), int64(-1)})
	require.NoError(t, got.err)
	require.Equal(t, waitroom.Status{State: waitroom.StateWaiting, Position: 42}, got.st, "the table says the same")
	for _, bad := range []any{int64(0), int64(-3), "42", nil, []any{"WAITING", int64(1)}} {
		got := s.userStanding(ctx, "enter", bad)
		require.ErrorContains(t, got.err, "unexpected script reply", "%#v", bad)
		require.Zero(t, got.st)
	}
}

// sameStanding requires got to be what want, the same user's standing
// from a call of its own on a twin room, is: the same state, place, units
// and refusal; a token of its own, as long-lived; the same opening, to the
// second (time passes between the calls).
func sameStanding(t *testing.T, want, got userResult, user string) {
	t.Helper()
	if want.st.State == waitroom.StateAdmitted {
		require.Equal(t, waitroom.StateAdmitted, got.st.State, user)
		require.NotEmpty(t, got.st.Token, user)
		require.InDelta(t, want.st.ExpiresIn, got.st.ExpiresIn, float64(time.Second), user)
		return
	}
	require.InDelta(t, want.st.OpensIn, got.st.OpensIn, float64(time.Second), user)
	want.st.OpensIn, got.st.OpensIn = 0, 0
	require.Equal(t, want, got, user)
}

// twinCalls runs one call of op for users on batched and one call a user
// on single, a room with the same settings and history, requires the same
// answers, and returns the call's.
func twinCalls(t *testing.T, s *Store, op *batchedOp, batched, single string, users ...string) []userResult {
	t.Helper()
	got := batchCall(t, s, op, batched, users...)
	for i, u := range users {
		var st waitroom.Status
		var err error
		if op == enterOp {
			st, err = s.Enter(t.Context(), single, u)
		} else {
			st, err = s.Status(t.Context(), single, u)
		}
		sameStanding(t, userResult{st: st, err: err}, got[i], u)
	}
	return got
}

// In a drop's room (stock, one order per buyer) one enter or status call
// serves its users as one call a user serves them on a twin room: new
// places told the units when they are short, a buyer refused, a holder
// given its token, a user named twice, the queue's limit, and, once the
// stock is sold, the refusals of a sold-out room.
func TestCallsInADropRoom(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	cfg := waitroom.RoomConfig{Rate: 100, MaxQueue: 8, Stock: 5, OneOrderPerUser: true}
	batched, single := newRoom(t, s, cfg), newRoom(t, s, cfg)
	rooms := []string{batched, single}
	// In each room a has bought a unit and b holds a token: 3 units left.
	for _, room := range rooms {
		for _, u := range []string{"a", "b"} {
			_, err := s.Enter(ctx, room, u)
			require.NoError(t, err)
		}
		adm := admitN(t, s, room, 2)
		require.Equal(t, "a", adm[0].User)
		hold, err := s.Claim(ctx, room, adm[0].User, adm[0].Token)
		require.NoError(t, err)
		require.NoError(t, s.Complete(ctx, hold))
	}
	compare := func(op *batchedOp, users ...string) []userResult {
		t.Helper()
		return twinCalls(t, s, op, batched, single, users...)
	}

	got := compare(enterOp, "c", "a", "d", "b", "c", "e", "f", "g", "h", "i", "j", "k", "l")
	require.Equal(t, []userResult{waiting(1)}, got[:1])
	require.ErrorIs(t, got[1].err, waitroom.ErrAlreadyOrdered)
	require.Equal(t, waiting(2), got[2])
	require.Equal(t, waitroom.StateAdmitted, got[3].st.State, "b holds its token")
	require.Equal(t, []userResult{waiting(1), waiting(3)}, got[4:6])
	short := func(pos int64) userResult {
		return userResult{st: waitroom.Status{State: waitroom.StateWaiting, Position: pos, UnitsLeft: 3, FewLeft: true}}
	}
	require.Equal(t, []userResult{short(4), short(5), short(6), short(7), short(8)}, got[6:11], "3 units left")
	require.ErrorIs(t, got[11].err, waitroom.ErrQueueFull)
	require.ErrorIs(t, got[12].err, waitroom.ErrQueueFull)

	// e ordered while still queued (as when the rule is switched on after
	// its order): a buyer, though it has a place.
	for _, room := range rooms {
		require.NoError(t, s.client.SAdd(ctx, s.keys(room).buyers, "e").Err())
	}
	got = compare(statusOp, "g", "a", "nobody", "c", "b", "e", "h", "g")
	require.Equal(t, short(5), got[0])
	require.ErrorIs(t, got[1].err, waitroom.ErrAlreadyOrdered)
	require.ErrorIs(t, got[2].err, waitroom.ErrNotInQueue)
	require.Equal(t, waiting(1), got[3])
	require.Equal(t, waitroom.StateAdmitted, got[4].st.State)
	require.ErrorIs(t, got[5].err, waitroom.ErrAlreadyOrdered)
	require.Equal(t, []userResult{short(6), short(5)}, got[6:])
	require.ErrorIs(t, compare(enterOp, "e")[0].err, waitroom.ErrAlreadyOrdered)

	// The operator lowers the stock to what is sold: sold out.
	for _, room := range rooms {
		_, err := waitroom.ChangeRoom(ctx, s, room, func(c *waitroom.RoomConfig) error {
			c.Stock = 1
			return nil
		})
		require.NoError(t, err)
	}
	soldOut := userResult{st: waitroom.Status{State: waitroom.StateSoldOut}}
	got = compare(enterOp, "m", "c", "a", "b", "m")
	require.ErrorIs(t, got[0].err, waitroom.ErrSoldOut)
	require.Equal(t, soldOut, got[1], "c keeps its place for a restock")
	require.ErrorIs(t, got[2].err, waitroom.ErrAlreadyOrdered)
	require.Equal(t, waitroom.StateAdmitted, got[3].st.State, "b's unit was reserved")
	require.ErrorIs(t, got[4].err, waitroom.ErrSoldOut)
	got = compare(statusOp, "d", "m", "c")
	require.Equal(t, soldOut, got[0])
	require.ErrorIs(t, got[1].err, waitroom.ErrNotInQueue, "a refused entry took no place")
	require.Equal(t, soldOut, got[2])
	for _, room := range rooms {
		stats, err := s.Stats(ctx, room)
		require.NoError(t, err)
		require.EqualValues(t, 8, stats.Waiting)
		require.EqualValues(t, 2, stats.Full)
	}
}

// A drop's room (stock, one order per buyer) takes the same short way as a
// plain room: one call of 8 new users reads them all with one command of
// each kind, not one command a user, and so does one of their polls.
func TestDropRoomCallsReadTheirUsersTogether(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := redistest.StartServer(t)
	s := New(openURL(t, srv.URL()), Options{Prefix: randomPrefix()})
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 100, MaxQueue: 100, Stock: 3, OneOrderPerUser: true})
	users := make([]string, 8)
	for i := range users {
		users[i] = fmt.Sprintf("u%d", i)
	}
	pc := srv.Client()
	commands := func(op *batchedOp) map[string]int64 {
		t.Helper()
		require.NoError(t, pc.ConfigResetStat(ctx).Err())
		for i, r := range batchCall(t, s, op, room, users...) {
			require.NoError(t, r.err)
			require.Equal(t, int64(i+1), r.st.Position)
		}
		stats, err := CommandStats(ctx, pc)
		require.NoError(t, err)
		calls := map[string]int64{}
		for name, st := range stats {
			switch name {
			case "config|resetstat", "hello", "client|setinfo", "select", "ping": // the test's own, a new connection's
			default:
				calls[name] = st.Calls
			}
		}
		return calls
	}
	require.Equal(t, map[string]int64{
		"fcall": 1, "hmget": 3, "time": 1, // the settings, the tokens, the units sold; the clock
		"hlen":    1,                  // the live tokens (none: no HEXISTS)
		"zmscore": 1, "smismember": 1, // the places, the buyers
		"zcard": 1, "incrby": 1, "zadd": 1, "publish": 1, // the places made; the first wakes the admitter
	}, commands(enterOp))
	require.Equal(t, map[string]int64{
		"fcall": 1, "hmget": 2, "get": 1, "time": 1, // the settings, the units sold, the sequence, the clock
		"hlen":    1,                  // the live tokens
		"zmscore": 1, "smismember": 1, // the places, the buyers
		"zrank": 8, // a rank each
	}, commands(statusOp))
}

// Between an opening and its draw the early arrivals are told the opening
// and new users queue behind all of them: one enter or status call serves
// them as one call a user does on a twin room, as it does before the
// opening, with a user named twice, one not in the room and the queue's
// limit among them.
func TestCallsAroundTheOpening(t *testing.T) {
	for _, order := range []waitroom.PrequeueOrder{waitroom.PrequeueFIFO, waitroom.PrequeueRandom} {
		t.Run(string(order), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s := newStore(t)
			// The opening is reached by the test clock (advanceTo), never by
			// waiting, so a loaded machine makes every call before it.
			cfg := waitroom.RoomConfig{Rate: 1, MaxQueue: 8, OpensAt: time.Now().Add(time.Hour), PrequeueOrder: order}
			batched, single := newRoom(t, s, cfg), newRoom(t, s, cfg)
			for _, room := range []string{batched, single} {
				for _, u := range []string{"a", "b", "c", "d"} {
					st, err := s.Enter(ctx, room, u)
					require.NoError(t, err)
					require.Equal(t, waitroom.StateScheduled, st.State)
				}
			}
			early := func(pos int64) waitroom.Status {
				if order == waitroom.PrequeueRandom {
					pos = 0 // not drawn yet
				}
				return waitroom.Status{State: waitroom.StateScheduled, Position: pos}
			}
			// requireEarly: the opening to come (opensIn), or passed: 0.
			requireEarly := func(want waitroom.Status, got userResult, opensIn bool) {
				t.Helper()
				require.NoError(t, got.err)
				if opensIn {
					require.Positive(t, got.st.OpensIn)
					got.st.OpensIn = 0
				}
				require.Equal(t, want, got.st)
			}

			got := twinCalls(t, s, statusOp, batched, single, "c", "nobody", "a", "c")
			requireEarly(early(3), got[0], true)
			require.ErrorIs(t, got[1].err, waitroom.ErrNotInQueue)
			requireEarly(early(1), got[2], true)
			requireEarly(early(3), got[3], true)

			advanceTo(t, s, cfg.OpensAt.Add(50*time.Millisecond))
			// The opening has passed; nobody drew it yet.
			got = twinCalls(t, s, enterOp, batched, single, "x", "b", "y", "x", "z", "w", "v")
			require.Equal(t, []userResult{waiting(5)}, got[:1], "behind the 4 early arrivals")
			requireEarly(early(2), got[1], false)
			require.Equal(t, []userResult{waiting(6), waiting(5), waiting(7), waiting(8)}, got[2:6])
			require.ErrorIs(t, got[6].err, waitroom.ErrQueueFull)
			got = twinCalls(t, s, statusOp, batched, single, "y", "d", "nobody", "x", "a", "y")
			require.Equal(t, waiting(6), got[0])
			requireEarly(early(4), got[1], false)
			require.ErrorIs(t, got[2].err, waitroom.ErrNotInQueue)
			require.Equal(t, waiting(5), got[3])
			requireEarly(early(1), got[4], false)
			require.Equal(t, waiting(6), got[5])

			// c left while the draw was being made: still an entrant, its
			// place recorded (a negative score), but not an early arrival.
			for _, room := range []string{batched, single} {
				k := s.keys(room)
				score, err := s.client.ZScore(ctx, k.pre, "c").Result()
				require.NoError(t, err)
				require.NoError(t, s.client.ZAdd(ctx, k.pre, redis.Z{Score: -score, Member: "c"}).Err())
			}
			got = twinCalls(t, s, statusOp, batched, single, "c", "d", "x")
			require.ErrorIs(t, got[0].err, waitroom.ErrNotInQueue)
			requireEarly(early(3), got[1], false)
			require.Equal(t, waiting(5), got[2], "c is still counted among those drawn ahead")
		})
	}
}
