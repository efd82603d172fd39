package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/adminapi"
	"github.com/waitroom/waitroom/adminclient"
)

// TestDrawVerify: a server whose default room opens a moment after start;
// early arrivals are told "scheduled", the opening draws their places, and
// 'waitroom draw verify' reproduces every place from the revealed seed;
// a tampered export is caught, and so are bad arguments.
func TestDrawVerify(t *testing.T) {
	t.Parallel()
	// An hour ahead, brought forward once all have entered: however slow
	// the machine, the early arrivals come before the opening.
	opens := time.Now().Add(time.Hour)
	m := startMain(t, []string{"--admin-token", testAdminToken, "--opens-at", opens.Format(time.RFC3339Nano), "--rate", "1"}, envOf())
	base := "http://" + m.Addr()
	env := envOf("WAITROOM_ADMIN_TOKEN", testAdminToken, "WAITROOM_ADMIN_URL", base)

	const early = 12
	for i := range early {
		body := call(t, "POST", base+"/queue/enter", fmt.Sprintf("early-%02d", i), "")
		require.Equal(t, "scheduled", body["state"], body)
	}
	code, _, errOut := runCmd(t, env, "draw", "verify", "default")
	require.Equal(t, exitFailure, code)
	require.Contains(t, errOut, "DRAW_PENDING")
	openSoon(t, env, "default")

	eventually(t, 10*time.Second, "early-00 placed by the draw", func() bool {
		return call(t, "GET", base+"/queue/position", "early-00", "")["state"] == "waiting"
	})
	code, out, errOut := runCmd(t, env, "draw", "verify", "default")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, fmt.Sprintf("all %d places reproduced from the seed", early))

	// The commitment saved before the opening is checked too.
	record := call(t, "GET", base+"/rooms/default/draw", "", "")
	commitment := record["commitment"].(string)
	code, _, errOut = runCmd(t, env, "draw", "verify", "default", "--commitment", commitment)
	require.Equal(t, exitOK, code, errOut)
	code, _, errOut = runCmd(t, env, "draw", "verify", "default", "--commitment", strings.Repeat("0", 64))
	require.Equal(t, exitFailure, code)
	require.Contains(t, errOut, "is not the one saved before the opening")

	// The public file: draw values and places, no user ids.
	code, out, errOut = runCmd(t, env, "draw", "export", "default")
	require.Equal(t, exitOK, code, errOut)
	require.NotContains(t, out, "early-0")
	var public adminclient.DrawFile
	require.NoError(t, json.Unmarshal([]byte(out), &public))
	require.Len(t, public.Entrants, early)
	dir := t.TempDir()
	save := func(name string, f adminclient.DrawFile) string {
		raw, err := json.Marshal(f)
		require.NoError(t, err)
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, raw, 0o600))
		return path
	}
	file := save("draw.json", public)

	// A user checks their own place: their id and the seed give their draw
	// value, the value their line, and it is the place the queue gave them.
	seed, err := hex.DecodeString(public.Draw.Seed)
	require.NoError(t, err)
	mine := hex.EncodeToString(waitroom.DrawValue(seed, "early-05"))
	line := slices.IndexFunc(public.Entrants, func(e waitroom.DrawnEntrant) bool { return e.Value == mine })
	require.GreaterOrEqual(t, line, 0)
	position := int64(call(t, "GET", base+"/queue/position", "early-05", "")["position"].(float64))
	require.Equal(t, position, public.Entrants[line].Place)
	code, out, errOut = runCmd(t, envOf(), "draw", "verify", "--file", file, "--commitment", commitment, "--user", "early-05")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, fmt.Sprintf("early-05: draw value %s, place %d of %d", mine, position, early))
	code, _, errOut = runCmd(t, envOf(), "draw", "verify", "--file", file, "--user", "never-came")
	require.Equal(t, exitFailure, code)
	require.Contains(t, errOut, "never-came")

	// Each tampering is caught, offline.
	tampered := func(name string, edit func(f *adminclient.DrawFile)) string {
		f := public
		f.Entrants = slices.Clone(public.Entrants)
		edit(&f)
		code, _, errOut := runCmd(t, envOf(), "draw", "verify", "--file", save(name, f))
		require.Equal(t, exitFailure, code, name)
		return errOut
	}
	// Removed, the others renumbered: the count and the digest differ.
	require.Contains(t, tampered("removed.json", func(f *adminclient.DrawFile) {
		f.Entrants = slices.Delete(f.Entrants, 0, 1)
		for i := range f.Entrants {
			f.Entrants[i].Place = int64(i + 1)
		}
	}), fmt.Sprintf("the list has %d entrants, the draw's record %d", early-1, early))
	// Removed with the record's count edited too: the digest differs.
	require.Contains(t, tampered("removed-count.json", func(f *adminclient.DrawFile) {
		f.Entrants = f.Entrants[:early-1]
		n := int64(early - 1)
		f.Draw.Entrants = &n
	}), "entrants were changed after the draw")
	// Added at the end.
	require.Contains(t, tampered("added.json", func(f *adminclient.DrawFile) {
		f.Entrants = append(f.Entrants, waitroom.DrawnEntrant{Value: strings.Repeat("f", 64), Place: early + 1})
	}), fmt.Sprintf("the list has %d entrants, the draw's record %d", early+1, early))
	// Renumbered: two places swapped.
	require.Contains(t, tampered("swapped.json", func(f *adminclient.DrawFile) {
		f.Entrants[0].Place, f.Entrants[1].Place = f.Entrants[1].Place, f.Entrants[0].Place
	}), "entrants were changed after the draw")

	// The operator's export (with ids) still verifies; two places swapped
	// in it are caught and named by user.
	c, err := newAdminClient(base, testAdminToken, envOf())
	require.NoError(t, err)
	raw, err := c.Call(t.Context(), "GET", "/admin/rooms/default/entrants", nil)
	require.NoError(t, err)
	var export adminapi.Entrants
	require.NoError(t, json.Unmarshal(raw, &export))
	require.Len(t, export.Entrants, early)
	export.Entrants[0].Place, export.Entrants[1].Place = export.Entrants[1].Place, export.Entrants[0].Place
	raw, err = json.Marshal(export)
	require.NoError(t, err)
	operator := filepath.Join(dir, "operator.json")
	require.NoError(t, os.WriteFile(operator, raw, 0o600))
	code, _, errOut = runCmd(t, envOf(), "draw", "verify", "--file", operator)
	require.Equal(t, exitFailure, code)
	require.Contains(t, errOut, "entrants were changed after the draw")

	for _, bad := range [][]string{
		{"draw", "verify", "--file", file, "--commitment", "abc"},
		{"draw", "verify", "--file", file, "--user", "bad id"},
		{"draw", "export"},
		{"draw", "export", "default", "--file", file},
	} {
		code, _, _ = runCmd(t, env, bad...)
		require.Equal(t, exitUsage, code, "%v", bad)
	}
	code, _, errOut = runCmd(t, env, "draw", "verify")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "a room is needed")
	code, _, _ = runCmd(t, env, "draw", "shuffle")
	require.Equal(t, exitUsage, code)
}

