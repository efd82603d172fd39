package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/waitroom/waitroom/internal/testenv"
)

const testAdminToken = "cmd-test-admin-token-0123"

// runCmd runs the command as main would and returns its exit code and
// output.
func runCmd(t *testing.T, getenv func(string) string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), args, getenv, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestAdminCommands drives 'waitroom admin rooms …' against a real running
// server (Main on port 0, the admin API on).
func TestAdminCommands(t *testing.T) {
	t.Parallel()
	m := startMain(t, []string{"--admin-token", testAdminToken}, envOf())
	base := "http://" + m.Addr()
	env := envOf("WAITROOM_ADMIN_TOKEN", testAdminToken, "WAITROOM_ADMIN_URL", base)

	code, out, errOut := runCmd(t, env, "admin", "rooms", "create", "sale", "--rate", "50", "--token-ttl", "2m", "--state", "paused")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "name:       sale")
	require.Contains(t, out, "state:      paused")
	require.Contains(t, out, "rate:       50 users/s")
	require.Contains(t, out, "token ttl:  2m0s")

	code, _, errOut = runCmd(t, env, "admin", "rooms", "create", "sale")
	require.Equal(t, exitFailure, code)
	require.Contains(t, errOut, "409 ROOM_EXISTS")

	code, out, errOut = runCmd(t, env, "admin", "rooms", "list")
	require.Equal(t, exitOK, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	require.Equal(t, []string{"NAME", "STATE", "RATE", "SLICE", "MAX_QUEUE", "TOKEN_TTL", "LEASE", "MAX_ACTIVE"}, strings.Fields(lines[0]))
	require.Equal(t, []string{"default", "open", "140", "100ms", "100000", "5m0s", "30s", "0"}, strings.Fields(lines[1]))
	require.Equal(t, []string{"sale", "paused", "50", "100ms", "100000", "2m0s", "30s", "0"}, strings.Fields(lines[2]))

	// Flags after the name, --url and --token on the command line.
	code, out, errOut = runCmd(t, envOf(), "admin", "rooms", "set", "default", "--rate", "200", "--state", "paused",
		"--url", base, "--token", testAdminToken)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "rate:       200 users/s")
	require.Contains(t, out, "state:      paused")
	code, out, errOut = runCmd(t, env, "admin", "rooms", "set", "sale", "--shop-url", "https://shop.example/sale")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "shop url:   https://shop.example/sale")
	code, out, errOut = runCmd(t, env, "admin", "rooms", "set", "sale", "--shop-name", "Kim's Shop", "--product-name", "한정판 드롭")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "shop:       Kim's Shop")
	require.Contains(t, out, "product:    한정판 드롭")
	code, _, errOut = runCmd(t, env, "admin", "rooms", "set", "sale", "--shop-name", "two\nlines")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "--shop-name: must be one line")

	// A room's own page, from a directory.
	dir := testenv.Dir(t, map[string]string{"theme.css": ":root { --accent: #0b3d91; }", "messages/ko.json": `{"join.title": "ACME 줄 서기"}`, ".editorconfig": "x"})
	code, out, errOut = runCmd(t, env, "admin", "rooms", "page", "sale", dir)
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "page:       its own (")
	require.Contains(t, get(t, base+"/rooms/sale?lang=ko"), "<h1>ACME 줄 서기</h1>")
	require.Contains(t, get(t, base+"/pages/sale/theme.css"), "#0b3d91")
	broken := testenv.Dir(t, map[string]string{"page.html": "<p>\n{{.Title}</p>"})
	code, _, errOut = runCmd(t, env, "admin", "rooms", "page", "sale", broken)
	require.Equal(t, exitFailure, code)
	require.Contains(t, errOut, "400 PAGE_INVALID: page.html: template: page.html:2:")
	require.Contains(t, get(t, base+"/pages/sale/theme.css"), "#0b3d91", "the refused page changed nothing")
	code, out, errOut = runCmd(t, env, "admin", "rooms", "page", "sale", "--clear")
	require.Equal(t, exitOK, code, errOut)
	require.NotContains(t, out, "page:")
	require.NotContains(t, get(t, base+"/rooms/sale"), "/pages/sale/")
	for _, args := range [][]string{{"page", "sale"}, {"page", "sale", dir, "--clear"}, {"set", "sale", "--clear"}, {"page", "sale", filepath.Join(dir, "nosuch")}} {
		code, _, _ = runCmd(t, env, append([]string{"admin", "rooms"}, args...)...)
		require.Equal(t, exitUsage, code, args)
	}

	enter(t, base, "u1")
	code, out, errOut = runCmd(t, env, "admin", "rooms", "show", "default", "--window", "0s", "--json")
	require.Equal(t, exitOK, code, errOut)
	var shown struct {
		Rate    float64 `json:"rate"`
		State   string  `json:"state"`
		Figures struct {
			Waiting int64 `json:"waiting"`
		} `json:"figures"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &shown), out)
	require.InDelta(t, 200, shown.Rate, 0)
	require.Equal(t, "paused", shown.State)
	require.EqualValues(t, 1, shown.Figures.Waiting, "paused: the user waits")

	code, out, errOut = runCmd(t, env, "admin", "rooms", "show", "default", "--window", "0s")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "waiting:     1")
	require.NotContains(t, out, "admitted/s", "no window, no rate")

	// Failures at run time: exit 1 with the server's code.
	for _, tc := range []struct {
		env  func(string) string
		args []string
		want string
	}{
		{envOf("WAITROOM_ADMIN_TOKEN", "wrong-token-wrong-token", "WAITROOM_ADMIN_URL", base), []string{"rooms", "list"}, "401 UNAUTHORIZED"},
		{env, []string{"rooms", "show", "nowhere", "--window", "0"}, "404 ROOM_NOT_FOUND"},
		{env, []string{"rooms", "set", "default", "--rate", "-5"}, "400 BAD_REQUEST: rate"},
		{env, []string{"rooms", "set", "default", "--token-ttl", "1ms"}, "400 BAD_REQUEST: token_ttl"},
		{envOf("WAITROOM_ADMIN_TOKEN", testAdminToken), []string{"rooms", "list", "--url", testenv.UnreachableURL(t)}, "connection refused"},
	} {
		code, _, errOut := runCmd(t, tc.env, append([]string{"admin"}, tc.args...)...)
		require.Equal(t, exitFailure, code, "%v: %s", tc.args, errOut)
		require.Contains(t, errOut, tc.want, tc.args)
	}

	// Mistakes in the command line: exit 2, nothing sent.
	for _, tc := range []struct {
		env  func(string) string
		args []string
		want string
	}{
		{envOf("WAITROOM_ADMIN_URL", base), []string{"rooms", "list"}, "no admin token"},
		{env, []string{}, "a command is needed"},
		{env, []string{"users"}, "unknown command"},
		{env, []string{"rooms"}, "needs a command"},
		{env, []string{"rooms", "delete", "sale"}, "unknown command"},
		{env, []string{"rooms", "set", "default"}, "at least one setting"},
		{env, []string{"rooms", "set", "--rate", "5"}, "exactly one room name"},
		{env, []string{"rooms", "set", "a", "b", "--rate", "5"}, "exactly one room name"},
		{env, []string{"rooms", "set", "default", "--rate", "fast"}, "--rate"},
		{env, []string{"rooms", "set", "default", "--lease", "forever"}, "--lease"},
		{env, []string{"rooms", "set", "default", "--max-queue", "1.5"}, "--max-queue"},
		{env, []string{"rooms", "set", "default", "--state", "half"}, "--state"},
		{env, []string{"rooms", "set", "default", "--shop-url", "javascript:alert(1)"}, "--shop-url"},
		{env, []string{"rooms", "set", "default", "--colour", "red"}, "colour"},
		{env, []string{"rooms", "list", "extra"}, "no arguments"},
		{env, []string{"rooms", "list", "--window", "1s"}, "--window"},
		{env, []string{"rooms", "list", "--url", "ftp://x"}, "--url"},
	} {
		code, _, errOut := runCmd(t, tc.env, append([]string{"admin"}, tc.args...)...)
		require.Equal(t, exitUsage, code, "%v: %s", tc.args, errOut)
		require.Contains(t, errOut, tc.want, tc.args)
	}
	code, out, errOut = runCmd(t, env, "admin", "rooms", "show", "default", "--window", "0")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "rate:        200 users/s", "refused commands changed nothing")

	code, out, _ = runCmd(t, envOf(), "help", "admin")
	require.Equal(t, exitOK, code)
	require.Contains(t, out, "waitroom admin rooms set default --rate 200 --state paused")
}

func TestAdminOffWithoutToken(t *testing.T) {
	t.Parallel()
	m := startMain(t, nil, envOf())
	code, _, errOut := runCmd(t, envOf("WAITROOM_ADMIN_TOKEN", testAdminToken), "admin", "rooms", "list", "--url", "http://"+m.Addr())
	require.Equal(t, exitFailure, code)
	require.Contains(t, errOut, "404 NOT_FOUND")
	require.Contains(t, errOut, "--admin-token")
}

func TestServeRejectsShortAdminToken(t *testing.T) {
	t.Parallel()
	_, err := parseServe([]string{"--admin-token", "short"}, envOf())
	require.ErrorContains(t, err, "--admin-token")
	require.NotContains(t, err.Error(), "short", "the token is never echoed")
	c, err := parseServe(nil, envOf("WAITROOM_ADMIN_TOKEN", testAdminToken))
	require.NoError(t, err)
	require.Equal(t, testAdminToken, c.AdminToken)
}

// TestServeMetrics: the running command serves /metrics, and its admitter
// reports admissions to them.
func TestServeMetrics(t *testing.T) {
	t.Parallel()
	m := startMain(t, []string{"--metrics-addr", "127.0.0.1:0"}, envOf())
	base := "http://" + m.Addr()
	scraper := "http://" + m.MetricsAddr()
	enter(t, base, "u1")
	eventually(t, 10*time.Second, "the admission counted", func() bool {
		return strings.Contains(get(t, scraper+"/metrics"), `waitroom_admitted_total{room="default"} 1`)
	})
	// The crowd's listener does not tell them (no admin token here).
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	metrics := get(t, scraper+"/metrics")
	require.Contains(t, metrics, `waitroom_enters_total{result="queued",room="default"} 1`)
	require.Contains(t, metrics, `waitroom_room_tokens_total{outcome="issued",room="default"} 1`)
	require.Contains(t, metrics, "go_goroutines", "runtime metrics come along")
}

func enter(t *testing.T, base, user string) {
	t.Helper()
	body := call(t, "POST", base+"/queue/enter", user, "")
	require.Equal(t, "waiting", body["state"], body)
}

func get(t *testing.T, url string) string {
	t.Helper()
	_, body := testenv.Get(t, http.DefaultClient, url)
	return body
}

// TestServeAdminAddr: with --admin-addr the operator API, the dashboard
// and /metrics behind the token move to a listener of their own, which
// 'waitroom admin' talks to; --addr answers 404 for them.
func TestServeAdminAddr(t *testing.T) {
	t.Parallel()
	m := startMain(t, []string{"--admin-token", testAdminToken, "--admin-addr", "127.0.0.1:0"}, envOf())
	base, operator := "http://"+m.Addr(), "http://"+m.AdminAddr()
	require.NotEqual(t, base, operator)
	status := func(url string) int {
		if strings.HasSuffix(url, "/admin/products") {
			return bearerStatus(t, "POST", url, testAdminToken, `{"id":"drop","name":"Drop","stock":3}`)
		}
		return bearerStatus(t, "GET", url, testAdminToken, "")
	}
	for _, path := range []string{"/admin/rooms", "/admin/rooms/default?window=0", "/admin/dashboard", "/admin/", "/admin/products", "/metrics"} {
		require.Equal(t, http.StatusNotFound, status(base+path), "public "+path)
		require.Contains(t, []int{http.StatusOK, http.StatusCreated}, status(operator+path), "operator "+path)
	}
	require.Equal(t, http.StatusOK, status(base+"/healthz"))

	code, out, errOut := runCmd(t, envOf("WAITROOM_ADMIN_TOKEN", testAdminToken, "WAITROOM_ADMIN_URL", operator), "admin", "rooms", "list")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "default")
	code, _, errOut = runCmd(t, envOf("WAITROOM_ADMIN_TOKEN", testAdminToken, "WAITROOM_ADMIN_URL", base), "admin", "rooms", "list")
	require.Equal(t, exitFailure, code)
	require.Contains(t, errOut, "404")
}

func TestParseServeAdminAddr(t *testing.T) {
	t.Parallel()
	c, err := parseServe(nil, envOf("WAITROOM_ADMIN_ADDR", "10.0.0.5:9090", "WAITROOM_ADMIN_TOKEN", testAdminToken))
	require.NoError(t, err)
	require.Equal(t, "10.0.0.5:9090", c.AdminAddr)
	c, err = parseServe(nil, envOf())
	require.NoError(t, err)
	require.Empty(t, c.AdminAddr, "off by default: the admin API stays on --addr")

	_, err = parseServe([]string{"--admin-addr", "127.0.0.1:9090"}, envOf())
	require.ErrorContains(t, err, "--admin-addr")
	require.ErrorContains(t, err, "--admin-token")
	_, err = parseServe([]string{"--admin-addr", "nonsense", "--admin-token", testAdminToken}, envOf())
	require.ErrorContains(t, err, "--admin-addr")
	require.ErrorContains(t, err, "host:port")
}

// bearerStatus sends an admin request with token as its bearer and returns
// the status.
func bearerStatus(t *testing.T, method, url, token, body string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}
