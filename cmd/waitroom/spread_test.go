package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redistest"
)

// TestServeSpreadRoomOnCluster: serve on a real 3-primary Redis Cluster
// with --shards 3 runs a whole drop through one room spread over the
// shards: the operator API shows the layout, buyers queue on their
// sub-shards and buy through the built-in shop until the room's stock is
// sold, a pass's link lets its holder in at once, and the last buyer is
// told sold out.
func TestServeSpreadRoomOnCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3})
	env := envOf("REDIS_URL", c.URL(), "WAITROOM_REDIS_PREFIX", fmt.Sprintf("wrtest-spread-%d", time.Now().UnixNano()),
		"WAITROOM_ADMIN_TOKEN", testAdminToken)
	m := startMain(t, []string{"--shards", "3", "--rate", "1000", "--stock", "3", "--products", "drop:3",
		"--cookie-secret", strings.Repeat("s", 32)}, env)
	base := "http://" + m.Addr()
	adminEnv := envOf("WAITROOM_ADMIN_TOKEN", testAdminToken, "WAITROOM_ADMIN_URL", base)

	code, out, errOut := runCmd(t, adminEnv, "admin", "rooms", "show", "default", "--json")
	require.Equal(t, exitOK, code, errOut)
	require.Regexp(t, `"shards": ?3\b`, out)

	for i := range 2 {
		user := fmt.Sprintf("buyer-%d", i)
		status, body := order(t, base, user, admitted(t, base, user))
		require.Equal(t, http.StatusCreated, status, body)
	}

	code, out, errOut = runCmd(t, adminEnv, "admin", "passes", "create", "--room", "default", "--uses", "2", "--expires", "1h")
	require.Equal(t, exitOK, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	link, err := url.Parse(lines[1])
	require.NoError(t, err)
	status, body := testenv.Request(t, "POST", base+"/queue/enter", "vip", "", `{"pass":"`+link.Query().Get("pass")+`"}`)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, "admitted", body["state"])
	status, body = order(t, base, "vip", body["token"].(string))
	require.Equal(t, http.StatusCreated, status, body)

	// Every unit sold: a newcomer is told so, and so is a pass holder.
	status, body = testenv.Request(t, "POST", base+"/queue/enter", "late", "", "")
	require.Equal(t, http.StatusConflict, status, body)
	require.Equal(t, "SOLD_OUT", body["error"].(map[string]any)["code"])
	status, body = testenv.Request(t, "POST", base+"/queue/enter", "vip-2", "", `{"pass":"`+link.Query().Get("pass")+`"}`)
	require.Equal(t, http.StatusConflict, status, body)
	require.Equal(t, "SOLD_OUT", body["error"].(map[string]any)["code"])
}
