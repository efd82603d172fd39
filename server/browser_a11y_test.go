package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/server"
)

// The waiting page for everybody: axe-core (the rules of WCAG 2.2 A and
// AA) on every state the page shows, reached as a visitor reaches it, in
// two languages, light and dark, on a desktop and on a phone; and what
// axe cannot judge by itself: what is announced and when, the focus, the
// keyboard, motion, and the page's weight.

var axeTags = []string{"wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"}

// axeSource is axe.min.js, which ./scripts/test installs with npm (into
// the cache directory it names in WAITROOM_AXE). Missing, the test fails.
func axeSource(t *testing.T) string {
	t.Helper()
	path := os.Getenv("WAITROOM_AXE")
	if path == "" {
		cache, err := os.UserCacheDir()
		require.NoError(t, err)
		path = filepath.Join(cache, "waitroom", "axe-core", "node_modules", "axe-core", "axe.min.js")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("axe-core is missing (%v): run ./scripts/test, which installs it with npm, or set WAITROOM_AXE to its axe.min.js", err)
	}
	return string(b)
}

// auditor runs axe and counts its runs.
type auditor struct {
	t    *testing.T
	axe  string
	runs int
}

type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// audit runs axe on what tb shows now, in light and dark, on each
// viewport: any violation fails the test, with where it is.
func (a *auditor) audit(tb *tab, name string) {
	a.t.Helper()
	for _, v := range a.violations(tb, name) {
		a.t.Error(v)
	}
}

