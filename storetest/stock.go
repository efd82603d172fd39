package storetest

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
)

// buy claims and completes an admitted user's token: the order succeeded.
func buy(t *testing.T, s waitroom.Store, room string, a waitroom.Admission) error {
	t.Helper()
	hold, err := s.Claim(ctxFor(t), room, a.User, a.Token)
	if err != nil {
		return err
	}
	return s.Complete(ctxFor(t), hold)
}

// requireWithinStock reads the room's figures and fails when live
// reservations (each token the room's units per order) and units sold
// exceed stock; it returns them.
func requireWithinStock(t *testing.T, s waitroom.Store, room string, stock int) waitroom.Stats {
	t.Helper()
	cfg, err := s.RoomConfig(ctxFor(t), room)
	require.NoError(t, err)
	st, err := s.Stats(ctxFor(t), room)
	require.NoError(t, err)
	reserved := st.Active * int64(cfg.UnitsPerOrder)
	require.LessOrEqual(t, reserved+st.Sold, int64(stock), "reservations %d + sold %d", reserved, st.Sold)
	return st
}

// testStockNoShowsGiveUnitsBack: stock 10, 40 buyers, 3 admitted no-shows
// with a short TTL: exactly 10 orders, every admitted buyer who came finds
// its unit, the no-shows' units come back and go to the next in line; then
// the rest are told sold_out, new entries get SOLD_OUT, and a restock
// reopens the room to them in their places.
func testStockNoShowsGiveUnitsBack(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	const stock, buyers, noShows = 10, 40, 3
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 1000, TokenTTL: time.Second, Stock: stock})
	enterAll(t, h.Store, room, buyers)

	admitted := map[string]bool{}
	skipped := 0
	var orders int
	for i := 0; orders < stock && i < 400; i++ {
		got, err := h.Store.Admit(ctx, room)
		require.NoError(t, err)
		for _, a := range got {
			require.False(t, admitted[a.User], "%s admitted twice", a.User)
			admitted[a.User] = true
			if skipped < noShows {
				skipped++ // a no-show: holds its unit until the token expires
				continue
			}
			require.NoError(t, buy(t, h.Store, room, a), "an admitted buyer finds its unit")
			orders++
		}
		requireWithinStock(t, h.Store, room, stock)
		h.Advance(t, 50*time.Millisecond)
	}
	require.Equal(t, stock, orders)
	require.Len(t, admitted, stock+noShows, "the no-shows' units went to the next in line")

	// All sold: nothing more is admitted.
	h.Advance(t, 100*time.Millisecond)
	got, err := h.Store.Admit(ctx, room)
	require.NoError(t, err)
	require.Empty(t, got)
	st := requireWithinStock(t, h.Store, room, stock)
	require.Equal(t, int64(stock), st.Completed)
	require.Equal(t, int64(stock+noShows), st.Admitted)
	require.Equal(t, int64(buyers-stock-noShows), st.Waiting)

	// Those still queued are told at once, on either instance.
	peer := h.Peer(t)
	waitingUser := ""
	for i := range buyers {
		if admitted[user(i)] {
			continue
		}
		waitingUser = user(i)
		status, err := peer.Status(ctx, room, user(i))
		require.NoError(t, err)
		require.Equal(t, waitroom.StateSoldOut, status.State, user(i))
		status, err = h.Store.Enter(ctx, room, user(i))
		require.NoError(t, err, "entering again is a status, not a new entry")
		require.Equal(t, waitroom.StateSoldOut, status.State)
	}
	_, err = h.Store.Enter(ctx, room, "latecomer")
	require.ErrorIs(t, err, waitroom.ErrSoldOut)
	_, err = h.Store.Status(ctx, room, "latecomer")
	require.ErrorIs(t, err, waitroom.ErrNotInQueue, "a refused entry took no place")

	// A restock of 5 reopens the room: the queued keep their places.
	_, err = waitroom.ChangeRoom(ctx, h.Store, room, func(c *waitroom.RoomConfig) error {
		c.Stock = stock + 5
		return nil
	})
	require.NoError(t, err)
	status, err := h.Store.Status(ctx, room, waitingUser)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateWaiting, status.State)
	require.Equal(t, int64(buyers-stock-noShows), status.Position, "the last queued is still last")
	require.True(t, status.FewLeft)
	require.Equal(t, int64(5), status.UnitsLeft)
	more := 0
	for i := 0; more < 5 && i < 100; i++ {
		got, err := h.Store.Admit(ctx, room)
		require.NoError(t, err)
		more += len(got)
		h.Advance(t, 20*time.Millisecond)
	}
	require.Equal(t, 5, more)
	requireWithinStock(t, h.Store, room, stock+5)
}

