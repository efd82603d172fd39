// Package shoptest is the conformance suite every shop store passes, so the
// PostgreSQL and in-process stores keep exactly the same semantics.
package shoptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/shop"
)

// Store is what the suite tests: the order store and its outbox.
type Store interface {
	shop.Store
	shop.Outbox
}

// Run runs the suite. newStore returns an empty, isolated store for one
// test (its cleanup registered on t); the tests run in parallel.
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s Store)
	}{
		{"Products", testProducts},
		{"Coupons", testCoupons},
		{"BadRequests", testBadRequests},
		{"PlaceOrder", testPlaceOrder},
		{"Replay", testReplay},
		{"ReplayOtherUser", testReplayOtherUser},
		{"UnknownProduct", testUnknownProduct},
		{"SoldOut", testSoldOut},
		{"CouponErrors", testCouponErrors},
		{"ConcurrentStock", testConcurrentStock},
		{"ConcurrentCoupon", testConcurrentCoupon},
		{"ConcurrentIdempotencyKey", testConcurrentIdempotencyKey},
		{"ConcurrentIdempotencyKeyLastUnit", testConcurrentIdempotencyKeyLastUnit},
		{"OneEventPerOrder", testOneEventPerOrder},
		{"DeliverPartial", testDeliverPartial},
		{"DeliverConcurrent", testDeliverConcurrent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, newStore(t))
		})
	}
}

// outcome is one concurrent call's result.
type outcome struct {
	order   shop.Order
	created bool
	err     error
}

// placeAll starts n PlaceOrder calls on one signal and returns every
// outcome.
func placeAll(t *testing.T, s Store, n int, req func(i int) shop.PlaceOrder) []outcome {
	t.Helper()
	ctx := t.Context()
	out := make([]outcome, n)
	testenv.AtOnce(n, func(i int) {
		o, created, err := s.PlaceOrder(ctx, req(i))
		out[i] = outcome{o, created, err}
	})
	return out
}

// counts tallies outcomes by kind; any unexpected error fails the test.
func counts(t *testing.T, outs []outcome, kinds ...error) (created, replayed int, byKind map[error]int) {
	t.Helper()
	byKind = make(map[error]int)
outer:
	for _, o := range outs {
		if o.err == nil {
			if o.created {
				created++
			} else {
				replayed++
			}
			continue
		}
		for _, k := range kinds {
			if errors.Is(o.err, k) {
				byKind[k]++
				continue outer
			}
		}
		require.NoError(t, o.err, "unexpected error kind")
	}
	return created, replayed, byKind
}

func product(t *testing.T, s Store, id string, stock int64) {
	t.Helper()
	require.NoError(t, s.CreateProduct(t.Context(), shop.Product{ID: id, Name: "Product " + id, Stock: stock}))
}

func coupon(t *testing.T, s Store, id, owner string) {
	t.Helper()
	require.NoError(t, s.CreateCoupon(t.Context(), shop.Coupon{ID: id, Owner: owner, DiscountPercent: 10}))
}

// requireRefused requires the store to refuse order with want.
func requireRefused(t *testing.T, s Store, order shop.PlaceOrder, want error) {
	t.Helper()
	_, _, err := s.PlaceOrder(t.Context(), order)
	require.ErrorIs(t, err, want)
}

func stock(t *testing.T, s Store, id string) int64 {
	t.Helper()
	p, err := s.Product(t.Context(), id)
	require.NoError(t, err)
	return p.Stock
}

func testProducts(t *testing.T, s Store) {
	ctx := t.Context()
	p := shop.Product{ID: "tv-55", Name: "Télé 55\"", Stock: 7}
	require.NoError(t, s.CreateProduct(ctx, p))
	got, err := s.Product(ctx, "tv-55")
	require.NoError(t, err)
	require.Equal(t, p, got)

	require.ErrorIs(t, s.CreateProduct(ctx, shop.Product{ID: "tv-55", Name: "again", Stock: 1}), shop.ErrProductExists)
	_, err = s.Product(ctx, "nope")
	require.ErrorIs(t, err, shop.ErrProductNotFound)

	require.NoError(t, s.CreateProduct(ctx, shop.Product{ID: "zero", Name: "none left", Stock: 0}))
	require.NoError(t, s.CreateProduct(ctx, shop.Product{ID: "max", Name: "many", Stock: shop.MaxStock}))
}

