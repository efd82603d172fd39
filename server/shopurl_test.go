package server_test

import (
	"encoding/json"
	"html/template"
	"net/http"
	"regexp"
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

// TestPageNamesShopAndProduct: with the room's shop_name and
// product_name, every view says who sells what (the eyebrow, a product
// line, the tab's title and the script's title), in any language the same
// name, escaped like any text the page did not write; without them the
// page is the waiting room's own.
func TestPageNamesShopAndProduct(t *testing.T) {
	t.Parallel()
	const shopName, productName = `Kim's <Shop> & Co`, `한정판 "스니커즈" <b>bold</b>`
	shopHTML, productHTML := template.HTMLEscapeString(shopName), template.HTMLEscapeString(productName)
	f := newPageFixture(t, pageOptions{room: waitroom.RoomConfig{ShopName: shopName, ProductName: productName}})
	views := map[string]page{"join": f.get("/"), "join, 한국어": f.get("/?lang=ko")}
	p := f.visit("/")
	views["waiting"] = p
	f.admitNext(1)
	views["admitted"] = f.get("/", p.visitorCookie())
	for name, v := range views {
		require.Equal(t, http.StatusOK, v.status, name)
		require.Contains(t, v.body, `<p class="eyebrow">`+shopHTML+`</p>`, name)
		require.Contains(t, v.body, `<p class="product">`+productHTML+`</p>`, name)
		require.Regexp(t, `<title>[^<]+ · `+regexp.QuoteMeta(shopHTML)+`</title>`, v.body, name)
		require.NotContains(t, v.body, "<b>bold", name)
		require.NotContains(t, v.body, "<Shop>", name)
		var boot map[string]any
		require.NoError(t, json.Unmarshal([]byte(text(t, v.body, "boot")), &boot), name)
		require.Equal(t, shopName, boot["shop_name"], name)
	}
	require.Contains(t, views["waiting"].body, "<title>In line · 1 · "+shopHTML+"</title>")
	require.Contains(t, views["join, 한국어"].body, `<html lang="ko">`)

	plain := newPageFixture(t, pageOptions{}).get("/")
	require.Contains(t, plain.body, `<p class="eyebrow">Waiting room</p>`)
	require.NotContains(t, plain.body, `class="product"`)
	require.Contains(t, plain.body, "<title>Waiting room</title>")
	require.NotContains(t, plain.body, `"shop_name"`)
}

// TestAdminShopAndProductNames: shop_name and product_name are room
// settings of the admin API, shown with the room, changed and cleared by
// PATCH; a name that is not one line of text is refused 400 BAD_REQUEST
// naming the field, and nothing is stored.
func TestAdminShopAndProductNames(t *testing.T) {
	t.Parallel()
	f := servertest.NewAdminFixture(t, servertest.FixtureOptions{})
	name := servertest.UniqueRoom(t)
	a := f.Admin("POST", "/admin/rooms", `{"name":"`+name+`","shop_name":"Kim's Shop","product_name":"한정판"}`)
	require.Equal(t, http.StatusCreated, a.Status, a.Body)
	require.Equal(t, "Kim's Shop", a.Body["shop_name"])
	require.Equal(t, "한정판", a.Body["product_name"])

	for _, field := range []string{"shop_name", "product_name"} {
		for _, bad := range []string{`two\nlines`, `\u001b[2J`, `\u202eevil`, ` padded`, strings.Repeat("가", waitroom.MaxNameBytes/3+1)} {
			a = f.Admin("PATCH", "/admin/rooms/"+name, `{"`+field+`":"`+bad+`"}`)
			a.RequireError(t, http.StatusBadRequest, "BAD_REQUEST", bad)
			require.Contains(t, a.Raw, `"message":"`+field+`: `, bad)
			a = f.Admin("POST", "/admin/rooms", `{"name":"`+name+`-bad","`+field+`":"`+bad+`"}`)
			a.RequireError(t, http.StatusBadRequest, "BAD_REQUEST", bad)
		}
		a = f.Admin("PATCH", "/admin/rooms/"+name, `{"`+field+`":7}`)
		a.RequireError(t, http.StatusBadRequest, "BAD_REQUEST", "a number is no name")
	}
	cfg, err := f.Store.RoomConfig(t.Context(), name)
	require.NoError(t, err)
	require.Equal(t, [2]string{"Kim's Shop", "한정판"}, [2]string{cfg.ShopName, cfg.ProductName}, "a refused change stored nothing")
	_, err = f.Store.RoomConfig(t.Context(), name+"-bad")
	require.ErrorIs(t, err, waitroom.ErrRoomNotFound)

	a = f.Admin("PATCH", "/admin/rooms/"+name, `{"shop_name":"","product_name":"Drop №2"}`)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	require.Equal(t, "", a.Body["shop_name"], "cleared")
	require.Equal(t, "Drop №2", a.Body["product_name"])
	a = f.Admin("GET", "/admin/rooms/"+name+"?window=0", "")
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	require.Equal(t, "Drop №2", a.Body["product_name"])
}