// testSoldOutHolderStillOrders: a room that is sold out (here the
// operator lowered the stock to what is sold) refuses new entries and
// tells the waiting so, yet a holder of a live token keeps it and can
// still order: its unit was reserved.
func testSoldOutHolderStillOrders(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 1000, Stock: 2})
	enterAll(t, h.Store, room, 3)
	var admitted []waitroom.Admission
	for i := 0; len(admitted) < 2 && i < 100; i++ {
		got, err := h.Store.Admit(ctx, room)
		require.NoError(t, err)
		admitted = append(admitted, got...)
		h.Advance(t, 20*time.Millisecond)
	}
	require.Len(t, admitted, 2, "two units, two holders")
	require.NoError(t, buy(t, h.Store, room, admitted[0]))
	_, err := waitroom.ChangeRoom(ctx, h.Store, room, func(c *waitroom.RoomConfig) error {
		c.Stock = 1
		return nil
	})
	require.NoError(t, err)

	_, err = h.Store.Enter(ctx, room, "latecomer")
	require.ErrorIs(t, err, waitroom.ErrSoldOut)
	st, err := h.Store.Status(ctx, room, user(2))
	require.NoError(t, err)
	require.Equal(t, waitroom.StateSoldOut, st.State)
	holder := admitted[1]
	st, err = h.Store.Enter(ctx, room, holder.User)
	require.NoError(t, err)
	require.Equal(t, waitroom.Status{State: waitroom.StateAdmitted, Token: holder.Token, ExpiresIn: st.ExpiresIn}, st, "the holder keeps its token")
	require.NoError(t, buy(t, h.Store, room, holder), "and orders with it")
	require.Equal(t, int64(2), testenv.Stats(t, h.Store, room).Completed)
}

// testUnitsLeft: a waiting answer carries the unreserved units when they
// are fewer than the users up to this one, and only then.
func testUnitsLeft(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	// One user per tick at most, so the test admits exactly two.
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 10, Stock: 5})
	enterAll(t, h.Store, room, 8)
	st, err := h.Store.Status(ctx, room, user(4))
	require.NoError(t, err)
	require.Equal(t, int64(5), st.Position)
	require.False(t, st.FewLeft, "5 units for 5 users")
	st, err = h.Store.Status(ctx, room, user(5))
	require.NoError(t, err)
	require.True(t, st.FewLeft)
	require.Equal(t, int64(5), st.UnitsLeft)

	// Two admitted: their tokens reserve two units.
	for n := 0; n < 2; {
		got, err := h.Store.Admit(ctx, room)
		require.NoError(t, err)
		n += len(got)
		if n < 2 {
			h.Advance(t, 100*time.Millisecond)
		}
	}
	st, err = h.Store.Enter(ctx, room, user(5)) // now 4th in line
	require.NoError(t, err)
	require.Equal(t, int64(4), st.Position)
	require.True(t, st.FewLeft)
	require.Equal(t, int64(3), st.UnitsLeft)
	st, err = h.Store.Status(ctx, room, user(2))
	require.NoError(t, err)
	require.False(t, st.FewLeft)

	// A room without stock never says so.
	plain := newRoom(t, h, waitroom.RoomConfig{})
	enterAll(t, h.Store, plain, 3)
	st, err = h.Store.Status(ctx, plain, user(2))
	require.NoError(t, err)
	require.False(t, st.FewLeft)
}

