package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/adminapi"
	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/server"
)

// The dashboard's page and files load without the token and hold nothing
// of the rooms; the figures need it.
func TestDashboardShellWithoutToken(t *testing.T) {
	t.Parallel()
	f := servertest.NewAdminFixture(t, servertest.FixtureOptions{})
	f.Enter("somebody")

	for path, contentType := range map[string]string{
		"/admin/":                         "text/html; charset=utf-8",
		"/admin/assets/admin.js":          "text/javascript; charset=utf-8",
		"/admin/assets/admin.css":         "text/css; charset=utf-8",
		"/admin/assets/uPlot.iife.min.js": "text/javascript; charset=utf-8",
		"/admin/assets/uPlot.min.css":     "text/css; charset=utf-8",
		"/admin/assets/uPlot.LICENSE.txt": "text/plain; charset=utf-8",
	} {
		resp, body := testenv.Get(t, f.Srv.Client(), f.Srv.URL+path)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.Equal(t, contentType, resp.Header.Get("Content-Type"), path)
		require.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'self'", path)
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), path)
		require.NotContains(t, string(body), f.Room, "%s shows nothing of the rooms", path)
		if path == "/admin/" {
			require.Contains(t, string(body), `id="login-form"`)
			require.Contains(t, string(body), `type="password"`)
		}
		if path == "/admin/assets/uPlot.LICENSE.txt" {
			require.Contains(t, string(body), "MIT License")
		}
	}

	for _, auth := range []string{"", "Bearer ", "Bearer wrong-token-of-some-length", "Basic " + servertest.AdminToken, servertest.AdminToken} {
		a := f.Do("GET", "/admin/dashboard", "", "Authorization", auth)
		a.RequireError(t, http.StatusUnauthorized, "UNAUTHORIZED", "%q", auth)
		require.NotContains(t, a.Raw, f.Room)
	}
	// Paths near the page's are still behind the token.
	for _, path := range []string{"/admin/assets/", "/admin/assets/other.js", "/admin/index.html"} {
		require.Equal(t, http.StatusUnauthorized, f.Do("GET", path, "").Status, path)
	}
}

func TestDashboardOffWithoutToken(t *testing.T) {
	t.Parallel()
	store := servertest.MemRoom(t, "default", waitroom.RoomConfig{})
	srv := httptest.NewServer(servertest.MustServer(t, server.Config{Store: store}))
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
	f := servertest.NewAdminFixture(t, servertest.FixtureOptions{Room: waitroom.RoomConfig{Rate: 4}})
	f.Enter("a")
	f.Enter("b")
	// What the admitter records once a second: the chart is the store's.
	history, ok := waitroom.HistoryOf(f.Store)
	require.True(t, ok)
	recorded := time.Now()
	require.NoError(t, history.RecordSamples(t.Context(), recorded, []string{f.Room}))

	a := f.Admin("GET", "/admin/dashboard", "")
	require.Equal(t, http.StatusOK, a.Status, a.Raw)
	require.Equal(t, "no-store", a.Header.Get("Cache-Control"))
	var ans adminapi.Dashboard
	require.NoError(t, json.Unmarshal([]byte(a.Raw), &ans))
	require.Nil(t, ans.Error)
	require.Equal(t, int64(1000), ans.EveryMS)
	require.Len(t, ans.Rooms, 1)
	r := ans.Rooms[0]
	require.Equal(t, f.Room, r.Name)
	require.Equal(t, waitroom.RoomOpen, r.State)
	require.Equal(t, 4.0, r.Rate)
	require.Equal(t, int64(2), r.Figures.Waiting)
	require.Equal(t, 0.5, *r.ETALastSeconds, "the second of two waits half a second at 4/s")
	require.Equal(t, []adminapi.DashboardPoint{{T: recorded.Truncate(time.Second).UnixMilli(), Rate: 4, Waiting: 2}}, r.Series)
	// The JSON names the dashboard reads.
	for _, name := range []string{`"sampled_at"`, `"every_ms"`, `"eta_last_seconds"`, `"series"`, `"live_tokens"`, `"admitted_per_second"`, `"completed"`, `"expired"`} {
		require.Contains(t, a.Raw, name)
	}

	// Nothing newer than the last point: an empty series, not a repeat.
	a = f.Admin("GET", "/admin/dashboard?since="+strconv.FormatInt(r.Series[0].T, 10), "")
	require.Equal(t, http.StatusOK, a.Status, a.Raw)
	require.Contains(t, a.Raw, `"series":[]`)

	for _, since := range []string{"-1", "x", "1.5", "99999999999999999999"} {
		a := f.Admin("GET", "/admin/dashboard?since="+since, "")
		a.RequireError(t, http.StatusBadRequest, "BAD_REQUEST", since)
		require.True(t, strings.HasPrefix(a.Body["error"].(map[string]any)["message"].(string), "since:"), a.Raw)
	}
}

