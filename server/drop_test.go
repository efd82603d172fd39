package server_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

// TestStockOverHTTP: the stock's answers as a client sees them: units_left
// while short, sold_out at the next poll, 409 SOLD_OUT for a new entry, and
// the admin API's restock bringing the queue back.
func TestStockOverHTTP(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, fixtureOptions{
		room:      waitroom.RoomConfig{Stock: 2},
		protected: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }),
	})
	tokA := f.admit("a")
	for _, u := range []string{"b", "c"} {
		require.Equal(t, http.StatusOK, f.enter(u).status)
	}
	b := f.status("b")
	require.Equal(t, "waiting", b.str("state"))
	require.NotContains(t, b.body, "units_left", "1 unit left for the 1st in line")
	c := f.status("c")
	require.Equal(t, int64(1), c.num("units_left"), "1 unit left, the 2nd in line: %v", c.body)

	require.Equal(t, http.StatusCreated, f.order("a", tokA).status)
	tokB := f.admit("b")
	require.Equal(t, http.StatusCreated, f.order("b", tokB).status)

	c = f.status("c")
	require.Equal(t, http.StatusOK, c.status)
	require.Equal(t, map[string]any{"state": "sold_out", "room": f.room}, c.body)
	d := f.enter("d")
	require.Equal(t, http.StatusConflict, d.status)
	require.Equal(t, "SOLD_OUT", d.code())
	status, page := f.page("c")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, page, `<body data-state="sold_out">`, "the page says so at once")

	show := f.admin("GET", "/admin/rooms/"+f.room+"?window=0", "")
	require.Equal(t, http.StatusOK, show.status)
	figures := show.body["figures"].(map[string]any)
	require.Equal(t, true, figures["sold_out"])
	require.Equal(t, 0.0, figures["units_left"])

	restock := f.admin("PATCH", "/admin/rooms/"+f.room, `{"stock":3}`)
	require.Equal(t, http.StatusOK, restock.status, restock.body)
	require.Equal(t, int64(3), restock.num("stock"))
	c = f.status("c")
	require.Equal(t, "waiting", c.str("state"))
	require.Equal(t, int64(1), c.num("position"))
}

// TestOneOrderPerUserOverHTTP: in a room with one order per user, the
// order goes upstream keyed by the buyer, the same for every token the
// buyer is given, and a buyer entering again is told 409 ALREADY_ORDERED,
// on the API and on the page.
func TestOneOrderPerUserOverHTTP(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	f := newFixture(t, fixtureOptions{room: waitroom.RoomConfig{OneOrderPerUser: true}, protected: proxyTo(t, up.srv.URL)})
	token := f.admit("u1")
	require.Equal(t, http.StatusCreated, f.order("u1", token).status)
	require.Equal(t, waitroom.BuyerKey(f.room, "u1"), up.headers[0].Get("Idempotency-Key"))
	require.NotEqual(t, waitroom.IdempotencyKey(f.room, token), up.headers[0].Get("Idempotency-Key"))

	again := f.enter("u1")
	require.Equal(t, http.StatusConflict, again.status)
	require.Equal(t, "ALREADY_ORDERED", again.code())
	status := f.status("u1")
	require.Equal(t, http.StatusConflict, status.status)
	require.Equal(t, "ALREADY_ORDERED", status.code())
	code, page := f.page("u1")
	require.Equal(t, http.StatusConflict, code)
	require.Contains(t, page, `<body data-state="already_ordered">`)

	// Buyer keys differ by room and by user.
	require.NotEqual(t, waitroom.BuyerKey(f.room, "u1"), waitroom.BuyerKey(f.room, "u2"))
	require.NotEqual(t, waitroom.BuyerKey(f.room, "u1"), waitroom.BuyerKey(f.room+"x", "u1"))
}

// page loads the room's waiting page as user and returns the status and
// the HTML.
func (f *fixture) page(user string) (int, string) {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.t.Context(), "GET", f.srv.URL+"/rooms/"+f.room, nil)
	require.NoError(f.t, err)
	req.Header.Set("X-User-Id", user)
	resp, err := f.srv.Client().Do(req)
	require.NoError(f.t, err)
	defer resp.Body.Close()
	html, err := io.ReadAll(resp.Body)
	require.NoError(f.t, err)
	return resp.StatusCode, string(html)
}
