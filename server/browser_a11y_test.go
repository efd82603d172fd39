package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/server"
)

// The waiting page for everybody: axe-core (the rules of WCAG 2.2 A and
// AA) on every state the page shows, reached as a visitor reaches it, in
// two languages, light and dark, on a desktop and on a phone; and what
// axe cannot judge by itself: what is announced and when, the focus, the
// keyboard, motion, and the page's weight.

// heldOrders holds the shop's answer to every order until released: the
// page's "ordering" moment, which is otherwise too short to look at.
func heldOrders(release <-chan struct{}) func(*server.Config) {
	return func(c *server.Config) {
		inner := c.Protected
		c.Protected = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
				inner.ServeHTTP(w, r)
			case <-r.Context().Done():
			}
		})
	}
}

// auditFixture is a page fixture for TestPageAccessibility: with
// WAITROOM_AUDIT_PAGE_DIR set, branded by that page directory, so an
// operator checks a brand in every state before a drop.
func auditFixture(t *testing.T, opts pageOptions) *pageFixture {
	t.Helper()
	if dir := os.Getenv("WAITROOM_AUDIT_PAGE_DIR"); dir != "" {
		inner := opts.server
		opts.server = func(c *server.Config) {
			c.PageDir = dir
			if inner != nil {
				inner(c)
			}
		}
	}
	return newPageFixture(t, opts)
}

