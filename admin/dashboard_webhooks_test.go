package admin_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/redistest"
	"github.com/waitroom/waitroom/server"
	"github.com/waitroom/waitroom/webhook"
)

// receiverSays is what the failing receiver answers: markup that must
// reach the operator's screen as text.
const receiverSays = `<script>window.pwned = true</script><img src=x onerror="window.pwned = true">database down`

// deadRig is a server whose admin API has the webhook routes, as
// instance wires them, on a real log; one endpoint at a receiver that
// refuses every message until it is made healthy; and a dispatcher on a
// fake clock, so that 24 h of retries take two steps, not a day.
type deadRig struct {
	t          *testing.T
	log        webhook.Log
	clock      *memstore.ManualClock
	dispatcher *webhook.Dispatcher
	endpoint   webhook.Endpoint
	srv        *httptest.Server
	store      *memstore.Store
	room       string

	mu       sync.Mutex
	healthy  bool
	refusals int
	taken    []string // webhook-ids the receiver took
}

func newDeadRig(t *testing.T, log webhook.Log) *deadRig {
	t.Helper()
	rig := &deadRig{t: t, log: log, clock: memstore.NewManualClock(time.Now().Truncate(time.Second))}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rig.mu.Lock()
		defer rig.mu.Unlock()
		if rig.healthy {
			rig.taken = append(rig.taken, r.Header.Get("webhook-id"))
			w.WriteHeader(http.StatusNoContent)
			return
		}
		rig.refusals++
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, receiverSays)
	}))
	t.Cleanup(receiver.Close)
	ep, err := webhook.StaticEndpoint(receiver.URL+"/hooks/waitroom?key=not-for-the-screen", []string{webhook.NewSecret()})
	require.NoError(t, err)
	rig.endpoint = ep
	rig.dispatcher = &webhook.Dispatcher{Log: log, ID: "d1", Static: []webhook.Endpoint{ep}, Now: rig.clock.Now, Jitter: func() float64 { return 0.5 }}

	rig.room = servertest.UniqueRoom(t)
	rig.store = servertest.MemRoom(t, rig.room, waitroom.RoomConfig{Rate: 40})
	hooks := &webhook.Admin{Log: log, Static: []webhook.Endpoint{ep}, Now: rig.clock.Now}
	rig.srv = httptest.NewServer(servertest.MustServer(t, server.Config{Store: rig.store, DefaultRoom: rig.room,
		AdminToken: servertest.AdminToken, AdminRoutes: hooks.Routes()}))
	t.Cleanup(rig.srv.Close)
	return rig
}

func (rig *deadRig) step() {
	rig.t.Helper()
	require.NoError(rig.t, rig.dispatcher.Step(rig.t.Context()))
}

// kill appends an event and steps the dispatcher through its retry
// budget until the event is a dead letter, which it returns.
func (rig *deadRig) kill(typ, room, user string) webhook.DeadLetter {
	rig.t.Helper()
	rig.step() // the endpoint's consumer groups, before the event
	before := rig.dead()
	e := webhook.NewEvent(typ, room, rig.clock.Now(), webhook.TokenData{User: user, Units: 1})
	require.NoError(rig.t, rig.log.Append(rig.t.Context(), []webhook.Entry{webhook.NewEntry(e, rig.clock.Now())}))
	rig.clock.Advance(time.Second) // past the dispatcher's quiet read
	rig.step()                     // refused, retried later
	rig.clock.Advance(webhook.MaxAge)
	rig.step() // refused again, past the budget: dead
	after := rig.dead()
	require.Len(rig.t, after, len(before)+1)
	require.Equal(rig.t, e.ID, after[0].EventID, "newest first")
	require.Equal(rig.t, 2, after[0].Attempts)
	return after[0]
}

// dead are the log's dead letters, newest first.
func (rig *deadRig) dead() []webhook.DeadLetter {
	rig.t.Helper()
	list, err := rig.log.Dead(rig.t.Context(), webhook.MaxDeadListed)
	require.NoError(rig.t, err)
	return list
}

