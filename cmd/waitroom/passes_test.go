package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/internal/testenv"
)

// TestAdminPasses drives 'waitroom admin passes …' against a real running
// server: the link it prints lets its holder in at once, until revoked.
func TestAdminPasses(t *testing.T) {
	t.Parallel()
	m := startMain(t, []string{"--admin-token", testAdminToken}, envOf())
	base := "http://" + m.Addr()
	env := envOf("WAITROOM_ADMIN_TOKEN", testAdminToken, "WAITROOM_ADMIN_URL", base)

	code, out, errOut := runCmd(t, env, "admin", "passes", "create", "--room", "default", "--uses", "2", "--expires", "1h")
	require.Equal(t, exitOK, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	require.Regexp(t, `^pass [A-Za-z0-9_-]{22}: 2 use\(s\), expires `, lines[0])
	id := strings.TrimSuffix(strings.Fields(lines[0])[1], ":")
	require.True(t, strings.HasPrefix(lines[1], base+"/?pass="+id+"."), lines[1])
	link, err := url.Parse(lines[1])
	require.NoError(t, err)
	passCode := link.Query().Get("pass")

	status, body := testenv.Request(t, "POST", base+"/queue/enter", "vip", "", `{"pass":"`+passCode+`"}`)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, "admitted", body["state"])

	code, out, errOut = runCmd(t, env, "admin", "passes", "list", "--room", "default")
	require.Equal(t, exitOK, code, errOut)
	rows := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, rows, 2, out)
	require.Equal(t, []string{"ID", "LEFT", "EXPIRES", "STATE", "LINK"}, strings.Fields(rows[0]))
	fields := strings.Fields(rows[1])
	require.Equal(t, []string{id, "1/2"}, fields[:2])
	require.Equal(t, []string{"valid", lines[1]}, fields[3:])

	code, out, errOut = runCmd(t, env, "admin", "passes", "revoke", "--room", "default", id)
	require.Equal(t, exitOK, code, errOut)
	require.Equal(t, "pass "+id+" revoked (1 of 2 uses were left)\n", out)
	status, body = testenv.Request(t, "POST", base+"/queue/enter", "latecomer", "", `{"pass":"`+passCode+`"}`)
	require.Equal(t, http.StatusForbidden, status)
	require.Equal(t, "PASS_INVALID", body["error"].(map[string]any)["code"])

	code, _, errOut = runCmd(t, env, "admin", "passes", "revoke", "--room", "default", "AAAAAAAAAAAAAAAAAAAAAA")
	require.Equal(t, exitFailure, code)
	require.Contains(t, errOut, "403 PASS_INVALID")
	code, _, errOut = runCmd(t, env, "admin", "passes", "create", "--room", "no-such-room")
	require.Equal(t, exitFailure, code)
	require.Contains(t, errOut, "404 ROOM_NOT_FOUND")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"passes"}, "needs a command"},
		{[]string{"passes", "mint", "--room", "default"}, "unknown command"},
		{[]string{"passes", "create"}, "--room"},
		{[]string{"passes", "create", "--room", "Bad Room"}, "--room"},
		{[]string{"passes", "create", "--room", "default", "--uses", "0"}, "--uses"},
		{[]string{"passes", "create", "--room", "default", "--uses", "many"}, "uses"},
		{[]string{"passes", "create", "--room", "default", "--expires", "10s"}, "--expires"},
		{[]string{"passes", "create", "--room", "default", "--expires", "forever"}, "--expires"},
		{[]string{"passes", "create", "--room", "default", "extra"}, "no arguments"},
		{[]string{"passes", "list", "--room", "default", "--uses", "2"}, "for passes create"},
		{[]string{"passes", "revoke", "--room", "default"}, "exactly one pass id"},
	} {
		code, _, errOut := runCmd(t, env, append([]string{"admin"}, tc.args...)...)
		require.Equal(t, exitUsage, code, "%v: %s", tc.args, errOut)
		require.Contains(t, errOut, tc.want, tc.args)
	}
	code, out, _ = runCmd(t, envOf(), "help", "admin")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "waitroom admin passes create --room drop --uses 5 --expires 48h")
}
