// Package inmem is a shop.Store and shop.Outbox kept in process memory
// behind one mutex, with the same semantics as shop/postgres. It is NOT
// durable: products, coupons, orders and pending events are lost when the
// process exits. Use it for demos, tests and single-process trials only.
package inmem

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/waitroom/waitroom/shop"
)

// Store is an in-process shop.Store and shop.Outbox. The zero value is not
// usable; call New.
type Store struct {
	now func() time.Time

	mu       sync.Mutex
	products map[string]shop.Product
	coupons  map[string]shop.Coupon
	orders   map[string]shop.Order // by order id
	byKey    map[string]string     // idempotency key → order id
	events   []*event              // in commit order
}

// event is one outbox entry with its delivery state.
type event struct {
	shop.Event
	claimed bool // handed to a relay whose pass has not finished
	sent    bool
}

var (
	_ shop.Store  = (*Store)(nil)
	_ shop.Outbox = (*Store)(nil)
)

// New returns an empty store.
func New() *Store {
	return &Store{
		now:      time.Now,
		products: make(map[string]shop.Product),
		coupons:  make(map[string]shop.Coupon),
		orders:   make(map[string]shop.Order),
		byKey:    make(map[string]string),
	}
}

// PlaceOrder implements shop.Store.
func (s *Store) PlaceOrder(ctx context.Context, req shop.PlaceOrder) (shop.Order, bool, error) {
	if err := req.Validate(); err != nil {
		return shop.Order{}, false, err
	}
	if err := ctx.Err(); err != nil {
		return shop.Order{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()

	// A replay returns the first order, whatever its body says: the key is
	// one admission, and one admission buys one order.
	if id, ok := s.byKey[req.IdempotencyKey]; ok {
		o := s.orders[id]
		if o.User != req.User {
			return shop.Order{}, false, shop.ErrIdempotencyConflict
		}
		return o, false, nil
	}
	p, ok := s.products[req.ProductID]
	if !ok {
		return shop.Order{}, false, fmt.Errorf("product %s: %w", req.ProductID, shop.ErrProductNotFound)
	}
	if p.Stock < int64(req.Quantity) {
		return shop.Order{}, false, fmt.Errorf("product %s: %w", req.ProductID, shop.ErrSoldOut)
	}
	var c shop.Coupon
	if req.CouponID != "" {
		c, ok = s.coupons[req.CouponID]
		if !ok {
			return shop.Order{}, false, fmt.Errorf("coupon %s: %w", req.CouponID, shop.ErrCouponNotFound)
		}
		if err := req.CheckCoupon(c.Owner, c.Used); err != nil {
			return shop.Order{}, false, err
		}
	}
	o := req.Order(s.now())
	ev, err := shop.NewEvent(o)
	if err != nil {
		return shop.Order{}, false, err
	}
	// Every check passed: apply all writes together, as one commit.
	p.Stock -= int64(req.Quantity)
	s.products[p.ID] = p
	if req.CouponID != "" {
		c.Used = true
		s.coupons[c.ID] = c
	}
	s.orders[o.ID] = o
	s.byKey[o.IdempotencyKey] = o.ID
	s.events = append(s.events, &event{Event: ev})
	return o, true, nil
}

// Order implements shop.Store.
func (s *Store) Order(ctx context.Context, user, id string) (shop.Order, error) {
	if err := ctx.Err(); err != nil {
		return shop.Order{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[id]
	if !ok || o.User != user {
		return shop.Order{}, fmt.Errorf("order %s: %w", id, shop.ErrOrderNotFound)
	}
	return o, nil
}

// CreateProduct implements shop.Store.
func (s *Store) CreateProduct(ctx context.Context, p shop.Product) error {
	if err := p.Validate(); err != nil {
		return err
	}
	return insert(ctx, s, s.products, "product", p.ID, p, shop.ErrProductExists)
}

// Product implements shop.Store.
func (s *Store) Product(ctx context.Context, id string) (shop.Product, error) {
	return lookup(ctx, s, s.products, "product", id, shop.ErrProductNotFound)
}

// CreateCoupon implements shop.Store.
func (s *Store) CreateCoupon(ctx context.Context, c shop.Coupon) error {
	if err := c.Validate(); err != nil {
		return err
	}
	c.Used = false // a new coupon is always unused
	return insert(ctx, s, s.coupons, "coupon", c.ID, c, shop.ErrCouponExists)
}

// Coupon implements shop.Store.
func (s *Store) Coupon(ctx context.Context, id string) (shop.Coupon, error) {
	return lookup(ctx, s, s.coupons, "coupon", id, shop.ErrCouponNotFound)
}

// insert adds v to m (the products or the coupons) under id, unless id is
// taken: then the error is exists, naming what and id.
func insert[T any](ctx context.Context, s *Store, m map[string]T, what, id string, v T, exists error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := m[id]; ok {
		return fmt.Errorf("%s %s: %w", what, id, exists)
	}
	m[id] = v
	return nil
}

// lookup reads m[id], or the error notFound naming what and id.
func lookup[T any](ctx context.Context, s *Store, m map[string]T, what, id string, notFound error) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := m[id]
	if !ok {
		return zero, fmt.Errorf("%s %s: %w", what, id, notFound)
	}
	return v, nil
}

// DeliverEvents implements shop.Outbox. Claimed events are skipped by other
// passes until this pass ends, like FOR UPDATE SKIP LOCKED in PostgreSQL;
// publish runs outside the lock so orders are not held up by the broker.
func (s *Store) DeliverEvents(ctx context.Context, limit int, publish func(ctx context.Context, events []shop.Event) ([]string, error)) (int, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("deliver events: limit %d must be positive", limit)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	var claimed []*event
	for _, e := range s.events {
		if len(claimed) == limit {
			break
		}
		if !e.sent && !e.claimed {
			e.claimed = true
			claimed = append(claimed, e)
		}
	}
	s.mu.Unlock()
	if len(claimed) == 0 {
		return 0, nil
	}

	batch := make([]shop.Event, len(claimed))
	for i, e := range claimed {
		batch[i] = e.Event
	}
	confirmed, err := publish(ctx, batch)

	s.mu.Lock()
	defer s.mu.Unlock()
	sent := 0
	for _, e := range claimed {
		e.claimed = false
		if !e.sent && slices.Contains(confirmed, e.EventID) {
			e.sent = true
			sent++
		}
	}
	// Drop the sent prefix so the list holds only what is still pending.
	i := 0
	for i < len(s.events) && s.events[i].sent {
		i++
	}
	s.events = s.events[i:]
	return sent, err
}

// PendingEvents implements shop.Outbox.
func (s *Store) PendingEvents(ctx context.Context) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.events {
		if !e.sent {
			n++
		}
	}
	return n, nil
}