func (rig *deadRig) received() (refusals int, taken []string) {
	rig.mu.Lock()
	defer rig.mu.Unlock()
	return rig.refusals, slices.Clone(rig.taken)
}

// signIn opens the dashboard in a fresh tab of browser and signs in.
func signIn(t *testing.T, browser context.Context, url string) *servertest.Tab {
	t.Helper()
	op := servertest.NewVisitor(t, browser)
	op.Open(url + "/admin/")
	op.WaitState("login")
	op.Do(chromedp.SendKeys(chromedp.ID("token"), servertest.AdminToken), chromedp.Click(chromedp.ID("signin")))
	op.WaitState("dead")
	return op
}

func deadRow(id string) string { return fmt.Sprintf(`#dead tr[data-dead=%q]`, id) }

// deadCells is the script reading the texts of a dead letter's row.
func deadCells(id string) string {
	return `Array.from(document.querySelector('` + deadRow(id) + `').cells, (c) => c.textContent).join(" | ")`
}

func redisLog(t *testing.T, url string) webhook.Log {
	t.Helper()
	client, err := redisstore.Open(url)
	require.NoError(t, err)
	prefix := testenv.Unique("wh")
	t.Cleanup(func() {
		_ = redisstore.DeletePrefix(context.Background(), client, prefix)
		_ = client.Close()
	})
	return webhook.NewRedisLog(client, prefix)
}

