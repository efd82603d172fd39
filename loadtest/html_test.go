package loadtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/loadtest"
)

var chartData = regexp.MustCompile(`(?m)^\s*const d = (\{.*\});$`)

// chartsOf reads the data the HTML report's script draws.
func chartsOf(t *testing.T, page string) loadtest.Charts {
	t.Helper()
	m := chartData.FindStringSubmatch(page)
	require.NotNil(t, m, "the page carries its data")
	var c loadtest.Charts
	require.NoError(t, json.Unmarshal([]byte(m[1]), &c))
	return c
}

// The HTML report's series agree with the report's own figures, and the
// page needs nothing from outside.
func TestHTMLReport(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{rate: 1000, stock: 300})
	cfg := f.config()
	// Admitting once everyone has entered: the queue has a shape to draw
	// however slow the machine.
	cfg.OnAllEntered = f.startAdmitter
	cfg.Users = 600
	cfg.Arrival = 400 * time.Millisecond
	cfg.LeaveShare = 0.1
	cfg.Rate = 1000
	cfg.Stock = 300
	rep, err := loadtest.Run(t.Context(), cfg)
	require.NoError(t, err)
	require.Equal(t, "server", rep.Admissions.Source)

	var page bytes.Buffer
	require.NoError(t, rep.WriteHTML(&page))
	html := page.String()
	require.True(t, strings.HasPrefix(html, "<!doctype html>"))
	for _, outside := range []string{`src="http`, `href="http`, "<link", "@import", "fetch("} {
		require.NotContains(t, html, outside, "self-contained")
	}
	require.Contains(t, html, "var uPlot=", "the chart library inline")
	require.Contains(t, html, "No violations")
	require.Contains(t, html, "violations: none", "the text report too")

	c := chartsOf(t, html)
	require.Equal(t, 1000.0, c.Rate)
	require.Equal(t, len(c.Seconds), len(c.Admitted))
	require.Equal(t, len(c.Seconds), len(c.Queue))
	require.Equal(t, 0.1, c.StepSeconds, "a short run is drawn by slices")
	require.GreaterOrEqual(t, float64(len(c.Seconds))*c.StepSeconds, rep.ElapsedSeconds, "a point per step of the run")
	sum := func(xs []int) (n int) {
		for _, x := range xs {
			n += x
		}
		return n
	}
	var admitted float64
	for _, perSecond := range c.Admitted {
		admitted += perSecond * c.StepSeconds
	}
	f.mu.Lock()
	serverAdmitted := 0
	for _, n := range f.admitCount {
		serverAdmitted += n
	}
	f.mu.Unlock()
	// The admitter's count, not the users who saw theirs: a leaver can be
	// admitted between its poll and its leaving.
	require.InDelta(t, float64(serverAdmitted), admitted, 1e-6, "every admission in its step")
	require.Zero(t, c.Queue[len(c.Queue)-1], "everyone left the queue by the end")
	require.LessOrEqual(t, slices.Max(c.Queue), int(rep.Queue.PeakPosition))
	require.Greater(t, slices.Max(c.Queue), 400, "600 entered, 60 leave, nobody admitted before all entered")
	require.Equal(t, rep.Admissions.ETAUsers, sum(c.WaitCounts), "every queued and admitted user's wait in a bin")
	require.InDelta(t, rep.Admissions.WaitMaxS/40, c.WaitBinSeconds, 1e-9, "40 bins up to the longest wait")
	require.Equal(t, c.ETASampled, len(c.ETA))
	require.Equal(t, c.ETASampled, len(c.Wait))
	require.Equal(t, rep.Admissions.ETAUsers, c.ETASampled, "under 2,000 users, all of them")
	require.True(t, slices.IsSorted(c.ETA))
	require.Len(t, c.ETALow, c.ETASampled)
	require.Len(t, c.ETAHigh, c.ETASampled)
	inRange := 0
	for i := range c.ETA {
		require.LessOrEqual(t, c.ETALow[i], c.ETA[i], "the range holds the ETA")
		require.LessOrEqual(t, c.ETA[i], c.ETAHigh[i])
		if c.Wait[i] >= c.ETALow[i] && c.Wait[i] <= c.ETAHigh[i] {
			inRange++
		}
	}
	require.InDelta(t, rep.Admissions.ETAInRangeShare, float64(inRange)/float64(c.ETASampled), 1e-9, "every user is drawn: the same share")

	// A report read back from JSON has no series; its page still opens.
	raw, err := json.Marshal(rep)
	require.NoError(t, err)
	require.NotContains(t, string(raw), "wait_counts", "the series stay out of the JSON report")
	var decoded loadtest.Report
	require.NoError(t, json.Unmarshal(raw, &decoded))
	page.Reset()
	require.NoError(t, decoded.WriteHTML(&page))
	require.Contains(t, page.String(), "<!doctype html>")

	renderReport(t, html)
}

// renderReport opens the page in headless Chromium (Debian's; missing, it
// fails): every chart is drawn and no script fails. The screenshot goes
// to the artifacts directory.
func renderReport(t *testing.T, html string) {
	t.Helper()
	path, err := exec.LookPath("chromium")
	require.NoError(t, err, "chromium is missing: install it (apt-get install -y chromium) or run ./scripts/test, which does")
	dir := os.Getenv("WAITROOM_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "artifacts", "loadtest")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	file := filepath.Join(dir, "report.html")
	require.NoError(t, os.WriteFile(file, []byte(html), 0o644))
	abs, err := filepath.Abs(file)
	require.NoError(t, err)

	alloc, cancel := chromedp.NewExecAllocator(t.Context(), chromedp.ExecPath(path), chromedp.Flag("headless", true),
		chromedp.NoSandbox, chromedp.Flag("disable-gpu", true), chromedp.NoFirstRun, chromedp.UserDataDir(t.TempDir()))
	defer cancel()
	var scriptErrors []string
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithListener(func(ev any) {
		if ev, ok := ev.(*runtime.EventExceptionThrown); ok {
			scriptErrors = append(scriptErrors, ev.ExceptionDetails.Text)
		}
	}))
	defer cancel()
	require.NoError(t, chromedp.Do(ctx))
	run, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	require.NoError(t, chromedp.Do(run,
		chromedp.EmulateViewport(1200, 3400),
		chromedp.Navigate("file://"+abs),
		chromedp.WaitVisible(chromedp.CSS("#eta .u-over"))))
	charts, err := chromedp.Run(run, chromedp.Evaluate[int](`document.querySelectorAll(".chart canvas").length`))
	require.NoError(t, err)
	require.Equal(t, 5, charts, "five charts drawn")
	png, err := chromedp.Run(run, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "report.png"), png, 0o644))
	require.Empty(t, scriptErrors)
}
