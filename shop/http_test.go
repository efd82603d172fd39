package shop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/jsonhttp"
	"github.com/waitroom/waitroom/shop"
	"github.com/waitroom/waitroom/shop/inmem"
)

type call struct {
	method, path, body string
	header             map[string]string
}

func do(t testing.TB, h http.Handler, c call) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
	for k, v := range c.header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func errorCode(t testing.TB, w *httptest.ResponseRecorder) string {
	t.Helper()
	var body jsonhttp.ErrorBody
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), w.Body.String())
	require.NotEmpty(t, body.Error.Message)
	return body.Error.Code
}

func newShop(t *testing.T) (orders, admin http.Handler) {
	t.Helper()
	s := inmem.New()
	admin = shop.NewAdminHandler(s, shop.Options{})
	orders = shop.NewHandler(s, shop.Options{})
	w := do(t, admin, call{method: "POST", path: "/admin/products", body: `{"id":"tv","name":"TV","stock":2}`})
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	w = do(t, admin, call{method: "POST", path: "/admin/coupons", body: `{"id":"c1","owner":"alice","discount":20}`})
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	return orders, admin
}

func order(user, key, body string) call {
	h := map[string]string{}
	if user != "" {
		h["X-User-Id"] = user
	}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	return call{method: "POST", path: "/orders", body: body, header: h}
}

func TestPlaceOrderHTTP(t *testing.T) {
	t.Parallel()
	orders, admin := newShop(t)

	w := do(t, orders, order("alice", "tok-1", `{"product_id":"tv","coupon_id":"c1"}`))
	require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
	var first shop.Order
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &first))
	require.Equal(t, 1, first.Quantity, "quantity defaults to 1")
	require.Equal(t, "c1", first.CouponID)
	require.Equal(t, "/orders/"+first.ID, w.Header().Get("Location"))
	require.NotContains(t, w.Body.String(), "tok-1", "the entry token id is not echoed")

	// Replay: 200 with the first order.
	w = do(t, orders, order("alice", "tok-1", `{"product_id":"tv","quantity":2}`))
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Equal(t, "true", w.Header().Get("Idempotent-Replayed"))
	var again shop.Order
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &again))
	require.Equal(t, first.ID, again.ID)

	// Only the owner sees the order.
	w = do(t, orders, call{method: "GET", path: "/orders/" + first.ID, header: map[string]string{"X-User-Id": "alice"}})
	require.Equal(t, http.StatusOK, w.Code)
	w = do(t, orders, call{method: "GET", path: "/orders/" + first.ID, header: map[string]string{"X-User-Id": "bob"}})
	require.Equal(t, http.StatusNotFound, w.Code)
	require.Equal(t, "ORDER_NOT_FOUND", errorCode(t, w))

	w = do(t, admin, call{method: "GET", path: "/admin/products/tv"})
	require.Equal(t, http.StatusOK, w.Code)
	require.JSONEq(t, `{"id":"tv","name":"TV","stock":1}`, w.Body.String())
	w = do(t, admin, call{method: "GET", path: "/admin/coupons/c1"})
	require.Equal(t, http.StatusOK, w.Code)
	require.JSONEq(t, `{"id":"c1","owner":"alice","discount":20,"used":true}`, w.Body.String())
}

