package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

// mintPass creates a pass through the operator API and returns its answer.
func (f *adminFixture) mintPass(room, body string) answer {
	f.t.Helper()
	a := f.admin("POST", "/admin/rooms/"+room+"/passes", body)
	require.Equal(f.t, http.StatusCreated, a.status, a.raw)
	return a
}

// enterWithPass enters user with a pass code through the API.
func (f *fixture) enterWithPass(user, code string) answer {
	f.t.Helper()
	return f.do("POST", "/rooms/"+f.room+"/enter", `{"pass":`+quote(code)+`}`, "X-User-Id", user)
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

func TestPasses(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	f := newAdminFixture(t, fixtureOptions{room: waitroom.RoomConfig{Rate: 1, MaxActive: 3}, protected: proxyTo(t, up.srv.URL)})
	f.enter("queued-1")

	// Minting: the link is the room's page with the code.
	p := f.mintPass(f.room, `{"uses": 2, "expires_in": "1h"}`)
	code := p.str("code")
	require.Equal(t, "/?pass="+code, p.str("link"), "the default room's page")
	require.EqualValues(t, 2, p.num("uses"))
	require.EqualValues(t, 2, p.num("left"))
	require.True(t, strings.HasPrefix(code, p.str("id")+"."))

	// Two uses: a newcomer and a queued user get tokens at once.
	a := f.enterWithPass("staff", code)
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, "admitted", a.str("state"))
	token := a.str("token")
	require.Equal(t, http.StatusCreated, f.order("staff", token).status, "the pass's token opens the gate")
	a = f.enterWithPass("queued-1", code)
	require.Equal(t, "admitted", a.str("state"), a.raw)
	a = f.enterWithPass("third", code)
	a.requireError(t, http.StatusForbidden, "PASS_USED_UP")

	// Forged, altered, truncated, another room's: PASS_INVALID.
	other := f.mintPass(f.room, `{}`).str("code") // a valid one to alter
	flip := func(s string) string {
		b := []byte(s)
		if b[len(b)-1] == 'A' {
			b[len(b)-1] = 'B'
		} else {
			b[len(b)-1] = 'A'
		}
		return string(b)
	}
	_, err := f.store.CreateRoom(t.Context(), "elsewhere", waitroom.RoomConfig{})
	require.NoError(t, err)
	elsewhere := f.mintPass("elsewhere", `{}`).str("code")
	for name, bad := range map[string]string{
		"altered MAC":    flip(other),
		"unsigned id":    strings.Split(other, ".")[0],
		"made-up":        waitroom.NewToken() + "." + strings.Split(other, ".")[1],
		"another room's": elsewhere,
		"garbage":        "not-a-pass",
		"huge":           strings.Repeat("A", 5000),
	} {
		a := f.enterWithPass("forger", bad)
		require.Equal(t, http.StatusForbidden, a.status, name)
		require.Equal(t, "PASS_INVALID", a.code(), name)
	}
	require.Equal(t, http.StatusNotFound, f.status("forger").status, "a refused pass takes no place")

	// Listing and revoking.
	list := f.admin("GET", "/admin/rooms/"+f.room+"/passes", "")
	require.Equal(t, http.StatusOK, list.status)
	passes := list.body["passes"].([]any)
	require.Len(t, passes, 2)
	first := passes[0].(map[string]any)
	require.EqualValues(t, 0, first["left"])
	require.Equal(t, code, first["code"])
	otherID := strings.Split(other, ".")[0]
	r := f.admin("DELETE", "/admin/rooms/"+f.room+"/passes/"+otherID, "")
	require.Equal(t, http.StatusOK, r.status, r.raw)
	require.Equal(t, true, r.body["revoked"])
	a = f.enterWithPass("late", other)
	require.Equal(t, "PASS_INVALID", a.code(), "revoked")
	require.Equal(t, "PASS_INVALID", f.admin("DELETE", "/admin/rooms/"+f.room+"/passes/"+waitroom.NewToken(), "").code())
	require.Equal(t, "PASS_INVALID", f.admin("DELETE", "/admin/rooms/"+f.room+"/passes/short", "").code())

	// Counted against max_active (3: staff's is spent; queued-1 holds one).
	full := f.mintPass(f.room, `{"uses": 5}`).str("code")
	require.Equal(t, "admitted", f.enterWithPass("a", full).str("state"))
	require.Equal(t, "admitted", f.enterWithPass("b", full).str("state"))
	a = f.enterWithPass("c", full)
	a.requireError(t, http.StatusTooManyRequests, "NO_FREE_SLOT", a.raw)
	require.NotEmpty(t, a.header.Get("Retry-After"))

	// Every enter with a pass is counted; forged ones without a room.
	m := scrape(t, f.srv.URL)
	passEntries := func(room, result string) float64 {
		return m.value("waitroom_pass_entries_total", "room", room, "result", result)
	}
	require.EqualValues(t, 4, passEntries(f.room, "admitted"), "staff, queued-1, a, b")
	require.EqualValues(t, 1, passEntries(f.room, "pass_used_up"))
	require.EqualValues(t, 1, passEntries(f.room, "no_free_slot"))
	require.EqualValues(t, 1, passEntries(f.room, "pass_invalid"), "the revoked one: a signed pass the store refused")
	require.EqualValues(t, 6, passEntries("", "pass_invalid"), "the forged ones")

	// Bad requests and strangers.
	for _, body := range []string{`{"uses": 0}`, `{"uses": 100001}`, `{"expires_in": "soon"}`, `{"expires_in": "30s"}`, `{"expires_in": "2400h"}`, `{"uses": "2"}`, `{"extra": 1}`} {
		a := f.admin("POST", "/admin/rooms/"+f.room+"/passes", body)
		require.Equal(t, http.StatusBadRequest, a.status, body)
	}
	require.Equal(t, http.StatusNotFound, f.admin("POST", "/admin/rooms/no-such-room/passes", `{}`).status)
	require.Equal(t, http.StatusUnauthorized, f.do("POST", "/admin/rooms/"+f.room+"/passes", `{}`).status)
	require.Equal(t, http.StatusUnauthorized, f.do("GET", "/admin/rooms/"+f.room+"/passes", "").status)
}

func TestInviteOnly(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, fixtureOptions{})
	f.enter("before")
	require.Equal(t, http.StatusOK, f.admin("PATCH", "/admin/rooms/"+f.room, `{"invite_only": true}`).status)

	a := f.enter("stranger")
	a.requireError(t, http.StatusForbidden, "INVITE_ONLY")
	require.Equal(t, "waiting", f.enter("before").str("state"), "queued before: keeps the place")

	code := f.mintPass(f.room, `{}`).str("code")
	a = f.enterWithPass("guest", code)
	require.Equal(t, "admitted", a.str("state"), a.raw)
	require.Equal(t, a.str("token"), f.enter("guest").str("token"), "a plain enter gives the guest its token back")

	// The pass link: the page carries the code into its join.
	req, err := http.NewRequestWithContext(t.Context(), "GET", f.srv.URL+"/?pass="+code, nil)
	require.NoError(t, err)
	req.Header.Set("X-User-Id", "browser-guest")
	page, err := f.srv.Client().Do(req)
	require.NoError(t, err)
	defer page.Body.Close()
	body := new(strings.Builder)
	_, err = io.Copy(body, page.Body)
	require.NoError(t, err)
	require.Contains(t, body.String(), `name="pass" value="`+code+`"`)
}
