package server_test

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
	"github.com/waitroom/waitroom/internal/testenv"
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
		resp, body := testenv.Get(t, f.srv.Client(), f.srv.URL+path)
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
		a.requireError(t, http.StatusUnauthorized, "UNAUTHORIZED", "%q", auth)
		require.NotContains(t, a.raw, f.room)
	}
	// Paths near the page's are still behind the token.
	for _, path := range []string{"/admin/assets/", "/admin/assets/other.js", "/admin/index.html"} {
		require.Equal(t, http.StatusUnauthorized, f.do("GET", path, "").status, path)
	}
}

func TestDashboardOffWithoutToken(t *testing.T) {
	t.Parallel()
	store := memRoom(t, "default", waitroom.RoomConfig{})
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
	var ans adminapi.Dashboard
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
		a.requireError(t, http.StatusBadRequest, "BAD_REQUEST", since)
		require.True(t, strings.HasPrefix(a.body["error"].(map[string]any)["message"].(string), "since:"), a.raw)
	}
}

// waitTrue waits until the script expression is true; what says what the
// test waits for.
func (tb *tab) waitTrue(js, what string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, browserWait)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		tb.t.Fatalf("waiting for %s: %v; the page shows: %s", what, err, tb.describe())
	}
}

// roomField is the script reading one figure of a room's card.
func roomField(room, field string) string {
	return fmt.Sprintf(`document.querySelector('[data-room=%q] [data-f=%q]').textContent`, room, field)
}

// number reads a figure the card shows, such as "1,234".
func (tb *tab) number(room, field string) int64 {
	tb.t.Helper()
	s := tb.eval(roomField(room, field))
	n, err := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
	require.NoError(tb.t, err, "%s shows %q", field, s)
	return n
}