// TestDashboardDeadLetters: in a real headless Chromium, on the
// in-process log and on Redis, dead letters the dispatcher made for real
// are listed newest first, the receiver's markup shown as text and the
// endpoint's query hidden; a cancelled redelivery changes nothing; a
// confirmed one is queued again for its endpoint and reaches it, healthy
// now, with the same webhook-id, and the row leaves the list; one that
// somebody else redelivered first is said so; the empty list says so.
func TestDashboardDeadLetters(t *testing.T) {
	t.Parallel()
	browser := servertest.NewBrowser(t)
	for name, newLog := range map[string]func(t *testing.T) webhook.Log{
		"mem":   func(*testing.T) webhook.Log { return webhook.NewMemLog() },
		"redis": func(t *testing.T) webhook.Log { return redisLog(t, testenv.RedisURL()) },
	} {
		t.Run(name, func(t *testing.T) {
			rig := newDeadRig(t, newLog(t))
			older := rig.kill(webhook.TokenSpent, "sale", "alice")
			newer := rig.kill(webhook.TokenReleased, "sale", "bob")
			shown := strings.TrimSuffix(rig.endpoint.URL, "key=not-for-the-screen") + "…"

			op := signIn(t, browser, rig.srv.URL)
			waitTrue(op, `document.querySelectorAll("#dead tbody tr").length === 2`, "the two dead letters")
			require.Equal(t, newer.ID+" "+older.ID, op.Eval(`Array.from(document.querySelectorAll("#dead tbody tr"), (r) => r.dataset.dead).join(" ")`),
				"newest first")
			require.Equal(t, "2 dead letters, newest first.", op.Text("dead-summary"))
			died := op.Eval(fmt.Sprintf(`new Intl.DateTimeFormat(undefined, {dateStyle: "medium", timeStyle: "short"}).format(new Date(%d))`, older.At.UnixMilli()))
			require.Equal(t, strings.Join([]string{webhook.TokenSpent, "sale", shown, died, "2", "answered 503: " + receiverSays, "Redeliver"}, " | "),
				op.Eval(deadCells(older.ID)))
			require.Equal(t, "0", op.Eval(`String(document.querySelectorAll("#dead script, #dead img").length)`), "the receiver's markup is text")
			require.Equal(t, "undefined", op.Eval(`String(window.pwned)`))
			require.NotContains(t, op.Eval(`document.body.innerText`), "not-for-the-screen", "the endpoint's query is not shown")
			op.Screenshot("admin-08-dead-letters-" + name)
			// On a phone (where Screenshot leaves the tab) each letter is a
			// block of labelled lines: nothing to scroll sideways to.
			require.Equal(t, "true", op.Eval(`(() => { const d = document.querySelector(".dead-list"); return String(d.scrollWidth <= d.clientWidth) })()`),
				"the dead letters fit a phone's width")
			require.Equal(t, "Endpoint", op.Eval(`getComputedStyle(document.querySelector('`+deadRow(older.ID)+` td.endpoint'), "::before").content.replace(/^"|:? ?"$/g, "")`))

			// Cancelled: nothing happens.
			redeliver := deadRow(older.ID) + ` [data-act="redeliver"]`
			op.Do(chromedp.Click(chromedp.CSS(redeliver)), chromedp.WaitVisible(chromedp.ID("confirm")))
			question := op.Text("confirm-text")
			require.Contains(t, question, "Redeliver "+webhook.TokenSpent+" of sale to "+shown+"?")
			require.Contains(t, question, older.EventID)
			require.Equal(t, "Redeliver", op.Text("confirm-ok"))
			op.Screenshot("admin-09-confirm-redeliver-" + name)
			op.Do(chromedp.Click(chromedp.ID("confirm-cancel")), chromedp.WaitNotVisible(chromedp.ID("confirm")))
			rig.clock.Advance(time.Hour)
			rig.step()
			require.Equal(t, []webhook.DeadLetter{newer, older}, rig.dead(), "cancelled: the dead letters are as they were")
			refusals, taken := rig.received()
			require.Equal(t, 4, refusals, "cancelled: nothing sent again")
			require.Empty(t, taken)
			require.Equal(t, "", op.Text("dead-status"))

			// Confirmed: queued again for its endpoint, which, healthy now,
			// gets it with the same webhook-id.
			rig.mu.Lock()
			rig.healthy = true
			rig.mu.Unlock()
			op.Do(chromedp.Click(chromedp.CSS(redeliver)), chromedp.WaitVisible(chromedp.ID("confirm")), chromedp.Click(chromedp.ID("confirm-ok")))
			waitTrue(op, `document.querySelector('`+deadRow(older.ID)+`').dataset.state === "queued"`, "the row to say queued again")
			require.Equal(t, webhook.TokenSpent+" of sale is queued again for "+shown+" (webhook-id "+older.EventID+").", op.Text("dead-status"))
			require.Equal(t, "queued again", op.Eval(`document.querySelector('`+deadRow(older.ID)+` .act').textContent`))
			require.Equal(t, "dead-title", op.Eval(`document.activeElement.id`), "the keyboard stays in the section")
			require.Equal(t, []webhook.DeadLetter{newer}, rig.dead(), "the log took it off its dead letters")
			rig.clock.Advance(time.Second)
			rig.step()
			_, taken = rig.received()
			require.Equal(t, []string{older.EventID}, taken, "delivered once, with the same webhook-id")
			waitTrue(op, `document.querySelector('`+deadRow(older.ID)+`') === null`, "the next read to drop the row")
			require.Equal(t, "1 dead letter.", op.Text("dead-summary"))

			// Redelivered by somebody else while the dialog is open: the
			// dashboard says so rather than pretending.
			op.Do(chromedp.Click(chromedp.CSS(deadRow(newer.ID)+` [data-act="redeliver"]`)), chromedp.WaitVisible(chromedp.ID("confirm")))
			req, err := http.NewRequestWithContext(t.Context(), "POST", rig.srv.URL+"/admin/webhooks/dead/"+newer.ID+"/redeliver", nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+servertest.AdminToken)
			resp, _ := testenv.Do(t, rig.srv.Client(), req)
			require.Equal(t, http.StatusAccepted, resp.StatusCode)
			op.Do(chromedp.Click(chromedp.ID("confirm-ok")))
			waitTrue(op, `document.getElementById("dead-status").textContent.includes("DEAD_LETTER_NOT_FOUND")`, "the refusal")
			require.Equal(t, `Not redelivered: no dead letter "`+newer.ID+`" (DEAD_LETTER_NOT_FOUND): somebody redelivered it already.`, op.Text("dead-status"))
			rig.clock.Advance(time.Second)
			rig.step()
			_, taken = rig.received()
			require.Equal(t, []string{older.EventID, newer.EventID}, taken, "the other redelivery went out, once")

			waitTrue(op, `document.querySelectorAll("#dead tbody tr").length === 0`, "the empty list")
			require.Equal(t, "No dead letters: every webhook message was delivered or is still being retried.", op.Text("dead-summary"))
			require.Equal(t, "true", op.Eval(`String(document.querySelector("#dead table").hidden)`))
		})
	}
}

