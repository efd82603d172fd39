// Package shop is the reference order service the waiting room protects: a
// flash sale of products with limited stock and single-use coupons. It holds
// the domain types, the Store contract both stores keep (PostgreSQL in
// shop/postgres, in process in shop/inmem), the outbox the relay drains
// (shop/rabbitmq) and the HTTP handlers.
//
// Every order is placed under an idempotency key (the waiting room's entry
// token id, passed by the gate as the Idempotency-Key header), so a retry
// after a crash returns the first order instead of placing a second.
package shop

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"time"
)

// Bounds on outside input; every store and handler validates against them.
const (
	MaxIDLen         = 64            // product, coupon and order ids
	MaxUserLen       = 128           // user ids come from the shop's auth layer
	MaxKeyLen        = 128           // idempotency keys
	MaxNameLen       = 200           // product names, in bytes
	MaxStock         = 1_000_000_000 // keeps stock arithmetic far from overflow
	MaxQuantity      = 10            // per order; a flash sale limits baskets
	MaxDiscount      = 100           // percent
	EventOrderPlaced = "order.placed"
)

// Product is something on sale with a limited stock.
type Product struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	Stock int64  `json:"stock"`
}

// Coupon is a single-use discount that belongs to one user.
type Coupon struct {
	ID              string `json:"id"`
	Owner           string `json:"owner"`
	DiscountPercent int    `json:"discount"`
	Used            bool   `json:"used"`
}

// Order is a placed order. The idempotency key is not shown to clients: it
// is the user's entry token id.
type Order struct {
	ID             string    `json:"id"`
	User           string    `json:"user"`
	ProductID      string    `json:"product_id"`
	Quantity       int       `json:"quantity"`
	CouponID       string    `json:"coupon_id,omitempty"`
	IdempotencyKey string    `json:"-"`
	CreatedAt      time.Time `json:"created_at"`
}

// PlaceOrder asks for an order. CouponID is optional.
type PlaceOrder struct {
	User           string
	IdempotencyKey string
	ProductID      string
	Quantity       int
	CouponID       string
}

// CheckCoupon applies the coupon rules to the coupon a store found and
// locked for req (owner and used as it has them): the buyer must own it
// and it must be unused.
func (req PlaceOrder) CheckCoupon(owner string, used bool) error {
	switch {
	case owner != req.User:
		return fmt.Errorf("coupon %s: %w", req.CouponID, ErrCouponNotOwned)
	case used:
		return fmt.Errorf("coupon %s: %w", req.CouponID, ErrCouponUsed)
	}
	return nil
}

// Order is the new order req places, created at at.
func (req PlaceOrder) Order(at time.Time) Order {
	return Order{
		ID:             NewID(),
		User:           req.User,
		ProductID:      req.ProductID,
		Quantity:       req.Quantity,
		CouponID:       req.CouponID,
		IdempotencyKey: req.IdempotencyKey,
		CreatedAt:      at.UTC(),
	}
}

// Event is an outbox entry: written in the order's transaction, published by
// the relay afterwards, so an order never exists without its event and an
// event never exists without its order. Consumers deduplicate by EventID
// (the AMQP message id): delivery is at least once.
type Event struct {
	EventID   string          `json:"event_id"`
	OrderID   string          `json:"order_id"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
	CreatedAt time.Time       `json:"created_at"`
}

// Store keeps products, coupons and orders. Every method is one atomic step:
// a transaction in PostgreSQL, one critical section in process.
type Store interface {
	// PlaceOrder places an order, or returns the order already placed under
	// the same idempotency key by the same user with created == false.
	// Errors: ErrBadRequest, ErrProductNotFound, ErrSoldOut,
	// ErrCouponNotFound, ErrCouponNotOwned, ErrCouponUsed,
	// ErrIdempotencyConflict.
	PlaceOrder(ctx context.Context, req PlaceOrder) (o Order, created bool, err error)
	// Order returns one of user's orders; another user's order is
	// ErrOrderNotFound, like a missing one.
	Order(ctx context.Context, user, id string) (Order, error)
	// CreateProduct adds a product; ErrProductExists if the id is taken.
	CreateProduct(ctx context.Context, p Product) error
	// Product returns a product with its current stock.
	Product(ctx context.Context, id string) (Product, error)
	// CreateCoupon adds an unused coupon; ErrCouponExists if the id is taken.
	CreateCoupon(ctx context.Context, c Coupon) error
	// Coupon returns a coupon.
	Coupon(ctx context.Context, id string) (Coupon, error)
}

// Outbox is what the relay needs from a store: pending events, claimed so
// that concurrent relays never publish one event in the same pass, and
// marked sent only once the broker confirmed them.
type Outbox interface {
	// DeliverEvents claims up to limit pending events, oldest first, and
	// hands them to publish, which returns the ids of the events the broker
	// confirmed. Those are marked sent; the rest stay pending for a later
	// pass. It returns how many were marked sent and publish's error, if
	// any. With nothing pending, publish is not called.
	DeliverEvents(ctx context.Context, limit int, publish func(ctx context.Context, events []Event) (confirmed []string, err error)) (int, error)
	// PendingEvents counts the events not yet sent.
	PendingEvents(ctx context.Context) (int, error)
}

// NewID returns a fresh random id (128 bits from crypto/rand), used for
// orders and events so that ids reveal neither volume nor order.
func NewID() string {
	return rand.Text()
}

// NewEvent builds the order.placed event of o, with a fresh event id.
func NewEvent(o Order) (Event, error) {
	payload, err := json.Marshal(o)
	if err != nil {
		return Event{}, fmt.Errorf("encode order %s: %w", o.ID, err)
	}
	return Event{
		EventID:   NewID(),
		OrderID:   o.ID,
		Type:      EventOrderPlaced,
		Payload:   payload,
		CreatedAt: o.CreatedAt,
	}, nil
}
