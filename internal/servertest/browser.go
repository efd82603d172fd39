package servertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// A real headless Chromium (Debian's), driven over the DevTools protocol,
// with a screenshot of each state on a phone and on a desktop.

// BrowserWait bounds every wait for the page; the page polls at least
// once a second in these tests, so a state that is not there by then is a
// failure, not slowness.
const BrowserWait = 20 * time.Second

var Viewports = []struct {
	Name          string
	Width, Height int64
	Scale         float64
	Mobile        bool
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

// NewBrowser starts one headless Chromium with a fresh profile for the test.
func NewBrowser(t *testing.T) context.Context {
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

// Tab is one browser tab of a visitor, with the script errors it saw.
type Tab struct {
	T   *testing.T
	Ctx context.Context

	mu     sync.Mutex
	errors []string
}

// NewVisitor opens a tab in a browser context of its own: a visitor with
// its own cookies and storage.
func NewVisitor(t *testing.T, browser context.Context) *Tab {
	t.Helper()
	return openTab(t, browser, chromedp.WithNewBrowserContext())
}

// SameVisitor opens another tab of the visitor that owns tb: same cookies.
func (tb *Tab) SameVisitor() *Tab {
	tb.T.Helper()
	return openTab(tb.T, tb.Ctx)
}

func openTab(t *testing.T, parent context.Context, opts ...chromedp.ContextOption) *Tab {
	t.Helper()
	tb := &Tab{T: t}
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
	tb.Ctx = ctx
	t.Cleanup(func() {
		cancel()
		tb.mu.Lock()
		defer tb.mu.Unlock()
		if len(tb.errors) > 0 {
			t.Errorf("script errors on the page: %q", tb.errors)
		}
	})
	// The first run opens the tab and binds it to ctx (see NewBrowser).
	require.NoError(t, chromedp.Do(ctx), "opening a tab")
	tb.Do(chromedp.EmulateViewport(Viewports[0].Width, Viewports[0].Height,
		chromedp.EmulateScale(Viewports[0].Scale), chromedp.EmulateMobile))
	return tb
}

// Do runs actions within BrowserWait; a failure reports what the page
// showed.
func (tb *Tab) Do(actions ...chromedp.Action[chromedp.Void]) {
	tb.T.Helper()
	tb.DoWithin(BrowserWait, actions...)
}

func (tb *Tab) DoWithin(wait time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	tb.T.Helper()
	ctx, cancel := context.WithTimeout(tb.Ctx, wait)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.T.Fatalf("%v; the page shows: %s", err, tb.Describe())
	}
}

// SendCDP runs one protocol command on tb's page, its answer unread: an
// emulation setting, say.
func SendCDP[P, R any](tb *Tab, cmd cdp.Command[P, R], params P) {
	tb.T.Helper()
	tb.Do(func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Call(ctx, cmd, params)
		return chromedp.Void{}, err
	})
}

func (tb *Tab) Describe() string {
	ctx, cancel := context.WithTimeout(tb.Ctx, 2*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`"[" + document.body.getAttribute("data-state") + "] " + document.body.innerText.replace(/\s+/g, " ")`))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return s
}

func (tb *Tab) Open(url string) {
	tb.T.Helper()
	tb.OpenWithin(url, BrowserWait)
}

func (tb *Tab) OpenWithin(url string, wait time.Duration) {
	tb.T.Helper()
	tb.DoWithin(wait, chromedp.Navigate(url))
}

// WaitState waits until the page shows state's section.
func (tb *Tab) WaitState(state string) {
	tb.T.Helper()
	tb.WaitStateWithin(state, BrowserWait)
}

func (tb *Tab) WaitStateWithin(state string, wait time.Duration) {
	tb.T.Helper()
	tb.DoWithin(wait, chromedp.WaitVisible(chromedp.ID(state)))
}

// WaitText waits until the element's text is want: the page updates by
// itself, so this is how a test sees the line move. Without scripts the
// page reloads itself, which ends a check midway; the next one starts on
// the new page.
func (tb *Tab) WaitText(id, want string) {
	tb.T.Helper()
	js := fmt.Sprintf(`document.getElementById(%q).textContent.trim() === %q`, id, want)
	deadline := time.Now().Add(BrowserWait)
	for {
		ctx, cancel := context.WithTimeout(tb.Ctx, time.Second)
		err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](js,
			chromedp.WithPollingTimeout(time.Second), chromedp.WithPollingInterval(50*time.Millisecond)))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) || tb.Ctx.Err() != nil {
			tb.T.Fatalf("#%s never showed %q: %v; the page shows: %s", id, want, err, tb.Describe())
		}
	}
}

func (tb *Tab) Text(id string) string {
	tb.T.Helper()
	ctx, cancel := context.WithTimeout(tb.Ctx, BrowserWait)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.ID(id)))
	require.NoError(tb.T, err)
	return strings.TrimSpace(s)
}

// LiveRegionOf names the live region the element is in, or "none": a
// clock that ticks every second must be in none.
func (tb *Tab) LiveRegionOf(id string) string {
	tb.T.Helper()
	return tb.Eval(fmt.Sprintf(`(function () {
		var r = document.getElementById(%q).closest('[aria-live]:not([aria-live="off"]), [role="status"], [role="alert"], [role="log"]');
		return r ? r.outerHTML.slice(0, 80) : "none";
	})()`, id))
}

func (tb *Tab) Eval(js string) string {
	tb.T.Helper()
	ctx, cancel := context.WithTimeout(tb.Ctx, BrowserWait)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	require.NoError(tb.T, err)
	return s
}

// Screenshot writes the visible page, as a phone and as a desktop shows
// it, to the artifacts directory.
func (tb *Tab) Screenshot(name string) {
	tb.T.Helper()
	dir := os.Getenv("WAITROOM_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "artifacts", "screenshots")
	}
	require.NoError(tb.T, os.MkdirAll(dir, 0o755))
	// The tab must be in front to be drawn (see NewBrowser): a closed
	// tab's neighbour, the browser's first blank tab say, may be instead.
	SendCDP(tb, cdppage.BringToFront, cdp.Empty{})
	for i := len(Viewports) - 1; i >= 0; i-- { // the phone last: the tests go on as a phone
		vp := Viewports[i]
		opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(vp.Scale)}
		if vp.Mobile {
			opts = append(opts, chromedp.EmulateMobile)
		}
		tb.Do(chromedp.EmulateViewport(vp.Width, vp.Height, opts...))
		png := tb.capture()
		path := filepath.Join(dir, name+"-"+vp.Name+".png")
		require.NoError(tb.T, os.WriteFile(path, png, 0o644))
	}
}

// captureTry bounds one screenshot attempt (see capture).
const captureTry = 4 * time.Second

// capture takes a screenshot within BrowserWait. A capture that meets a
// reload (a page without scripts refreshes itself every second or so)
// never answers, so each try has a few seconds and the next one finds the
// new page.
func (tb *Tab) capture() []byte {
	tb.T.Helper()
	for deadline := time.Now().Add(BrowserWait); ; {
		ctx, cancel := context.WithTimeout(tb.Ctx, captureTry)
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		cancel()
		if err == nil {
			return png
		}
		if time.Now().After(deadline) || tb.Ctx.Err() != nil {
			tb.T.Fatalf("no screenshot within %s: %v; the page shows: %s", BrowserWait, err, tb.Describe())
		}
	}
}