// The operator's dashboard in a real headless Chromium: signing in, a room
// filling and draining on the chart, pausing it from the dashboard (and
// the store then admitting nobody), changing the rate, signing out.
func TestDashboardBrowser(t *testing.T) {
	t.Parallel()
	room := uniqueRoom(t)
	store := memRoom(t, room, waitroom.RoomConfig{Rate: 40})
	srv := httptest.NewServer(mustServer(t, server.Config{Store: store, DefaultRoom: room, AdminToken: adminToken}))
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

	browser := newBrowser(t)
	op := newVisitor(t, browser)
	op.open(srv.URL + "/admin/")
	op.waitState("login")
	require.NotContains(t, op.eval(`document.body.innerText`), room, "nothing shown without the token")
	op.screenshot("admin-01-sign-in")

	op.do(chromedp.SendKeys(chromedp.ID("token"), "not-the-admin-token"), chromedp.Click(chromedp.ID("signin")))
	op.waitState("login-error")
	require.Equal(t, "That token was refused.", op.text("login-error"))
	require.Equal(t, "", op.eval(`sessionStorage.getItem("waitroom.adminToken") || ""`), "a refused token is not kept")
	require.NotContains(t, op.eval(`document.body.innerText`), room)

	require.Equal(t, "", op.eval(`document.getElementById("token").value`), "the refused token is cleared")
	op.do(chromedp.SendKeys(chromedp.ID("token"), adminToken), chromedp.Click(chromedp.ID("signin")))
	card := fmt.Sprintf(`[data-room=%q]`, room)
	op.do(chromedp.WaitVisible(chromedp.CSS(card)))
	require.Equal(t, adminToken, op.eval(`sessionStorage.getItem("waitroom.adminToken")`))
	require.Equal(t, "open", op.eval(`document.querySelector('`+card+` .state').textContent`))

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
	op.waitTrue(`Number(`+roomField(room, "waiting")+`.replace(/,/g, "")) >= 300`, "the queue to fill")
	op.waitTrue(`Number(`+roomField(room, "admitted_per_second")+`) > 0`, "admissions to show")
	<-filled
	op.waitTrue(`document.querySelectorAll('`+card+` .u-over').length === 1`, "the chart")
	op.screenshot("admin-02-filling")

	// Pause from the dashboard, after a confirmation.
	op.do(chromedp.Click(chromedp.CSS(card + ` [data-act="pause"]`)))
	op.waitState("confirm")
	require.Contains(t, op.text("confirm-text"), "Pause "+room+"?")
	op.screenshot("admin-03-confirm-pause")
	op.do(chromedp.Click(chromedp.ID("confirm-cancel")))
	op.do(chromedp.WaitNotVisible(chromedp.ID("confirm")))
	cfg, err := store.RoomConfig(t.Context(), room)
	require.NoError(t, err)
	require.Equal(t, waitroom.RoomOpen, cfg.State, "cancelled: nothing changed")

	op.do(chromedp.Click(chromedp.CSS(card+` [data-act="pause"]`)), chromedp.WaitVisible(chromedp.ID("confirm")),
		chromedp.Click(chromedp.ID("confirm-ok")))
	op.waitTrue(`document.querySelector('`+card+` .state').textContent === "paused"`, "the card to say paused")
	cfg, err = store.RoomConfig(t.Context(), room)
	require.NoError(t, err)
	require.Equal(t, waitroom.RoomPaused, cfg.State)
	// The pause takes effect: across two fresh samples, nobody is admitted.
	paused := stats()
	seen := op.eval(`document.getElementById("sampled").textContent`)
	for range 2 {
		op.waitTrue(`document.getElementById("sampled").textContent !== `+strconv.Quote(seen), "a new sample")
		seen = op.eval(`document.getElementById("sampled").textContent`)
	}
	require.Equal(t, paused.Admitted, stats().Admitted, "a paused room admits nobody")
	require.Equal(t, paused.Waiting, op.number(room, "waiting"))
	require.Equal(t, "on hold", op.eval(roomField(room, "eta_last")))
	op.screenshot("admin-04-paused")

	// A faster rate, then resume: the queue drains.
	op.do(chromedp.SendKeys(chromedp.CSS(card+` input[name="rate"]`), "150"),
		chromedp.Click(chromedp.CSS(card+` .rate-form button`)), chromedp.WaitVisible(chromedp.ID("confirm")))
	require.Contains(t, op.text("confirm-text"), "from 40 to 150 users/s")
	op.do(chromedp.Click(chromedp.ID("confirm-ok")))
	op.waitTrue(roomField(room, "rate")+` === "150/s"`, "the new rate")
	cfg, err = store.RoomConfig(t.Context(), room)
	require.NoError(t, err)
	require.Equal(t, 150.0, cfg.Rate)

	op.do(chromedp.Click(chromedp.CSS(card+` [data-act="resume"]`)), chromedp.WaitVisible(chromedp.ID("confirm")),
		chromedp.Click(chromedp.ID("confirm-ok")))
	op.waitTrue(roomField(room, "waiting")+` === "0"`, "the queue to drain")
	require.Zero(t, stats().Waiting)
	require.Equal(t, "no queue", op.eval(roomField(room, "eta_last")))
	op.screenshot("admin-05-drained")

	// A room that tracks stock shows what is left and what is sold.
	stocked := room + "-stock"
	_, err = store.CreateRoom(t.Context(), stocked, waitroom.RoomConfig{Rate: 40, Stock: 3})
	require.NoError(t, err)
	for _, u := range []string{"s1", "s2", "s3"} {
		_, err := store.Enter(t.Context(), stocked, u)
		require.NoError(t, err)
	}
	stockCard := fmt.Sprintf(`[data-room=%q]`, stocked)
	op.do(chromedp.WaitVisible(chromedp.CSS(stockCard)))
	op.waitTrue(roomField(stocked, "live_tokens")+` === "3"`, "three admitted, three units reserved")
	op.waitTrue(roomField(stocked, "units_left")+` === "0"`, "no unit left unreserved")
	require.Equal(t, int64(0), op.number(stocked, "sold"))
	for i, u := range []string{"s1", "s2", "s3"} {
		st, err := store.Status(t.Context(), stocked, u)
		require.NoError(t, err)
		h, err := store.Claim(t.Context(), stocked, u, st.Token)
		require.NoError(t, err)
		require.NoError(t, store.Complete(t.Context(), h))
		if i == 0 {
			op.waitTrue(roomField(stocked, "sold")+` === "1"`, "one sold")
		}
	}
	op.waitTrue(roomField(stocked, "sold")+` === "3"`, "all sold")
	op.do(chromedp.WaitVisible(chromedp.CSS(stockCard + ` .sold-out`)))
	require.Equal(t, "sold out", op.eval(roomField(stocked, "eta_last")))
	require.Equal(t, "true", op.eval(`String(document.querySelector('`+card+` [data-optional="units_left"]').hidden)`),
		"a room without stock shows no stock")
	op.screenshot("admin-06-stock")

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
	op.do(chromedp.Reload())
	op.do(chromedp.WaitVisible(chromedp.CSS(card)))
	op.waitTrue(`document.querySelector('`+card+` .pass-count').textContent === "2 (1 valid)"`, "the passes")
	op.do(chromedp.Click(chromedp.CSS(card + ` .passes summary`)))
	row := fmt.Sprintf(`%s tr[data-pass=%q]`, card, pass.ID)
	op.do(chromedp.WaitVisible(chromedp.CSS(row)))
	require.Equal(t, "2 of 3", op.eval(`document.querySelector('`+row+` td:nth-child(2)').textContent`))
	require.Equal(t, "used up", op.eval(fmt.Sprintf(`document.querySelector('%s tr[data-pass=%q]').dataset.state`, card, used.ID)))
	op.screenshot("admin-07-passes")
	op.do(chromedp.Click(chromedp.CSS(row+` [data-act="revoke"]`)), chromedp.WaitVisible(chromedp.ID("confirm")))
	require.Contains(t, op.text("confirm-text"), "Revoke pass "+pass.ID[:8])
	op.do(chromedp.Click(chromedp.ID("confirm-ok")))
	op.waitTrue(`document.querySelector('`+row+`').dataset.state === "revoked"`, "the pass to show revoked")
	passes, err := store.Passes(t.Context(), room)
	require.NoError(t, err)
	require.True(t, passes[0].Revoked)
	_, err = store.EnterWithPass(t.Context(), room, "after", pass.ID)
	require.ErrorIs(t, err, waitroom.ErrPassInvalid)

	// Signing out forgets the token.
	op.do(chromedp.Click(chromedp.ID("logout")))
	op.waitState("login")
	require.Equal(t, "", op.eval(`sessionStorage.getItem("waitroom.adminToken") || ""`))
	require.Equal(t, "0", op.eval(`String(document.querySelectorAll("[data-room]").length)`))
}

