package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/redistest"
	"github.com/waitroom/waitroom/webhook"
)

// outboxBackend is a store and a log, and a way to make another
// instance's store on the same backend (a new client on the same Redis
// and prefix; the same store in process).
type outboxBackend struct {
	store    waitroom.Store
	log      webhook.Log
	instance func(t *testing.T) waitroom.Store
}

// eachOutboxBackend runs f on memstore with MemLog, and on redisstore
// with RedisLog on the test Redis and on a 3-primary Cluster.
func eachOutboxBackend(t *testing.T, f func(t *testing.T, b outboxBackend)) {
	t.Run("mem", func(t *testing.T) {
		t.Parallel()
		s := memstore.New(memstore.Options{})
		f(t, outboxBackend{store: s, log: webhook.NewMemLog(), instance: func(*testing.T) waitroom.Store { return s }})
	})
	onRedis := func(t *testing.T, url string) {
		prefix := testenv.Unique("wrwh")
		open := func(t *testing.T) *redisstore.Store {
			client, err := redisstore.Open(url)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = client.Close() })
			return redisstore.New(client, redisstore.Options{Prefix: prefix})
		}
		s := open(t)
		t.Cleanup(func() { _ = redisstore.DeletePrefix(context.Background(), s.Client(), prefix) })
		f(t, outboxBackend{store: s, log: webhook.NewRedisLog(s.Client(), prefix),
			instance: func(t *testing.T) waitroom.Store { return open(t) }})
	}
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		onRedis(t, testenv.RedisURL())
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		onRedis(t, redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3}).URL())
	})
}

// admitN makes a room (rate 1,000/s), enters users u000 … and admits
// until all are admitted, call after call as the store's clock allows,
// and returns them in admission order.
func admitN(t *testing.T, s waitroom.Store, n int) (string, []string) {
	t.Helper()
	ctx := t.Context()
	room := testenv.Unique("r-")
	if _, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Rate: 1000, TokenTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	return room, admitMore(t, s, room, "u", n)
}

// admitMore enters n users named prefix000 … into room and admits them.
func admitMore(t *testing.T, s waitroom.Store, room, prefix string, n int) []string {
	t.Helper()
	ctx := t.Context()
	for i := range n {
		if _, err := s.Enter(ctx, room, fmt.Sprintf("%s%03d", prefix, i)); err != nil {
			t.Fatal(err)
		}
	}
	var order []string
	// Each call admits what the time since the last one allows: on the
	// real clock, a few users per call; the bound is of calls, not time.
	for calls := 0; len(order) < n; calls++ {
		if calls > 1_000_000 {
			t.Fatalf("admitted %d of %d", len(order), n)
		}
		got, err := s.Admit(ctx, room)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range got {
			order = append(order, a.User)
		}
	}
	return order
}

