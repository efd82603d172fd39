package servertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

var AxeTags = []string{"wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"}

// AxeSource is axe.min.js, which ./scripts/test installs with npm (into
// the cache directory it names in WAITROOM_AXE). Missing, the test fails.
func AxeSource(t *testing.T) string {
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

// Auditor runs axe and counts its runs.
type Auditor struct {
	T    *testing.T
	Axe  string
	Runs int
}

type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// Audit runs axe on what tb shows now, in light and dark, on each
// viewport: any violation fails the test, with where it is.
func (a *Auditor) Audit(tb *Tab, name string) {
	a.T.Helper()
	for _, v := range a.Violations(tb, name) {
		a.T.Error(v)
	}
}

// Violations runs axe as Audit does and returns what it found.
func (a *Auditor) Violations(tb *Tab, name string) []string {
	a.T.Helper()
	tb.T.Helper()
	var found []string
	defer tb.Do(chromedp.EmulateViewport(Viewports[0].Width, Viewports[0].Height, chromedp.EmulateScale(Viewports[0].Scale), chromedp.EmulateMobile))
	defer SetScheme(tb, "light")
	for _, scheme := range []string{"light", "dark"} {
		SetScheme(tb, scheme)
		for _, vp := range Viewports {
			opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(vp.Scale)}
			if vp.Mobile {
				opts = append(opts, chromedp.EmulateMobile)
			}
			tb.Do(chromedp.EmulateViewport(vp.Width, vp.Height, opts...))
			if tb.Eval(`typeof axe`) != "object" {
				// Through the DevTools protocol: the page's policy runs no
				// script but its own.
				tb.Eval(a.Axe + `; "loaded"`)
			}
			tags, _ := json.Marshal(AxeTags)
			out := tb.EvalAwait(`axe.run(document, {runOnly: {type: "tag", values: ` + string(tags) + `}, resultTypes: ["violations"]}).then(function (r) {
				return JSON.stringify(r.violations.map(function (v) {
					return {id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(function (n) { return n.target.join(" ") + " " + n.html.slice(0, 160) + " — " + (n.failureSummary || ""); })};
				}));
			})`)
			var violations []axeViolation
			require.NoError(a.T, json.Unmarshal([]byte(out), &violations))
			a.Runs++
			for _, v := range violations {
				found = append(found, fmt.Sprintf("%s, %s, %s: axe %s (%s): %s\n  %s", name, scheme, vp.Name, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n  ")))
			}
		}
	}
	return found
}

func SetScheme(tb *Tab, scheme string) {
	tb.T.Helper()
	SendCDP(tb, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
}

func (tb *Tab) EvalAwait(js string) string {
	tb.T.Helper()
	ctx, cancel := context.WithTimeout(tb.Ctx, BrowserWait)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
	require.NoError(tb.T, err)
	return s
}

// WaitJS waits until the expression is true on the page.
func (tb *Tab) WaitJS(js string) {
	tb.T.Helper()
	tb.Do(chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(50*time.Millisecond)))
}
