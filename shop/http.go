package shop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/waitroom/waitroom/jsonhttp"
)

// DefaultUserHeader carries the user id set by the shop's auth layer.
const DefaultUserHeader = "X-User-Id"

// UnitsHeader carries the units the order's entry token reserved, set by
// the waiting room's gate (waitroom.UnitsHeader): an order may buy at most
// that many. Without it (no gate in front) only MaxQuantity bounds an
// order.
const UnitsHeader = "Waitroom-Units"

// Options configures the handlers; the zero value is valid.
type Options struct {
	// UserHeader names the header holding the authenticated user id.
	// Default DefaultUserHeader.
	UserHeader string
	// Logger receives store failures. Default: discard.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.UserHeader == "" {
		o.UserHeader = DefaultUserHeader
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// handler serves one store; its methods return errors that serve maps to
// answers in one place.
type handler struct {
	store Store
	opts  Options
}

// NewHandler serves the user-facing order API:
//
//	POST /orders        {"product_id", "quantity" (default 1), "coupon_id"}
//	                    with the Idempotency-Key and Waitroom-Units headers
//	                    (set by the gate); 201 with the new order, 200 with
//	                    the first order on a replay of the key; 422
//	                    QUANTITY_OVER_LIMIT for more units than reserved.
//	GET  /orders/{id}   the user's own order; anyone else's is 404.
//
// Mount it behind the waiting room's gate for POST /orders.
func NewHandler(store Store, opts Options) http.Handler {
	return newMux(store, opts, map[string]route{
		"POST /orders":     (*handler).placeOrder,
		"GET /orders/{id}": (*handler).order,
	})
}

// NewAdminHandler serves stock and coupon administration; mount it behind
// admin authentication:
//
//	POST /admin/products       {"id", "name", "stock"} → 201
//	GET  /admin/products/{id}  the product with its current stock
//	POST /admin/coupons        {"id", "owner", "discount"} → 201
//	GET  /admin/coupons/{id}   the coupon, with whether it was used
func NewAdminHandler(store Store, opts Options) http.Handler {
	return newMux(store, opts, map[string]route{
		"POST /admin/products":     (*handler).createProduct,
		"GET /admin/products/{id}": (*handler).product,
		"POST /admin/coupons":      (*handler).createCoupon,
		"GET /admin/coupons/{id}":  (*handler).coupon,
	})
}

// A route is a handler method that returns its error for serve to answer.
type route = func(h *handler, w http.ResponseWriter, r *http.Request) error

// newMux serves each pattern with its route on one handler over store.
func newMux(store Store, opts Options, routes map[string]route) http.Handler {
	h := &handler{store: store, opts: opts.withDefaults()}
	mux := http.NewServeMux()
	for pattern, fn := range routes {
		mux.Handle(pattern, h.serve(func(w http.ResponseWriter, r *http.Request) error { return fn(h, w, r) }))
	}
	return mux
}

// serve turns a handler that returns an error into an http.Handler: the
// client gets a code and a safe message, the log gets the cause.
func (h *handler) serve(fn func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := fn(w, r)
		if err == nil {
			return
		}
		for _, e := range errorTable {
			if !errors.Is(err, e.err) {
				continue
			}
			msg := e.message
			if msg == "" {
				// Such errors are built from safe text only.
				msg = strings.TrimPrefix(err.Error(), e.err.Error()+": ")
			}
			jsonhttp.Error(w, e.status, e.code, msg)
			return
		}
		// Anything else is the store failing (database down, pool exhausted
		// past the deadline, the client gone): always a 503, never an empty
		// 200, because the gate completes the user's entry token on a 2xx
		// and releases it otherwise. A retry with the same key is safe.
		h.opts.Logger.ErrorContext(r.Context(), "shop store failed",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("err", err))
		jsonhttp.RetryAfter(w, time.Second)
		jsonhttp.Error(w, http.StatusServiceUnavailable, "STORE_UNAVAILABLE", "the order service is unavailable, try again")
	})
}

func (h *handler) user(r *http.Request) (string, error) {
	user := r.Header.Get(h.opts.UserHeader)
	if user == "" {
		return "", badRequest("missing user header %s", h.opts.UserHeader)
	}
	if err := CheckUser(user); err != nil {
		return "", err
	}
	return user, nil
}

type placeOrderBody struct {
	ProductID string `json:"product_id"`
	Quantity  *int   `json:"quantity"` // nil means 1; an explicit 0 is an error
	CouponID  string `json:"coupon_id"`
}