// testStockHoldsUnderConcurrency: 1,000 buyers entering at once on two
// instances, stock 100, both instances admitting and buying at once while
// a sampler reads the figures: reservations + sales never exceed 100, and
// exactly 100 are sold.
func testStockHoldsUnderConcurrency(t *testing.T, h Harness) {
	stockUnderConcurrency(t, h, 100, 1, 1000)
}

// testUnitsPerOrderHoldUnderConcurrency: the same with 4 units per order
// and a stock of 102, no multiple of 4: live tokens × 4 + units sold never
// exceed 102, exactly 25 orders sell 100 units, and the last 2 units are
// never reserved (a token is issued only while 4 are left), so the room is
// sold out.
func testUnitsPerOrderHoldUnderConcurrency(t *testing.T, h Harness) {
	stockUnderConcurrency(t, h, 102, 4, 400)
}

// stockUnderConcurrency: buyers entering at once on two instances, both
// instances admitting and buying at once (every goroutine released at one
// signal) while a sampler reads the figures: live tokens × per + units
// sold never exceed stock, exactly stock / per orders complete, each
// selling per units, and the room is sold out after.
func stockUnderConcurrency(t *testing.T, h Harness, stock, per, buyers int) {
	ctx := ctxFor(t)
	orders := stock / per
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 2000, Stock: stock, UnitsPerOrder: per})
	stores := []waitroom.Store{h.Store, h.Peer(t)}
	errs := race(buyers, func(i int) error {
		_, err := stores[i%2].Enter(ctx, room, user(i))
		return err
	})
	require.Equal(t, map[string]int{"ok": buyers}, countErrors(errs))

	var sold atomic.Int64 // orders completed
	var outcomes sync.Map // user → error of its order
	done := make(chan struct{})
	var over atomic.Int64 // samples above the stock
	var samples atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	wg.Go(func() {
		<-start
		for {
			select {
			case <-done:
				return
			default:
			}
			st, err := h.Store.Stats(ctx, room)
			if err == nil {
				samples.Add(1)
				if st.Active*int64(per)+st.Sold > int64(stock) {
					over.Add(1)
				}
			}
		}
	})
	var admitErrs atomic.Int64
	for _, s := range stores {
		wg.Go(func() {
			<-start
			var placed sync.WaitGroup
			for i := 0; sold.Load() < int64(orders) && i < 2000; i++ {
				got, err := s.Admit(ctx, room)
				if err != nil {
					admitErrs.Add(1)
				}
				for _, a := range got {
					placed.Go(func() {
						err := buy(t, s, room, a)
						outcomes.Store(a.User, err)
						if err == nil {
							sold.Add(1)
						}
					})
				}
				h.Advance(t, 5*time.Millisecond)
			}
			placed.Wait()
		})
	}
	close(start)
	for sold.Load() < int64(orders) {
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
		if admitErrs.Load() > 0 {
			break
		}
	}
	close(done)
	wg.Wait()

	require.Zero(t, admitErrs.Load())
	orderErrs := map[string]int{}
	outcomes.Range(func(_, v any) bool {
		err, _ := v.(error)
		if err == nil {
			orderErrs["ok"]++
		} else {
			orderErrs[waitroom.ErrorCode(err)]++
		}
		return true
	})
	require.Equal(t, map[string]int{"ok": orders}, orderErrs, "every admitted buyer found its units")
	require.Positive(t, samples.Load())
	require.Zero(t, over.Load(), "of %d samples", samples.Load())
	st := requireWithinStock(t, h.Store, room, stock)
	require.Equal(t, int64(orders), st.Completed)
	require.Equal(t, int64(orders*per), st.Sold)
	require.Equal(t, int64(orders), st.Admitted)
	require.Equal(t, int64(buyers-orders), st.Waiting)
	_, err := h.Store.Enter(ctx, room, "latecomer")
	require.True(t, errors.Is(err, waitroom.ErrSoldOut), "%v", err)
	waiting := 0 // one who was never admitted (they entered in no fixed order)
	for _, admitted := outcomes.Load(user(waiting)); admitted; _, admitted = outcomes.Load(user(waiting)) {
		waiting++
	}
	status, err := h.Store.Status(ctx, room, user(waiting))
	require.NoError(t, err)
	require.Equal(t, waitroom.StateSoldOut, status.State, "fewer than one order's units are left")
}