func testCoupons(t *testing.T, s Store) {
	ctx := t.Context()
	c := shop.Coupon{ID: "WELCOME-1", Owner: "alice@example.com", DiscountPercent: 15}
	require.NoError(t, s.CreateCoupon(ctx, c))
	got, err := s.Coupon(ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, c, got)

	// A new coupon is unused whatever the caller says.
	require.NoError(t, s.CreateCoupon(ctx, shop.Coupon{ID: "pre-used", Owner: "bob", DiscountPercent: 5, Used: true}))
	got, err = s.Coupon(ctx, "pre-used")
	require.NoError(t, err)
	require.False(t, got.Used)

	require.ErrorIs(t, s.CreateCoupon(ctx, c), shop.ErrCouponExists)
	_, err = s.Coupon(ctx, "nope")
	require.ErrorIs(t, err, shop.ErrCouponNotFound)
}

func testBadRequests(t *testing.T, s Store) {
	ctx := t.Context()
	long := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a'
		}
		return string(b)
	}
	products := []shop.Product{
		{ID: "", Name: "x", Stock: 1},
		{ID: "a b", Name: "x", Stock: 1},
		{ID: "a/b", Name: "x", Stock: 1},
		{ID: "ünï", Name: "x", Stock: 1},
		{ID: long(shop.MaxIDLen + 1), Name: "x", Stock: 1},
		{ID: "p", Name: "", Stock: 1},
		{ID: "p", Name: long(shop.MaxNameLen + 1), Stock: 1},
		{ID: "p", Name: "bad\x00name", Stock: 1},
		{ID: "p", Name: "bad\xffutf8", Stock: 1},
		{ID: "p", Name: "x", Stock: -1},
		{ID: "p", Name: "x", Stock: shop.MaxStock + 1},
	}
	for _, p := range products {
		require.ErrorIs(t, s.CreateProduct(ctx, p), shop.ErrBadRequest, "%+v", p)
	}
	coupons := []shop.Coupon{
		{ID: "", Owner: "u", DiscountPercent: 10},
		{ID: "c", Owner: "", DiscountPercent: 10},
		{ID: "c", Owner: "has space", DiscountPercent: 10},
		{ID: "c", Owner: long(shop.MaxUserLen + 1), DiscountPercent: 10},
		{ID: "c", Owner: "u", DiscountPercent: 0},
		{ID: "c", Owner: "u", DiscountPercent: 101},
	}
	for _, c := range coupons {
		require.ErrorIs(t, s.CreateCoupon(ctx, c), shop.ErrBadRequest, "%+v", c)
	}
	product(t, s, "p", 5)
	ok := shop.PlaceOrder{User: "u", IdempotencyKey: "k", ProductID: "p", Quantity: 1}
	orders := []func(r *shop.PlaceOrder){
		func(r *shop.PlaceOrder) { r.User = "" },
		func(r *shop.PlaceOrder) { r.User = "tab\tuser" },
		func(r *shop.PlaceOrder) { r.IdempotencyKey = "" },
		func(r *shop.PlaceOrder) { r.IdempotencyKey = long(shop.MaxKeyLen + 1) },
		func(r *shop.PlaceOrder) { r.ProductID = "" },
		func(r *shop.PlaceOrder) { r.ProductID = "p;drop" },
		func(r *shop.PlaceOrder) { r.Quantity = 0 },
		func(r *shop.PlaceOrder) { r.Quantity = -1 },
		func(r *shop.PlaceOrder) { r.Quantity = shop.MaxQuantity + 1 },
		func(r *shop.PlaceOrder) { r.CouponID = "c'" },
	}
	for i, mutate := range orders {
		req := ok
		mutate(&req)
		_, _, err := s.PlaceOrder(ctx, req)
		require.ErrorIs(t, err, shop.ErrBadRequest, "case %d: %+v", i, req)
	}
	require.Equal(t, int64(5), stock(t, s, "p"), "a rejected request takes no stock")
}

