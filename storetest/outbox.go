package storetest

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/webhook"
)

// RunOutbox checks a waitroom.OutboxStore: a room whose outbox is on has
// its admission name the users it admitted, cleaned up as no-shows or
// expired, and skipped as gone, in the order it met them; a room whose
// outbox is off gets none; what it names is counted (Named) beside
// Stats, and a Watcher (package webhook) tells the rest as counts, once.
// A store runs it besides Run once it keeps an outbox (memstore and
// redisstore do).
func RunOutbox(t *testing.T, newHarness func(t *testing.T) Harness) {
	runExtension(t, newHarness, "outbox", []extensionCase[waitroom.OutboxStore]{
		{"OutboxOffWritesNothing", testOutboxOffWritesNothing},
		{"OutboxKeepsAdmissionOrder", testOutboxKeepsAdmissionOrder},
		{"OutboxNamesNoShowsExpiredAndAbandoned", testOutboxNamesNoShowsExpiredAndAbandoned},
		{"OutboxRefuses", testOutboxRefuses},
		{"OutboxCountsOnlyWhatItNames", testOutboxCountsOnlyWhatItNames},
		{"WatcherCountsTheUnnamedOnce", testWatcherCountsTheUnnamedOnce},
	})
}

// readOutbox reads all of room's outbox (at most 1,000 entries).
func readOutbox(t *testing.T, o waitroom.OutboxStore, room string) waitroom.OutboxRead {
	t.Helper()
	read, err := o.ReadOutbox(ctxFor(t), room, 1000)
	require.NoError(t, err)
	return read
}

// usersOf are the users of entries of typ, in entry order.
func usersOf(entries []waitroom.OutboxEntry, typ string) []string {
	var users []string
	for _, e := range entries {
		if e.Type == typ {
			users = append(users, e.Users...)
		}
	}
	return users
}

// testOutboxOffWritesNothing: admissions, no-shows and leavers of a room
// whose outbox was never on, or was turned off, write nothing.
func testOutboxOffWritesNothing(t *testing.T, h Harness, o waitroom.OutboxStore) {
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 1000, FirstUseWithin: time.Second})
	enterAll(t, h.Store, room, 5)
	admitAll(t, h, room, 5)
	h.Advance(t, 2*time.Second)
	_, err := h.Store.Admit(ctxFor(t), room) // cleans the no-shows up
	require.NoError(t, err)
	require.Empty(t, readOutbox(t, o, room).Entries)

	require.False(t, readOutbox(t, o, room).On)
	require.NoError(t, o.SetOutbox(ctxFor(t), room, true))
	require.True(t, readOutbox(t, o, room).On)
	require.NoError(t, o.SetOutbox(ctxFor(t), room, false))
	enterAll(t, h.Store, room, 3)
	h.Advance(t, 100*time.Millisecond)
	got, err := h.Store.Admit(ctxFor(t), room)
	require.NoError(t, err)
	require.NotEmpty(t, got)
	read := readOutbox(t, o, room)
	require.Empty(t, read.Entries, "turned off")
	require.Zero(t, read.Lost)
	require.Zero(t, read.Named, "the no-shows of an outbox off are named nowhere")
	require.Equal(t, int64(5), testenv.Stats(t, h.Store, room).NoShows)
}

// testOutboxKeepsAdmissionOrder: admissions over many calls are entries
// of user.admitted whose users, in entry order, are the admission order
// (of a spread room: within each sub-shard's stream, and all streams
// together name everyone once); ids are unique; a trim through an entry
// leaves the ones after it, and its stream's only.
func testOutboxKeepsAdmissionOrder(t *testing.T, h Harness, o waitroom.OutboxStore) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 200})
	require.NoError(t, o.SetOutbox(ctx, room, true))
	enterAll(t, h.Store, room, 60)
	var order []string
	for _, a := range admitAll(t, h, room, 60) {
		order = append(order, a.User)
	}
	read := readOutbox(t, o, room)
	require.Greater(t, len(read.Entries), 1, "several calls, several entries")
	streams := map[string][]waitroom.OutboxEntry{}
	var names []string // the streams, in the order they come
	var all []string
	for _, e := range read.Entries {
		require.Equal(t, waitroom.OutboxAdmitted, e.Type)
		require.False(t, e.At.IsZero())
		if streams[e.Stream] == nil {
			names = append(names, e.Stream)
		}
		streams[e.Stream] = append(streams[e.Stream], e)
	}
	for _, name := range names {
		users := usersOf(streams[name], waitroom.OutboxAdmitted)
		in := map[string]bool{}
		for _, u := range users {
			in[u] = true
		}
		require.Equal(t, slices.DeleteFunc(slices.Clone(order), func(u string) bool { return !in[u] }), users,
			"stream %q in admission order", name)
		all = append(all, users...)
	}
	require.ElementsMatch(t, order, all, "everyone admitted named once")
	if h.Shards > 1 {
		require.Greater(t, len(names), 1, "a spread room's sub-shards name their own")
	}
	ids := make([]string, len(read.Entries))
	for i, e := range read.Entries {
		ids[i] = e.ID
	}
	slices.Sort(ids)
	require.Len(t, slices.Compact(ids), len(read.Entries), "ids are unique")

	first := streams[names[0]]
	cut := len(first) / 2
	require.NoError(t, o.TrimOutbox(ctx, room, first[cut].ID))
	trimmed := map[string]bool{}
	for _, e := range first[:cut+1] {
		trimmed[e.ID] = true
	}
	rest := readOutbox(t, o, room)
	require.Equal(t, slices.DeleteFunc(slices.Clone(read.Entries), func(e waitroom.OutboxEntry) bool { return trimmed[e.ID] }), rest.Entries)
	// A late trim (another relay's, through an earlier entry) removes
	// nothing more.
	require.NoError(t, o.TrimOutbox(ctx, room, first[0].ID))
	require.Equal(t, rest.Entries, readOutbox(t, o, room).Entries)
	for _, name := range names {
		es := streams[name]
		require.NoError(t, o.TrimOutbox(ctx, room, es[len(es)-1].ID))
	}
	require.Empty(t, readOutbox(t, o, room).Entries)
}