// testOneOrderPerUser: once a buyer's order completed, entering again is
// ALREADY_ORDERED on every instance and takes no place, however many
// retries race; its holds say to key orders by buyer; a buyer queued again
// (as a failover that lost the admission leaves it) is skipped at the
// head. Without the setting a buyer may queue again.
func testOneOrderPerUser(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 1000, OneOrderPerUser: true})
	enterAll(t, h.Store, room, 2)
	var buyer, other waitroom.Admission
	for buyer.User == "" || other.User == "" {
		got, err := h.Store.Admit(ctx, room)
		require.NoError(t, err)
		for _, a := range got {
			if a.User == user(0) {
				buyer = a
			} else {
				other = a
			}
		}
		h.Advance(t, 20*time.Millisecond)
	}
	hold, err := h.Store.Claim(ctx, room, buyer.User, buyer.Token)
	require.NoError(t, err)
	require.True(t, hold.OneOrderPerUser)
	require.NoError(t, h.Store.Complete(ctx, hold))

	peer := h.Peer(t)
	errs := race(20, func(i int) error {
		s := []waitroom.Store{h.Store, peer}[i%2]
		if i%4 < 2 {
			_, err := s.Enter(ctx, room, buyer.User)
			return err
		}
		_, err := s.Status(ctx, room, buyer.User)
		return err
	})
	require.Equal(t, map[string]int{waitroom.ErrAlreadyOrdered.Code: 20}, countErrors(errs))
	st := testenv.Stats(t, h.Store, room)
	require.Equal(t, int64(2), st.Entered, "a buyer's entries took no place")

	// The other still holds its unspent token.
	status, err := peer.Enter(ctx, room, other.User)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, status.State)

	// Turned off, a buyer may queue again; turned back on, the admitter
	// skips the buyer still queued and it is told ALREADY_ORDERED.
	setOneOrder := func(on bool) {
		_, err := waitroom.ChangeRoom(ctx, h.Store, room, func(c *waitroom.RoomConfig) error {
			c.OneOrderPerUser = on
			return nil
		})
		require.NoError(t, err)
	}
	setOneOrder(false)
	status, err = h.Store.Enter(ctx, room, buyer.User)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateWaiting, status.State)
	setOneOrder(true)
	_, err = h.Store.Enter(ctx, room, "after-buyer")
	require.NoError(t, err)
	var admittedAfter []string
	for i := 0; len(admittedAfter) == 0 && i < 50; i++ {
		h.Advance(t, 20*time.Millisecond)
		got, err := h.Store.Admit(ctx, room)
		require.NoError(t, err)
		for _, a := range got {
			admittedAfter = append(admittedAfter, a.User)
		}
	}
	require.Equal(t, []string{"after-buyer"}, admittedAfter, "the buyer at the head got no token")
	st = testenv.Stats(t, h.Store, room)
	require.Zero(t, st.Waiting, "the buyer left the queue")
	_, err = h.Store.Status(ctx, room, buyer.User)
	require.ErrorIs(t, err, waitroom.ErrAlreadyOrdered)

	// Without the setting nobody is remembered: a buyer queues again.
	plain := newRoom(t, h, waitroom.RoomConfig{Rate: 1000})
	enterAll(t, h.Store, plain, 1)
	a := admitOne(t, h, plain)
	hold, err = h.Store.Claim(ctx, plain, a.User, a.Token)
	require.NoError(t, err)
	require.False(t, hold.OneOrderPerUser)
	require.NoError(t, h.Store.Complete(ctx, hold))
	status, err = h.Store.Enter(ctx, plain, a.User)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateWaiting, status.State)
}
