package server_test

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/servertest"
)

// The waiting page in a real headless Chromium (Debian's), driven over the
// DevTools protocol: what a visitor sees, step by step, with a screenshot
// of each state on a phone and on a desktop.

func TestBrowser(t *testing.T) {
	t.Parallel()
	browser := servertest.NewBrowser(t)

	// A visitor opens the page behind three others, sees the line move,
	// is admitted and orders; a second tab keeps the one place.
	t.Run("journey", func(t *testing.T) {
		f := newPageFixture(t, pageOptions{})
		f.enterUsers("u1", "u2", "u3")

		visitor := servertest.NewVisitor(t, browser)
		visitor.Open(f.srv.URL + "/")
		visitor.WaitState("waiting")
		require.Equal(t, "4", visitor.Text("position"))
		require.Equal(t, "3", visitor.Text("ahead"))
		require.Equal(t, "less than a minute", visitor.Text("wait"))
		require.Equal(t, "0", visitor.Eval(`String(document.getElementById("progress").value)`))
		require.Equal(t, int64(4), f.waiting())
		visitor.Screenshot("01-waiting")

		second := visitor.SameVisitor()
		second.Open(f.srv.URL + "/")
		second.WaitState("waiting")
		require.Equal(t, "4", second.Text("position"), "the same visitor in a second tab")
		require.Equal(t, int64(4), f.waiting(), "one place, however many tabs")
		second.Screenshot("02-second-tab")

		f.admitNext(1)
		visitor.WaitText("position", "3")
		visitor.WaitText("progress-text", "33% of the way to the front")
		second.WaitText("position", "3")
		visitor.Screenshot("03-line-moves")

		f.admitNext(2)
		visitor.WaitText("position", "1")
		visitor.WaitText("progress-text", "You're next")
		visitor.Screenshot("04-next")

		f.admitNext(1)
		visitor.WaitState("admitted")
		require.Regexp(t, regexp.MustCompile(`^[45]:\d\d$`), visitor.Text("time-left"))
		require.Equal(t, "Your turn", visitor.Eval(`document.title`))
		require.Equal(t, "none", visitor.LiveRegionOf("time-left"), "a screen reader is not read the clock every second")
		visitor.Screenshot("05-admitted")

		visitor.Do(chromedp.Click(chromedp.ID("order")))
		visitor.WaitState("ordered")
		orderID := visitor.Text("order-id")
		require.NotEmpty(t, orderID)
		visitor.Screenshot("06-order-placed")

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
		visitor := servertest.NewVisitor(t, browser)
		visitor.Open(f.srv.URL + "/")
		visitor.WaitState("waiting")
		require.Equal(t, "2,501", visitor.Text("position"))
		require.Equal(t, "about 39–45 minutes", visitor.Text("wait"), "the ETA and its 10–90% range")
		visitor.Screenshot("07-long-line")

		for _, u := range ahead[:500] {
			require.NoError(t, f.store.Leave(t.Context(), f.room, u))
		}
		visitor.Do(chromedp.Reload())
		visitor.WaitState("waiting")
		visitor.WaitText("position", "2,001")
		visitor.WaitText("progress-text", "20% of the way to the front")
		require.Equal(t, int64(2001), f.waiting(), "the reload kept the place")
		visitor.Screenshot("08-long-line-reloaded")
	})

	t.Run("paused", func(t *testing.T) {
		f := newPageFixture(t, pageOptions{})
		f.enterUsers("u1")
		f.setState(waitroom.RoomPaused)
		visitor := servertest.NewVisitor(t, browser)
		visitor.Open(f.srv.URL + "/")
		visitor.WaitState("paused")
		require.Equal(t, "on hold while the sale is paused", visitor.Text("wait"))
		visitor.Screenshot("09-paused")

		// Resuming shows at the next poll.
		f.setState(waitroom.RoomOpen)
		visitor.Do(chromedp.WaitNotVisible(chromedp.ID("paused")))
		visitor.WaitText("wait", "less than a minute")
	})

	t.Run("queue full", func(t *testing.T) {
		f := newPageFixture(t, pageOptions{room: waitroom.RoomConfig{MaxQueue: 1}})
		f.enterUsers("u1")
		visitor := servertest.NewVisitor(t, browser)
		visitor.Open(f.srv.URL + "/")
		visitor.WaitState("queue_full")
		require.Equal(t, "true", visitor.Eval(`document.getElementById("retry").getAttribute("aria-disabled")`),
			"no trying again before Retry-After")
		left, err := strconv.Atoi(visitor.Eval(`document.getElementById("retry-after").dataset.seconds`))
		require.NoError(t, err)
		require.Greater(t, left, 20)
		require.Regexp(t, `^Please try again in \d+ seconds\.$`, visitor.Text("retry-after"))
		visitor.Screenshot("10-queue-full")
		require.Equal(t, int64(1), f.waiting())
	})

	t.Run("closed", func(t *testing.T) {
		f := newPageFixture(t, pageOptions{})
		f.setState(waitroom.RoomClosed)
		visitor := servertest.NewVisitor(t, browser)
		visitor.Open(f.srv.URL + "/")
		visitor.WaitState("closed")
		visitor.Screenshot("11-closed")
	})

	t.Run("invite only", func(t *testing.T) {
		f := newPageFixture(t, pageOptions{room: waitroom.RoomConfig{InviteOnly: true}})
		visitor := servertest.NewVisitor(t, browser)
		visitor.Open(f.srv.URL + "/")
		visitor.WaitState("invitation")
		require.Equal(t, "Only guests with an invitation can join this sale.", visitor.Text("invitation-message"))
		visitor.Screenshot("11-invitation")
	})

	t.Run("sold out", func(t *testing.T) {
		f := newPageFixture(t, pageOptions{soldOut: true})
		visitor := servertest.NewVisitor(t, browser)
		visitor.Open(f.srv.URL + "/")
		visitor.WaitState("waiting")
		f.admitNext(1)
		visitor.WaitState("admitted")
		visitor.Do(chromedp.Click(chromedp.ID("order")))
		visitor.WaitState("sold_out")
		visitor.Screenshot("12-sold-out")
		st, err := f.store.Stats(t.Context(), f.room)
		require.NoError(t, err)
		require.Equal(t, int64(1), st.Released, "a refused order gives the token back")
	})

	// The turn runs out before the order: the page says so and offers the
	// line again; a visitor who left the line is told so at the next poll.
	t.Run("expired and left", func(t *testing.T) {
		f := newPageFixture(t, pageOptions{})
		visitor := servertest.NewVisitor(t, browser)
		visitor.Open(f.srv.URL + "/")
		visitor.WaitState("waiting")
		f.admitNext(1)
		visitor.WaitState("admitted")
		f.clock.Advance(waitroom.DefaultTokenTTL + time.Second)
		visitor.Do(chromedp.Click(chromedp.ID("order")))
		visitor.WaitState("expired")
		visitor.Screenshot("13-turn-ended")

		visitor.Do(chromedp.Click(chromedp.CSS("#expired a")))
		visitor.WaitState("waiting")
		require.Equal(t, "1", visitor.Text("position"), "back in line")
		// Leave as an app on the page would; the cookie names the visitor.
		visitor.Eval(`fetch("/rooms/` + f.room + `/queue", {method: "DELETE"}), "sent"`)
		visitor.WaitState("left")
		visitor.Screenshot("14-left")
		require.Zero(t, f.waiting())
	})

	// The switcher turns the page into another language, the script's own
	// texts too, and the choice holds for the visitor's next visit.
	t.Run("language switcher", func(t *testing.T) {
		f := newPageFixture(t, pageOptions{})
		f.enterUsers("u1", "u2")
		visitor := servertest.NewVisitor(t, browser)
		visitor.Open(f.srv.URL + "/")
		visitor.WaitState("waiting")
		require.Equal(t, "en", visitor.Eval(`document.documentElement.lang`))
		require.Equal(t, "3", visitor.Text("position"))

		visitor.Do(chromedp.Click(chromedp.CSS(`#langs a[hreflang="ko"]`)))
		visitor.WaitText("wait", "1분 미만")
		require.Equal(t, "ko", visitor.Eval(`document.documentElement.lang`))
		require.Equal(t, "3", visitor.Text("position"), "the same place")
		require.Equal(t, "대기 중입니다", visitor.Eval(`document.querySelector("#waiting h1").textContent`))
		require.Equal(t, "대기 중 · 3번째", visitor.Eval(`document.title`))
		require.Equal(t, "true", visitor.Eval(`document.querySelector('#langs a[hreflang="ko"]').getAttribute("aria-current")`))
		// What the script writes after a poll is Korean too.
		f.admitNext(1)
		visitor.WaitText("position", "2")
		visitor.WaitText("progress-text", "맨 앞까지 50% 왔습니다")
		visitor.Screenshot("17-korean")

		// Remembered: the visitor's next page, at the plain address.
		second := visitor.SameVisitor()
		second.Open(f.srv.URL + "/")
		second.WaitState("waiting")
		require.Equal(t, "ko", second.Eval(`document.documentElement.lang`))
		require.Equal(t, "2", second.Text("position"))
		require.Equal(t, "1분 미만", second.Text("wait"))

		// And back.
		second.Do(chromedp.Click(chromedp.CSS(`#langs a[hreflang="en"]`)))
		second.WaitText("wait", "less than a minute")
		require.Equal(t, "en", second.Eval(`document.documentElement.lang`))
		require.Equal(t, int64(2), f.waiting(), "switching took no second place")
	})

	// With scripts off the server's rendering and the meta refresh carry
	// the page: the line still moves on screen.
	t.Run("without JavaScript", func(t *testing.T) {
		f := newPageFixture(t, pageOptions{})
		f.enterUsers("u1")
		visitor := servertest.NewVisitor(t, browser)
		servertest.SendCDP(visitor, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		visitor.Open(f.srv.URL + "/")
		visitor.WaitState("join")
		require.Equal(t, int64(1), f.waiting(), "loading the page queued nobody")
		visitor.Screenshot("14-no-js-join")
		// Joining takes one click.
		visitor.Do(chromedp.Click(chromedp.ID("join-button")))
		visitor.WaitState("waiting")
		require.Equal(t, "2", visitor.Text("position"))
		require.Equal(t, int64(2), f.waiting())
		visitor.Screenshot("15-no-js-waiting")

		f.admitNext(1)
		visitor.WaitText("position", "1") // the meta refresh reloaded the page
		f.admitNext(1)
		visitor.WaitState("admitted")
		require.Equal(t, "0", visitor.Eval(`String(document.querySelectorAll("#order:not([hidden])").length)`))
		visitor.Screenshot("16-no-js-admitted")
	})
}