func testPlaceOrder(t *testing.T, s Store) {
	ctx := t.Context()
	product(t, s, "p", 10)
	coupon(t, s, "c", "alice")
	o, created, err := s.PlaceOrder(ctx, shop.PlaceOrder{User: "alice", IdempotencyKey: "k1", ProductID: "p", Quantity: 3, CouponID: "c"})
	require.NoError(t, err)
	require.True(t, created)
	require.NotEmpty(t, o.ID)
	require.NoError(t, shop.CheckID(o.ID))
	require.Equal(t, "alice", o.User)
	require.Equal(t, "p", o.ProductID)
	require.Equal(t, 3, o.Quantity)
	require.Equal(t, "c", o.CouponID)
	require.Equal(t, "k1", o.IdempotencyKey)
	require.False(t, o.CreatedAt.IsZero())

	require.Equal(t, int64(7), stock(t, s, "p"))
	c, err := s.Coupon(ctx, "c")
	require.NoError(t, err)
	require.True(t, c.Used)

	got, err := s.Order(ctx, "alice", o.ID)
	require.NoError(t, err)
	require.Equal(t, o.ID, got.ID)
	require.Equal(t, o.Quantity, got.Quantity)
	require.Equal(t, o.CouponID, got.CouponID)
	require.True(t, o.CreatedAt.Equal(got.CreatedAt))

	// Someone else's order looks exactly like a missing one.
	_, err = s.Order(ctx, "mallory", o.ID)
	require.ErrorIs(t, err, shop.ErrOrderNotFound)
	_, err = s.Order(ctx, "alice", "no-such-order")
	require.ErrorIs(t, err, shop.ErrOrderNotFound)

	// Without a coupon, and a second order of the same user.
	o2, created, err := s.PlaceOrder(ctx, shop.PlaceOrder{User: "alice", IdempotencyKey: "k2", ProductID: "p", Quantity: 1})
	require.NoError(t, err)
	require.True(t, created)
	require.NotEqual(t, o.ID, o2.ID)
	require.Empty(t, o2.CouponID)
	require.Equal(t, int64(6), stock(t, s, "p"))
}

func testReplay(t *testing.T, s Store) {
	ctx := t.Context()
	product(t, s, "p", 10)
	product(t, s, "q", 10)
	first, created, err := s.PlaceOrder(ctx, shop.PlaceOrder{User: "u", IdempotencyKey: "token-1", ProductID: "p", Quantity: 2})
	require.NoError(t, err)
	require.True(t, created)

	// The same key returns the first order, even with another body: the
	// key is one admission, and one admission buys one order.
	for _, req := range []shop.PlaceOrder{
		{User: "u", IdempotencyKey: "token-1", ProductID: "p", Quantity: 2},
		{User: "u", IdempotencyKey: "token-1", ProductID: "q", Quantity: 5},
		{User: "u", IdempotencyKey: "token-1", ProductID: "missing", Quantity: 1},
	} {
		again, created, err := s.PlaceOrder(ctx, req)
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, first.ID, again.ID)
		require.Equal(t, "p", again.ProductID)
		require.Equal(t, 2, again.Quantity)
	}
	require.Equal(t, int64(8), stock(t, s, "p"))
	require.Equal(t, int64(10), stock(t, s, "q"))
	pending, err := s.PendingEvents(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, pending)
}

func testReplayOtherUser(t *testing.T, s Store) {
	ctx := t.Context()
	product(t, s, "p", 10)
	_, _, err := s.PlaceOrder(ctx, shop.PlaceOrder{User: "alice", IdempotencyKey: "shared", ProductID: "p", Quantity: 1})
	require.NoError(t, err)
	requireRefused(t, s, shop.PlaceOrder{User: "bob", IdempotencyKey: "shared", ProductID: "p", Quantity: 1}, shop.ErrIdempotencyConflict)
	require.Equal(t, int64(9), stock(t, s, "p"))
}