// testOutboxNamesNoShowsExpiredAndAbandoned: of four holders, the two
// who never came back are no-shows and the confirmed one that ran out is
// expired, by name, when the admission cleans them up; of the queue
// behind, those silent past AbandonAfter are named abandoned as the
// admission skips them, and the one who kept polling is admitted.
func testOutboxNamesNoShowsExpiredAndAbandoned(t *testing.T, h Harness, o waitroom.OutboxStore) {
	ctx := ctxFor(t)
	const ttl, firstUse = 3 * time.Second, time.Second
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 1000, MaxActive: 3, TokenTTL: ttl, FirstUseWithin: firstUse, AbandonAfter: abandonAfter})
	require.NoError(t, o.SetOutbox(ctx, room, true))
	enterAll(t, h.Store, room, 6) // user-00000 … user-00005
	adm := admitAll(t, h, room, 3)
	require.Len(t, adm, 3)
	confirm(t, h.Store, room, adm[2])

	// user-00003 keeps polling while the others are silent; then the two
	// never-confirmed holders are no-shows and the confirmed one expires.
	pollAlone(t, h, room, user(3))
	require.Greater(t, silentFor, ttl, "the confirmed token ran out too")
	got, err := h.Store.Admit(ctx, room)
	require.NoError(t, err)
	read := readOutbox(t, o, room)
	require.Equal(t, []string{adm[0].User, adm[1].User}, usersOf(read.Entries, waitroom.OutboxNoShow))
	require.Equal(t, []string{adm[2].User}, usersOf(read.Entries, waitroom.OutboxExpired))
	var admitted []string
	for _, a := range got {
		admitted = append(admitted, a.User)
	}
	require.Equal(t, []string{user(3)}, admitted, "the one who polled")
	// user-00004 and user-00005 were silent: skipped as the admission
	// filled the free slots.
	abandoned := usersOf(read.Entries, waitroom.OutboxAbandoned)
	require.Equal(t, []string{user(4), user(5)}, abandoned)
	require.Equal(t, []string{adm[0].User, adm[1].User, adm[2].User, user(3)}, usersOf(read.Entries, waitroom.OutboxAdmitted))
	st := testenv.Stats(t, h.Store, room)
	require.Equal(t, int64(2), st.NoShows)
	require.Equal(t, int64(1), st.Expired)
	require.Equal(t, int64(2), st.Abandoned)
	require.Equal(t, waitroom.OutboxNamed{NoShows: 2, Expired: 1, Abandoned: 2}, read.Named, "all named")
}

// testOutboxRefuses: an unknown room is ErrRoomNotFound; a read of no
// entries and a malformed id are bad requests.
func testOutboxRefuses(t *testing.T, h Harness, o waitroom.OutboxStore) {
	ctx := ctxFor(t)
	require.ErrorIs(t, o.SetOutbox(ctx, "no-such-room", true), waitroom.ErrRoomNotFound)
	_, err := o.ReadOutbox(ctx, "no-such-room", 10)
	require.ErrorIs(t, err, waitroom.ErrRoomNotFound)
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 10})
	_, err = o.ReadOutbox(ctx, room, 0)
	require.ErrorIs(t, err, waitroom.ErrBadRequest)
	require.ErrorIs(t, o.TrimOutbox(ctx, room, "not-an-id"), waitroom.ErrBadRequest)
}

// pollAlone has user poll room every pollEvery for silentFor while the
// others are silent.
func pollAlone(t *testing.T, h Harness, room, user string) {
	t.Helper()
	for elapsed := time.Duration(0); elapsed < silentFor; elapsed += pollEvery {
		h.Advance(t, pollEvery)
		st, err := h.Store.Status(ctxFor(t), room, user)
		require.NoError(t, err)
		require.Equal(t, waitroom.StateWaiting, st.State)
	}
}