// TestDashboardBrowserRateLimited: once an address has used up its wrong
// tokens, the sign-in says so and when to try again, even with the right
// token, instead of blaming the network.
func TestDashboardBrowserRateLimited(t *testing.T) {
	t.Parallel()
	store := memRoom(t, "default", waitroom.RoomConfig{})
	// The limit's clock stands still: the wait is an hour exactly, however
	// long the browser takes between the two attempts.
	stopped := time.Now()
	srv := httptest.NewServer(mustServer(t, server.Config{Store: store, AdminToken: adminToken,
		AdminAuthLimit: waitroom.Limit{Rate: 1.0 / 3600, Burst: 1}, Now: func() time.Time { return stopped }}))
	t.Cleanup(srv.Close)
	op := newVisitor(t, newBrowser(t))
	op.open(srv.URL + "/admin/")
	op.waitState("login")
	op.do(chromedp.SendKeys(chromedp.ID("token"), "not-the-admin-token"), chromedp.Click(chromedp.ID("signin")))
	op.waitState("login-error")
	require.Equal(t, "That token was refused.", op.text("login-error"))
	op.do(chromedp.SendKeys(chromedp.ID("token"), adminToken), chromedp.Click(chromedp.ID("signin")))
	op.waitText("login-error", "Too many wrong tokens from this address; try again in 3600 s.")
	require.Equal(t, "", op.eval(`sessionStorage.getItem("waitroom.adminToken") || ""`))
}