func TestPageAccessibility(t *testing.T) {
	t.Parallel()
	a := &servertest.Auditor{T: t, Axe: servertest.AxeSource(t)}
	browser := servertest.NewBrowser(t)
	opensAt := time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC) // an hour after the fixtures' clock
	audited := map[string]bool{}

	for _, lang := range []string{"en", "ko"} {
		q := "?lang=" + lang
		check := func(tb *servertest.Tab, state string) {
			t.Helper()
			a.Audit(tb, state+" ("+lang+")")
			audited[state] = true
		}

		// join: without scripts the page stays on its join form (the
		// script joins at once), and the keyboard joins by it.
		f := auditFixture(t, pageOptions{})
		tb := servertest.NewVisitor(t, browser)
		servertest.SendCDP(tb, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		tb.Open(f.srv.URL + "/" + q)
		tb.WaitState("join")
		// Scripts back on for axe: the page's own script was passed over
		// at load and stays so.
		servertest.SendCDP(tb, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: false})
		check(tb, "join")
		require.Equal(t, "join", tb.Eval(`document.body.getAttribute("data-state")`))
		tb.Do(chromedp.KeyEvent(kb.Tab))
		require.Equal(t, "join-button", tb.Eval(`document.activeElement.id`), "the join button is the first stop of the keyboard")
		tb.Do(chromedp.KeyEvent(kb.Enter))
		tb.WaitState("waiting")
		require.Equal(t, int64(1), f.waiting(), "joined by the keyboard")

		// scheduled, with its countdown running.
		f = auditFixture(t, pageOptions{room: waitroom.RoomConfig{OpensAt: opensAt}})
		tb = servertest.NewVisitor(t, browser)
		tb.Open(f.srv.URL + "/" + q)
		tb.WaitState("scheduled")
		tb.WaitJS(`/^\d+:\d\d:\d\d$/.test(document.getElementById("opens-in").textContent)`)
		check(tb, "scheduled")

		// waiting, then admitted, ordering and ordered, the order placed
		// by the keyboard where "your turn" put the focus.
		release := make(chan struct{})
		f = auditFixture(t, pageOptions{server: heldOrders(release)})
		f.enterUsers("u1", "u2")
		tb = servertest.NewVisitor(t, browser)
		tb.Open(f.srv.URL + "/" + q)
		tb.WaitState("waiting")
		tb.WaitText("position", "3")
		check(tb, "waiting")
		f.admitNext(3)
		tb.WaitState("admitted")
		require.Equal(t, "order", tb.Eval(`document.activeElement.id`), "your turn puts the focus on the order")
		check(tb, "admitted")
		tb.Do(chromedp.KeyEvent(kb.Enter))
		tb.WaitJS(`document.getElementById("order").disabled`)
		check(tb, "ordering")
		close(release)
		tb.WaitState("ordered")
		require.NotEmpty(t, tb.Text("order-id"))
		require.Equal(t, "ordered", tb.Eval(`document.activeElement.closest("section").id`), "the keyboard goes on with the page")
		check(tb, "ordered")

		f = auditFixture(t, pageOptions{soldOut: true})
		tb = servertest.NewVisitor(t, browser)
		tb.Open(f.srv.URL + "/" + q)
		tb.WaitState("waiting")
		f.admitNext(1)
		tb.WaitState("admitted")
		tb.Do(chromedp.Click(chromedp.ID("order")))
		tb.WaitState("sold_out")
		check(tb, "sold out")

		f = auditFixture(t, pageOptions{})
		f.setState(waitroom.RoomClosed)
		tb = servertest.NewVisitor(t, browser)
		tb.Open(f.srv.URL + "/" + q)
		tb.WaitState("closed")
		check(tb, "closed")

		f = auditFixture(t, pageOptions{})
		f.enterUsers("u1")
		f.setState(waitroom.RoomPaused)
		tb = servertest.NewVisitor(t, browser)
		tb.Open(f.srv.URL + "/" + q)
		tb.WaitState("paused")
		check(tb, "paused")

		f = auditFixture(t, pageOptions{room: waitroom.RoomConfig{MaxQueue: 1}})
		f.enterUsers("u1")
		tb = servertest.NewVisitor(t, browser)
		tb.Open(f.srv.URL + "/" + q)
		tb.WaitState("queue_full")
		check(tb, "full")

		f = auditFixture(t, pageOptions{room: waitroom.RoomConfig{InviteOnly: true}})
		tb = servertest.NewVisitor(t, browser)
		tb.Open(f.srv.URL + "/" + q)
		tb.WaitState("invitation")
		check(tb, "invite-only")

		// rate limited: a second new visitor from this address within the
		// limit's second is told to wait on the join view.
		f = auditFixture(t, pageOptions{server: func(c *server.Config) { c.VisitorRateLimit = 0.001 }})
		tb = servertest.NewVisitor(t, browser)
		tb.Open(f.srv.URL + "/" + q)
		tb.WaitState("waiting")
		tb = servertest.NewVisitor(t, browser)
		tb.Open(f.srv.URL + "/" + q)
		tb.WaitState("join-note")
		require.Equal(t, int64(1), f.waiting())
		check(tb, "rate limited")

		f = auditFixture(t, pageOptions{})
		tb = servertest.NewVisitor(t, browser)
		tb.Open(f.srv.URL + "/rooms/Bad.Room" + q)
		tb.WaitState("error")
		check(tb, "error")

		tb.Open(f.srv.URL + "/rooms/nosuch" + q)
		tb.WaitState("no_room")
		check(tb, "no room")
	}
	// A branded room, with the operator's theme and logo.
	f := newPageFixture(t, pageOptions{server: func(c *server.Config) {
		c.PageDir = pageDir(t, map[string]string{"logo.svg": testLogo, "theme.css": testTheme, "messages/en.json": `{"page.logo": "ACME"}`})
	}})
	f.enterUsers("u1")
	tb := servertest.NewVisitor(t, browser)
	tb.Open(f.srv.URL + "/")
	tb.WaitState("waiting")
	a.Audit(tb, "waiting (branded)")
	a.Runs -= 2 * len(servertest.Viewports) // counted apart below

	// axe sees what it should: a theme whose muted text is too pale.
	f = newPageFixture(t, pageOptions{server: func(c *server.Config) {
		c.PageDir = pageDir(t, map[string]string{"theme.css": ":root { --muted: #c8c8c8; } @media (prefers-color-scheme: dark) { :root { --muted: #3a3a3a; } }"})
	}})
	tb = servertest.NewVisitor(t, browser)
	tb.Open(f.srv.URL + "/rooms/nosuch")
	tb.WaitState("no_room")
	found := a.Violations(tb, "pale theme")
	a.Runs -= 2 * len(servertest.Viewports)
	require.Len(t, found, 2*len(servertest.Viewports), "a contrast violation in each scheme and width: %q", found)
	for _, v := range found {
		require.Contains(t, v, "axe color-contrast (serious)")
	}

	states := len(audited)
	require.Equal(t, 14, states, "states audited: %v", audited)
	require.Equal(t, states*2*2*len(servertest.Viewports), a.Runs)
	t.Logf("axe (%s): %d states × 2 languages × 2 colour schemes × %d widths = %d runs without a violation, and a branded room's waiting view in %d more",
		strings.Join(servertest.AxeTags, ", "), states, len(servertest.Viewports), a.Runs, 2*len(servertest.Viewports))
}

