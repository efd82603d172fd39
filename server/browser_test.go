package server_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

// The waiting page in a real headless Chromium (Debian's), driven over the
// DevTools protocol: what a visitor sees, step by step, with a screenshot
// of each state on a phone and on a desktop.

// browserWait bounds every wait for the page; the page polls at least
// once a second in these tests, so a state that is not there by then is a
// failure, not slowness.
const browserWait = 20 * time.Second

var viewports = []struct {
	name          string
	width, height int64
	scale         float64
	mobile        bool
}{
	{"phone", 390, 844, 2, true},
	{"desktop", 1280, 800, 1, false},
}

// chromiumPath finds Debian's chromium; a missing browser fails the test
// (scripts/test installs it), it is never a skip.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	t.Fatal("chromium is missing: install it (apt-get install -y chromium) or run ./scripts/test, which does")
	return ""
}

// newBrowser starts one headless Chromium with a fresh profile for the test.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(t.Context(),
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		// Headless Chromium draws no frames for a tab it keeps in the
		// background, and a screenshot of one waits for a frame forever.
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	// The first run starts the browser and binds it to its context, so it
	// runs on ctx itself, not on one with a deadline.
	require.NoError(t, chromedp.Do(ctx), "starting chromium")
	return ctx
}

// tab is one browser tab of a visitor, with the script errors it saw.
type tab struct {
	t   *testing.T
	ctx context.Context

	mu     sync.Mutex
	errors []string
}

// newVisitor opens a tab in a browser context of its own: a visitor with
// its own cookies and storage.
func newVisitor(t *testing.T, browser context.Context) *tab {
	t.Helper()
	return openTab(t, browser, chromedp.WithNewBrowserContext())
}

// sameVisitor opens another tab of the visitor that owns tb: same cookies.
func (tb *tab) sameVisitor() *tab {
	tb.t.Helper()
	return openTab(tb.t, tb.ctx)
}

func openTab(t *testing.T, parent context.Context, opts ...chromedp.ContextOption) *tab {
	t.Helper()
	tb := &tab{t: t}
	opts = append(opts, chromedp.WithListener(func(ev any) {
		// A broken script shows as an exception; a page that silently
		// stopped updating would otherwise only show as a timeout.
		if ev, ok := ev.(*runtime.EventExceptionThrown); ok {
			tb.mu.Lock()
			defer tb.mu.Unlock()
			tb.errors = append(tb.errors, ev.ExceptionDetails.Text)
		}
	}))
	ctx, cancel := chromedp.NewContext(parent, opts...)
	tb.ctx = ctx
	t.Cleanup(func() {
		cancel()
		tb.mu.Lock()
		defer tb.mu.Unlock()
		if len(tb.errors) > 0 {
			t.Errorf("script errors on the page: %q", tb.errors)
		}
	})
	// The first run opens the tab and binds it to ctx (see newBrowser).
	require.NoError(t, chromedp.Do(ctx), "opening a tab")
	tb.do(chromedp.EmulateViewport(viewports[0].width, viewports[0].height,
		chromedp.EmulateScale(viewports[0].scale), chromedp.EmulateMobile))
	return tb
}

// do runs actions within browserWait; a failure reports what the page
// showed.
func (tb *tab) do(actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	tb.doWithin(browserWait, actions...)
}

func (tb *tab) doWithin(wait time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, wait)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.t.Fatalf("%v; the page shows: %s", err, tb.describe())
	}
}

// sendCDP runs one protocol command on tb's page, its answer unread: an
// emulation setting, say.
func sendCDP[P, R any](tb *tab, cmd cdp.Command[P, R], params P) {
	tb.t.Helper()
	tb.do(func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Call(ctx, cmd, params)
		return chromedp.Void{}, err
	})
}

func (tb *tab) describe() string {
	ctx, cancel := context.WithTimeout(tb.ctx, 2*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`"[" + document.body.getAttribute("data-state") + "] " + document.body.innerText.replace(/\s+/g, " ")`))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return s
}

func (tb *tab) open(url string) {
	tb.t.Helper()
	tb.openWithin(url, browserWait)
}

func (tb *tab) openWithin(url string, wait time.Duration) {
	tb.t.Helper()
	tb.doWithin(wait, chromedp.Navigate(url))
}

// waitState waits until the page shows state's section.
func (tb *tab) waitState(state string) {
	tb.t.Helper()
	tb.waitStateWithin(state, browserWait)
}

func (tb *tab) waitStateWithin(state string, wait time.Duration) {
	tb.t.Helper()
	tb.doWithin(wait, chromedp.WaitVisible(chromedp.ID(state)))
}

