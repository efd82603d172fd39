package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/webhook"
)

// setup is a log with one endpoint at rc, an emitter and a dispatcher on
// the fake clock.
func setup(t *testing.T, log webhook.Log, c *clock, rc *receiver, id string) (webhook.Endpoint, *webhook.Emitter, *webhook.Dispatcher) {
	t.Helper()
	ep, err := webhook.StaticEndpoint(rc.URL+"/hook", []string{webhook.NewSecret()})
	if err != nil {
		t.Fatal(err)
	}
	em := &webhook.Emitter{Log: log, Now: c.Now}
	d := &webhook.Dispatcher{Log: log, ID: id, Static: []webhook.Endpoint{ep}, Now: c.Now, Jitter: func() float64 { return 0.5 }}
	// The consumer groups exist before the first event.
	if err := d.Step(t.Context()); err != nil {
		t.Fatal(err)
	}
	return ep, em, d
}

// emitRooms emits n events spread over rooms, in an order the test knows.
func emitRooms(t *testing.T, em *webhook.Emitter, rooms []string, n int) map[string][]string {
	t.Helper()
	order := map[string][]string{} // room → users in emit order
	for i := range n {
		room := rooms[i%len(rooms)]
		user := fmt.Sprintf("u%03d", i)
		em.Emit(webhook.TokenSpent, room, webhook.TokenData{User: user, Units: 1})
		order[room] = append(order[room], user)
	}
	if err := em.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	return order
}

func userOf(t *testing.T, d delivery) string {
	t.Helper()
	var data webhook.TokenData
	if err := json.Unmarshal(d.Event.Data, &data); err != nil {
		t.Fatal(err)
	}
	return data.User
}

// stepUntil steps d (advancing the clock by every after each step) until
// done says so, at most steps times.
func stepUntil(t *testing.T, d *webhook.Dispatcher, c *clock, every time.Duration, steps int, done func() bool) {
	t.Helper()
	for range steps {
		if err := d.Step(t.Context()); err != nil {
			t.Fatal(err)
		}
		if done() {
			return
		}
		c.Advance(every)
	}
	t.Fatalf("not done after %d steps", steps)
}

// checkOrder checks that in every room each event was first offered only
// once the one before it had been taken.
func checkOrder(t *testing.T, got []delivery, order map[string][]string) {
	t.Helper()
	takenUpTo := map[string]int{} // room → how many of its events were taken
	for _, d := range got {
		room, user := d.Event.Room, userOf(t, d)
		i := slices.Index(order[room], user)
		if i < 0 {
			t.Fatalf("unexpected event %s in %s", user, room)
		}
		if i > takenUpTo[room] {
			t.Fatalf("room %s: %s offered before %s was taken", room, user, order[room][takenUpTo[room]])
		}
		if d.Status/100 == 2 && i == takenUpTo[room] {
			takenUpTo[room]++
		}
	}
	for room, users := range order {
		if takenUpTo[room] != len(users) {
			t.Fatalf("room %s: %d of %d events taken", room, takenUpTo[room], len(users))
		}
	}
}

