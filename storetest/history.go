package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
)

// RunHistory checks a waitroom.HistoryStore: one call records many rooms
// with the figures Stats tells, one sample a second in time order however
// many admitters record it, the last HistoryKeep of them within
// HistoryWindow. A store runs it besides Run once it keeps history
// (memstore and redisstore do).
func RunHistory(t *testing.T, newHarness func(t *testing.T) Harness) {
	runExtension(t, newHarness, "history", []extensionCase[waitroom.HistoryStore]{
		{"HistoryRecordsTheFigures", testHistoryRecordsTheFigures},
		{"HistoryOneSampleASecond", testHistoryOneSampleASecond},
		{"HistoryKeepsTheWindow", testHistoryKeepsTheWindow},
		{"HistoryBatchOfRooms", testHistoryBatchOfRooms},
	})
}

// historyStart is the second the history tests record from: a sample's
// time is the recorder's, not the store's clock.
func historyStart(h Harness) time.Time { return h.now().Truncate(time.Second) }

// testHistoryRecordsTheFigures: each sample holds what Stats tells at
// its second, at the second now falls in; History answers those after
// since, oldest first.
func testHistoryRecordsTheFigures(t *testing.T, h Harness, hs waitroom.HistoryStore) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 20, Slice: 100 * time.Millisecond})
	got, err := hs.History(ctx, room, time.Time{})
	require.NoError(t, err)
	require.Empty(t, got, "nothing recorded yet")

	t0 := historyStart(h)
	var want []waitroom.Sample
	record := func(at time.Time) {
		t.Helper()
		require.NoError(t, hs.RecordSamples(ctx, at, []string{room}))
		st, err := h.Store.Stats(ctx, room)
		require.NoError(t, err)
		want = append(want, waitroom.Sample{At: at.Truncate(time.Second), Rate: 20, Waiting: st.Waiting, LiveTokens: st.Active, Admitted: st.Admitted})
	}
	record(t0.Add(300 * time.Millisecond)) // an empty room
	enterAll(t, h.Store, room, 6)
	record(t0.Add(time.Second))
	n, _ := h.AdmitAfter(t, room, 0) // starts the bucket
	if n == 0 {
		n, _ = h.AdmitAfter(t, room, 100*time.Millisecond) // a slice's quota at 20/s: two
	}
	require.Positive(t, n)
	require.Less(t, n, 6)
	record(t0.Add(2*time.Second + 999*time.Millisecond))
	require.Equal(t, []int64{0, 6, 6 - int64(n)}, []int64{want[0].Waiting, want[1].Waiting, want[2].Waiting})
	require.Equal(t, int64(n), want[2].LiveTokens)
	require.Equal(t, int64(n), want[2].Admitted)

	got, err = hs.History(ctx, room, time.Time{})
	require.NoError(t, err)
	requireSamples(t, want, got)
	got, err = hs.History(ctx, room, t0.Add(500*time.Millisecond))
	require.NoError(t, err)
	requireSamples(t, want[1:], got)
	got, err = hs.History(ctx, room, t0.Add(2*time.Second))
	require.NoError(t, err)
	require.Empty(t, got, "nothing after the last")

	_, err = hs.History(ctx, room+"{", time.Time{})
	require.Equal(t, "BAD_REQUEST", waitroom.ErrorCode(err))
	got, err = hs.History(ctx, testenv.Unique("none-"), time.Time{})
	require.NoError(t, err)
	require.Empty(t, got, "no room, no history")
}

// requireSamples compares samples by their values (a time read back from
// a store has no monotonic reading and may have another location).
func requireSamples(t *testing.T, want, got []waitroom.Sample) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.True(t, want[i].At.Equal(got[i].At), "sample %d at %s, want %s", i, got[i].At, want[i].At)
		got[i].At = want[i].At
		require.Equal(t, want[i], got[i], "sample %d", i)
	}
}

