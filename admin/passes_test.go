package admin_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/servertest"
)

func TestPasses(t *testing.T) {
	t.Parallel()
	up := servertest.NewUpstream(t)
	f := servertest.NewAdminFixture(t, servertest.FixtureOptions{Room: waitroom.RoomConfig{Rate: 1, MaxActive: 3}, Protected: servertest.ProxyTo(t, up.Srv.URL)})
	f.Enter("queued-1")

	// Minting: the link is the room's page with the code.
	p := f.MintPass(f.Room, `{"uses": 2, "expires_in": "1h"}`)
	code := p.Str("code")
	require.Equal(t, "/?pass="+code, p.Str("link"), "the default room's page")
	require.EqualValues(t, 2, p.Num("uses"))
	require.EqualValues(t, 2, p.Num("left"))
	require.True(t, strings.HasPrefix(code, p.Str("id")+"."))

	// Two uses: a newcomer and a queued user get tokens at once.
	a := f.EnterWithPass("staff", code)
	require.Equal(t, http.StatusOK, a.Status, a.Raw)
	require.Equal(t, "admitted", a.Str("state"))
	token := a.Str("token")
	require.Equal(t, http.StatusCreated, f.Order("staff", token).Status, "the pass's token opens the gate")
	a = f.EnterWithPass("queued-1", code)
	require.Equal(t, "admitted", a.Str("state"), a.Raw)
	a = f.EnterWithPass("third", code)
	a.RequireError(t, http.StatusForbidden, "PASS_USED_UP")

	// Forged, altered, truncated, another room's: PASS_INVALID.
	other := f.MintPass(f.Room, `{}`).Str("code") // a valid one to alter
	flip := func(s string) string {
		b := []byte(s)
		if b[len(b)-1] == 'A' {
			b[len(b)-1] = 'B'
		} else {
			b[len(b)-1] = 'A'
		}
		return string(b)
	}
	_, err := f.Store.CreateRoom(t.Context(), "elsewhere", waitroom.RoomConfig{})
	require.NoError(t, err)
	elsewhere := f.MintPass("elsewhere", `{}`).Str("code")
	for name, bad := range map[string]string{
		"altered MAC":    flip(other),
		"unsigned id":    strings.Split(other, ".")[0],
		"made-up":        waitroom.NewToken() + "." + strings.Split(other, ".")[1],
		"another room's": elsewhere,
		"garbage":        "not-a-pass",
		"huge":           strings.Repeat("A", 5000),
	} {
		a := f.EnterWithPass("forger", bad)
		require.Equal(t, http.StatusForbidden, a.Status, name)
		require.Equal(t, "PASS_INVALID", a.Code(), name)
	}
	require.Equal(t, http.StatusNotFound, f.Status("forger").Status, "a refused pass takes no place")

	// Listing and revoking.
	list := f.Admin("GET", "/admin/rooms/"+f.Room+"/passes", "")
	require.Equal(t, http.StatusOK, list.Status)
	passes := list.Body["passes"].([]any)
	require.Len(t, passes, 2)
	first := passes[0].(map[string]any)
	require.EqualValues(t, 0, first["left"])
	require.Equal(t, code, first["code"])
	otherID := strings.Split(other, ".")[0]
	r := f.Admin("DELETE", "/admin/rooms/"+f.Room+"/passes/"+otherID, "")
	require.Equal(t, http.StatusOK, r.Status, r.Raw)
	require.Equal(t, true, r.Body["revoked"])
	a = f.EnterWithPass("late", other)
	require.Equal(t, "PASS_INVALID", a.Code(), "revoked")
	require.Equal(t, "PASS_INVALID", f.Admin("DELETE", "/admin/rooms/"+f.Room+"/passes/"+waitroom.NewToken(), "").Code())
	require.Equal(t, "PASS_INVALID", f.Admin("DELETE", "/admin/rooms/"+f.Room+"/passes/short", "").Code())

	// Counted against max_active (3: staff's is spent; queued-1 holds one).
	full := f.MintPass(f.Room, `{"uses": 5}`).Str("code")
	require.Equal(t, "admitted", f.EnterWithPass("a", full).Str("state"))
	require.Equal(t, "admitted", f.EnterWithPass("b", full).Str("state"))
	a = f.EnterWithPass("c", full)
	a.RequireError(t, http.StatusTooManyRequests, "NO_FREE_SLOT", a.Raw)
	require.NotEmpty(t, a.Header.Get("Retry-After"))

	// Every enter with a pass is counted; forged ones without a room.
	m := servertest.Scrape(t, f.Srv.URL)
	passEntries := func(room, result string) float64 {
		return m.Value("waitroom_pass_entries_total", "room", room, "result", result)
	}
	require.EqualValues(t, 4, passEntries(f.Room, "admitted"), "staff, queued-1, a, b")
	require.EqualValues(t, 1, passEntries(f.Room, "pass_used_up"))
	require.EqualValues(t, 1, passEntries(f.Room, "no_free_slot"))
	require.EqualValues(t, 1, passEntries(f.Room, "pass_invalid"), "the revoked one: a signed pass the store refused")
	require.EqualValues(t, 6, passEntries("", "pass_invalid"), "the forged ones")

	// Bad requests and strangers.
	for _, body := range []string{`{"uses": 0}`, `{"uses": 100001}`, `{"expires_in": "soon"}`, `{"expires_in": "30s"}`, `{"expires_in": "2400h"}`, `{"uses": "2"}`, `{"extra": 1}`} {
		a := f.Admin("POST", "/admin/rooms/"+f.Room+"/passes", body)
		require.Equal(t, http.StatusBadRequest, a.Status, body)
	}
	require.Equal(t, http.StatusNotFound, f.Admin("POST", "/admin/rooms/no-such-room/passes", `{}`).Status)
	require.Equal(t, http.StatusUnauthorized, f.Do("POST", "/admin/rooms/"+f.Room+"/passes", `{}`).Status)
	require.Equal(t, http.StatusUnauthorized, f.Do("GET", "/admin/rooms/"+f.Room+"/passes", "").Status)
}

func TestInviteOnly(t *testing.T) {
	t.Parallel()
	f := servertest.NewAdminFixture(t, servertest.FixtureOptions{})
	f.Enter("before")
	require.Equal(t, http.StatusOK, f.Admin("PATCH", "/admin/rooms/"+f.Room, `{"invite_only": true}`).Status)

	a := f.Enter("stranger")
	a.RequireError(t, http.StatusForbidden, "INVITE_ONLY")
	require.Equal(t, "waiting", f.Enter("before").Str("state"), "queued before: keeps the place")

	code := f.MintPass(f.Room, `{}`).Str("code")
	a = f.EnterWithPass("guest", code)
	require.Equal(t, "admitted", a.Str("state"), a.Raw)
	require.Equal(t, a.Str("token"), f.Enter("guest").Str("token"), "a plain enter gives the guest its token back")

	// The pass link: the page carries the code into its join.
	req, err := http.NewRequestWithContext(t.Context(), "GET", f.Srv.URL+"/?pass="+code, nil)
	require.NoError(t, err)
	req.Header.Set("X-User-Id", "browser-guest")
	page, err := f.Srv.Client().Do(req)
	require.NoError(t, err)
	defer page.Body.Close()
	body := new(strings.Builder)
	_, err = io.Copy(body, page.Body)
	require.NoError(t, err)
	require.Contains(t, body.String(), `name="pass" value="`+code+`"`)
}