// waitText waits until the element's text is want: the page updates by
// itself, so this is how a test sees the line move. Without scripts the
// page reloads itself, which ends a check midway; the next one starts on
// the new page.
func (tb *tab) waitText(id, want string) {
	tb.t.Helper()
	js := fmt.Sprintf(`document.getElementById(%q).textContent.trim() === %q`, id, want)
	deadline := time.Now().Add(browserWait)
	for {
		ctx, cancel := context.WithTimeout(tb.ctx, time.Second)
		err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](js,
			chromedp.WithPollingTimeout(time.Second), chromedp.WithPollingInterval(50*time.Millisecond)))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) || tb.ctx.Err() != nil {
			tb.t.Fatalf("#%s never showed %q: %v; the page shows: %s", id, want, err, tb.describe())
		}
	}
}

func (tb *tab) text(id string) string {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, browserWait)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.ID(id)))
	require.NoError(tb.t, err)
	return strings.TrimSpace(s)
}

// liveRegionOf names the live region the element is in, or "none": a
// clock that ticks every second must be in none.
func (tb *tab) liveRegionOf(id string) string {
	tb.t.Helper()
	return tb.eval(fmt.Sprintf(`(function () {
		var r = document.getElementById(%q).closest('[aria-live]:not([aria-live="off"]), [role="status"], [role="alert"], [role="log"]');
		return r ? r.outerHTML.slice(0, 80) : "none";
	})()`, id))
}

func (tb *tab) eval(js string) string {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, browserWait)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	require.NoError(tb.t, err)
	return s
}

// screenshot writes the visible page, as a phone and as a desktop shows
// it, to the artifacts directory.
func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	dir := os.Getenv("WAITROOM_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "artifacts", "screenshots")
	}
	require.NoError(tb.t, os.MkdirAll(dir, 0o755))
	// The tab must be in front to be drawn (see newBrowser): a closed
	// tab's neighbour, the browser's first blank tab say, may be instead.
	sendCDP(tb, cdppage.BringToFront, cdp.Empty{})
	for i := len(viewports) - 1; i >= 0; i-- { // the phone last: the tests go on as a phone
		vp := viewports[i]
		opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(vp.scale)}
		if vp.mobile {
			opts = append(opts, chromedp.EmulateMobile)
		}
		tb.do(chromedp.EmulateViewport(vp.width, vp.height, opts...))
		png := tb.capture()
		path := filepath.Join(dir, name+"-"+vp.name+".png")
		require.NoError(tb.t, os.WriteFile(path, png, 0o644))
	}
}

// captureTry bounds one screenshot attempt (see capture).
const captureTry = 4 * time.Second

// capture takes a screenshot within browserWait. A capture that meets a
// reload (a page without scripts refreshes itself every second or so)
// never answers, so each try has a few seconds and the next one finds the
// new page.
func (tb *tab) capture() []byte {
	tb.t.Helper()
	for deadline := time.Now().Add(browserWait); ; {
		ctx, cancel := context.WithTimeout(tb.ctx, captureTry)
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		cancel()
		if err == nil {
			return png
		}
		if time.Now().After(deadline) || tb.ctx.Err() != nil {
			tb.t.Fatalf("no screenshot within %s: %v; the page shows: %s", browserWait, err, tb.describe())
		}
	}
}