// unnamedScene makes, in room (outbox on), a named no-show and three
// users found gone outside an admission: of two holders (MaxActive 2)
// and two waiting, the confirmed holder's token runs out and its claim
// finds it so (an expired token), the silent waiting user is dropped by
// its own late poll (abandoned), and then the admission cleans up the
// other holder, who never came (a named no-show), and admits the user
// who kept polling.
func unnamedScene(t *testing.T, h Harness, room string) []waitroom.Admission {
	t.Helper()
	ctx := ctxFor(t)
	enterAll(t, h.Store, room, 4)
	adm := admitAll(t, h, room, 2)
	require.Len(t, adm, 2)
	confirm(t, h.Store, room, adm[0])
	pollAlone(t, h, room, user(3))
	_, err := h.Store.Status(ctx, room, user(2))
	require.ErrorIs(t, err, waitroom.ErrNotInQueue, "dropped by its own late poll")
	_, err = h.Store.Claim(ctx, room, adm[0].User, adm[0].Token)
	require.ErrorIs(t, err, waitroom.ErrTokenNotFound, "run out")
	got, err := h.Store.Admit(ctx, room)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, user(3), got[0].User)
	return adm
}

// unnamedConfig is unnamedScene's room.
var unnamedConfig = waitroom.RoomConfig{Rate: 1000, MaxActive: 2, TokenTTL: 3 * time.Second,
	FirstUseWithin: time.Second, AbandonAfter: abandonAfter}

// testOutboxCountsOnlyWhatItNames: Named counts the no-show the
// admission named; Stats counts it and the expired token and the leaver
// found by a claim and a poll, which nothing names.
func testOutboxCountsOnlyWhatItNames(t *testing.T, h Harness, o waitroom.OutboxStore) {
	room := newRoom(t, h, unnamedConfig)
	require.NoError(t, o.SetOutbox(ctxFor(t), room, true))
	adm := unnamedScene(t, h, room)
	read := readOutbox(t, o, room)
	require.Equal(t, []string{adm[1].User}, usersOf(read.Entries, waitroom.OutboxNoShow))
	require.Empty(t, usersOf(read.Entries, waitroom.OutboxExpired))
	require.Empty(t, usersOf(read.Entries, waitroom.OutboxAbandoned))
	require.Equal(t, waitroom.OutboxNamed{NoShows: 1}, read.Named)
	st := testenv.Stats(t, h.Store, room)
	require.Equal(t, [3]int64{1, 1, 1}, [3]int64{st.NoShows, st.Expired, st.Abandoned})
}

// testWatcherCountsTheUnnamedOnce: two watchers (two instances of the
// store) ticking at one signal tell the users unnamedScene names by name
// and the ones it does not as counts: each user once, in one event.
func testWatcherCountsTheUnnamedOnce(t *testing.T, h Harness, _ waitroom.OutboxStore) {
	ctx := ctxFor(t)
	room := newRoom(t, h, unnamedConfig)
	log := webhook.NewMemLog()
	require.NoError(t, log.AddGroup(ctx, "t"))
	em := &webhook.Emitter{Log: log}
	// An hour ahead of the store: each second's entries are told at once.
	ahead := func() time.Time { return h.now().Add(time.Hour) }
	owns := func(r string) bool { return r == room }
	watchers := []*webhook.Watcher{
		{Store: h.Store, Log: log, Emitter: em, Owns: owns, Now: ahead},
		{Store: h.Peer(t), Log: log, Emitter: em, Owns: owns, Now: ahead},
	}
	tickAll := func() []webhook.Entry {
		t.Helper()
		errs := make([]error, len(watchers))
		testenv.AtOnce(len(watchers), func(i int) { errs[i] = watchers[i].Tick(ctx) })
		for i, err := range errs {
			require.NoError(t, err, "watcher %d", i)
		}
		require.NoError(t, em.Flush(ctx))
		var got []webhook.Entry
		for p := range webhook.Partitions {
			es, err := log.Read(ctx, "t", p, "reader", 10_000)
			require.NoError(t, err)
			got = append(got, es...)
		}
		return got
	}
	require.Empty(t, tickAll(), "the first look marks the outbox and tells nothing")

	adm := unnamedScene(t, h, room)
	named := map[string][]string{}
	counted := map[string][]int64{}
	for _, e := range tickAll() {
		require.Equal(t, room, e.Event.Room)
		var data struct {
			Count int64     `json:"count"`
			Users *[]string `json:"users"`
		}
		require.NoError(t, json.Unmarshal(e.Event.Data, &data))
		if data.Users == nil {
			counted[e.Event.Type] = append(counted[e.Event.Type], data.Count)
			continue
		}
		require.Len(t, *data.Users, int(data.Count), "%s", e.Body)
		named[e.Event.Type] = append(named[e.Event.Type], *data.Users...)
	}
	require.Equal(t, map[string][]string{
		webhook.UserAdmitted: {adm[0].User, adm[1].User, user(3)},
		webhook.UserNoShow:   {adm[1].User},
	}, named)
	require.Equal(t, map[string][]int64{webhook.TokenExpired: {1}, webhook.UserAbandoned: {1}}, counted,
		"the claim's expired token and the late poll's leaver, once each")
	require.Empty(t, tickAll(), "nothing twice")
}