func TestErrorsHTTP(t *testing.T) {
	t.Parallel()
	orders, admin := newShop(t)
	// Sell the last unit but one, so SOLD_OUT can be provoked.
	require.Equal(t, http.StatusCreated, do(t, orders, order("carol", "k0", `{"product_id":"tv"}`)).Code)

	for _, tc := range []struct {
		name   string
		h      http.Handler
		c      call
		status int
		code   string
	}{
		{"no user", orders, order("", "k", `{"product_id":"tv"}`), 400, "BAD_REQUEST"},
		{"bad user", orders, order("a b", "k", `{"product_id":"tv"}`), 400, "BAD_REQUEST"},
		{"no key", orders, order("alice", "", `{"product_id":"tv"}`), 400, "BAD_REQUEST"},
		{"long key", orders, order("alice", strings.Repeat("k", 129), `{"product_id":"tv"}`), 400, "BAD_REQUEST"},
		{"empty body", orders, order("alice", "k", ``), 400, "BAD_REQUEST"},
		{"bad json", orders, order("alice", "k", `{"product_id":`), 400, "BAD_REQUEST"},
		{"unknown field", orders, order("alice", "k", `{"product_id":"tv","price":0}`), 400, "BAD_REQUEST"},
		{"two objects", orders, order("alice", "k", `{"product_id":"tv"}{}`), 400, "BAD_REQUEST"},
		{"quantity 0", orders, order("alice", "k", `{"product_id":"tv","quantity":0}`), 400, "BAD_REQUEST"},
		{"quantity 11", orders, order("alice", "k", `{"product_id":"tv","quantity":11}`), 400, "BAD_REQUEST"},
		{"quantity string", orders, order("alice", "k", `{"product_id":"tv","quantity":"1"}`), 400, "BAD_REQUEST"},
		{"quantity huge", orders, order("alice", "k", `{"product_id":"tv","quantity":1e30}`), 400, "BAD_REQUEST"},
		{"bad product id", orders, order("alice", "k", `{"product_id":"../etc"}`), 400, "BAD_REQUEST"},
		{"huge body", orders, order("alice", "k", `{"product_id":"`+strings.Repeat("a", jsonhttp.MaxBody)+`"}`), 400, "BAD_REQUEST"},
		{"unknown product", orders, order("alice", "k", `{"product_id":"radio"}`), 404, "PRODUCT_NOT_FOUND"},
		{"missing coupon", orders, order("alice", "k", `{"product_id":"tv","coupon_id":"zz"}`), 422, "COUPON_NOT_FOUND"},
		{"not owned", orders, order("bob", "k", `{"product_id":"tv","coupon_id":"c1"}`), 422, "COUPON_NOT_OWNED"},
		{"sold out", orders, order("alice", "k", `{"product_id":"tv","quantity":2}`), 409, "SOLD_OUT"},
		{"key of another user", orders, order("dave", "k0", `{"product_id":"tv"}`), 409, "IDEMPOTENCY_KEY_CONFLICT"},
		{"order bad id", orders, call{method: "GET", path: "/orders/%00", header: map[string]string{"X-User-Id": "alice"}}, 404, "ORDER_NOT_FOUND"},
		{"order no user", orders, call{method: "GET", path: "/orders/x"}, 400, "BAD_REQUEST"},
		{"product negative", admin, call{method: "POST", path: "/admin/products", body: `{"id":"p","name":"P","stock":-1}`}, 400, "BAD_REQUEST"},
		{"product too many", admin, call{method: "POST", path: "/admin/products", body: `{"id":"p","name":"P","stock":1000000001}`}, 400, "BAD_REQUEST"},
		{"product float stock", admin, call{method: "POST", path: "/admin/products", body: `{"id":"p","name":"P","stock":1.5}`}, 400, "BAD_REQUEST"},
		{"product no name", admin, call{method: "POST", path: "/admin/products", body: `{"id":"p","stock":1}`}, 400, "BAD_REQUEST"},
		{"product bad id", admin, call{method: "POST", path: "/admin/products", body: `{"id":"p p","name":"P","stock":1}`}, 400, "BAD_REQUEST"},
		{"product exists", admin, call{method: "POST", path: "/admin/products", body: `{"id":"tv","name":"P","stock":1}`}, 409, "PRODUCT_EXISTS"},
		{"coupon discount", admin, call{method: "POST", path: "/admin/coupons", body: `{"id":"c","owner":"u","discount":0}`}, 400, "BAD_REQUEST"},
		{"coupon used field", admin, call{method: "POST", path: "/admin/coupons", body: `{"id":"c","owner":"u","discount":5,"used":true}`}, 400, "BAD_REQUEST"},
		{"coupon exists", admin, call{method: "POST", path: "/admin/coupons", body: `{"id":"c1","owner":"u","discount":5}`}, 409, "COUPON_EXISTS"},
		{"coupon missing", admin, call{method: "GET", path: "/admin/coupons/nope"}, 404, "COUPON_NOT_FOUND"},
		{"product missing", admin, call{method: "GET", path: "/admin/products/nope"}, 404, "PRODUCT_NOT_FOUND"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(t, tc.h, tc.c)
			require.Equal(t, tc.status, w.Code, w.Body.String())
			require.Equal(t, tc.code, errorCode(t, w))
			require.Equal(t, "application/json", w.Header().Get("Content-Type"))
		})
	}
}

func TestUserHeaderOption(t *testing.T) {
	t.Parallel()
	s := inmem.New()
	require.NoError(t, s.CreateProduct(t.Context(), shop.Product{ID: "p", Name: "P", Stock: 1}))
	h := shop.NewHandler(s, shop.Options{UserHeader: "X-Shop-User"})
	c := call{method: "POST", path: "/orders", body: `{"product_id":"p"}`, header: map[string]string{"X-Shop-User": "alice", "Idempotency-Key": "k"}}
	require.Equal(t, http.StatusCreated, do(t, h, c).Code)
	c.header = map[string]string{"X-User-Id": "alice", "Idempotency-Key": "k2"}
	require.Equal(t, http.StatusBadRequest, do(t, h, c).Code)
}

