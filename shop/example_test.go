package shop_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/waitroom/waitroom/shop"
	"github.com/waitroom/waitroom/shop/inmem"
)

// The shop's two handlers on one store: the order API goes behind the
// waiting room's gate, the admin API behind admin authentication. In
// production the store is postgres.Open(ctx, postgres.Config{URL: …}) and a
// rabbitmq.NewRelay(store, rabbitmq.Config{URL: …}) runs beside it.
func Example() {
	store := inmem.New()
	_ = store.CreateProduct(context.Background(), shop.Product{ID: "tv-55", Name: "TV", Stock: 1})

	mux := http.NewServeMux()
	mux.Handle("/orders", shop.NewHandler(store, shop.Options{}))  // POST, behind the gate
	mux.Handle("/orders/", shop.NewHandler(store, shop.Options{})) // GET /orders/{id}
	mux.Handle("/admin/", shop.NewAdminHandler(store, shop.Options{}))

	order := func(user, key string) int {
		r := httptest.NewRequest("POST", "/orders", strings.NewReader(`{"product_id":"tv-55"}`))
		r.Header.Set("X-User-Id", user)
		r.Header.Set("Idempotency-Key", key) // set by the gate: the entry token id
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w.Code
	}
	fmt.Println(order("alice", "token-a")) // a new order
	fmt.Println(order("alice", "token-a")) // a retry: the same order
	fmt.Println(order("bob", "token-b"))   // sold out
	// Output:
	// 201
	// 200
	// 409
}
