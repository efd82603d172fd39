package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
)

// Leavers: a waiting user whose last enter or status is older than
// AbandonAfter has gone. Stores keep "last seen" to the second at least, so
// the checks below stay silent for over twice AbandonAfter and poll at
// under half of it.

const (
	// Two seconds, not the least (one), so that a loaded machine under
	// -race polling a few hundred users in turn still polls each in time.
	abandonAfter = 2 * time.Second
	pollEvery    = 500 * time.Millisecond
	// silentFor is long enough for a store that rounds seconds down on
	// both ends (silence > whole-second age − 1).
	silentFor = 2*abandonAfter + 4*pollEvery
)

// pollWhileSilent advances the clock by silentFor in steps of pollEvery,
// and each step the pollers ask for their status and must still wait.
// They ask at once, as a crowd does: asking one after another, a loaded
// machine could stretch one round of 160 polls past AbandonAfter and
// silence the pollers themselves.
func pollWhileSilent(t *testing.T, h Harness, room string, pollers ...string) {
	t.Helper()
	type answer struct {
		st  waitroom.Status
		err error
	}
	for elapsed := time.Duration(0); elapsed < silentFor; elapsed += pollEvery {
		h.Advance(t, pollEvery)
		answers := race(len(pollers), func(i int) answer {
			st, err := h.Store.Status(ctxFor(t), room, pollers[i])
			return answer{st, err}
		})
		for i, a := range answers {
			require.NoError(t, a.err, pollers[i])
			require.Equal(t, waitroom.StateWaiting, a.st.State, pollers[i])
		}
	}
}

// testSilentUserAtHeadIsSkipped: the silent user at the head gets no token
// and takes no share of the rate; the polling user behind it is admitted;
// the silent user is counted abandoned, and its later status is
// NOT_IN_QUEUE, while a new enter queues it at the back.
func testSilentUserAtHeadIsSkipped(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 10, Slice: 100 * time.Millisecond, AbandonAfter: abandonAfter})
	for _, u := range []string{"silent", "polling", "late"} {
		_, err := h.Store.Enter(ctx, room, u)
		require.NoError(t, err)
	}
	_, err := h.Store.Admit(ctx, room) // starts the bucket: admits nobody
	require.NoError(t, err)
	pollWhileSilent(t, h, room, "polling", "late")

	// The bucket holds one slice's worth: one user at 10/s and 100 ms.
	got, err := h.Store.Admit(ctx, room)
	require.NoError(t, err)
	require.Len(t, got, 1, "the silent user takes no share of the rate")
	require.Equal(t, "polling", got[0].User)

	st, err := h.Store.Status(ctx, room, "late")
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Position, "the skipped user no longer counts ahead")
	_, err = h.Store.Status(ctx, room, "silent")
	require.ErrorIs(t, err, waitroom.ErrNotInQueue)
	stats := testenv.Stats(t, h.Store, room)
	require.Equal(t, int64(1), stats.Abandoned)
	require.Equal(t, int64(1), stats.Admitted)
	require.Equal(t, int64(1), stats.Waiting)

	st, err = h.Store.Enter(ctx, room, "silent")
	require.NoError(t, err)
	require.Equal(t, waitroom.Status{State: waitroom.StateWaiting, Position: 2}, st, "back of the queue")
}

// testTwoInstancesSkipSilentUsersOnce: two instances admitting at once skip
// each silent user once and count it once, and admit each polling user once.
func testTwoInstancesSkipSilentUsersOnce(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	const silent, polling = 20, 5
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 1000, AbandonAfter: abandonAfter})
	var pollers []string
	for i := range silent + polling {
		_, err := h.Store.Enter(ctx, room, user(i))
		require.NoError(t, err)
		if i >= silent {
			pollers = append(pollers, user(i))
		}
	}
	peer := h.Peer(t)
	_, err := h.Store.Admit(ctx, room)
	require.NoError(t, err)
	pollWhileSilent(t, h, room, pollers...)

	type outcome struct {
		got []waitroom.Admission
		err error
	}
	seen := map[string]int{}
	for range 10 {
		// One call per instance at once: each instance's admitter calls
		// Admit for a room from one goroutine.
		for _, o := range race(2, func(i int) outcome {
			s := h.Store
			if i == 1 {
				s = peer
			}
			got, err := s.Admit(ctx, room)
			return outcome{got, err}
		}) {
			require.NoError(t, o.err)
			for _, a := range o.got {
				seen[a.User]++
			}
		}
		h.Advance(t, 20*time.Millisecond)
	}
	require.Len(t, seen, polling, "every polling user, no silent one: %v", seen)
	for _, u := range pollers {
		require.Equal(t, 1, seen[u], u)
	}
	stats := testenv.Stats(t, h.Store, room)
	require.Equal(t, int64(silent), stats.Abandoned)
	require.Equal(t, int64(polling), stats.Admitted)
	require.Equal(t, int64(0), stats.Waiting)
}

// testSilentUserLeftBeforeTheHead: a silent user's own status, before the
// admitter reaches it, finds it gone (NOT_IN_QUEUE, counted once); its
// enter queues it anew at the back, counted once too; polling keeps a
// place however long the wait.
func testSilentUserLeftBeforeTheHead(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{State: waitroom.RoomPaused, AbandonAfter: abandonAfter})
	for _, u := range []string{"first", "asks", "enters", "last"} {
		_, err := h.Store.Enter(ctx, room, u)
		require.NoError(t, err)
	}
	pollWhileSilent(t, h, room, "first", "last")

	_, err := h.Store.Status(ctx, room, "asks")
	require.ErrorIs(t, err, waitroom.ErrNotInQueue)
	_, err = h.Store.Status(ctx, room, "asks")
	require.ErrorIs(t, err, waitroom.ErrNotInQueue, "still gone, not counted twice")
	st, err := h.Store.Enter(ctx, room, "enters")
	require.NoError(t, err)
	require.Equal(t, waitroom.Status{State: waitroom.StateWaiting, Position: 3}, st, "behind first and last")
	st, err = h.Store.Status(ctx, room, "last")
	require.NoError(t, err)
	require.Equal(t, int64(2), st.Position)

	stats := testenv.Stats(t, h.Store, room)
	require.Equal(t, int64(2), stats.Abandoned)
	require.Equal(t, int64(5), stats.Entered, "four places and one anew")
	require.Equal(t, int64(3), stats.Waiting)
}