func TestParseServeDropSettings(t *testing.T) {
	t.Parallel()
	c, err := parseServe([]string{"--opens-at", "2026-03-01T10:00:00+09:00", "--prequeue-order", "fifo",
		"--closes-at", "2026-03-01T12:00:00+09:00", "--stock", "500", "--one-order-per-user", "--shop-url", "https://shop.example/sale"}, envOf())
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 3, 1, 1, 0, 0, 0, time.UTC), c.Room.OpensAt.UTC())
	require.Equal(t, time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC), c.Room.ClosesAt.UTC())
	require.Equal(t, "fifo", string(c.Room.PrequeueOrder))
	require.Equal(t, 500, c.Room.Stock)
	require.True(t, c.Room.OneOrderPerUser)
	require.Equal(t, "https://shop.example/sale", c.Room.ShopURL)
	env, err := parseServe(nil, envOf("WAITROOM_SHOP_URL", "http://127.0.0.1:8081/"))
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:8081/", env.Room.ShopURL, "from the environment")
	for _, bad := range [][]string{
		{"--opens-at", "10am"},
		{"--prequeue-order", "lottery"},
		{"--opens-at", "2026-03-01T10:00:00Z", "--closes-at", "2026-03-01T09:00:00Z"},
		{"--stock", "-1"},
		{"--one-order-per-user=maybe"},
		{"--shop-url", "javascript:alert(1)"},
		{"--shop-url", "/sale"},
	} {
		_, err := parseServe(bad, envOf())
		require.Error(t, err, "%v", bad)
	}
}

// openSoon brings room's opening forward to a moment from now, again if
// the machine stalled long enough for that moment to pass on the way
// (OPENS_AT_PAST).
func openSoon(t *testing.T, env func(string) string, room string) {
	t.Helper()
	for {
		at := time.Now().Add(500 * time.Millisecond).Format(time.RFC3339Nano)
		code, _, errOut := runCmd(t, env, "admin", "rooms", "set", room, "--opens-at", at)
		if code == exitOK {
			return
		}
		require.Contains(t, errOut, "OPENS_AT_PAST")
	}
}