func testUnknownProduct(t *testing.T, s Store) {
	requireRefused(t, s, shop.PlaceOrder{User: "u", IdempotencyKey: "k", ProductID: "ghost", Quantity: 1}, shop.ErrProductNotFound)
}

func testSoldOut(t *testing.T, s Store) {
	ctx := t.Context()
	product(t, s, "p", 3)
	coupon(t, s, "c", "u")
	requireRefused(t, s, shop.PlaceOrder{User: "u", IdempotencyKey: "k1", ProductID: "p", Quantity: 4, CouponID: "c"}, shop.ErrSoldOut)
	c, err := s.Coupon(ctx, "c")
	require.NoError(t, err)
	require.False(t, c.Used, "a failed order leaves the coupon unused")

	// The key of a failed order is not burnt: a retry may succeed.
	_, created, err := s.PlaceOrder(ctx, shop.PlaceOrder{User: "u", IdempotencyKey: "k1", ProductID: "p", Quantity: 3})
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, int64(0), stock(t, s, "p"))

	requireRefused(t, s, shop.PlaceOrder{User: "u", IdempotencyKey: "k2", ProductID: "p", Quantity: 1}, shop.ErrSoldOut)
	require.Equal(t, int64(0), stock(t, s, "p"))
}

func testCouponErrors(t *testing.T, s Store) {
	ctx := t.Context()
	product(t, s, "p", 10)
	coupon(t, s, "alices", "alice")

	requireRefused(t, s, shop.PlaceOrder{User: "alice", IdempotencyKey: "k1", ProductID: "p", Quantity: 1, CouponID: "missing"}, shop.ErrCouponNotFound)

	requireRefused(t, s, shop.PlaceOrder{User: "bob", IdempotencyKey: "k2", ProductID: "p", Quantity: 1, CouponID: "alices"}, shop.ErrCouponNotOwned)
	require.Equal(t, int64(10), stock(t, s, "p"), "a failed order takes no stock")

	_, created, err := s.PlaceOrder(ctx, shop.PlaceOrder{User: "alice", IdempotencyKey: "k3", ProductID: "p", Quantity: 1, CouponID: "alices"})
	require.NoError(t, err)
	require.True(t, created)

	requireRefused(t, s, shop.PlaceOrder{User: "alice", IdempotencyKey: "k4", ProductID: "p", Quantity: 1, CouponID: "alices"}, shop.ErrCouponUsed)
	require.Equal(t, int64(9), stock(t, s, "p"))

	pending, err := s.PendingEvents(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, pending, "only the committed order has an event")
}

func testConcurrentStock(t *testing.T, s Store) {
	const buyers, units = 300, 100
	product(t, s, "hot", units)
	outs := placeAll(t, s, buyers, func(i int) shop.PlaceOrder {
		return shop.PlaceOrder{User: fmt.Sprintf("user-%d", i), IdempotencyKey: fmt.Sprintf("key-%d", i), ProductID: "hot", Quantity: 1}
	})
	created, replayed, byKind := counts(t, outs, shop.ErrSoldOut)
	require.Equal(t, units, created)
	require.Zero(t, replayed)
	require.Equal(t, buyers-units, byKind[shop.ErrSoldOut])
	require.Equal(t, int64(0), stock(t, s, "hot"))

	ids := make(map[string]bool)
	for _, o := range outs {
		if o.err == nil {
			ids[o.order.ID] = true
		}
	}
	require.Len(t, ids, units, "every order has its own id")
	pending, err := s.PendingEvents(t.Context())
	require.NoError(t, err)
	require.Equal(t, units, pending)
}

