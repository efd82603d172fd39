package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/server"
	"github.com/waitroom/waitroom/shop"
	"github.com/waitroom/waitroom/shop/inmem"
)

// unitsRoom is a room of one store behind a server whose gate guards
// protected: the store in process on a fake clock, or on the test Redis
// (its clock: real time).
type unitsRoom struct {
	t       *testing.T
	store   waitroom.Store
	advance func(time.Duration)
	room    string
	url     string
}

// onEachStore runs fn on a room with cfg, on memstore and on redisstore,
// behind a gate that guards what setup makes for it.
func onEachStore[T any](t *testing.T, cfg waitroom.RoomConfig, setup func(t *testing.T) (http.Handler, T), fn func(t *testing.T, r *unitsRoom, v T)) {
	roomOnEachStore(t, cfg, func(t *testing.T, r *unitsRoom) {
		protected, v := setup(t)
		srv := httptest.NewServer(servertest.MustServer(t, server.Config{Store: r.store, DefaultRoom: r.room, Protected: protected}))
		t.Cleanup(srv.Close)
		r.url = srv.URL
		fn(t, r, v)
	})
}

// roomOnEachStore runs fn on a room with cfg, on memstore and on
// redisstore, with no server yet: fn makes the one it needs.
func roomOnEachStore(t *testing.T, cfg waitroom.RoomConfig, fn func(t *testing.T, r *unitsRoom)) {
	for _, name := range []string{"memstore", "redisstore"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := &unitsRoom{t: t, room: servertest.UniqueRoom(t)}
			if name == "memstore" {
				clock := memstore.NewManualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
				r.store, r.advance = memstore.New(memstore.Options{Now: clock.Now}), clock.Advance
			} else {
				client, err := redisstore.Open(testenv.RedisURL())
				require.NoError(t, err)
				prefix := testenv.Unique("wrtest-units-")
				t.Cleanup(func() {
					require.NoError(t, redisstore.DeletePrefix(context.Background(), client, prefix))
					_ = client.Close()
				})
				r.store, r.advance = redisstore.New(client, redisstore.Options{Prefix: prefix}), func(d time.Duration) { time.Sleep(d) }
			}
			_, err := r.store.CreateRoom(t.Context(), r.room, cfg)
			require.NoError(t, err)
			fn(t, r)
		})
	}
}

// admit enters user and ticks the admitter until it holds a token, within
// a generous bound.
func (r *unitsRoom) admit(user string) string {
	r.t.Helper()
	_, err := r.store.Enter(r.t.Context(), r.room, user)
	require.NoError(r.t, err)
	for range 200 {
		got, err := r.store.Admit(r.t.Context(), r.room)
		require.NoError(r.t, err)
		for _, a := range got {
			if a.User == user {
				return a.Token
			}
		}
		r.advance(20 * time.Millisecond)
	}
	r.t.Fatalf("%s was not admitted", user)
	return ""
}

// order sends user's order with token and body; headers are name, value
// pairs the client adds.
func (r *unitsRoom) order(user, token, body string, headers ...string) servertest.Answer {
	r.t.Helper()
	req, err := http.NewRequestWithContext(r.t.Context(), "POST", r.url+"/orders", strings.NewReader(body))
	require.NoError(r.t, err)
	req.Header.Set("X-User-Id", user)
	req.Header.Set("X-Entry-Token", token)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return servertest.Send(r.t, http.DefaultClient, req)
}

// expiresIn is what user's token has left, as its holder is told.
func (r *unitsRoom) expiresIn(user string) time.Duration {
	r.t.Helper()
	st, err := r.store.Status(r.t.Context(), r.room, user)
	require.NoError(r.t, err)
	require.Equal(r.t, waitroom.StateAdmitted, st.State, "%s still holds its token", user)
	return st.ExpiresIn
}

// An order for more units than the token reserved is refused by the
// built-in shop with 422 QUANTITY_OVER_LIMIT before its stock is touched,
// whatever Waitroom-Units the client sends; the gate releases the token
// (never completes it), which keeps the TTL it had; a bad quantity is 400
// and releases it too; an order within the reservation completes and the
// room counts the reservation sold.
func TestBuiltInShopSellsWhatTheTokenReserved(t *testing.T) {
	t.Parallel()
	withShop := func(t *testing.T) (http.Handler, *inmem.Store) {
		d := inmem.New()
		require.NoError(t, d.CreateProduct(t.Context(), shop.Product{ID: "drop", Name: "Drop", Stock: 20}))
		return shop.NewHandler(d, shop.Options{}), d
	}
	onEachStore(t, waitroom.RoomConfig{Rate: 1000, Stock: 20, UnitsPerOrder: 3}, withShop, builtInShopOrders)
}