// testHistoryOneSampleASecond: admitters recording the same second at
// once (a handover) leave one sample; a second before the last is not
// recorded, the next one is.
func testHistoryOneSampleASecond(t *testing.T, h Harness, hs waitroom.HistoryStore) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 7})
	peer, ok := h.Peer(t).(waitroom.HistoryStore)
	require.True(t, ok, "the peer keeps no history")
	t0 := historyStart(h)

	const recorders = 8
	start := make(chan struct{})
	errs := make([]error, recorders)
	var wg sync.WaitGroup
	for i := range recorders {
		who := hs
		if i%2 == 1 {
			who = peer
		}
		wg.Go(func() {
			<-start
			errs[i] = who.RecordSamples(ctx, t0.Add(time.Duration(i)*time.Millisecond), []string{room})
		})
	}
	close(start)
	wg.Wait()
	require.Equal(t, make([]error, recorders), errs)
	got, err := hs.History(ctx, room, time.Time{})
	require.NoError(t, err)
	requireSamples(t, []waitroom.Sample{{At: t0, Rate: 7}}, got)

	require.NoError(t, peer.RecordSamples(ctx, t0.Add(-time.Second), []string{room}))
	require.NoError(t, hs.RecordSamples(ctx, t0.Add(time.Second), []string{room}))
	got, err = peer.History(ctx, room, time.Time{})
	require.NoError(t, err)
	requireSamples(t, []waitroom.Sample{{At: t0, Rate: 7}, {At: t0.Add(time.Second), Rate: 7}}, got)
}

// testHistoryKeepsTheWindow: a history keeps its last HistoryKeep
// samples, and History answers none older than HistoryWindow before the
// newest.
func testHistoryKeepsTheWindow(t *testing.T, h Harness, hs waitroom.HistoryStore) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 3})
	t0 := historyStart(h)
	const extra = 5
	for i := range waitroom.HistoryKeep + extra {
		require.NoError(t, hs.RecordSamples(ctx, t0.Add(time.Duration(i)*time.Second), []string{room}))
	}
	got, err := hs.History(ctx, room, time.Time{})
	require.NoError(t, err)
	require.Len(t, got, waitroom.HistoryKeep)
	require.True(t, got[0].At.Equal(t0.Add(extra*time.Second)), "the oldest kept: %s", got[0].At)
	for i := 1; i < len(got); i++ {
		require.Equal(t, time.Second, got[i].At.Sub(got[i-1].At), "sample %d", i)
	}

	// A quiet room's samples a minute apart: those within the window of
	// the newest.
	quiet := newRoom(t, h, waitroom.RoomConfig{Rate: 3})
	for i := range 15 {
		require.NoError(t, hs.RecordSamples(ctx, t0.Add(time.Duration(i)*time.Minute), []string{quiet}))
	}
	got, err = hs.History(ctx, quiet, time.Time{})
	require.NoError(t, err)
	require.Len(t, got, 10, "minutes 5 to 14: within ten minutes of minute 14")
	require.True(t, got[0].At.Equal(t0.Add(5*time.Minute)), "the oldest answered: %s", got[0].At)
}

// testHistoryBatchOfRooms: one call records every room it names that
// exists, and refuses a batch it cannot take.
func testHistoryBatchOfRooms(t *testing.T, h Harness, hs waitroom.HistoryStore) {
	ctx := ctxFor(t)
	t0 := historyStart(h)
	var rooms []string
	for i := range 20 {
		rooms = append(rooms, newRoom(t, h, waitroom.RoomConfig{Rate: float64(i + 1)}))
	}
	missing := testenv.Unique("none-")
	require.NoError(t, hs.RecordSamples(ctx, t0, append(rooms, missing)))
	for i, room := range rooms {
		got, err := hs.History(ctx, room, time.Time{})
		require.NoError(t, err)
		requireSamples(t, []waitroom.Sample{{At: t0, Rate: float64(i + 1)}}, got)
	}
	got, err := hs.History(ctx, missing, time.Time{})
	require.NoError(t, err)
	require.Empty(t, got, "a room that does not exist gets no sample")

	require.NoError(t, hs.RecordSamples(ctx, t0, nil))
	err = hs.RecordSamples(ctx, t0, []string{rooms[0], "bad{name"})
	require.Equal(t, "BAD_REQUEST", waitroom.ErrorCode(err))
	many := make([]string, waitroom.MaxHistoryRoomsBatch+1)
	for i := range many {
		many[i] = fmt.Sprintf("r-%d", i)
	}
	err = hs.RecordSamples(ctx, t0, many)
	require.Equal(t, "BAD_REQUEST", waitroom.ErrorCode(err))
	got, err = hs.History(ctx, rooms[0], time.Time{})
	require.NoError(t, err)
	require.Len(t, got, 1, "a refused batch records nothing")
}