// redisStoreAndLog are a Store and a RedisLog on the test Redis under a
// prefix of their own.
func redisStoreAndLog(t *testing.T) (*redisstore.Store, webhook.Log) {
	t.Helper()
	client, err := redisstore.Open(testenv.RedisURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	prefix := testenv.Unique("wrwh")
	t.Cleanup(func() { _ = redisstore.DeletePrefix(context.Background(), client, prefix) })
	return redisstore.New(client, redisstore.Options{Prefix: prefix}), webhook.NewRedisLog(client, prefix)
}

// watcher is a Watcher of every room with no endpoint filter, on a clock
// an hour ahead: every second's outbox entries are told at once
// (OutboxEvents).
func watcher(s waitroom.Store, log webhook.Log) *webhook.Watcher {
	return &webhook.Watcher{Store: s, Log: log, Emitter: &webhook.Emitter{Log: log}, Now: hourAhead}
}

func hourAhead() time.Time { return time.Now().Add(time.Hour) }

// relayed are the entries of room's outbox events in the log (group
// "t"'s reading), in log order.
func relayed(t *testing.T, log webhook.Log, room string) []webhook.Entry {
	t.Helper()
	var out []webhook.Entry
	for _, e := range appended(t, log) {
		if e.Event.Room == room && slices.Contains(webhook.OutboxTypes, e.Event.Type) {
			out = append(out, e)
		}
	}
	return out
}

// admittedIn are the users of the user.admitted entries, in order.
func admittedIn(t *testing.T, entries []webhook.Entry) []string {
	t.Helper()
	var users []string
	for _, e := range entries {
		if e.Event.Type != webhook.UserAdmitted {
			continue
		}
		var data webhook.AdmittedData
		if err := json.Unmarshal(e.Event.Data, &data); err != nil {
			t.Fatal(err)
		}
		if data.Count != len(data.Users) {
			t.Fatalf("count %d of %d users: %s", data.Count, len(data.Users), e.Body)
		}
		users = append(users, data.Users...)
	}
	return users
}

func tick(t *testing.T, w *webhook.Watcher) {
	t.Helper()
	if err := w.Tick(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestOutboxRelay: on each backend (in process, Redis, a Redis Cluster),
// the relay survives a kill and two relays racing append each entry once.
func TestOutboxRelay(t *testing.T) {
	t.Parallel()
	eachOutboxBackend(t, func(t *testing.T, b outboxBackend) {
		if err := b.log.AddGroup(t.Context(), "t"); err != nil {
			t.Fatal(err)
		}
		t.Run("SurvivesAKill", func(t *testing.T) { testRelaySurvivesAKill(t, b) })
		t.Run("Race", func(t *testing.T) { testRelayRace(t, b) })
	})
}

// An instance that dies after its admissions and before its relay loses
// no event: a fresh Watcher on the same store relays every admitted user
// in admission order, with the ids the events of those entries have; a
// relay that died after its append and before its trim appends nothing
// again, and the ids it appended are the ones a replay would give.
func testRelaySurvivesAKill(t *testing.T, b outboxBackend) {
	ctx := t.Context()
	first := watcher(b.store, b.log)
	tick(t, first) // no rooms yet
	room := testenv.Unique("r-")
	if _, err := b.store.CreateRoom(ctx, room, waitroom.RoomConfig{Rate: 1000, TokenTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	tick(t, first) // marks the new room's outbox on
	order := admitMore(t, b.store, room, "u", 40)
	// The instance dies here: its watcher never ticks again.

	outbox, ok := b.store.(waitroom.OutboxStore)
	if !ok {
		t.Fatal("the store keeps no outbox")
	}
	read, err := outbox.ReadOutbox(ctx, room, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(read.Entries) < 2 {
		t.Fatalf("%d outbox entries; the admission took several calls", len(read.Entries))
	}
	var entryUsers []string
	for _, oe := range read.Entries {
		entryUsers = append(entryUsers, oe.Users...)
	}
	if !slices.Equal(entryUsers, order) {
		t.Fatalf("the outbox holds\n%v\nwant, as admitted,\n%v", entryUsers, order)
	}
	events, _ := webhook.OutboxEvents(room, read.Entries, hourAhead(), false)
	var want []string
	for _, ev := range events {
		want = append(want, ev.ID)
	}

	// A relay that appends the first half and dies before its trim.
	half := (len(events) + 1) / 2
	var early []webhook.Entry
	for _, ev := range events[:half] {
		early = append(early, webhook.NewEntry(ev, time.Now()))
	}
	if n, err := b.log.AppendOnce(ctx, early); err != nil || n != half {
		t.Fatalf("appended %d of %d: %v", n, half, err)
	}

	second := watcher(b.instance(t), b.log)
	tick(t, second)
	got := relayed(t, b.log, room)
	var ids []string
	for _, e := range got {
		ids = append(ids, e.Event.ID)
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("relayed ids\n%v\nwant\n%v", ids, want)
	}
	if users := admittedIn(t, got); !slices.Equal(users, order) {
		t.Fatalf("relayed users\n%v\nwant, as admitted,\n%v", users, order)
	}
	for i, e := range got {
		if !e.Event.Timestamp.Equal(events[i].Timestamp) {
			t.Fatalf("event %d's timestamp %v, its first entry's %v", i, e.Event.Timestamp, events[i].Timestamp)
		}
	}
	if left, err := outbox.ReadOutbox(ctx, room, 1000); err != nil || len(left.Entries) != 0 {
		t.Fatalf("left in the outbox: %v, %v", left.Entries, err)
	}

	// More admissions go on in order with the next tick.
	more := admitMore(t, b.store, room, "v", 10)
	tick(t, second)
	if users := admittedIn(t, relayed(t, b.log, room)); !slices.Equal(users, more) {
		t.Fatalf("relayed %v, want %v", users, more)
	}
}

// Two watchers relaying the same room at one signal append every event
// once: as many as the entries make, each id once, every admitted user
// once and in order.
func testRelayRace(t *testing.T, b outboxBackend) {
	ctx := t.Context()
	room := testenv.Unique("r-")
	if _, err := b.store.CreateRoom(ctx, room, waitroom.RoomConfig{Rate: 1000, TokenTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := b.store.(waitroom.OutboxStore).SetOutbox(ctx, room, true); err != nil {
		t.Fatal(err)
	}
	order := admitMore(t, b.store, room, "u", 60)
	read, err := b.store.(waitroom.OutboxStore).ReadOutbox(ctx, room, 1000)
	if err != nil {
		t.Fatal(err)
	}
	watchers := []*webhook.Watcher{watcher(b.store, b.log), watcher(b.instance(t), b.log)}
	errs := make([]error, len(watchers))
	testenv.AtOnce(len(watchers), func(i int) { errs[i] = watchers[i].Tick(ctx) })
	for i, err := range errs {
		if err != nil {
			t.Fatalf("watcher %d: %v", i, err)
		}
	}
	events, _ := webhook.OutboxEvents(room, read.Entries, hourAhead(), false)
	got := relayed(t, b.log, room)
	if len(got) != len(events) {
		t.Fatalf("%d events appended, want %d (of %d entries)", len(got), len(events), len(read.Entries))
	}
	seen := map[string]bool{}
	for _, e := range got {
		if seen[e.Event.ID] {
			t.Fatalf("id %s twice", e.Event.ID)
		}
		seen[e.Event.ID] = true
	}
	if users := admittedIn(t, got); !slices.Equal(users, order) {
		t.Fatalf("relayed users\n%v\nwant\n%v", users, order)
	}
}

// A room no endpoint wants per-user events of (its filter names other
// events, or other rooms) never gets an outbox, whatever it admits; once
// an endpoint wants them, it does.
func TestOutboxOnlyWhereWanted(t *testing.T) {
	t.Parallel()
	s, log := redisStoreAndLog(t)
	room, _ := admitN(t, s, 0)
	endpoints := []webhook.Endpoint{{ID: "a", Events: []string{webhook.RoomPaused, webhook.TokenSpent}}, {ID: "b", Rooms: []string{"elsewhere"}}}
	w := watcher(s, log)
	w.Endpoints = func() []webhook.Endpoint { return endpoints }
	outKey := s.Prefix() + ":{" + room + "}:out"
	for range 3 {
		tick(t, w)
		admitMore(t, s, room, testenv.Unique("u")+"-", 5)
	}
	if n := s.Client().Exists(t.Context(), outKey).Val(); n != 0 {
		t.Fatal("an outbox nobody wants")
	}
	endpoints = append(endpoints, webhook.Endpoint{ID: "c", Rooms: []string{room}, Events: []string{webhook.UserAbandoned}})
	tick(t, w)
	admitMore(t, s, room, "late", 5)
	if n := s.Client().XLen(t.Context(), outKey).Val(); n == 0 {
		t.Fatal("no outbox for an endpoint that wants user.abandoned")
	}
}

// user.no_show, token.expired and user.abandoned name exactly the users
// the admission cleaned up or skipped, with the count beside them.
func TestOutboxNamesWhoLeft(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := memstore.New(memstore.Options{Now: c.Now})
	ctx := t.Context()
	log := groupedMemLog(t)
	if _, err := s.CreateRoom(ctx, "r", waitroom.RoomConfig{Rate: 100, MaxActive: 2, FirstUseWithin: time.Second,
		TokenTTL: 3 * time.Second, AbandonAfter: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	w := watcher(s, log)
	tick(t, w)
	for _, u := range []string{"gone-soon", "confirms", "silent-1", "silent-2", "polls"} {
		if _, err := s.Enter(ctx, "r", u); err != nil {
			t.Fatal(err)
		}
	}
	var got []waitroom.Admission
	for range 10 {
		c.Advance(100 * time.Millisecond)
		a, err := s.Admit(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, a...)
	}
	if len(got) != 2 || got[0].User != "gone-soon" || got[1].User != "confirms" {
		t.Fatalf("admitted %v", got)
	}
	for range 2 { // told, then confirmed: the whole TTL
		if _, err := s.Status(ctx, "r", "confirms"); err != nil {
			t.Fatal(err)
		}
	}
	for range 8 {
		c.Advance(500 * time.Millisecond)
		if _, err := s.Status(ctx, "r", "polls"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Admit(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	tick(t, w)
	var told []string
	for _, e := range relayed(t, log, "r") {
		told = append(told, e.Event.Type+" "+string(e.Event.Data))
	}
	want := []string{
		`user.admitted {"count":2,"users":["gone-soon","confirms"]}`,
		`user.no_show {"count":1,"users":["gone-soon"]}`,
		`token.expired {"count":1,"users":["confirms"]}`,
		`user.abandoned {"count":2,"users":["silent-1","silent-2"]}`,
		`user.admitted {"count":1,"users":["polls"]}`,
	}
	if !slices.Equal(told, want) {
		t.Fatalf("told\n%v\nwant\n%v", told, want)
	}
}

// A receiver that fails three times, then takes each message, gets every
// admitted user exactly once, in admission order, from the outbox of a
// room on Redis.
func TestOutboxFailingReceiverGetsEveryAdmission(t *testing.T) {
	t.Parallel()
	s, log := redisStoreAndLog(t)
	c := newClock()
	rc := newReceiver(t, func(_ *http.Request, nth int) int {
		if nth < 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	ep, _, d := setup(t, log, c, rc, "d1")
	room, _ := admitN(t, s, 0)
	w := watcher(s, log)
	w.Endpoints = func() []webhook.Endpoint { return []webhook.Endpoint{ep} }
	tick(t, w)
	order := admitMore(t, s, room, "u", 50)
	tick(t, w)
	var taken []string
	stepUntil(t, d, c, time.Second, 2000, func() bool {
		taken = taken[:0]
		for _, dl := range rc.taken() {
			var data webhook.AdmittedData
			if err := json.Unmarshal(dl.Event.Data, &data); err != nil {
				t.Fatal(err)
			}
			taken = append(taken, data.Users...)
		}
		return len(taken) >= len(order)
	})
	if !slices.Equal(taken, order) {
		t.Fatalf("taken\n%v\nwant\n%v", taken, order)
	}
	for _, dl := range rc.deliveries() {
		if err := verify(t, ep.Secrets[0].Value, dl, false); err != nil {
			t.Fatal(err)
		}
	}
}

// OutboxEvents makes one event of the consecutive entries of one type a
// second, of at most MaxBatchUsers users, and holds back the last
// second's until it is over (or the read was cut short); ids follow from
// the entries.
func TestOutboxEventsGroupBySecond(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	entry := func(id string, typ string, ms int, users ...string) waitroom.OutboxEntry {
		return waitroom.OutboxEntry{ID: id, Type: typ, At: at.Add(time.Duration(ms) * time.Millisecond), Users: users}
	}
	many := make([]string, 600)
	for i := range many {
		many[i] = fmt.Sprintf("m%03d", i)
	}
	entries := []waitroom.OutboxEntry{
		entry("1-0", webhook.UserAdmitted, 0, "a", "b"),
		entry("2-0", webhook.UserAdmitted, 25, "c"),
		entry("3-0", webhook.UserNoShow, 50, "a"),
		entry("4-0", webhook.UserAdmitted, 75, "d"),
		entry("5-0", webhook.UserAdmitted, 1000, many...), // a new second
		entry("6-0", webhook.UserAdmitted, 1025, many...), // past 1,000 users
		entry("7-0", webhook.UserAdmitted, 2000, "e"),     // the last second
	}
	describe := func(events []webhook.Event) []string {
		var out []string
		for _, e := range events {
			var data struct {
				Count int      `json:"count"`
				Users []string `json:"users"`
			}
			if err := json.Unmarshal(e.Data, &data); err != nil || data.Count != len(data.Users) {
				t.Fatalf("%s: %v", e.Data, err)
			}
			out = append(out, fmt.Sprintf("%s %d %s", e.Type, data.Count, e.Timestamp.Format("05.000")))
		}
		return out
	}
	events, through := webhook.OutboxEvents("r", entries, at.Add(2500*time.Millisecond), false)
	want := []string{"user.admitted 3 00.000", "user.no_show 1 00.050", "user.admitted 1 00.075", "user.admitted 600 01.000", "user.admitted 600 01.025"}
	if got := describe(events); !slices.Equal(got, want) || through != "6-0" {
		t.Fatalf("events %v through %s\nwant %v through 6-0", got, through, want)
	}
	if events, through = webhook.OutboxEvents("r", entries, at.Add(3*time.Second), false); len(events) != 6 || through != "7-0" {
		t.Fatalf("once its second is over: %d events through %s", len(events), through)
	}
	if events, through = webhook.OutboxEvents("r", entries, at.Add(2500*time.Millisecond), true); len(events) != 6 || through != "7-0" {
		t.Fatalf("a full read: %d events through %s", len(events), through)
	}
	again, _ := webhook.OutboxEvents("r", entries, at.Add(time.Hour), false)
	other, _ := webhook.OutboxEvents("other", entries, at.Add(time.Hour), false)
	for i := range again {
		if again[i].ID != events[i].ID || other[i].ID == events[i].ID {
			t.Fatalf("event %d: ids %s, %s, other room's %s", i, events[i].ID, again[i].ID, other[i].ID)
		}
	}
}

// statsThenMore is a store that runs between after each Stats has read:
// what an admission, or a poll, does between a watcher's read of the
// figures and its read of the outbox.
type statsThenMore struct {
	*memstore.Store
	between func()
}

func (s *statsThenMore) Stats(ctx context.Context, room string) (waitroom.Stats, error) {
	st, err := s.Store.Stats(ctx, room)
	if s.between != nil {
		s.between()
	}
	return st, err
}

// A watcher reads the figures before the outbox's named counters: an
// admission that names a no-show between the two reads is told by name
// and never also as a count (read the other way round, the figures
// would count it and the named counter would not yet), and a leaver a
// poll drops meanwhile is told as a count at the next look, once.
func TestWatcherReadsFiguresBeforeNamed(t *testing.T) {
	t.Parallel()
	c := newClock()
	s := &statsThenMore{Store: memstore.New(memstore.Options{Now: c.Now})}
	ctx := t.Context()
	if _, err := s.CreateRoom(ctx, "r", waitroom.RoomConfig{Rate: 100, MaxActive: 1, FirstUseWithin: time.Second,
		AbandonAfter: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	log := groupedMemLog(t)
	em := &webhook.Emitter{Log: log}
	w := &webhook.Watcher{Store: s, Log: log, Emitter: em, Now: hourAhead}
	look(t, em, log, w) // marks the outbox on
	for _, u := range []string{"holder", "silent"} {
		if _, err := s.Enter(ctx, "r", u); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Admit(ctx, "r"); err != nil { // the bucket's clock starts
		t.Fatal(err)
	}
	c.Advance(100 * time.Millisecond)
	if a, err := s.Admit(ctx, "r"); err != nil || len(a) != 1 || a[0].User != "holder" {
		t.Fatalf("admitted %v, %v", a, err)
	}
	if got := fmt.Sprint(look(t, em, log, w)); got != `[user.admitted {"count":1,"users":["holder"]}]` {
		t.Fatalf("told %v", got)
	}

	c.Advance(3 * time.Second) // holder never came; silent stopped polling
	s.between = func() {
		if _, err := s.Status(ctx, "r", "silent"); !errors.Is(err, waitroom.ErrNotInQueue) {
			t.Errorf("silent's late poll: %v", err)
		}
		if _, err := s.Admit(ctx, "r"); err != nil {
			t.Error(err)
		}
	}
	if got := fmt.Sprint(look(t, em, log, w)); got != `[user.no_show {"count":1,"users":["holder"]}]` {
		t.Fatalf("told %v", got)
	}
	s.between = nil
	if got := fmt.Sprint(look(t, em, log, w)); got != `[user.abandoned {"count":1}]` {
		t.Fatalf("told %v", got)
	}
	if got := look(t, em, log, w); len(got) != 0 {
		t.Fatalf("told again %v", got)
	}
	st, err := s.Stats(ctx, "r")
	if err != nil || st.NoShows != 1 || st.Abandoned != 1 || st.Expired != 0 {
		t.Fatalf("stats %+v, %v", st, err)
	}
}