// waitTrue waits until the script expression is true; what says what the
// test waits for.
func waitTrue(tb *servertest.Tab, js, what string) {
	tb.T.Helper()
	ctx, cancel := context.WithTimeout(tb.Ctx, servertest.BrowserWait)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		tb.T.Fatalf("waiting for %s: %v; the page shows: %s", what, err, tb.Describe())
	}
}

// roomField is the script reading one figure of a room's card.
func roomField(room, field string) string {
	return fmt.Sprintf(`document.querySelector('[data-room=%q] [data-f=%q]').textContent`, room, field)
}

// number reads a figure the card shows, such as "1,234".
func number(tb *servertest.Tab, room, field string) int64 {
	tb.T.Helper()
	s := tb.Eval(roomField(room, field))
	n, err := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
	require.NoError(tb.T, err, "%s shows %q", field, s)
	return n
}

// The operator's dashboard in a real headless Chromium: signing in, a room
// filling and draining on the chart, pausing it from the dashboard (and
// the store then admitting nobody), changing the rate, signing out.
func TestDashboardBrowser(t *testing.T) {
	t.Parallel()
	room := servertest.UniqueRoom(t)
	store := servertest.MemRoom(t, room, waitroom.RoomConfig{Rate: 40})
	srv := httptest.NewServer(servertest.MustServer(t, server.Config{Store: store, DefaultRoom: room, AdminToken: servertest.AdminToken}))
	t.Cleanup(srv.Close)
	ctx, stop := context.WithCancel(t.Context())
	var admitting sync.WaitGroup
	admitting.Add(1)
	go func() {
		defer admitting.Done()
		_ = (&waitroom.Admitter{Store: store, Every: 25 * time.Millisecond}).Run(ctx)
	}()
	t.Cleanup(func() { stop(); admitting.Wait() })
	stats := func() waitroom.Stats {
		st, err := store.Stats(t.Context(), room)
		require.NoError(t, err)
		return st
	}

	browser := servertest.NewBrowser(t)
	op := servertest.NewVisitor(t, browser)
	op.Open(srv.URL + "/admin/")
	op.WaitState("login")
	require.NotContains(t, op.Eval(`document.body.innerText`), room, "nothing shown without the token")
	op.Screenshot("admin-01-sign-in")

	op.Do(chromedp.SendKeys(chromedp.ID("token"), "not-the-admin-token"), chromedp.Click(chromedp.ID("signin")))
	op.WaitState("login-error")
	require.Equal(t, "That token was refused.", op.Text("login-error"))
	require.Equal(t, "", op.Eval(`sessionStorage.getItem("waitroom.adminToken") || ""`), "a refused token is not kept")
	require.NotContains(t, op.Eval(`document.body.innerText`), room)

	require.Equal(t, "", op.Eval(`document.getElementById("token").value`), "the refused token is cleared")
	op.Do(chromedp.SendKeys(chromedp.ID("token"), servertest.AdminToken), chromedp.Click(chromedp.ID("signin")))
	card := fmt.Sprintf(`[data-room=%q]`, room)
	op.Do(chromedp.WaitVisible(chromedp.CSS(card)))
	require.Equal(t, servertest.AdminToken, op.Eval(`sessionStorage.getItem("waitroom.adminToken")`))
	require.Equal(t, "open", op.Eval(`document.querySelector('`+card+` .state').textContent`))
	// This server has no webhook routes: the dead letters' section says
	// webhooks are off, not that something failed.
	op.WaitText("dead-summary", "Webhooks are off on this server: there are no dead letters.")
	require.Equal(t, "", op.Text("dead-status"))

	// Filling: 60 arrivals every quarter second against 40 admissions a
	// second.
	filled := make(chan struct{})
	go func() {
		defer close(filled)
		for i := range 16 {
			for j := range 60 {
				if _, err := store.Enter(ctx, room, fmt.Sprintf("u%d-%d", i, j)); err != nil {
					t.Errorf("enter: %v", err)
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	waitTrue(op, `Number(`+roomField(room, "waiting")+`.replace(/,/g, "")) >= 300`, "the queue to fill")
	waitTrue(op, `Number(`+roomField(room, "admitted_per_second")+`) > 0`, "admissions to show")
	<-filled
	waitTrue(op, `document.querySelectorAll('`+card+` .u-over').length === 1`, "the chart")
	op.Screenshot("admin-02-filling")

	// Pause from the dashboard, after a confirmation.
	op.Do(chromedp.Click(chromedp.CSS(card + ` [data-act="pause"]`)))
	op.WaitState("confirm")
	require.Contains(t, op.Text("confirm-text"), "Pause "+room+"?")
	op.Screenshot("admin-03-confirm-pause")
	op.Do(chromedp.Click(chromedp.ID("confirm-cancel")))
	op.Do(chromedp.WaitNotVisible(chromedp.ID("confirm")))
	cfg, err := store.RoomConfig(t.Context(), room)
	require.NoError(t, err)
	require.Equal(t, waitroom.RoomOpen, cfg.State, "cancelled: nothing changed")

	op.Do(chromedp.Click(chromedp.CSS(card+` [data-act="pause"]`)), chromedp.WaitVisible(chromedp.ID("confirm")),
		chromedp.Click(chromedp.ID("confirm-ok")))
	waitTrue(op, `document.querySelector('`+card+` .state').textContent === "paused"`, "the card to say paused")
	cfg, err = store.RoomConfig(t.Context(), room)
	require.NoError(t, err)
	require.Equal(t, waitroom.RoomPaused, cfg.State)
	// The pause takes effect: across two fresh samples, nobody is admitted.
	paused := stats()
	seen := op.Eval(`document.getElementById("sampled").textContent`)
	for range 2 {
		waitTrue(op, `document.getElementById("sampled").textContent !== `+strconv.Quote(seen), "a new sample")
		seen = op.Eval(`document.getElementById("sampled").textContent`)
	}
	require.Equal(t, paused.Admitted, stats().Admitted, "a paused room admits nobody")
	require.Equal(t, paused.Waiting, number(op, room, "waiting"))
	require.Equal(t, "on hold", op.Eval(roomField(room, "eta_last")))
	op.Screenshot("admin-04-paused")

	// A faster rate, then resume: the queue drains.
	op.Do(chromedp.SendKeys(chromedp.CSS(card+` input[name="rate"]`), "150"),
		chromedp.Click(chromedp.CSS(card+` .rate-form button`)), chromedp.WaitVisible(chromedp.ID("confirm")))
	require.Contains(t, op.Text("confirm-text"), "from 40 to 150 users/s")
	op.Do(chromedp.Click(chromedp.ID("confirm-ok")))
	waitTrue(op, roomField(room, "rate")+` === "150/s"`, "the new rate")
	cfg, err = store.RoomConfig(t.Context(), room)
	require.NoError(t, err)
	require.Equal(t, 150.0, cfg.Rate)

	op.Do(chromedp.Click(chromedp.CSS(card+` [data-act="resume"]`)), chromedp.WaitVisible(chromedp.ID("confirm")),
		chromedp.Click(chromedp.ID("confirm-ok")))
	waitTrue(op, roomField(room, "waiting")+` === "0"`, "the queue to drain")
	require.Zero(t, stats().Waiting)
	require.Equal(t, "no queue", op.Eval(roomField(room, "eta_last")))
	op.Screenshot("admin-05-drained")

	// A room that tracks stock shows what is left and what is sold.
	stocked := room + "-stock"
	_, err = store.CreateRoom(t.Context(), stocked, waitroom.RoomConfig{Rate: 40, Stock: 3})
	require.NoError(t, err)
	for _, u := range []string{"s1", "s2", "s3"} {
		_, err := store.Enter(t.Context(), stocked, u)
		require.NoError(t, err)
	}
	stockCard := fmt.Sprintf(`[data-room=%q]`, stocked)
	op.Do(chromedp.WaitVisible(chromedp.CSS(stockCard)))
	waitTrue(op, roomField(stocked, "live_tokens")+` === "3"`, "three admitted, three units reserved")
	waitTrue(op, roomField(stocked, "units_left")+` === "0"`, "no unit left unreserved")
	require.Equal(t, int64(0), number(op, stocked, "sold"))
	for i, u := range []string{"s1", "s2", "s3"} {
		st, err := store.Status(t.Context(), stocked, u)
		require.NoError(t, err)
		h, err := store.Claim(t.Context(), stocked, u, st.Token)
		require.NoError(t, err)
		require.NoError(t, store.Complete(t.Context(), h))
		if i == 0 {
			waitTrue(op, roomField(stocked, "sold")+` === "1"`, "one sold")
		}
	}
	waitTrue(op, roomField(stocked, "sold")+` === "3"`, "all sold")
	op.Do(chromedp.WaitVisible(chromedp.CSS(stockCard + ` .sold-out`)))
	require.Equal(t, "sold out", op.Eval(roomField(stocked, "eta_last")))
	require.Equal(t, "true", op.Eval(`String(document.querySelector('`+card+` [data-optional="units_left"]').hidden)`),
		"a room without stock shows no stock")
	op.Screenshot("admin-06-stock")

	// The stock is set from here, after a confirmation that says it is a
	// restock; the settings line follows.
	stockForm := stockCard + ` .stock-form`
	op.Do(chromedp.SendKeys(chromedp.CSS(stockForm+` input`), "5"), chromedp.Click(chromedp.CSS(stockForm+` button`)),
		chromedp.WaitVisible(chromedp.ID("confirm")))
	require.Contains(t, op.Text("confirm-text"), "from 3 to 5 units")
	require.Contains(t, op.Text("confirm-text"), "restock")
	op.Do(chromedp.Click(chromedp.ID("confirm-ok")))
	waitTrue(op, `document.querySelector('`+stockCard+` .settings').textContent.includes("Stock 5")`, "the new stock")
	cfg, err = store.RoomConfig(t.Context(), stocked)
	require.NoError(t, err)
	require.Equal(t, 5, cfg.Stock)
	waitTrue(op, roomField(stocked, "units_left")+` === "2"`, "two units back on sale")

	// So is the opening: the operator's local time, stored as the instant.
	opening := stockCard + ` .opening-form`
	op.Eval(`document.querySelector('` + opening + ` input').value = "2031-01-02T10:00", ""`)
	op.Do(chromedp.Click(chromedp.CSS(opening+` button`)), chromedp.WaitVisible(chromedp.ID("confirm")))
	require.Contains(t, op.Text("confirm-text"), "Set the opening of "+stocked+" to ")
	op.Do(chromedp.Click(chromedp.ID("confirm-ok")))
	waitTrue(op, `document.querySelector('`+stockCard+` .settings').textContent.startsWith("Opens ")`, "the opening shown")
	cfg, err = store.RoomConfig(t.Context(), stocked)
	require.NoError(t, err)
	want, err := time.Parse(time.RFC3339, op.Eval(`new Date("2031-01-02T10:00").toISOString()`))
	require.NoError(t, err)
	require.True(t, want.Equal(cfg.OpensAt), "opens at %s, want %s", cfg.OpensAt, want)

	// Passes are listed with the room, and one is revoked from here.
	pass := waitroom.Pass{ID: waitroom.NewToken(), Uses: 3, Left: 3, ExpiresAt: time.Now().Add(time.Hour)}
	require.NoError(t, store.CreatePass(t.Context(), room, pass))
	_, err = store.EnterWithPass(t.Context(), room, "vip", pass.ID)
	require.NoError(t, err)
	used := waitroom.Pass{ID: waitroom.NewToken(), Uses: 1, Left: 1, ExpiresAt: time.Now().Add(time.Hour)}
	require.NoError(t, store.CreatePass(t.Context(), room, used))
	_, err = store.EnterWithPass(t.Context(), room, "guest", used.ID)
	require.NoError(t, err)

	// A reload keeps the sign-in (this tab's session) and reads the passes.
	op.Do(chromedp.Reload())
	op.Do(chromedp.WaitVisible(chromedp.CSS(card)))
	waitTrue(op, `document.querySelector('`+card+` .pass-count').textContent === "2 (1 valid)"`, "the passes")
	op.Do(chromedp.Click(chromedp.CSS(card + ` .passes summary`)))
	row := fmt.Sprintf(`%s tr[data-pass=%q]`, card, pass.ID)
	op.Do(chromedp.WaitVisible(chromedp.CSS(row)))
	require.Equal(t, "2 of 3", op.Eval(`document.querySelector('`+row+` td:nth-child(2)').textContent`))
	require.Equal(t, "used up", op.Eval(fmt.Sprintf(`document.querySelector('%s tr[data-pass=%q]').dataset.state`, card, used.ID)))
	op.Screenshot("admin-07-passes")
	op.Do(chromedp.Click(chromedp.CSS(row+` [data-act="revoke"]`)), chromedp.WaitVisible(chromedp.ID("confirm")))
	require.Contains(t, op.Text("confirm-text"), "Revoke pass "+pass.ID[:8])
	op.Do(chromedp.Click(chromedp.ID("confirm-ok")))
	waitTrue(op, `document.querySelector('`+row+`').dataset.state === "revoked"`, "the pass to show revoked")
	passes, err := store.Passes(t.Context(), room)
	require.NoError(t, err)
	require.True(t, passes[0].Revoked)
	_, err = store.EnterWithPass(t.Context(), room, "after", pass.ID)
	require.ErrorIs(t, err, waitroom.ErrPassInvalid)

	// A pass is created from here too, after a confirmation.
	op.Do(chromedp.Click(chromedp.CSS(card+` [data-act="pass"]`)), chromedp.WaitVisible(chromedp.ID("confirm")))
	require.Contains(t, op.Text("confirm-text"), "Create a pass for "+room+"?")
	op.Do(chromedp.Click(chromedp.ID("confirm-ok")))
	waitTrue(op, `document.querySelector('`+card+` .note').textContent.startsWith("Pass created: `+srv.URL+`/")`, "the new pass's link")
	waitTrue(op, `document.querySelector('`+card+` .pass-count').textContent === "3 (1 valid)"`, "the new pass listed")
	passes, err = store.Passes(t.Context(), room)
	require.NoError(t, err)
	require.Len(t, passes, 3)

	// Signing out forgets the token.
	op.Do(chromedp.Click(chromedp.ID("logout")))
	op.WaitState("login")
	require.Equal(t, "", op.Eval(`sessionStorage.getItem("waitroom.adminToken") || ""`))
	require.Equal(t, "0", op.Eval(`String(document.querySelectorAll("[data-room]").length)`))
}

// TestDashboardBrowserRateLimited: once an address has used up its wrong
// tokens, the sign-in says so and when to try again, even with the right
// token, instead of blaming the network.
func TestDashboardBrowserRateLimited(t *testing.T) {
	t.Parallel()
	store := servertest.MemRoom(t, "default", waitroom.RoomConfig{})
	// The limit's clock stands still: the wait is an hour exactly, however
	// long the browser takes between the two attempts.
	stopped := time.Now()
	srv := httptest.NewServer(servertest.MustServer(t, server.Config{Store: store, AdminToken: servertest.AdminToken,
		AdminAuthLimit: waitroom.Limit{Rate: 1.0 / 3600, Burst: 1}, Now: func() time.Time { return stopped }}))
	t.Cleanup(srv.Close)
	op := servertest.NewVisitor(t, servertest.NewBrowser(t))
	op.Open(srv.URL + "/admin/")
	op.WaitState("login")
	op.Do(chromedp.SendKeys(chromedp.ID("token"), "not-the-admin-token"), chromedp.Click(chromedp.ID("signin")))
	op.WaitState("login-error")
	require.Equal(t, "That token was refused.", op.Text("login-error"))
	op.Do(chromedp.SendKeys(chromedp.ID("token"), servertest.AdminToken), chromedp.Click(chromedp.ID("signin")))
	op.WaitText("login-error", "Too many wrong tokens from this address; try again in 3600 s.")
	require.Equal(t, "", op.Eval(`sessionStorage.getItem("waitroom.adminToken") || ""`))
}
