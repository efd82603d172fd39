package shop_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/server"
	"github.com/waitroom/waitroom/shop"
	"github.com/waitroom/waitroom/shop/inmem"
)

// The shop behind the real gate, on a store with a fake clock: what a buyer
// keeps when an order fails or the process dies mid-order.

// failingFirst fails the first n orders as a database outage would: a
// hand-written fault at the shop's store seam.
type failingFirst struct {
	shop.Store
	n atomic.Int64
}

func (f *failingFirst) PlaceOrder(ctx context.Context, req shop.PlaceOrder) (shop.Order, bool, error) {
	if f.n.Add(-1) >= 0 {
		return shop.Order{}, false, errors.New("connection refused")
	}
	return f.Store.PlaceOrder(ctx, req)
}

type gatedShop struct {
	clock *memstore.ManualClock
	rooms *memstore.Store
	shop  *inmem.Store
	url   string
}

func newGatedShop(t *testing.T, shopStore shop.Store, shopData *inmem.Store) *gatedShop {
	t.Helper()
	clock := memstore.NewManualClock(time.Unix(1_800_000_000, 0))
	rooms := memstore.New(memstore.Options{Now: clock.Now})
	_, err := rooms.CreateRoom(t.Context(), "default", waitroom.RoomConfig{Rate: 100, Lease: 30 * time.Second})
	require.NoError(t, err)
	require.NoError(t, shopData.CreateProduct(t.Context(), shop.Product{ID: "drop", Name: "Drop", Stock: 10}))
	orders := shop.NewHandler(shopStore, shop.Options{})
	srv, err := server.New(server.Config{Store: rooms, Protected: orders})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return &gatedShop{clock: clock, rooms: rooms, shop: shopData, url: ts.URL}
}

// admit queues user and runs admission ticks until it holds a token.
func (g *gatedShop) admit(t *testing.T, user string) string {
	t.Helper()
	_, err := g.rooms.Enter(t.Context(), "default", user)
	require.NoError(t, err)
	for range 20 {
		if _, err := g.rooms.Admit(t.Context(), "default"); err != nil {
			t.Fatal(err)
		}
		st, err := g.rooms.Status(t.Context(), "default", user)
		require.NoError(t, err)
		if st.State == waitroom.StateAdmitted {
			return st.Token
		}
		g.clock.Advance(100 * time.Millisecond)
	}
	t.Fatal("not admitted")
	return ""
}

func (g *gatedShop) order(t *testing.T, user, token string) (int, map[string]any) {
	t.Helper()
	return testenv.Request(t, "POST", g.url+"/orders", user, token, `{"product_id":"drop"}`)
}

func TestGatedFailedOrderReleasesTokenWithItsTTL(t *testing.T) {
	t.Parallel()
	data := inmem.New()
	faulty := &failingFirst{Store: data}
	faulty.n.Store(1)
	g := newGatedShop(t, faulty, data)
	token := g.admit(t, "alice")
	g.clock.Advance(10 * time.Second)
	before, err := g.rooms.Status(t.Context(), "default", "alice")
	require.NoError(t, err)

	status, body := g.order(t, "alice", token)
	require.Equal(t, http.StatusServiceUnavailable, status, body)
	g.clock.Advance(time.Second)

	after, err := g.rooms.Status(t.Context(), "default", "alice")
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, after.State, "the failed order gave the token back")
	require.Equal(t, before.ExpiresIn-time.Second, after.ExpiresIn, "with the TTL it had left, not a fresh one")

	status, body = g.order(t, "alice", token)
	require.Equal(t, http.StatusCreated, status, body)
	p, err := data.Product(t.Context(), "drop")
	require.NoError(t, err)
	require.Equal(t, int64(9), p.Stock)
}

func TestGatedCrashAfterClaimGivesTheSameOrderBack(t *testing.T) {
	t.Parallel()
	data := inmem.New()
	g := newGatedShop(t, data, data)
	token := g.admit(t, "bob")

	// The dying process claimed the token and its order reached the shop,
	// but it never completed the token.
	_, err := g.rooms.Claim(t.Context(), "default", "bob", token)
	require.NoError(t, err)
	first, created, err := data.PlaceOrder(t.Context(), shop.PlaceOrder{
		User: "bob", IdempotencyKey: waitroom.IdempotencyKey("default", token), ProductID: "drop", Quantity: 1,
	})
	require.NoError(t, err)
	require.True(t, created)

	// While the dead holder's lease runs, a retry is refused, not doubled.
	status, body := g.order(t, "bob", token)
	require.Equal(t, http.StatusConflict, status)
	require.Equal(t, "TOKEN_IN_USE", body["error"].(map[string]any)["code"])

	// After the lease and the settle window (the dead holder's gate might
	// still have been settling it) the retry passes the gate and gets the
	// first order.
	g.clock.Advance(31*time.Second + waitroom.SettleWindow)
	status, body = g.order(t, "bob", token)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, first.ID, body["id"])
	p, err := data.Product(t.Context(), "drop")
	require.NoError(t, err)
	require.Equal(t, int64(9), p.Stock, "one order, not two")

	// The replay spent the token.
	status, _ = g.order(t, "bob", token)
	require.Equal(t, http.StatusForbidden, status)
}