// FuzzPlaceOrder feeds outside input to POST /orders: whatever comes in,
// the answer is a known status with the standard error body, never a 5xx.
func FuzzPlaceOrder(f *testing.F) {
	f.Add("alice", "k1", []byte(`{"product_id":"tv","quantity":1,"coupon_id":"c1"}`))
	f.Add("bob", "k2", []byte(`{"product_id":"tv","quantity":-3}`))
	f.Add("", "", []byte(`{`))
	f.Add("a\x00", "\xff", []byte(`{"quantity":9223372036854775808}`))
	f.Add("u", "k", []byte(`[]`))
	f.Fuzz(func(t *testing.T, user, key string, body []byte) {
		s := inmem.New()
		_ = s.CreateProduct(t.Context(), shop.Product{ID: "tv", Name: "TV", Stock: 1})
		_ = s.CreateCoupon(t.Context(), shop.Coupon{ID: "c1", Owner: "alice", DiscountPercent: 5})
		h := shop.NewHandler(s, shop.Options{})
		r := httptest.NewRequest("POST", "/orders", bytes.NewReader(body))
		r.Header["X-User-Id"] = []string{user}
		r.Header["Idempotency-Key"] = []string{key}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		switch w.Code {
		case http.StatusCreated:
			var o shop.Order
			require.NoError(t, json.Unmarshal(w.Body.Bytes(), &o))
			require.Equal(t, user, o.User)
		case 400, 404, 409, 422:
			errorCode(t, w)
		default:
			t.Fatalf("status %d for user %q key %q body %q: %s", w.Code, user, key, body, w.Body)
		}
	})
}

// failing is a store whose database is down.
type failing struct{ *inmem.Store }

func (failing) PlaceOrder(context.Context, shop.PlaceOrder) (shop.Order, bool, error) {
	return shop.Order{}, false, fmt.Errorf("place order: %w", errors.New("dial tcp 10.0.0.5:5432: connection refused"))
}

func TestStoreFailureHTTP(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	h := shop.NewHandler(failing{inmem.New()}, shop.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	w := do(t, h, order("alice", "k", `{"product_id":"tv"}`))
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	require.Equal(t, "STORE_UNAVAILABLE", errorCode(t, w))
	require.Equal(t, "1", w.Header().Get("Retry-After"))
	require.NotContains(t, w.Body.String(), "10.0.0.5", "the cause stays in the log")
	require.Contains(t, logs.String(), "10.0.0.5")
}

// The units the gate reserved (Waitroom-Units) bound an order's quantity:
// more is 422 QUANTITY_OVER_LIMIT with the stock untouched, as much
// passes; a header that is no count the room could have set is a bad
// request, never taken for no bound.
func TestOrderWithinReservedUnits(t *testing.T) {
	t.Parallel()
	s := inmem.New()
	require.NoError(t, s.CreateProduct(t.Context(), shop.Product{ID: "tv", Name: "TV", Stock: 30}))
	orders := shop.NewHandler(s, shop.Options{})
	placed := func(key, quantity string, units ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/orders", strings.NewReader(`{"product_id":"tv","quantity":`+quantity+`}`))
		r.Header.Set("X-User-Id", "alice")
		r.Header.Set("Idempotency-Key", key)
		for _, u := range units {
			r.Header.Add(shop.UnitsHeader, u)
		}
		w := httptest.NewRecorder()
		orders.ServeHTTP(w, r)
		return w
	}
	w := placed("k1", "3", "2")
	require.Equal(t, http.StatusUnprocessableEntity, w.Code)
	require.Equal(t, "QUANTITY_OVER_LIMIT", errorCode(t, w))
	for _, bad := range [][]string{{"0"}, {"-1"}, {"two"}, {"2.0"}, {""}, {strconv.Itoa(waitroom.MaxUnitsPerOrder + 1)}, {"3", "3"}} {
		w := placed("k2", "1", bad...)
		require.Equal(t, http.StatusBadRequest, w.Code, "%q", bad)
		require.Equal(t, "BAD_REQUEST", errorCode(t, w))
	}
	p, err := s.Product(t.Context(), "tv")
	require.NoError(t, err)
	require.Equal(t, int64(30), p.Stock, "no refused order touched the stock")

	require.Equal(t, http.StatusCreated, placed("k3", "2", "2").Code)
	require.Equal(t, http.StatusCreated, placed("k4", "10", strconv.Itoa(waitroom.MaxUnitsPerOrder)).Code, "the room's largest reservation")
	require.Equal(t, http.StatusCreated, placed("k5", "10").Code, "no gate in front: only the shop's own limit")
	p, err = s.Product(t.Context(), "tv")
	require.NoError(t, err)
	require.Equal(t, int64(30-2-10-10), p.Stock)
}
