package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/server"
)

// TestDrawVerify: a server whose default room opens a moment after start;
// early arrivals are told "scheduled", the opening draws their places, and
// 'waitroom draw verify' reproduces every place from the revealed seed;
// a tampered export is caught, and so are bad arguments.
func TestDrawVerify(t *testing.T) {
	t.Parallel()
	opens := time.Now().Add(4 * time.Second) // time for a loaded machine to start the server and enter all
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

	eventually(t, 10*time.Second, "early-00 placed by the draw", func() bool {
		return call(t, "GET", base+"/queue/position", "early-00", "")["state"] == "waiting"
	})
	code, out, errOut := runCmd(t, env, "draw", "verify", "default")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, fmt.Sprintf("all %d places reproduced from the seed", early))

	// A saved export with two places swapped is caught, offline.
	c, err := newAdminClient(base, testAdminToken, envOf())
	require.NoError(t, err)
	raw, err := c.Call(t.Context(), "GET", "/admin/rooms/default/entrants", nil)
	require.NoError(t, err)
	var export server.AdminEntrants
	require.NoError(t, json.Unmarshal(raw, &export))
	require.Len(t, export.Entrants, early)
	export.Entrants[0].Place, export.Entrants[1].Place = export.Entrants[1].Place, export.Entrants[0].Place
	tampered, err := json.Marshal(export)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "draw.json")
	require.NoError(t, os.WriteFile(file, tampered, 0o600))
	code, out, errOut = runCmd(t, envOf(), "draw", "verify", "--file", file)
	require.Equal(t, exitFailure, code)
	require.Contains(t, errOut, fmt.Sprintf("2 of %d places differ", early))
	require.Contains(t, out, export.Entrants[0].User+": place 2, the seed gives 1")

	code, _, errOut = runCmd(t, env, "draw", "verify")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "a room is needed")
	code, _, _ = runCmd(t, env, "draw", "shuffle")
	require.Equal(t, exitUsage, code)
}

func TestParseServeDropSettings(t *testing.T) {
	t.Parallel()
	c, err := parseServe([]string{"--opens-at", "2026-03-01T10:00:00+09:00", "--prequeue-order", "fifo",
		"--closes-at", "2026-03-01T12:00:00+09:00", "--stock", "500", "--one-order-per-user"}, envOf())
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 3, 1, 1, 0, 0, 0, time.UTC), c.Room.OpensAt.UTC())
	require.Equal(t, time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC), c.Room.ClosesAt.UTC())
	require.Equal(t, "fifo", string(c.Room.PrequeueOrder))
	require.Equal(t, 500, c.Room.Stock)
	require.True(t, c.Room.OneOrderPerUser)
	for _, bad := range [][]string{
		{"--opens-at", "10am"},
		{"--prequeue-order", "lottery"},
		{"--opens-at", "2026-03-01T10:00:00Z", "--closes-at", "2026-03-01T09:00:00Z"},
		{"--stock", "-1"},
		{"--one-order-per-user=maybe"},
	} {
		_, err := parseServe(bad, envOf())
		require.Error(t, err, "%v", bad)
	}
}
