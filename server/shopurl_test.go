package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/server"
)

const testShopURL = "https://shop.example/sale?from=queue&x=1"

// shopAnchor is how the page renders a link to testShopURL.
const shopAnchor = `href="https://shop.example/sale?from=queue&amp;x=1"`

// TestPageLinksToTheShop: with the room's shop_url, the admitted view of a
// page that cannot order itself (another order API, a proxy's forward
// auth) sends the buyer on to the shop with a link rather than telling
// them to find their way back; a page that orders itself keeps its button
// and links to the shop without scripts and after the order. Without
// shop_url the page names no shop.
func TestPageLinksToTheShop(t *testing.T) {
	t.Parallel()
	admitted := func(t *testing.T, opts pageOptions) page {
		f := newPageFixture(t, opts)
		p := f.visit("/")
		f.admitNext(1)
		p = f.get("/", p.visitorCookie())
		p.requireShows(t, http.StatusOK, "admitted")
		return p
	}
	noOrder := func(c *server.Config) { c.OrderProduct = "" }

	t.Run("elsewhere", func(t *testing.T) {
		t.Parallel()
		p := admitted(t, pageOptions{room: waitroom.RoomConfig{ShopURL: testShopURL}, server: noOrder})
		require.Contains(t, p.body, `<a class="button" id="shop-link" `+shopAnchor+`>Continue to the shop</a>`)
		require.NotContains(t, p.body, "Go back to the shop")
		require.NotContains(t, p.body, `id="order"`)
	})
	t.Run("on this page", func(t *testing.T) {
		t.Parallel()
		p := admitted(t, pageOptions{room: waitroom.RoomConfig{ShopURL: testShopURL}})
		require.Contains(t, p.body, `<button id="order" type="button" hidden>`)
		require.Contains(t, p.body, `<a `+shopAnchor+` id="shop-link-noscript">`, "without scripts the shop is the way to order")
		require.Contains(t, p.body, `<a class="button" id="shop-back" `+shopAnchor+`>Back to the shop</a>`, "after the order")
	})
	t.Run("none", func(t *testing.T) {
		t.Parallel()
		p := admitted(t, pageOptions{server: noOrder})
		require.Contains(t, p.body, "Go back to the shop to order")
		require.NotContains(t, p.body, `id="shop-link`)
		require.NotContains(t, p.body, `id="shop-back"`)
	})
}

// TestAdminShopURL: shop_url is a room setting of the admin API, shown
// with the room, changed and cleared by PATCH; anything a page must not
// link to is refused 400 BAD_REQUEST naming the field, and nothing is
// stored.
func TestAdminShopURL(t *testing.T) {
	t.Parallel()
	f := servertest.NewAdminFixture(t, servertest.FixtureOptions{})
	name := servertest.UniqueRoom(t)
	a := f.Admin("POST", "/admin/rooms", `{"name":"`+name+`","shop_url":"`+testShopURL+`"}`)
	require.Equal(t, http.StatusCreated, a.Status, a.Body)
	require.Equal(t, testShopURL, a.Body["shop_url"])
	cfg, err := f.Store.RoomConfig(t.Context(), name)
	require.NoError(t, err)
	require.Equal(t, testShopURL, cfg.ShopURL)

	for _, bad := range []string{"javascript:alert(1)", "JavaScript:alert(1)", "data:text/html,hi", "/sale", "//evil.example/",
		"ftp://shop.example/", "https://", "https://user:pw@shop.example/", "https://shop.example/\\u0000", "https://shop.example/ x",
		"https://shop.example/" + strings.Repeat("a", waitroom.MaxShopURL)} {
		a = f.Admin("PATCH", "/admin/rooms/"+name, `{"shop_url":"`+bad+`"}`)
		a.RequireError(t, http.StatusBadRequest, "BAD_REQUEST", bad)
		require.Contains(t, a.Raw, `"message":"shop_url: `, bad)
		a = f.Admin("POST", "/admin/rooms", `{"name":"`+name+`-bad","shop_url":"`+bad+`"}`)
		a.RequireError(t, http.StatusBadRequest, "BAD_REQUEST", bad)
	}
	cfg, err = f.Store.RoomConfig(t.Context(), name)
	require.NoError(t, err)
	require.Equal(t, testShopURL, cfg.ShopURL, "a refused change stored nothing")

	a = f.Admin("PATCH", "/admin/rooms/"+name, `{"shop_url":"http://127.0.0.1:8081/"}`)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	require.Equal(t, "http://127.0.0.1:8081/", a.Body["shop_url"])
	a = f.Admin("PATCH", "/admin/rooms/"+name, `{"shop_url":""}`)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	require.Equal(t, "", a.Body["shop_url"], "cleared")
	a = f.Admin("GET", "/admin/rooms/"+name+"?window=0", "")
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	require.Equal(t, "", a.Body["shop_url"])
}