// A receiver that fails three times then takes each event gets every one
// at least once, each attempt with the same webhook-id and a signature
// the Standard Webhooks library accepts, in order per room; the first
// retry comes within seconds.
func TestFailingReceiverGetsEveryEventInOrder(t *testing.T) {
	eachLog(t, func(t *testing.T, log webhook.Log, c *clock) {
		rc := newReceiver(t, func(_ *http.Request, nth int) int {
			if nth < 3 {
				return http.StatusServiceUnavailable
			}
			return http.StatusNoContent
		})
		ep, em, d := setup(t, log, c, rc, "d1")
		rooms := []string{"r-a", "r-b", "r-c"}
		order := emitRooms(t, em, rooms, 30)
		stepUntil(t, d, c, time.Second, 500, func() bool { return len(rc.taken()) >= 30 })

		got := rc.deliveries()
		byID := map[string][]delivery{}
		for _, dl := range got {
			if err := verify(t, ep.Secrets[0].Value, dl, true); err != nil {
				t.Fatalf("signature of %s: %v", dl.ID, err)
			}
			if dl.Event.Version != webhook.Version || dl.Event.Type != webhook.TokenSpent {
				t.Fatalf("body %s", dl.Body)
			}
			byID[dl.ID] = append(byID[dl.ID], dl)
		}
		if len(byID) != 30 {
			t.Fatalf("%d distinct webhook-ids, want 30", len(byID))
		}
		for id, ds := range byID {
			// Three refusals, then taken once: the same id and body.
			if len(ds) != 4 || ds[3].Status != http.StatusNoContent {
				t.Fatalf("%s: %d attempts, last %d; want 4 ending 204", id, len(ds), ds[len(ds)-1].Status)
			}
			for _, x := range ds[1:] {
				if string(x.Body) != string(ds[0].Body) {
					t.Fatalf("%s: body changed between attempts", id)
				}
			}
			first, _ := strconv.ParseInt(ds[0].Timestamp, 10, 64)
			second, _ := strconv.ParseInt(ds[1].Timestamp, 10, 64)
			if wait := time.Duration(second-first) * time.Second; wait < time.Second || wait > 2*time.Second {
				t.Fatalf("%s: first retry after %s, want 1–2 s", id, wait)
			}
		}
		checkOrder(t, got, order)
	})
}

// A dispatcher killed while its receiver holds a request loses nothing:
// once its lease lapses a second one claims the entries it was handed
// (XAUTOCLAIM) and delivers them with the rest, in order per room.
func TestKilledDispatcherLosesNoEvent(t *testing.T) {
	eachLog(t, func(t *testing.T, log webhook.Log, c *clock) {
		var mu sync.Mutex
		served, blocked := 0, make(chan struct{}, 64)
		var stuck bool
		rc := newReceiver(t, func(r *http.Request, _ int) int {
			mu.Lock()
			block := stuck
			if !block {
				served++
				if served == 5 {
					stuck = true // from now on dispatcher a is "killed" mid-request
				}
			}
			mu.Unlock()
			if block {
				blocked <- struct{}{}
				<-r.Context().Done() // held until the dispatcher dies
				return http.StatusServiceUnavailable
			}
			return http.StatusOK
		})
		ep, em, a := setup(t, log, c, rc, "a")
		order := emitRooms(t, em, []string{"r-a", "r-b", "r-c", "r-d"}, 40)
		c.Advance(webhook.QuietRead) // a reads at once

		// a steps until the receiver holds one of its requests, then dies.
		ctx, kill := context.WithCancel(t.Context())
		aDone := make(chan struct{})
		go func() {
			defer close(aDone)
			for ctx.Err() == nil {
				_ = a.Step(ctx)
			}
		}()
		<-blocked
		kill()
		<-aDone
		mu.Lock()
		stuck = false // the receiver is fine again
		mu.Unlock()

		// b starts; a's lease lapses; b owns every partition.
		b := &webhook.Dispatcher{Log: log, ID: "b", Static: []webhook.Endpoint{ep}, Now: c.Now, Jitter: func() float64 { return 0.5 }}
		c.Advance(webhook.LeaseTTL + time.Second)
		stepUntil(t, b, c, time.Second, 200, func() bool {
			taken := map[string]bool{}
			for _, d := range rc.taken() {
				taken[d.ID] = true
			}
			return len(taken) == 40
		})
		checkOrder(t, rc.deliveries(), order)
	})
}

