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
	req, err := http.NewRequestWithContext(t.Context(), "GET", f.srv.URL+"/rooms/"+f.room, nil)
	require.NoError(t, err)
	req.Header.Set("X-User-Id", "c")
	resp, err := f.srv.Client().Do(req)
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(page), `<body data-state="sold_out">`, "the page says so at once")

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