func testConcurrentCoupon(t *testing.T, s Store) {
	const tries = 20
	product(t, s, "p", 1000)
	coupon(t, s, "once", "alice")
	outs := placeAll(t, s, tries, func(i int) shop.PlaceOrder {
		return shop.PlaceOrder{User: "alice", IdempotencyKey: fmt.Sprintf("key-%d", i), ProductID: "p", Quantity: 1, CouponID: "once"}
	})
	created, replayed, byKind := counts(t, outs, shop.ErrCouponUsed)
	require.Equal(t, 1, created)
	require.Zero(t, replayed)
	require.Equal(t, tries-1, byKind[shop.ErrCouponUsed])
	require.Equal(t, int64(999), stock(t, s, "p"))
}

func testConcurrentIdempotencyKey(t *testing.T, s Store) {
	const tries = 20
	product(t, s, "p", 1000)
	outs := placeAll(t, s, tries, func(int) shop.PlaceOrder {
		return shop.PlaceOrder{User: "alice", IdempotencyKey: "the-token", ProductID: "p", Quantity: 2}
	})
	created, replayed, _ := counts(t, outs)
	require.Equal(t, 1, created)
	require.Equal(t, tries-1, replayed)
	for _, o := range outs {
		require.Equal(t, outs[0].order.ID, o.order.ID, "every answer is the one order")
	}
	require.Equal(t, int64(998), stock(t, s, "p"))
	pending, err := s.PendingEvents(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, pending)
}

// testConcurrentIdempotencyKeyLastUnit races duplicates for the last unit
// with a single-use coupon: the losers must answer with the winner's order,
// not with the SOLD_OUT or COUPON_USED the winner caused.
func testConcurrentIdempotencyKeyLastUnit(t *testing.T, s Store) {
	const tries = 20
	product(t, s, "last", 1)
	coupon(t, s, "c", "alice")
	outs := placeAll(t, s, tries, func(int) shop.PlaceOrder {
		return shop.PlaceOrder{User: "alice", IdempotencyKey: "the-token", ProductID: "last", Quantity: 1, CouponID: "c"}
	})
	created, replayed, _ := counts(t, outs)
	require.Equal(t, 1, created)
	require.Equal(t, tries-1, replayed)
	for _, o := range outs {
		require.Equal(t, outs[0].order.ID, o.order.ID)
	}
	require.Equal(t, int64(0), stock(t, s, "last"))
}

// collect is a publisher that confirms everything and records it.
type collect struct {
	mu     sync.Mutex
	events []shop.Event
}

func (c *collect) publish(_ context.Context, events []shop.Event) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, len(events))
	for i, e := range events {
		c.events = append(c.events, e)
		ids[i] = e.EventID
	}
	return ids, nil
}

func testOneEventPerOrder(t *testing.T, s Store) {
	ctx := t.Context()
	product(t, s, "p", 30)
	coupon(t, s, "c", "user-0")
	outs := placeAll(t, s, 50, func(i int) shop.PlaceOrder {
		k := i % 45 // calls 45-49 replay the keys of calls 0-4
		req := shop.PlaceOrder{User: fmt.Sprintf("user-%d", k), IdempotencyKey: fmt.Sprintf("key-%d", k), ProductID: "p", Quantity: 1}
		if k == 0 {
			req.CouponID = "c"
		}
		return req
	})
	// 45 distinct keys race for 30 units; a replay shares its key's fate.
	created, replayed, byKind := counts(t, outs, shop.ErrSoldOut)
	require.Equal(t, 30, created)
	require.Equal(t, 50, created+replayed+byKind[shop.ErrSoldOut])
	orders := make(map[string]shop.Order)
	for _, o := range outs {
		if o.err == nil {
			orders[o.order.ID] = o.order
		}
	}
	require.Len(t, orders, created)
	require.Equal(t, int64(30-len(orders)), stock(t, s, "p"))

	var c collect
	total := 0
	for {
		n, err := s.DeliverEvents(ctx, 7, c.publish)
		require.NoError(t, err)
		if n == 0 {
			break
		}
		total += n
	}
	require.Equal(t, len(orders), total)
	require.Len(t, c.events, len(orders))
	seen := make(map[string]bool)
	for _, e := range c.events {
		require.False(t, seen[e.EventID], "event %s published twice", e.EventID)
		seen[e.EventID] = true
		o, ok := orders[e.OrderID]
		require.True(t, ok, "event for unknown order %s", e.OrderID)
		delete(orders, e.OrderID) // a second event for one order fails above
		require.Equal(t, shop.EventOrderPlaced, e.Type)
		var payload shop.Order
		require.NoError(t, json.Unmarshal(e.Payload, &payload))
		require.Equal(t, o.ID, payload.ID)
		require.Equal(t, o.User, payload.User)
		require.Equal(t, o.Quantity, payload.Quantity)
	}
	require.Empty(t, orders, "every order has its event")
	pending, err := s.PendingEvents(ctx)
	require.NoError(t, err)
	require.Zero(t, pending)
}

