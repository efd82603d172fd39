package webhook_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/webhook"
)

// appended reads every entry appended to log since the group "t" was
// made.
func appended(t *testing.T, log webhook.Log) []webhook.Entry {
	t.Helper()
	var out []webhook.Entry
	for p := range webhook.Partitions {
		es, err := log.Read(t.Context(), "t", p, "reader", 10_000)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, es...)
	}
	return out
}

// look ticks each of watchers, flushes em and returns what the log got
// since the last look, each event as its type and data.
func look(t *testing.T, em *webhook.Emitter, log webhook.Log, watchers ...*webhook.Watcher) []string {
	t.Helper()
	for _, w := range watchers {
		if err := w.Tick(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if err := em.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	var told []string
	for _, e := range appended(t, log) {
		told = append(told, e.Event.Type+" "+string(e.Event.Data))
	}
	return told
}

// groupedMemLog is an in-process log whose group "t" reads (appended)
// everything appended to it.
func groupedMemLog(t *testing.T) *webhook.MemLog {
	t.Helper()
	log := webhook.NewMemLog()
	if err := log.AddGroup(t.Context(), "t"); err != nil {
		t.Fatal(err)
	}
	return log
}

// The watcher tells no-shows (by name, from the room's outbox, which
// its first look turns on) and a sale's end once, however many instances
// watch the room (their log is one Redis).
func TestWatcherTellsEachChangeOnce(t *testing.T) {
	t.Parallel()
	c := newClock()
	store := memstore.New(memstore.Options{Now: c.Now})
	ctx := t.Context()
	cfg := waitroom.RoomConfig{Rate: 100, Stock: 1, FirstUseWithin: time.Second}.WithDefaults()
	if _, err := store.CreateRoom(ctx, "r", cfg); err != nil {
		t.Fatal(err)
	}
	log := redisLog(t)
	if err := log.AddGroup(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	em := &webhook.Emitter{Log: log, Now: c.Now}
	// The watchers' clock is a second ahead of the store's: an
	// admission's second is over when they look (OutboxEvents).
	ahead := func() time.Time { return c.Now().Add(time.Second) }
	watchers := []*webhook.Watcher{{Store: store, Log: log, Emitter: em, Now: ahead}, {Store: store, Log: log, Emitter: em, Now: ahead}}
	tick := func() []string {
		t.Helper()
		return look(t, em, log, watchers...)
	}
	// Admission ticks a second apart until one admits somebody.
	admit := func() []waitroom.Admission {
		for range 5 {
			c.Advance(time.Second)
			a, err := store.Admit(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			if len(a) > 0 {
				return a
			}
		}
		return nil
	}
	for _, u := range []string{"u1", "u2"} {
		if _, err := store.Enter(ctx, "r", u); err != nil {
			t.Fatal(err)
		}
	}
	if a := admit(); len(a) != 1 {
		t.Fatalf("admitted %v", a)
	}
	if got := tick(); len(got) != 0 {
		t.Fatalf("the first look told %v", got)
	}
	c.Advance(time.Second) // u1 never came: a no-show
	a := admit()
	if len(a) != 1 || a[0].User != "u2" {
		t.Fatalf("admitted %v", a)
	}
	if got := tick(); fmt.Sprint(got) != `[user.no_show {"count":1,"users":["u1"]} user.admitted {"count":1,"users":["u2"]}]` {
		t.Fatalf("told %v", got)
	}
	h, err := store.Claim(ctx, "r", "u2", a[0].Token)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Complete(ctx, h); err != nil {
		t.Fatal(err)
	}
	if got := tick(); fmt.Sprint(got) != `[room.sold_out {"stock":1,"sold":1}]` {
		t.Fatalf("told %v", got)
	}
	if got := tick(); len(got) != 0 {
		t.Fatalf("told again: %v", got)
	}

	// A scheduled closing is told once it has come, once.
	closes := c.Now().Add(time.Minute)
	if _, err := waitroom.ChangeRoom(ctx, store, "r", func(cfg *waitroom.RoomConfig) error { cfg.ClosesAt = closes; return nil }); err != nil {
		t.Fatal(err)
	}
	if got := tick(); len(got) != 0 {
		t.Fatalf("told before the closing: %v", got)
	}
	c.Advance(time.Minute)
	if got := tick(); fmt.Sprint(got) != `[room.closed {"state":"closed"}]` {
		t.Fatalf("told %v", got)
	}
	if got := tick(); len(got) != 0 {
		t.Fatalf("told again: %v", got)
	}
}

// What an operator's change of a room tells.
func TestRoomChangedTells(t *testing.T) {
	t.Parallel()
	open, paused, closed := waitroom.RoomOpen, waitroom.RoomPaused, waitroom.RoomClosed
	for _, c := range []struct {
		from, to waitroom.RoomConfig
		created  bool
		want     string
	}{
		{waitroom.RoomConfig{}, waitroom.RoomConfig{State: open}, true, `[room.opened {"state":"open"}]`},
		{waitroom.RoomConfig{}, waitroom.RoomConfig{State: paused}, true, `[]`},
		{waitroom.RoomConfig{State: open}, waitroom.RoomConfig{State: paused}, false, `[room.paused {"state":"paused"}]`},
		{waitroom.RoomConfig{State: paused}, waitroom.RoomConfig{State: open}, false, `[room.resumed {"state":"open"}]`},
		{waitroom.RoomConfig{State: closed}, waitroom.RoomConfig{State: open}, false, `[room.opened {"state":"open"}]`},
		{waitroom.RoomConfig{State: paused}, waitroom.RoomConfig{State: closed}, false, `[room.closed {"state":"closed"}]`},
		{waitroom.RoomConfig{State: open, Rate: 1}, waitroom.RoomConfig{State: open, Rate: 2}, false, `[]`},
		{waitroom.RoomConfig{State: open, Stock: 10}, waitroom.RoomConfig{State: open, Stock: 25}, false, `[room.restocked {"stock":25,"previous_stock":10}]`},
		{waitroom.RoomConfig{State: open, Stock: 10}, waitroom.RoomConfig{State: open, Stock: 5}, false, `[]`},
	} {
		log := groupedMemLog(t)
		em := &webhook.Emitter{Log: log}
		em.RoomChanged("r", c.from, c.to, c.created)
		if err := em.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range appended(t, log) {
			got = append(got, e.Event.Type+" "+string(e.Event.Data))
		}
		if fmt.Sprint(got) != c.want {
			t.Errorf("%+v → %+v (created %v): told %v, want %s", c.from.State, c.to.State, c.created, got, c.want)
		}
	}
}

// Settles are gathered per room and type, and a room's own event appends
// what its users did before it first.
func TestSettledIsBatchedAndKeepsTheRoomsOrder(t *testing.T) {
	t.Parallel()
	log := groupedMemLog(t)
	em := &webhook.Emitter{Log: log}
	for i := range 3 {
		em.Settled(waitroom.Hold{Room: "r", User: fmt.Sprintf("u%d", i), Units: 2}, waitroom.OutcomeCompleted)
	}
	em.Settled(waitroom.Hold{Room: "r", User: "u9"}, waitroom.OutcomeReleased)
	em.Emit(webhook.RoomPaused, "r", webhook.RoomData{State: "paused"})
	if err := em.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range appended(t, log) {
		got = append(got, e.Event.Type+" "+string(e.Event.Data))
	}
	want := []string{
		`token.spent {"count":3,"tokens":[{"user":"u0","units":2},{"user":"u1","units":2},{"user":"u2","units":2}]}`,
		`token.released {"count":1,"tokens":[{"user":"u9","units":1}]}`,
		`room.paused {"state":"paused"}`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("appended\n%v\nwant\n%v", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