// Dead-lettered after the retry budget (24 h, on the fake clock), listed
// by the admin API and redelivered through it with the same webhook-id.
func TestDeadLetterAndRedeliver(t *testing.T) {
	eachLog(t, func(t *testing.T, log webhook.Log, c *clock) {
		var mu sync.Mutex
		up := false
		rc := newReceiver(t, func(*http.Request, int) int {
			mu.Lock()
			defer mu.Unlock()
			if up {
				return http.StatusOK
			}
			return http.StatusInternalServerError
		})
		ep, em, d := setup(t, log, c, rc, "d1")
		admin := (&webhook.Admin{Log: log, Static: []webhook.Endpoint{ep}, Now: c.Now}).Routes()
		emitRooms(t, em, []string{"r-a"}, 1)

		start := c.Now()
		stepUntil(t, d, c, webhook.MaxBackoff, 40, func() bool {
			_, body := adminCall(t, admin, "GET", "/admin/webhooks/dead", "")
			return len(body["dead"].([]any)) == 1
		})
		if c.Now().Sub(start) < webhook.MaxAge {
			t.Fatalf("dead-lettered after %s, before the budget of %s", c.Now().Sub(start), webhook.MaxAge)
		}
		_, body := adminCall(t, admin, "GET", "/admin/webhooks/dead", "")
		dead := body["dead"].([]any)[0].(map[string]any)
		attempts := len(rc.deliveries())
		if dead["endpoint"] != ep.ID || dead["type"] != webhook.TokenSpent || int(dead["attempts"].(float64)) != attempts || dead["last_error"] != "answered 500" {
			t.Fatalf("dead letter %v after %d attempts", dead, attempts)
		}
		// Nothing more is tried once dead.
		c.Advance(time.Hour)
		if err := d.Step(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := len(rc.deliveries()); n != attempts {
			t.Fatalf("%d attempts after the dead letter, want %d", n, attempts)
		}

		if code, body := adminCall(t, admin, "POST", "/admin/webhooks/dead/dl_nope/redeliver", ""); code != 404 || errorCode(body) != webhook.CodeDeadNotFound {
			t.Fatalf("unknown dead letter: %d %v", code, body)
		}
		mu.Lock()
		up = true
		mu.Unlock()
		if code, body := adminCall(t, admin, "POST", "/admin/webhooks/dead/"+dead["id"].(string)+"/redeliver", ""); code != 202 || body["event_id"] != dead["event_id"] {
			t.Fatalf("redeliver: %d %v", code, body)
		}
		if code, _ := adminCall(t, admin, "POST", "/admin/webhooks/dead/"+dead["id"].(string)+"/redeliver", ""); code != 404 {
			t.Fatalf("a second redeliver answered %d, want 404", code)
		}
		stepUntil(t, d, c, time.Second, 10, func() bool { return len(rc.taken()) == 1 })
		if got := rc.taken()[0].ID; got != dead["event_id"] {
			t.Fatalf("redelivered as %s, want the same webhook-id %s", got, dead["event_id"])
		}
		_, body = adminCall(t, admin, "GET", "/admin/webhooks/dead", "")
		if n := len(body["dead"].([]any)); n != 0 {
			t.Fatalf("%d dead letters after the redelivery", n)
		}
	})
}

// A Redis that lost its data lost the consumer groups: the dispatcher
// makes them again and delivers what is appended from then on.
func TestDispatcherMakesLostGroupsAgain(t *testing.T) {
	t.Parallel()
	client, err := redisstore.Open(testenv.RedisURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	prefix := testenv.Unique("wh")
	t.Cleanup(func() { _ = redisstore.DeletePrefix(context.Background(), client, prefix) })
	log := webhook.NewRedisLog(client, prefix)
	c := newClock()
	rc := newReceiver(t, func(*http.Request, int) int { return http.StatusOK })
	_, em, d := setup(t, log, c, rc, "d1")
	emitRooms(t, em, []string{"r-a"}, 1)
	stepUntil(t, d, c, time.Second, 5, func() bool { return len(rc.taken()) == 1 })

	if err := redisstore.DeletePrefix(t.Context(), client, prefix); err != nil {
		t.Fatal(err)
	}
	c.Advance(webhook.QuietRead)
	for range 2 { // the first step finds no group, the second makes them
		if err := d.Step(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	emitRooms(t, em, []string{"r-a"}, 1)
	stepUntil(t, d, c, time.Second, 5, func() bool { return len(rc.taken()) == 2 })
}

// Two live dispatchers split the partitions: each room's events go out
// from one of them, each exactly once while nothing fails, in order.
func TestTwoDispatchersShareTheWork(t *testing.T) {
	eachLog(t, func(t *testing.T, log webhook.Log, c *clock) {
		rc := newReceiver(t, func(*http.Request, int) int { return http.StatusOK })
		ep, em, a := setup(t, log, c, rc, "a")
		b := &webhook.Dispatcher{Log: log, ID: "b", Static: []webhook.Endpoint{ep}, Now: c.Now}
		var sent [2]atomic.Int64
		a.OnOutcome = func(_, outcome string) {
			if outcome == "delivered" {
				sent[0].Add(1)
			}
		}
		b.OnOutcome = func(_, outcome string) {
			if outcome == "delivered" {
				sent[1].Add(1)
			}
		}
		rooms := make([]string, 16)
		for i := range rooms {
			rooms[i] = fmt.Sprintf("room-%02d", i)
		}
		// Both alive before the first event.
		for _, d := range []*webhook.Dispatcher{a, b} {
			if err := d.Step(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		order := emitRooms(t, em, rooms, 64)
		for range 20 {
			testenv.AtOnce(2, func(i int) {
				if err := []*webhook.Dispatcher{a, b}[i].Step(t.Context()); err != nil {
					t.Error(err)
				}
			})
			c.Advance(time.Second)
		}
		got := rc.deliveries()
		if len(got) != 64 {
			t.Fatalf("%d deliveries of 64 events, want each once", len(got))
		}
		// Each sent the events of the partitions it owns (rendezvous
		// hashing may give one of them all 8: 1 in 256).
		var want [2]int64
		for _, dl := range got {
			p := webhook.Partition(dl.Event.Room)
			if a.Sends(ep.ID, p) == b.Sends(ep.ID, p) {
				t.Fatalf("partition %d is sent by none or by both", p)
			}
			if a.Sends(ep.ID, p) {
				want[0]++
			} else {
				want[1]++
			}
		}
		if sent[0].Load() != want[0] || sent[1].Load() != want[1] {
			t.Fatalf("a sent %d, b %d; they own %d and %d", sent[0].Load(), sent[1].Load(), want[0], want[1])
		}
		checkOrder(t, got, order)
		if !a.Owns(rooms[0]) && !b.Owns(rooms[0]) || a.Owns(rooms[0]) && b.Owns(rooms[0]) {
			t.Fatal("a room is watched by none or by both")
		}
	})
}

// A dead letter's last error says what the receiver answered, as one
// bounded line with no control character, and never the endpoint's URL,
// whose query may hold a token.
func TestDeadLetterSaysWhatTheReceiverAnswered(t *testing.T) {
	t.Parallel()
	said := "<script>alert(1)</script>\r\n\tdatabase\x1b[31m down " + strings.Repeat("é", 200)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, said)
	}))
	t.Cleanup(rc.Close)
	refused := httptest.NewServer(http.NotFoundHandler())
	refusedURL := refused.URL
	refused.Close() // nothing listens there any more

	for name, tc := range map[string]struct{ url, want string }{
		"refusal":   {rc.URL + "/hook", "answered 503: <script>alert(1)</script> database [31m down " + strings.Repeat("é", 76) + "…"},
		"no answer": {refusedURL + "/hook?token=not-for-the-log", "Post: dial tcp "},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			log, c := webhook.NewMemLog(), newClock()
			ep, err := webhook.StaticEndpoint(tc.url, []string{webhook.NewSecret()})
			if err != nil {
				t.Fatal(err)
			}
			d := &webhook.Dispatcher{Log: log, ID: "d1", Static: []webhook.Endpoint{ep}, Now: c.Now}
			if err := d.Step(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := log.Append(t.Context(), []webhook.Entry{webhook.NewEntry(webhook.NewEvent(webhook.TokenSpent, "r-a", c.Now(), webhook.TokenData{User: "u1", Units: 1}), c.Now())}); err != nil {
				t.Fatal(err)
			}
			c.Advance(time.Second)
			stepUntil(t, d, c, webhook.MaxAge, 3, func() bool {
				dead, err := log.Dead(t.Context(), 1)
				return err == nil && len(dead) == 1
			})
			dead, err := log.Dead(t.Context(), 1)
			if err != nil {
				t.Fatal(err)
			}
			got := dead[0].LastError
			if !strings.HasPrefix(got, tc.want) || strings.Contains(got, "token=") || strings.ContainsFunc(got, func(r rune) bool { return r < ' ' }) {
				t.Fatalf("last error %q, want it to start %q, one line, without the URL", got, tc.want)
			}
		})
	}
}
