package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/server"
)

// The dashboard's page and files load without the token and hold nothing
// of the rooms; the figures need it.
func TestDashboardShellWithoutToken(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, fixtureOptions{})
	f.enter("somebody")

	for path, contentType := range map[string]string{
		"/admin/":                         "text/html; charset=utf-8",
		"/admin/assets/admin.js":          "text/javascript; charset=utf-8",
		"/admin/assets/admin.css":         "text/css; charset=utf-8",
		"/admin/assets/uPlot.iife.min.js": "text/javascript; charset=utf-8",
		"/admin/assets/uPlot.min.css":     "text/css; charset=utf-8",
		"/admin/assets/uPlot.LICENSE.txt": "text/plain; charset=utf-8",
	} {
		resp, err := f.srv.Client().Get(f.srv.URL + path)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.Equal(t, contentType, resp.Header.Get("Content-Type"), path)
		require.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'self'", path)
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), path)
		require.NotContains(t, string(body), f.room, "%s shows nothing of the rooms", path)
		if path == "/admin/" {
			require.Contains(t, string(body), `id="login-form"`)
			require.Contains(t, string(body), `type="password"`)
		}
		if path == "/admin/assets/uPlot.LICENSE.txt" {
			require.Contains(t, string(body), "MIT License")
		}
	}

	for _, auth := range []string{"", "Bearer ", "Bearer wrong-token-of-some-length", "Basic " + adminToken, adminToken} {
		a := f.do("GET", "/admin/dashboard", "", "Authorization", auth)
		require.Equal(t, http.StatusUnauthorized, a.status, "%q", auth)
		require.Equal(t, "UNAUTHORIZED", a.code())
		require.NotContains(t, a.raw, f.room)
	}
	// Paths near the page's are still behind the token.
	for _, path := range []string{"/admin/assets/", "/admin/assets/other.js", "/admin/index.html"} {
		require.Equal(t, http.StatusUnauthorized, f.do("GET", path, "").status, path)
	}
}

func TestDashboardOffWithoutToken(t *testing.T) {
	t.Parallel()
	store := memstore.New(memstore.Options{})
	_, err := store.CreateRoom(t.Context(), "default", waitroom.RoomConfig{})
	require.NoError(t, err)
	srv := httptest.NewServer(mustServer(t, server.Config{Store: store}))
	t.Cleanup(srv.Close)
	for _, path := range []string{"/admin/", "/admin/assets/admin.js", "/admin/dashboard"} {
		resp, err := srv.Client().Get(srv.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
	}
}

func TestDashboardFigures(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t, fixtureOptions{room: waitroom.RoomConfig{Rate: 4}})
	f.enter("a")
	f.enter("b")

	a := f.admin("GET", "/admin/dashboard", "")
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Equal(t, "no-store", a.header.Get("Cache-Control"))
	var ans server.DashboardAnswer
	require.NoError(t, json.Unmarshal([]byte(a.raw), &ans))
	require.Nil(t, ans.Error)
	require.Equal(t, int64(1000), ans.EveryMS)
	require.Len(t, ans.Rooms, 1)
	r := ans.Rooms[0]
	require.Equal(t, f.room, r.Name)
	require.Equal(t, waitroom.RoomOpen, r.State)
	require.Equal(t, 4.0, r.Rate)
	require.Equal(t, int64(2), r.Figures.Waiting)
	require.Equal(t, 0.5, *r.ETALastSeconds, "the second of two waits half a second at 4/s")
	require.Len(t, r.Series, 1)
	require.Equal(t, ans.SampledAt, r.Series[0].T)
	// The JSON names the dashboard reads.
	for _, name := range []string{`"sampled_at"`, `"every_ms"`, `"eta_last_seconds"`, `"series"`, `"live_tokens"`, `"admitted_per_second"`, `"completed"`, `"expired"`} {
		require.Contains(t, a.raw, name)
	}

	// Nothing newer than the sample: an empty series, not a repeat.
	a = f.admin("GET", "/admin/dashboard?since="+strconv.FormatInt(ans.SampledAt, 10), "")
	require.Equal(t, http.StatusOK, a.status, a.raw)
	require.Contains(t, a.raw, `"series":[]`)

	for _, since := range []string{"-1", "x", "1.5", "99999999999999999999"} {
		a := f.admin("GET", "/admin/dashboard?since="+since, "")
		require.Equal(t, http.StatusBadRequest, a.status, since)
		require.Equal(t, "BAD_REQUEST", a.code())
		require.True(t, strings.HasPrefix(a.body["error"].(map[string]any)["message"].(string), "since:"), a.raw)
	}
}