func (h *handler) placeOrder(w http.ResponseWriter, r *http.Request) error {
	user, err := h.user(r)
	if err != nil {
		return err
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		return badRequest("missing Idempotency-Key header")
	}
	var body placeOrderBody
	if err := jsonhttp.Decode(r, &body); err != nil {
		return badRequest("%s", err.Error())
	}
	qty := 1
	if body.Quantity != nil {
		qty = *body.Quantity
	}
	req := PlaceOrder{User: user, IdempotencyKey: key, ProductID: body.ProductID, Quantity: qty, CouponID: body.CouponID}
	if err := req.Validate(); err != nil {
		return err
	}
	// Refused before the stock is touched: the room counted the units the
	// token reserved, not what the body asks for.
	if err := withinReserved(r.Header, qty); err != nil {
		return err
	}
	o, created, err := h.store.PlaceOrder(r.Context(), req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/orders/"+o.ID)
	if !created {
		w.Header().Set("Idempotent-Replayed", "true")
		jsonhttp.Write(w, http.StatusOK, o)
		return nil
	}
	jsonhttp.Write(w, http.StatusCreated, o)
	return nil
}

// maxReserved bounds what UnitsHeader may say: the room's own limit on
// units per order (waitroom.MaxUnitsPerOrder).
const maxReserved = 1000

// withinReserved refuses an order of qty units when the request's
// UnitsHeader reserved fewer; a header that is not one whole number in
// [1, maxReserved] is a bad request.
func withinReserved(h http.Header, qty int) error {
	vals := h.Values(UnitsHeader)
	if len(vals) == 0 {
		return nil
	}
	n, err := strconv.Atoi(vals[0])
	if len(vals) > 1 || err != nil || n < 1 || n > maxReserved {
		return badRequest("%s must be one whole number of units in [1, %d]", UnitsHeader, maxReserved)
	}
	if qty > n {
		return fmt.Errorf("%w: quantity %d is more than the %d units your turn reserved", ErrQuantityOverLimit, qty, n)
	}
	return nil
}

func (h *handler) order(w http.ResponseWriter, r *http.Request) error {
	user, err := h.user(r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if CheckID(id) != nil {
		return ErrOrderNotFound // no valid id names an order
	}
	o, err := h.store.Order(r.Context(), user, id)
	if err != nil {
		return err
	}
	jsonhttp.Write(w, http.StatusOK, o)
	return nil
}

func (h *handler) createProduct(w http.ResponseWriter, r *http.Request) error {
	var p Product
	if err := jsonhttp.Decode(r, &p); err != nil {
		return badRequest("%s", err.Error())
	}
	return create(w, r, p, h.store.CreateProduct, "/admin/products/"+p.ID)
}

func (h *handler) product(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if CheckID(id) != nil {
		return ErrProductNotFound
	}
	p, err := h.store.Product(r.Context(), id)
	if err != nil {
		return err
	}
	jsonhttp.Write(w, http.StatusOK, p)
	return nil
}

// couponBody is what an admin sends: a coupon is always created unused.
type couponBody struct {
	ID       string `json:"id"`
	Owner    string `json:"owner"`
	Discount int    `json:"discount"`
}

func (h *handler) createCoupon(w http.ResponseWriter, r *http.Request) error {
	var body couponBody
	if err := jsonhttp.Decode(r, &body); err != nil {
		return badRequest("%s", err.Error())
	}
	c := Coupon{ID: body.ID, Owner: body.Owner, DiscountPercent: body.Discount}
	return create(w, r, c, h.store.CreateCoupon, "/admin/coupons/"+c.ID)
}

// create validates v, has the store create it and answers 201 with v at
// location.
func create[T interface{ Validate() error }](w http.ResponseWriter, r *http.Request, v T, store func(context.Context, T) error, location string) error {
	if err := v.Validate(); err != nil {
		return err
	}
	if err := store(r.Context(), v); err != nil {
		return err
	}
	w.Header().Set("Location", location)
	jsonhttp.Write(w, http.StatusCreated, v)
	return nil
}

func (h *handler) coupon(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if CheckID(id) != nil {
		jsonhttp.Error(w, http.StatusNotFound, "COUPON_NOT_FOUND", "no such coupon")
		return nil
	}
	c, err := h.store.Coupon(r.Context(), id)
	if errors.Is(err, ErrCouponNotFound) {
		// 422 fits an order naming a bad coupon; looking one up is a plain 404.
		jsonhttp.Error(w, http.StatusNotFound, "COUPON_NOT_FOUND", "no such coupon")
		return nil
	}
	if err != nil {
		return err
	}
	jsonhttp.Write(w, http.StatusOK, c)
	return nil
}