func builtInShopOrders(t *testing.T, r *unitsRoom, d *inmem.Store) {
	t.Helper()
	ctx := t.Context()
	token := r.admit("alice")
	r.advance(1100 * time.Millisecond)
	before := r.expiresIn("alice")

	refused := map[string]struct {
		status int
		code   string
	}{
		`{"product_id":"drop","quantity":4}`:   {http.StatusUnprocessableEntity, "QUANTITY_OVER_LIMIT"},
		`{"product_id":"drop","quantity":0}`:   {http.StatusBadRequest, "BAD_REQUEST"},
		`{"product_id":"drop","quantity":-3}`:  {http.StatusBadRequest, "BAD_REQUEST"},
		`{"product_id":"drop","quantity":"3"}`: {http.StatusBadRequest, "BAD_REQUEST"},
		`{"product_id":"drop","quantity":2.5}`: {http.StatusBadRequest, "BAD_REQUEST"},
		`{"product_id":"drop","quantity":11}`:  {http.StatusBadRequest, "BAD_REQUEST"},
	}
	released := int64(0)
	for body, want := range refused {
		// The client's own Waitroom-Units (any spelling) counts for nothing.
		a := r.order("alice", token, body, "Waitroom-Units", "10", "Waitroom_Units", "10")
		a.RequireError(t, want.status, want.code, body)
		released++
		st := testenv.Stats(t, r.store, r.room)
		require.Equal(t, released, st.Released, "a refused order releases the token: %s", body)
		require.Zero(t, st.Completed, body)
	}
	a := r.order("alice", token, `{"product_id":"drop","quantity":4}`)
	require.Equal(t, "quantity 4 is more than the 3 units your turn reserved", a.Body["error"].(map[string]any)["message"])
	after := r.expiresIn("alice")
	require.LessOrEqual(t, after, before, "the TTL ran on; the releases gave no fresh one")
	p, err := d.Product(ctx, "drop")
	require.NoError(t, err)
	require.Equal(t, int64(20), p.Stock, "no refused order reached the stock")

	// Within the reservation: sold, and the room counts the 3 units.
	a = r.order("alice", token, `{"product_id":"drop","quantity":3}`)
	require.Equal(t, http.StatusCreated, a.Status, a.Raw)
	st := testenv.Stats(t, r.store, r.room)
	require.Equal(t, int64(1), st.Completed)
	require.Equal(t, int64(3), st.Sold)

	// No quantity is one unit, within the reservation; the room counts
	// the whole reservation sold.
	token = r.admit("bob")
	a = r.order("bob", token, `{"product_id":"drop"}`)
	require.Equal(t, http.StatusCreated, a.Status, a.Raw)
	require.EqualValues(t, 1, a.Num("quantity"))
	st = testenv.Stats(t, r.store, r.room)
	require.Equal(t, int64(6), st.Sold)
	p, err = d.Product(ctx, "drop")
	require.NoError(t, err)
	require.Equal(t, int64(16), p.Stock)

	// 14 units unsold: the 4th in line is not short of its 3 (12), the
	// 5th is (15), and its answer says so.
	for i := 1; i <= 5; i++ {
		req, err := http.NewRequestWithContext(ctx, "POST", r.url+"/rooms/"+r.room+"/enter", nil)
		require.NoError(t, err)
		req.Header.Set("X-User-Id", fmt.Sprintf("w%d", i))
		a := servertest.Send(t, http.DefaultClient, req)
		require.Equal(t, http.StatusOK, a.Status, a.Raw)
		require.EqualValues(t, i, a.Num("position"))
		left, told := a.Body["units_left"]
		require.Equal(t, i == 5, told, "w%d: %s", i, a.Raw)
		if told {
			require.Equal(t, 14.0, left)
		}
	}
}

// An --upstream learns the units the token reserved in Waitroom-Units,
// exactly once and in one spelling whatever the client sent; its refusal
// (422) releases the token, its 201 completes it and sells the units.
func TestUpstreamIsToldTheUnitsReserved(t *testing.T) {
	t.Parallel()
	withUpstream := func(t *testing.T) (http.Handler, *servertest.Upstream) {
		up := servertest.NewUpstream(t)
		return servertest.ProxyTo(t, up.Srv.URL), up
	}
	onEachStore(t, waitroom.RoomConfig{Rate: 1000, Stock: 50, UnitsPerOrder: 5}, withUpstream, func(t *testing.T, r *unitsRoom, up *servertest.Upstream) {
		token := r.admit("carol")
		r.advance(1100 * time.Millisecond)
		before := r.expiresIn("carol")

		// The upstream refuses (as the README asks of it): released.
		up.Reply.Store(http.StatusUnprocessableEntity)
		a := r.order("carol", token, `{"sku":"drop","qty":6}`,
			"Waitroom-Units", "1000", "Waitroom_Units", "1000", "Connection", "Waitroom-Units", "Waitroom-Hold", "forged", "Waitroom_Hold", "forged")
		require.Equal(t, http.StatusUnprocessableEntity, a.Status)
		st := testenv.Stats(t, r.store, r.room)
		require.Equal(t, int64(1), st.Released)
		require.Zero(t, st.Completed)
		require.LessOrEqual(t, r.expiresIn("carol"), before, "the TTL ran on")

		up.Reply.Store(http.StatusCreated)
		a = r.order("carol", token, `{"sku":"drop","qty":5}`)
		require.Equal(t, http.StatusCreated, a.Status)
		st = testenv.Stats(t, r.store, r.room)
		require.Equal(t, int64(1), st.Completed)
		require.Equal(t, int64(5), st.Sold)

		up.Mu.Lock()
		defer up.Mu.Unlock()
		require.Len(t, up.Headers, 2)
		for _, h := range up.Headers {
			var spellings []string
			for name := range h {
				if strings.EqualFold(strings.ReplaceAll(name, "_", "-"), waitroom.UnitsHeader) {
					spellings = append(spellings, name)
				}
			}
			require.Equal(t, []string{"Waitroom-Units"}, spellings, "one spelling, the gate's")
			require.Equal(t, []string{"5"}, h.Values("Waitroom-Units"))
			for name := range h {
				require.NotEqual(t, "WAITROOM-HOLD", strings.ToUpper(strings.ReplaceAll(name, "_", "-")), "a client's hold id never reaches the upstream")
			}
		}
	})
}