func placeN(t *testing.T, s Store, n int) {
	t.Helper()
	product(t, s, "p", int64(n))
	for i := range n {
		_, created, err := s.PlaceOrder(t.Context(), shop.PlaceOrder{User: "u", IdempotencyKey: fmt.Sprintf("k-%d", i), ProductID: "p", Quantity: 1})
		require.NoError(t, err)
		require.True(t, created)
	}
}

func testDeliverPartial(t *testing.T, s Store) {
	ctx := t.Context()
	placeN(t, s, 6)

	// A broker failure marks nothing sent.
	boom := errors.New("broker down")
	n, err := s.DeliverEvents(ctx, 10, func(context.Context, []shop.Event) ([]string, error) { return nil, boom })
	require.ErrorIs(t, err, boom)
	require.Zero(t, n)
	pending, err := s.PendingEvents(ctx)
	require.NoError(t, err)
	require.Equal(t, 6, pending)

	// Only confirmed events are marked sent; the others come back, oldest
	// first.
	var first []shop.Event
	n, err = s.DeliverEvents(ctx, 4, func(_ context.Context, events []shop.Event) ([]string, error) {
		first = events
		return []string{events[0].EventID, events[2].EventID}, boom
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, 2, n)
	require.Len(t, first, 4)
	pending, err = s.PendingEvents(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, pending)

	var c collect
	n, err = s.DeliverEvents(ctx, 10, c.publish)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Equal(t, first[1].EventID, c.events[0].EventID)
	require.Equal(t, first[3].EventID, c.events[1].EventID)

	// Nothing pending: publish is not called.
	n, err = s.DeliverEvents(ctx, 10, func(context.Context, []shop.Event) ([]string, error) {
		t.Error("publish called with nothing pending")
		return nil, nil
	})
	require.NoError(t, err)
	require.Zero(t, n)
}

// testDeliverConcurrent runs two passes that overlap in time: each waits
// inside publish until the other has claimed its batch. The batches must be
// disjoint and together hold every event.
func testDeliverConcurrent(t *testing.T, s Store) {
	const events, limit = 20, 10
	placeN(t, s, events)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	start := make(chan struct{})
	var inside sync.WaitGroup
	inside.Add(2)
	both := make(chan struct{})
	go func() { inside.Wait(); close(both) }()

	batches := make([][]string, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			<-start
			_, errs[r] = s.DeliverEvents(ctx, limit, func(ctx context.Context, evs []shop.Event) ([]string, error) {
				inside.Done()
				select {
				case <-both: // the other pass holds its claim too
				case <-ctx.Done():
					return nil, fmt.Errorf("the other pass never claimed a batch: %w", ctx.Err())
				}
				for _, e := range evs {
					batches[r] = append(batches[r], e.EventID)
				}
				return batches[r], nil
			})
		})
	}
	close(start)
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Len(t, batches[0], limit)
	require.Len(t, batches[1], limit)
	seen := make(map[string]bool)
	for _, b := range batches {
		for _, id := range b {
			require.False(t, seen[id], "event %s claimed by both passes", id)
			seen[id] = true
		}
	}
	require.Len(t, seen, events)
	pending, err := s.PendingEvents(ctx)
	require.NoError(t, err)
	require.Zero(t, pending)
}