// TestDashboardDeadLettersBounded: the dashboard shows the newest 50 and
// says that more are kept; a letter whose endpoint was deleted offers no
// redelivery, which would reach nobody.
func TestDashboardDeadLettersBounded(t *testing.T) {
	t.Parallel()
	rig := newDeadRig(t, webhook.NewMemLog())
	at := rig.clock.Now()
	letter := func(id, endpoint string) webhook.DeadLetter {
		return webhook.DeadLetter{ID: id, Endpoint: endpoint, EventID: "msg_" + id, Type: webhook.TokenSpent, Room: "sale",
			Attempts: 30, LastError: "answered 500", At: at}
	}
	for i := range 50 {
		require.NoError(t, rig.log.AddDead(t.Context(), letter("dl_"+strconv.Itoa(i), rig.endpoint.ID)))
	}
	require.NoError(t, rig.log.AddDead(t.Context(), letter("dl_gone", "ep_deleted")))
	op := signIn(t, servertest.NewBrowser(t), rig.srv.URL)
	waitTrue(op, `document.querySelectorAll("#dead tbody tr").length === 50`, "the newest 50")
	require.Equal(t, "dl_gone", op.Eval(`document.querySelector("#dead tbody tr").dataset.dead`))
	require.Equal(t, "dl_1", op.Eval(`document.querySelector("#dead tbody tr:last-child").dataset.dead`))
	require.Equal(t, "The newest 50 dead letters; more are kept (waitroom admin webhooks dead --limit 1000 lists them).", op.Text("dead-summary"))
	cells := strings.Split(op.Eval(deadCells("dl_gone")), " | ")
	require.Equal(t, "ep_deleted (removed)", cells[2])
	require.Equal(t, "endpoint removed", cells[6])
	require.Equal(t, "0", op.Eval(`String(document.querySelectorAll('`+deadRow("dl_gone")+` button').length)`))
}

// TestDashboardDeadLettersLogDown: a webhook log that stops answering is
// said in the section's status, for a redelivery (and its button works
// again) and for the next read, never dropped.
func TestDashboardDeadLettersLogDown(t *testing.T) {
	t.Parallel()
	redis := redistest.StartServer(t)
	rig := newDeadRig(t, redisLog(t, redis.URL()))
	dead := rig.kill(webhook.TokenSpent, "sale", "alice")
	op := signIn(t, servertest.NewBrowser(t), rig.srv.URL)
	op.Do(chromedp.WaitVisible(chromedp.CSS(deadRow(dead.ID))))
	// Every text the status takes, so that the next read's cannot hide the
	// redelivery's however the two interleave.
	op.Eval(`window.deadStatuses = []; new MutationObserver(() => deadStatuses.push(document.getElementById("dead-status").textContent))
		.observe(document.getElementById("dead-status"), {childList: true, characterData: true, subtree: true}); ""`)

	redis.Kill()
	button := deadRow(dead.ID) + ` [data-act="redeliver"]`
	op.Do(chromedp.Click(chromedp.CSS(button)), chromedp.WaitVisible(chromedp.ID("confirm")), chromedp.Click(chromedp.ID("confirm-ok")))
	refused := "Not redelivered: the webhook log is unavailable (STORE_UNAVAILABLE). Try again."
	waitTrue(op, `deadStatuses.includes(`+strconv.Quote(refused)+`)`, "the refused redelivery")
	waitTrue(op, `!document.querySelector('`+button+`').disabled`, "the button to work again")
	waitTrue(op, `document.getElementById("dead-status").textContent === "Cannot read the dead letters: the webhook log is unavailable (STORE_UNAVAILABLE). Retrying in 10 s."`,
		"the next read's failure")
	require.Equal(t, "1 dead letter.", op.Text("dead-summary"), "the last list read stays")
}