func TestBrowser(t *testing.T) {
	t.Parallel()
	browser := newBrowser(t)

	// A visitor opens the page behind three others, sees the line move,
	// is admitted and orders; a second tab keeps the one place.
	t.Run("journey", func(t *testing.T) {
		f := newPageFixture(t, pageOptions{})
		f.enterUsers("u1", "u2", "u3")

		visitor := newVisitor(t, browser)
		visitor.open(f.srv.URL + "/")
		visitor.waitState("waiting")
		require.Equal(t, "4", visitor.text("position"))
		require.Equal(t, "3", visitor.text("ahead"))
		require.Equal(t, "less than a minute", visitor.text("wait"))
		require.Equal(t, "0", visitor.eval(`String(document.getElementById("progress").value)`))
		require.Equal(t, int64(4), f.waiting())
		visitor.screenshot("01-waiting")

		second := visitor.sameVisitor()
		second.open(f.srv.URL + "/")
		second.waitState("waiting")
		require.Equal(t, "4", second.text("position"), "the same visitor in a second tab")
		require.Equal(t, int64(4), f.waiting(), "one place, however many tabs")
		second.screenshot("02-second-tab")

		f.admitNext(1)
		visitor.waitText("position", "3")
		visitor.waitText("progress-text", "33% of the way to the front")
		second.waitText("position", "3")
		visitor.screenshot("03-line-moves")

		f.admitNext(2)
		visitor.waitText("position", "1")
		visitor.waitText("progress-text", "You're next")
		visitor.screenshot("04-next")

		f.admitNext(1)
		visitor.waitState("admitted")
		require.Regexp(t, regexp.MustCompile(`^[45]:\d\d$`), visitor.text("time-left"))
		require.Equal(t, "Your turn", visitor.eval(`document.title`))
		require.Equal(t, "none", visitor.liveRegionOf("time-left"), "a screen reader is not read the clock every second")
		visitor.screenshot("05-admitted")

		visitor.do(chromedp.Click(chromedp.ID("order")))
		visitor.waitState("ordered")
		orderID := visitor.text("order-id")
		require.NotEmpty(t, orderID)
		visitor.screenshot("06-order-placed")

		product, err := f.shop.Product(t.Context(), testProduct)
		require.NoError(t, err)
		require.Equal(t, int64(9), product.Stock, "one order, one item")
		st, err := f.store.Stats(t.Context(), f.room)
		require.NoError(t, err)
		require.Equal(t, int64(1), st.Completed, "the entry token was spent")
	})

	// A long line: big numbers stay readable, and a reload keeps both the
	// place and the progress bar's starting point.
	t.Run("long line and reload", func(t *testing.T) {
		f := newPageFixture(t, pageOptions{})
		ahead := make([]string, 2500)
		for i := range ahead {
			ahead[i] = "u" + strconv.Itoa(i)
		}
		f.enterUsers(ahead...)
		visitor := newVisitor(t, browser)
		visitor.open(f.srv.URL + "/")
		visitor.waitState("waiting")
		require.Equal(t, "2,501", visitor.text("position"))
		require.Equal(t, "about 39–45 minutes", visitor.text("wait"), "the ETA and its 10–90% range")
		visitor.screenshot("07-long-line")

		for _, u := range ahead[:500] {
			require.NoError(t, f.store.Leave(t.Context(), f.room, u))
		}
		visitor.do(chromedp.Reload())
		visitor.waitState("waiting")
		visitor.waitText("position", "2,001")
		visitor.waitText("progress-text", "20% of the way to the front")
		require.Equal(t, int64(2001), f.waiting(), "the reload kept the place")
		visitor.screenshot("08-long-line-reloaded")
	})

	t.Run("paused", func(t *testing.T) {
		f := newPageFixture(t, pageOptions{})
		f.enterUsers("u1")
		f.setState(waitroom.RoomPaused)
		visitor := newVisitor(t, browser)
		visitor.open(f.srv.URL + "/")
		visitor.waitState("paused")
		require.Equal(t, "on hold while the sale is paused", visitor.text("wait"))
		visitor.screenshot("09-paused")

		// Resuming shows at the next poll.
		f.setState(waitroom.RoomOpen)
		visitor.do(chromedp.WaitNotVisible(chromedp.ID("paused")))
		visitor.waitText("wait", "less than a minute")
	})

	t.Run("queue full", func(t *testing.T) {
		f := newPageFixture(t, pageOptions{room: waitroom.RoomConfig{MaxQueue: 1}})
		f.enterUsers("u1")
		visitor := newVisitor(t, browser)
		visitor.open(f.srv.URL + "/")
		visitor.waitState("queue_full")
		require.Equal(t, "true", visitor.eval(`document.getElementById("retry").getAttribute("aria-disabled")`),
			"no trying again before Retry-After")
		left, err := strconv.Atoi(visitor.eval(`document.getElementById("retry-after").dataset.seconds`))
		require.NoError(t, err)
		require.Greater(t, left, 20)
		require.Regexp(t, `^Please try again in \d+ seconds\.$`, visitor.text("retry-after"))
		visitor.screenshot("10-queue-full")
		require.Equal(t, int64(1), f.waiting())
	})

	t.Run("closed", func(t *testing.T) {
		f := newPageFixture(t, pageOptions{})
		f.setState(waitroom.RoomClosed)
		visitor := newVisitor(t, browser)
		visitor.open(f.srv.URL + "/")
		visitor.waitState("closed")
		visitor.screenshot("11-closed")
	})

	t.Run("invite only", func(t *testing.T) {
		f := newPageFixture(t, pageOptions{room: waitroom.RoomConfig{InviteOnly: true}})
		visitor := newVisitor(t, browser)
		visitor.open(f.srv.URL + "/")
		visitor.waitState("invitation")
		require.Equal(t, "Only guests with an invitation can join this sale.", visitor.text("invitation-message"))
		visitor.screenshot("11-invitation")
	})

	t.Run("sold out", func(t *testing.T) {
		f := newPageFixture(t, pageOptions{soldOut: true})
		visitor := newVisitor(t, browser)
		visitor.open(f.srv.URL + "/")
		visitor.waitState("waiting")
		f.admitNext(1)
		visitor.waitState("admitted")
		visitor.do(chromedp.Click(chromedp.ID("order")))
		visitor.waitState("sold_out")
		visitor.screenshot("12-sold-out")
		st, err := f.store.Stats(t.Context(), f.room)
		require.NoError(t, err)
		require.Equal(t, int64(1), st.Released, "a refused order gives the token back")
	})

	// The turn runs out before the order: the page says so and offers the
	// line again; a visitor who left the line is told so at the next poll.
	t.Run("expired and left", func(t *testing.T) {
		f := newPageFixture(t, pageOptions{})
		visitor := newVisitor(t, browser)
		visitor.open(f.srv.URL + "/")
		visitor.waitState("waiting")
		f.admitNext(1)
		visitor.waitState("admitted")
		f.clock.Advance(waitroom.DefaultTokenTTL + time.Second)
		visitor.do(chromedp.Click(chromedp.ID("order")))
		visitor.waitState("expired")
		visitor.screenshot("13-turn-ended")

		visitor.do(chromedp.Click(chromedp.CSS("#expired a")))
		visitor.waitState("waiting")
		require.Equal(t, "1", visitor.text("position"), "back in line")
		// Leave as an app on the page would; the cookie names the visitor.
		visitor.eval(`fetch("/rooms/` + f.room + `/queue", {method: "DELETE"}), "sent"`)
		visitor.waitState("left")
		visitor.screenshot("14-left")
		require.Zero(t, f.waiting())
	})

	// The switcher turns the page into another language, the script's own
	// texts too, and the choice holds for the visitor's next visit.
	t.Run("language switcher", func(t *testing.T) {
		f := newPageFixture(t, pageOptions{})
		f.enterUsers("u1", "u2")
		visitor := newVisitor(t, browser)
		visitor.open(f.srv.URL + "/")
		visitor.waitState("waiting")
		require.Equal(t, "en", visitor.eval(`document.documentElement.lang`))
		require.Equal(t, "3", visitor.text("position"))

		visitor.do(chromedp.Click(chromedp.CSS(`#langs a[hreflang="ko"]`)))
		visitor.waitText("wait", "1분 미만")
		require.Equal(t, "ko", visitor.eval(`document.documentElement.lang`))
		require.Equal(t, "3", visitor.text("position"), "the same place")
		require.Equal(t, "대기 중입니다", visitor.eval(`document.querySelector("#waiting h1").textContent`))
		require.Equal(t, "대기 중 · 3번째", visitor.eval(`document.title`))
		require.Equal(t, "true", visitor.eval(`document.querySelector('#langs a[hreflang="ko"]').getAttribute("aria-current")`))
		// What the script writes after a poll is Korean too.
		f.admitNext(1)
		visitor.waitText("position", "2")
		visitor.waitText("progress-text", "맨 앞까지 50% 왔습니다")
		visitor.screenshot("17-korean")

		// Remembered: the visitor's next page, at the plain address.
		second := visitor.sameVisitor()
		second.open(f.srv.URL + "/")
		second.waitState("waiting")
		require.Equal(t, "ko", second.eval(`document.documentElement.lang`))
		require.Equal(t, "2", second.text("position"))
		require.Equal(t, "1분 미만", second.text("wait"))

		// And back.
		second.do(chromedp.Click(chromedp.CSS(`#langs a[hreflang="en"]`)))
		second.waitText("wait", "less than a minute")
		require.Equal(t, "en", second.eval(`document.documentElement.lang`))
		require.Equal(t, int64(2), f.waiting(), "switching took no second place")
	})

	// With scripts off the server's rendering and the meta refresh carry
	// the page: the line still moves on screen.
	t.Run("without JavaScript", func(t *testing.T) {
		f := newPageFixture(t, pageOptions{})
		f.enterUsers("u1")
		visitor := newVisitor(t, browser)
		sendCDP(visitor, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		visitor.open(f.srv.URL + "/")
		visitor.waitState("join")
		require.Equal(t, int64(1), f.waiting(), "loading the page queued nobody")
		visitor.screenshot("14-no-js-join")
		// Joining takes one click.
		visitor.do(chromedp.Click(chromedp.ID("join-button")))
		visitor.waitState("waiting")
		require.Equal(t, "2", visitor.text("position"))
		require.Equal(t, int64(2), f.waiting())
		visitor.screenshot("15-no-js-waiting")

		f.admitNext(1)
		visitor.waitText("position", "1") // the meta refresh reloaded the page
		f.admitNext(1)
		visitor.waitState("admitted")
		require.Equal(t, "0", visitor.eval(`String(document.querySelectorAll("#order:not([hidden])").length)`))
		visitor.screenshot("16-no-js-admitted")
	})
}