// violations runs axe as audit does and returns what it found.
func (a *auditor) violations(tb *tab, name string) []string {
	a.t.Helper()
	tb.t.Helper()
	var found []string
	defer tb.do(chromedp.EmulateViewport(viewports[0].width, viewports[0].height, chromedp.EmulateScale(viewports[0].scale), chromedp.EmulateMobile))
	defer setScheme(tb, "light")
	for _, scheme := range []string{"light", "dark"} {
		setScheme(tb, scheme)
		for _, vp := range viewports {
			opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(vp.scale)}
			if vp.mobile {
				opts = append(opts, chromedp.EmulateMobile)
			}
			tb.do(chromedp.EmulateViewport(vp.width, vp.height, opts...))
			if tb.eval(`typeof axe`) != "object" {
				// Through the DevTools protocol: the page's policy runs no
				// script but its own.
				tb.eval(a.axe + `; "loaded"`)
			}
			tags, _ := json.Marshal(axeTags)
			out := tb.evalAwait(`axe.run(document, {runOnly: {type: "tag", values: ` + string(tags) + `}, resultTypes: ["violations"]}).then(function (r) {
				return JSON.stringify(r.violations.map(function (v) {
					return {id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(function (n) { return n.target.join(" ") + " " + n.html.slice(0, 160) + " — " + (n.failureSummary || ""); })};
				}));
			})`)
			var violations []axeViolation
			require.NoError(a.t, json.Unmarshal([]byte(out), &violations))
			a.runs++
			for _, v := range violations {
				found = append(found, fmt.Sprintf("%s, %s, %s: axe %s (%s): %s\n  %s", name, scheme, vp.name, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n  ")))
			}
		}
	}
	return found
}

func setScheme(tb *tab, scheme string) {
	tb.t.Helper()
	sendCDP(tb, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
}

func (tb *tab) evalAwait(js string) string {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, browserWait)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
	require.NoError(tb.t, err)
	return s
}

// waitJS waits until the expression is true on the page.
func (tb *tab) waitJS(js string) {
	tb.t.Helper()
	tb.do(chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(50*time.Millisecond)))
}

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
	a := &auditor{t: t, axe: axeSource(t)}
	browser := newBrowser(t)
	opensAt := time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC) // an hour after the fixtures' clock
	audited := map[string]bool{}

	for _, lang := range []string{"en", "ko"} {
		q := "?lang=" + lang
		check := func(tb *tab, state string) {
			t.Helper()
			a.audit(tb, state+" ("+lang+")")
			audited[state] = true
		}

		// join: without scripts the page stays on its join form (the
		// script joins at once), and the keyboard joins by it.
		f := auditFixture(t, pageOptions{})
		tb := newVisitor(t, browser)
		sendCDP(tb, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		tb.open(f.srv.URL + "/" + q)
		tb.waitState("join")
		// Scripts back on for axe: the page's own script was passed over
		// at load and stays so.
		sendCDP(tb, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: false})
		check(tb, "join")
		require.Equal(t, "join", tb.eval(`document.body.getAttribute("data-state")`))
		tb.do(chromedp.KeyEvent(kb.Tab))
		require.Equal(t, "join-button", tb.eval(`document.activeElement.id`), "the join button is the first stop of the keyboard")
		tb.do(chromedp.KeyEvent(kb.Enter))
		tb.waitState("waiting")
		require.Equal(t, int64(1), f.waiting(), "joined by the keyboard")

		// scheduled, with its countdown running.
		f = auditFixture(t, pageOptions{room: waitroom.RoomConfig{OpensAt: opensAt}})
		tb = newVisitor(t, browser)
		tb.open(f.srv.URL + "/" + q)
		tb.waitState("scheduled")
		tb.waitJS(`/^\d+:\d\d:\d\d$/.test(document.getElementById("opens-in").textContent)`)
		check(tb, "scheduled")

		// waiting, then admitted, ordering and ordered, the order placed
		// by the keyboard where "your turn" put the focus.
		release := make(chan struct{})
		f = auditFixture(t, pageOptions{server: heldOrders(release)})
		f.enterUsers("u1", "u2")
		tb = newVisitor(t, browser)
		tb.open(f.srv.URL + "/" + q)
		tb.waitState("waiting")
		tb.waitText("position", "3")
		check(tb, "waiting")
		f.admitNext(3)
		tb.waitState("admitted")
		require.Equal(t, "order", tb.eval(`document.activeElement.id`), "your turn puts the focus on the order")
		check(tb, "admitted")
		tb.do(chromedp.KeyEvent(kb.Enter))
		tb.waitJS(`document.getElementById("order").disabled`)
		check(tb, "ordering")
		close(release)
		tb.waitState("ordered")
		require.NotEmpty(t, tb.text("order-id"))
		require.Equal(t, "ordered", tb.eval(`document.activeElement.closest("section").id`), "the keyboard goes on with the page")
		check(tb, "ordered")

		f = auditFixture(t, pageOptions{soldOut: true})
		tb = newVisitor(t, browser)
		tb.open(f.srv.URL + "/" + q)
		tb.waitState("waiting")
		f.admitNext(1)
		tb.waitState("admitted")
		tb.do(chromedp.Click(chromedp.ID("order")))
		tb.waitState("sold_out")
		check(tb, "sold out")

		f = auditFixture(t, pageOptions{})
		f.setState(waitroom.RoomClosed)
		tb = newVisitor(t, browser)
		tb.open(f.srv.URL + "/" + q)
		tb.waitState("closed")
		check(tb, "closed")

		f = auditFixture(t, pageOptions{})
		f.enterUsers("u1")
		f.setState(waitroom.RoomPaused)
		tb = newVisitor(t, browser)
		tb.open(f.srv.URL + "/" + q)
		tb.waitState("paused")
		check(tb, "paused")

		f = auditFixture(t, pageOptions{room: waitroom.RoomConfig{MaxQueue: 1}})
		f.enterUsers("u1")
		tb = newVisitor(t, browser)
		tb.open(f.srv.URL + "/" + q)
		tb.waitState("queue_full")
		check(tb, "full")

		f = auditFixture(t, pageOptions{room: waitroom.RoomConfig{InviteOnly: true}})
		tb = newVisitor(t, browser)
		tb.open(f.srv.URL + "/" + q)
		tb.waitState("invitation")
		check(tb, "invite-only")

		// rate limited: a second new visitor from this address within the
		// limit's second is told to wait on the join view.
		f = auditFixture(t, pageOptions{server: func(c *server.Config) { c.VisitorRateLimit = 0.001 }})
		tb = newVisitor(t, browser)
		tb.open(f.srv.URL + "/" + q)
		tb.waitState("waiting")
		tb = newVisitor(t, browser)
		tb.open(f.srv.URL + "/" + q)
		tb.waitState("join-note")
		require.Equal(t, int64(1), f.waiting())
		check(tb, "rate limited")

		f = auditFixture(t, pageOptions{})
		tb = newVisitor(t, browser)
		tb.open(f.srv.URL + "/rooms/Bad.Room" + q)
		tb.waitState("error")
		check(tb, "error")

		tb.open(f.srv.URL + "/rooms/nosuch" + q)
		tb.waitState("no_room")
		check(tb, "no room")
	}
	// A branded room, with the operator's theme and logo.
	f := newPageFixture(t, pageOptions{server: func(c *server.Config) {
		c.PageDir = pageDir(t, map[string]string{"logo.svg": testLogo, "theme.css": testTheme, "messages/en.json": `{"page.logo": "ACME"}`})
	}})
	f.enterUsers("u1")
	tb := newVisitor(t, browser)
	tb.open(f.srv.URL + "/")
	tb.waitState("waiting")
	a.audit(tb, "waiting (branded)")
	a.runs -= 2 * len(viewports) // counted apart below

	// axe sees what it should: a theme whose muted text is too pale.
	f = newPageFixture(t, pageOptions{server: func(c *server.Config) {
		c.PageDir = pageDir(t, map[string]string{"theme.css": ":root { --muted: #c8c8c8; } @media (prefers-color-scheme: dark) { :root { --muted: #3a3a3a; } }"})
	}})
	tb = newVisitor(t, browser)
	tb.open(f.srv.URL + "/rooms/nosuch")
	tb.waitState("no_room")
	found := a.violations(tb, "pale theme")
	a.runs -= 2 * len(viewports)
	require.Len(t, found, 2*len(viewports), "a contrast violation in each scheme and width: %q", found)
	for _, v := range found {
		require.Contains(t, v, "axe color-contrast (serious)")
	}

	states := len(audited)
	require.Equal(t, 14, states, "states audited: %v", audited)
	require.Equal(t, states*2*2*len(viewports), a.runs)
	t.Logf("axe (%s): %d states × 2 languages × 2 colour schemes × %d widths = %d runs without a violation, and a branded room's waiting view in %d more",
		strings.Join(axeTags, ", "), states, len(viewports), a.runs, 2*len(viewports))
}