// TestPageAnnounces: a screen reader hears a change of place or wait once
// (not at every poll) and "your turn" once, assertively; the bar is a
// progressbar with its values and an edge of at least 3:1 in either
// scheme; reduced motion stops its movement.
func TestPageAnnounces(t *testing.T) {
	t.Parallel()
	browser := servertest.NewBrowser(t)
	f := newPageFixture(t, pageOptions{})
	f.enterUsers("u1", "u2")
	tb := servertest.NewVisitor(t, browser)
	tb.Open(f.srv.URL + "/")
	tb.WaitState("waiting")
	tb.WaitText("position", "3")

	tb.Do(chromedp.Reload())
	tb.WaitState("waiting")
	// Count what is written into the regions from here on.
	tb.Eval(`window.said = {announce: [], alert: []};
		["announce", "alert"].forEach(function (id) {
			new MutationObserver(function () { window.said[id].push(document.getElementById(id).textContent); })
				.observe(document.getElementById(id), {childList: true, characterData: true, subtree: true});
		}); "watching"`)
	polls := func() int {
		n, err := strconv.Atoi(tb.Eval(`String(performance.getEntriesByType("resource").filter(function (e) { return /\/status$/.test(e.name); }).length)`))
		require.NoError(t, err)
		return n
	}
	said := func(id string) []string {
		var out []string
		require.NoError(t, json.Unmarshal([]byte(tb.Eval(`JSON.stringify(window.said.`+id+`)`)), &out))
		return out
	}
	// Polls that change nothing say nothing.
	start := polls()
	tb.WaitJS(fmt.Sprintf(`performance.getEntriesByType("resource").filter(function (e) { return /\/status$/.test(e.name); }).length >= %d`, start+2))
	require.Empty(t, said("announce"), "a poll that changes nothing is not announced")
	require.Equal(t, "", tb.Text("announce"), "the page as loaded is read as it is")

	f.admitNext(1)
	tb.WaitText("position", "2")
	require.Equal(t, []string{"Your place: 2. Estimated wait: less than a minute."}, said("announce"))
	start = polls()
	tb.WaitJS(fmt.Sprintf(`performance.getEntriesByType("resource").filter(function (e) { return /\/status$/.test(e.name); }).length >= %d`, start+2))
	require.Len(t, said("announce"), 1, "said once, not at every poll")

	// The bar: a progressbar with its values, its edge seen against the card.
	require.Equal(t, "progressbar|0|100|50", tb.Eval(`(function (p) {
		return [p.getAttribute("role"), p.getAttribute("aria-valuemin"), p.getAttribute("aria-valuemax"), p.getAttribute("aria-valuenow")].join("|");
	})(document.getElementById("progress"))`))
	for _, scheme := range []string{"light", "dark"} {
		servertest.SetScheme(tb, scheme)
		ratio, err := strconv.ParseFloat(tb.Eval(`(function () {
			function lum(c) {
				var v = c.match(/\d+(\.\d+)?/g).slice(0, 3).map(function (x) { x = x / 255; return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); });
				return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
			}
			var edge = lum(getComputedStyle(document.getElementById("progress")).borderTopColor);
			var card = lum(getComputedStyle(document.querySelector(".card")).backgroundColor);
			return String((Math.max(edge, card) + 0.05) / (Math.min(edge, card) + 0.05));
		})()`), 64)
		require.NoError(t, err)
		require.GreaterOrEqual(t, ratio, 3.0, "%s: the progress track's edge against the card", scheme)
		t.Logf("%s: progress track edge %.2f:1 against the card", scheme, ratio)
	}
	require.Equal(t, "rgb(21, 23, 25)", tb.Eval(`getComputedStyle(document.documentElement).backgroundColor`), "dark follows prefers-color-scheme")
	servertest.SetScheme(tb, "light")
	require.Equal(t, "rgb(244, 244, 241)", tb.Eval(`getComputedStyle(document.documentElement).backgroundColor`))

	transition := `getComputedStyle(document.getElementById("join-button")).transitionDuration`
	require.Equal(t, "0.2s", tb.Eval(transition))
	servertest.SendCDP(tb, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-reduced-motion", Value: "reduce"}}})
	require.Equal(t, "0s", tb.Eval(transition), "reduced motion: nothing moves")

	f.admitNext(1)
	f.admitNext(1)
	tb.WaitState("admitted")
	require.Equal(t, "order", tb.Eval(`document.activeElement.id`))
	tb.WaitJS(`document.getElementById("time-left").textContent !== ""`)
	require.Equal(t, []string{"It's your turn. Place your order before the time runs out."}, said("alert"), "said once, assertively")
	require.Equal(t, "assertive", tb.Eval(`document.getElementById("alert").getAttribute("aria-live")`))
}

// TestPageWeightInTheBrowser: a waiting view, from nothing (the page, the join, the
// branded page's theme and logo), transfers at most 40 KB.
func TestPageWeightInTheBrowser(t *testing.T) {
	t.Parallel()
	browser := servertest.NewBrowser(t)
	for _, c := range []struct {
		name string
		dir  map[string]string
	}{
		{"default", nil},
		{"branded", map[string]string{"logo.svg": testLogo, "theme.css": testTheme}},
	} {
		for _, lang := range []string{"en", "ko"} {
			opts := pageOptions{}
			if c.dir != nil {
				dir := pageDir(t, c.dir)
				opts.server = func(cfg *server.Config) { cfg.PageDir = dir }
			}
			f := newPageFixture(t, opts)
			f.enterUsers("u1", "u2", "u3")
			tb := servertest.NewVisitor(t, browser)
			tb.Open(f.srv.URL + "/?lang=" + lang)
			tb.WaitState("waiting")
			if c.dir != nil {
				tb.WaitJS(`document.querySelector("img.logo").complete`)
			}
			var entries []struct {
				Name string  `json:"name"`
				Size float64 `json:"size"`
			}
			require.NoError(t, json.Unmarshal([]byte(tb.Eval(`JSON.stringify(performance.getEntriesByType("navigation").concat(performance.getEntriesByType("resource")).map(function (e) {
				return {name: e.name, size: e.transferSize};
			}))`)), &entries))
			total := 0.0
			var parts []string
			for _, e := range entries {
				total += e.Size
				parts = append(parts, fmt.Sprintf("%s %.0f", strings.TrimPrefix(e.Name, f.srv.URL), e.Size))
			}
			require.Greater(t, entries[0].Size, 20000.0, "the page itself was measured")
			require.LessOrEqual(t, total, 40.0*1024, "%s (%s): %s", c.name, lang, strings.Join(parts, ", "))
			t.Logf("%s page (%s): %.0f bytes transferred for a waiting view: %s", c.name, lang, total, strings.Join(parts, ", "))

			// The line moves, and docs/screenshots/ shows it (README),
			// the bar where it ends.
			servertest.SendCDP(tb, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-reduced-motion", Value: "reduce"}}})
			f.admitNext(2)
			tb.WaitText("position", "2")
			tb.Screenshot("page-" + c.name + "-" + lang)
		}
	}
}
