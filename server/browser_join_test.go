package server_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/server"
)

// phoneCPUSlowdown is how much slower than this machine's core the join
// challenge is measured: Chromium's throttling, 4× being Lighthouse's
// "mid-tier mobile".
const phoneCPUSlowdown = 4

// solveWait bounds one throttled solve. The hashes a solve needs are
// geometric: at 2^14 expected and ~2,000–3,000 a second throttled, one
// round in thirty needs over 20 s (BrowserWait); 120 s is fifteen times
// the mean, which one round in millions exceeds.
const solveWait = 120 * time.Second

// TestBrowserJoin: with scripts the page joins by itself (no click), also
// when it has to solve the join challenge at the default difficulty on a
// CPU throttled to a phone's; the solve times are logged for BENCHMARKS.md.
func TestBrowserJoin(t *testing.T) {
	t.Parallel()
	browser := servertest.NewBrowser(t)

	t.Run("no click with JavaScript", func(t *testing.T) {
		f := newPageFixture(t, pageOptions{})
		f.enterUsers("u1")
		visitor := servertest.NewVisitor(t, browser)
		visitor.Open(f.srv.URL + "/")
		visitor.WaitState("waiting")
		require.Equal(t, "2", visitor.Text("position"))
		require.Equal(t, int64(2), f.waiting(), "one place, taken by the page's own join")
	})

	t.Run("before a scheduled opening", func(t *testing.T) {
		opens := time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC) // an hour after the fixture's clock
		f := newPageFixture(t, pageOptions{room: waitroom.RoomConfig{OpensAt: opens}})
		visitor := servertest.NewVisitor(t, browser)
		visitor.Open(f.srv.URL + "/")
		visitor.WaitState("scheduled")
		require.Equal(t, "false", visitor.Eval(`String(document.getElementById("drawn").hidden)`), "the draw is said")
		require.Equal(t, "true", visitor.Eval(`String(document.getElementById("join-note").hidden)`), "no error note")
		require.Equal(t, "none", visitor.LiveRegionOf("opens-in"), "the countdown is not read out every second")
		require.Equal(t, int64(1), f.waiting(), "one early arrival, by the page's own join")
	})

	t.Run("refused by the address limit, the page tries again", func(t *testing.T) {
		// One new visitor per 2 s from this address, the burst being one.
		f := newPageFixture(t, pageOptions{server: func(c *server.Config) { c.VisitorRateLimit = 0.5; c.JoinChallenge = 8 }})
		first := servertest.NewVisitor(t, browser)
		first.Open(f.srv.URL + "/")
		first.WaitState("waiting")
		second := servertest.NewVisitor(t, browser)
		second.Open(f.srv.URL + "/")
		second.WaitState("waiting")
		require.Equal(t, "2", second.Text("position"), "joined after waiting out the Retry-After")
		require.Equal(t, int64(2), f.waiting())
	})

	t.Run("join challenge on a phone's CPU", func(t *testing.T) {
		f := newPageFixture(t, pageOptions{server: func(c *server.Config) { c.JoinChallenge = server.DefaultJoinDifficulty }})
		const rounds = 6
		var total time.Duration
		var hashes int
		for i := range rounds {
			visitor := servertest.NewVisitor(t, browser)
			servertest.SendCDP(visitor, emulation.SetCPUThrottlingRate, emulation.SetCPUThrottlingRateParams{Rate: phoneCPUSlowdown})
			// Loading the page may wait for the solve too.
			visitor.OpenWithin(f.srv.URL+"/", solveWait)
			visitor.WaitStateWithin("waiting", solveWait)
			require.Equal(t, strconv.Itoa(i+1), visitor.Text("position"))
			ms, err := strconv.Atoi(visitor.Eval(`document.body.getAttribute("data-solve-ms") || ""`))
			require.NoError(t, err, "the page recorded its solve time")
			tried, err := strconv.Atoi(visitor.Eval(`document.body.getAttribute("data-solve-hashes") || ""`))
			require.NoError(t, err)
			total += time.Duration(ms) * time.Millisecond
			hashes += tried
			t.Logf("round %d: solved %d bits in %d ms, %d hashes, at %d× CPU slowdown", i+1, server.DefaultJoinDifficulty, ms, tried, phoneCPUSlowdown)
		}
		rate := float64(hashes) / total.Seconds()
		t.Logf("mean %s over %d rounds; %.0f hashes/s, so the expected %d hashes take %.1f s",
			total/rounds, rounds, rate, 1<<server.DefaultJoinDifficulty, float64(int(1)<<server.DefaultJoinDifficulty)/rate)
		require.Equal(t, int64(rounds), f.waiting(), "one place per solved challenge")
	})
}