// TestPageAnnounces: a screen reader hears a change of place or wait once
// (not at every poll) and "your turn" once, assertively; the bar is a
// progressbar with its values and an edge of at least 3:1 in either
// scheme; reduced motion stops its movement.
func TestPageAnnounces(t *testing.T) {
	t.Parallel()
	browser := newBrowser(t)
	f := newPageFixture(t, pageOptions{})
	f.enterUsers("u1", "u2")
	tb := newVisitor(t, browser)
	tb.open(f.srv.URL + "/")
	tb.waitState("waiting")
	tb.waitText("position", "3")

	tb.do(chromedp.Reload())
	tb.waitState("waiting")
	// Count what is written into the regions from here on.
	tb.eval(`window.said = {announce: [], alert: []};
		["announce", "alert"].forEach(function (id) {
			new MutationObserver(function () { window.said[id].push(document.getElementById(id).textContent); })
				.observe(document.getElementById(id), {childList: true, characterData: true, subtree: true});
		}); "watching"`)
	polls := func() int {
		n, err := strconv.Atoi(tb.eval(`String(performance.getEntriesByType("resource").filter(function (e) { return /\/status$/.test(e.name); }).length)`))
		require.NoError(t, err)
		return n
	}
	said := func(id string) []string {
		var out []string
		require.NoError(t, json.Unmarshal([]byte(tb.eval(`JSON.stringify(window.said.`+id+`)`)), &out))
		return out
	}
	// Polls that change nothing say nothing.
	start := polls()
	tb.waitJS(fmt.Sprintf(`performance.getEntriesByType("resource").filter(function (e) { return /\/status$/.test(e.name); }).length >= %d`, start+2))
	require.Empty(t, said("announce"), "a poll that changes nothing is not announced")
	require.Equal(t, "", tb.text("announce"), "the page as loaded is read as it is")

	f.admitNext(1)
	tb.waitText("position", "2")
	require.Equal(t, []string{"Your place: 2. Estimated wait: less than a minute."}, said("announce"))
	start = polls()
	tb.waitJS(fmt.Sprintf(`performance.getEntriesByType("resource").filter(function (e) { return /\/status$/.test(e.name); }).length >= %d`, start+2))
	require.Len(t, said("announce"), 1, "said once, not at every poll")

	// The bar: a progressbar with its values, its edge seen against the card.
	require.Equal(t, "progressbar|0|100|50", tb.eval(`(function (p) {
		return [p.getAttribute("role"), p.getAttribute("aria-valuemin"), p.getAttribute("aria-valuemax"), p.getAttribute("aria-valuenow")].join("|");
	})(document.getElementById("progress"))`))
	for _, scheme := range []string{"light", "dark"} {
		setScheme(tb, scheme)
		ratio, err := strconv.ParseFloat(tb.eval(`(function () {
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
	require.Equal(t, "rgb(21, 23, 25)", tb.eval(`getComputedStyle(document.documentElement).backgroundColor`), "dark follows prefers-color-scheme")
	setScheme(tb, "light")
	require.Equal(t, "rgb(244, 244, 241)", tb.eval(`getComputedStyle(document.documentElement).backgroundColor`))

	transition := `getComputedStyle(document.getElementById("join-button")).transitionDuration`
	require.Equal(t, "0.2s", tb.eval(transition))
	sendCDP(tb, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-reduced-motion", Value: "reduce"}}})
	require.Equal(t, "0s", tb.eval(transition), "reduced motion: nothing moves")

	f.admitNext(1)
	f.admitNext(1)
	tb.waitState("admitted")
	require.Equal(t, "order", tb.eval(`document.activeElement.id`))
	tb.waitJS(`document.getElementById("time-left").textContent !== ""`)
	require.Equal(t, []string{"It's your turn. Place your order before the time runs out."}, said("alert"), "said once, assertively")
	require.Equal(t, "assertive", tb.eval(`document.getElementById("alert").getAttribute("aria-live")`))
}

// TestPageWeightInTheBrowser: a waiting view, from nothing (the page, the join, the
// branded page's theme and logo), transfers at most 40 KB.
func TestPageWeightInTheBrowser(t *testing.T) {
	t.Parallel()
	browser := newBrowser(t)
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
			tb := newVisitor(t, browser)
			tb.open(f.srv.URL + "/?lang=" + lang)
			tb.waitState("waiting")
			if c.dir != nil {
				tb.waitJS(`document.querySelector("img.logo").complete`)
			}
			var entries []struct {
				Name string  `json:"name"`
				Size float64 `json:"size"`
			}
			require.NoError(t, json.Unmarshal([]byte(tb.eval(`JSON.stringify(performance.getEntriesByType("navigation").concat(performance.getEntriesByType("resource")).map(function (e) {
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
			sendCDP(tb, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-reduced-motion", Value: "reduce"}}})
			f.admitNext(2)
			tb.waitText("position", "2")
			tb.screenshot("page-" + c.name + "-" + lang)
		}
	}
}
