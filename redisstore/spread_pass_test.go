package redisstore

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
)

// testSpreadPassesRaceTheTicks: on a room spread over 3 shards with
// max_active 10 and a crowd queued, 20 pass holders use one pass through
// two Stores while two admitters tick the room, all at one signal. The
// live tokens never pass max_active: exactly 10 are issued in all, each
// pass use either got a token (its use taken) or NO_FREE_SLOT (its use
// kept), and the pass has as many uses left as it was refused.
func testSpreadPassesRaceTheTicks(t *testing.T, s, peer *Store) {
	ctx := testCtx(t)
	room := testenv.Unique("vip-")
	const maxActive, holders, queued = 10, 20, 40
	_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: 3, Rate: 100, MaxActive: maxActive, TokenTTL: time.Hour, FirstUseWithin: time.Hour})
	require.NoError(t, err)
	for i := range queued {
		_, err := s.Enter(ctx, room, fmt.Sprintf("q%03d", i))
		require.NoError(t, err)
	}
	p := waitroom.Pass{ID: waitroom.NewToken(), Uses: holders, Left: holders, ExpiresAt: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}
	require.NoError(t, s.CreatePass(ctx, room, p))
	_, err = s.Admit(ctx, room) // starts the bucket
	require.NoError(t, err)

	var mu sync.Mutex
	var ticked []waitroom.Admission
	results := atOnce(holders+2, func(i int) error {
		store := []*Store{s, peer}[i%2]
		if i >= holders { // an admitter
			for range 20 {
				got, err := store.Admit(ctx, room)
				if err != nil {
					return err
				}
				mu.Lock()
				ticked = append(ticked, got...)
				mu.Unlock()
				time.Sleep(time.Millisecond) // the test clock moves the bucket; this lets the uses in between
				advance(t, s, 10*time.Millisecond)
			}
			return nil
		}
		st, err := store.EnterWithPass(ctx, room, fmt.Sprintf("vip%02d", i), p.ID)
		if err == nil && st.State != waitroom.StateAdmitted {
			return fmt.Errorf("vip%02d: %s", i, st.State)
		}
		return err
	})
	let, full := 0, 0
	for i, err := range results {
		switch {
		case i >= holders:
			require.NoError(t, err, "admitter")
		case err == nil:
			let++
		case errors.Is(err, waitroom.ErrNoFreeSlot):
			full++
		default:
			t.Fatalf("vip%02d: unexpected %v", i, err)
		}
	}
	t.Logf("by pass %d, by ticks %d", let, len(ticked))
	require.Equal(t, holders, let+full)
	require.Equal(t, maxActive, let+len(ticked), "max_active over the room: %d by pass, %d by ticks", let, len(ticked))
	stats, err := s.Stats(ctx, room)
	require.NoError(t, err)
	require.Equal(t, int64(maxActive), stats.Active)
	require.Equal(t, int64(maxActive), stats.Admitted)
	passes, err := s.Passes(ctx, room)
	require.NoError(t, err)
	require.Len(t, passes, 1)
	require.Equal(t, full, passes[0].Left, "a refused use is kept")
}

// spreadPassRoom is a spread room with max_active 1, one user queued,
// a pass of uses, and its bucket started.
func spreadPassRoom(t *testing.T, s *Store, uses int) (string, waitroom.Pass) {
	t.Helper()
	ctx := testCtx(t)
	room := testenv.Unique("vip-")
	_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: 3, Rate: 1000, MaxActive: 1, TokenTTL: time.Hour, FirstUseWithin: time.Hour})
	require.NoError(t, err)
	_, err = s.Enter(ctx, room, "queued")
	require.NoError(t, err)
	p := waitroom.Pass{ID: waitroom.NewToken(), Uses: uses, Left: uses, ExpiresAt: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}
	require.NoError(t, s.CreatePass(ctx, room, p))
	_, err = s.Admit(ctx, room) // starts the bucket
	require.NoError(t, err)
	advance(t, s, 100*time.Millisecond)
	return room, p
}

// testSpreadPassWaitsForATick: a pass used while a tick of a spread room
// is between reading the heads and popping them waits for the tick
// rather than make it stale: the tick admits the queued user into the
// one slot, and the use then finds none (NO_FREE_SLOT, its use kept).
func testSpreadPassWaitsForATick(t *testing.T, s, peer *Store) {
	ctx := testCtx(t)
	room, p := spreadPassRoom(t, s, 1)
	busy := make(chan struct{}, 1)
	peer.passBusy = func() {
		select {
		case busy <- struct{}{}:
		default:
		}
	}
	passErr := make(chan error, 1)
	s.tickCut = func() {
		s.tickCut = nil
		go func() {
			_, err := peer.EnterWithPass(ctx, room, "vip", p.ID)
			passErr <- err
		}()
		select {
		case <-busy: // told to wait for this tick
		case err := <-passErr:
			passErr <- err
			t.Errorf("the pass use ended (%v) while the tick was under way", err)
		}
	}
	got, err := s.Admit(ctx, room)
	require.NoError(t, err)
	require.Len(t, got, 1, "the tick under way is not made stale")
	require.Equal(t, "queued", got[0].User)
	require.ErrorIs(t, <-passErr, waitroom.ErrNoFreeSlot)
	stats, err := s.Stats(ctx, room)
	require.NoError(t, err)
	require.Equal(t, int64(1), stats.Active)
	passes, err := s.Passes(ctx, room)
	require.NoError(t, err)
	require.Equal(t, 1, passes[0].Left, "a refused use is kept")
}

// testSpreadTickStalesAPass: a tick that begins while a pass use has
// sealed the sub-shards and not yet taken its use seals it out: the use
// begins again, counts the token the tick issued and finds no slot.
func testSpreadTickStalesAPass(t *testing.T, s, peer *Store) {
	ctx := testCtx(t)
	room, p := spreadPassRoom(t, s, 1)
	var ticked []waitroom.Admission
	peer.passCut = func() {
		peer.passCut = nil
		var err error
		ticked, err = s.Admit(ctx, room)
		require.NoError(t, err)
	}
	_, err := peer.EnterWithPass(ctx, room, "vip", p.ID)
	require.ErrorIs(t, err, waitroom.ErrNoFreeSlot)
	require.Len(t, ticked, 1, "the tick admitted the queued user")
	stats, err := s.Stats(ctx, room)
	require.NoError(t, err)
	require.Equal(t, int64(1), stats.Active, "one token, not two")
	passes, err := s.Passes(ctx, room)
	require.NoError(t, err)
	require.Equal(t, 1, passes[0].Left)
}

// testSpreadPassRefusedBeforeSealing: uses of a spent, a revoked and a
// made-up pass, at a closed room, and at a room found full a moment ago,
// are refused before anything is sealed: the admitters' fence does not
// move, so a script of such uses cannot stall admission.
func testSpreadPassRefusedBeforeSealing(t *testing.T, s *Store) {
	ctx := testCtx(t)
	room, p := spreadPassRoom(t, s, 1)
	k := s.keys(room)
	fence := func() int64 {
		v, err := s.client.Get(ctx, k.fence).Int64()
		require.NoError(t, err)
		return v
	}
	_, err := s.Admit(ctx, room) // the queued user takes the slot
	require.NoError(t, err)
	_, err = s.EnterWithPass(ctx, room, "full", p.ID)
	require.ErrorIs(t, err, waitroom.ErrNoFreeSlot, "sealed and counted: no slot")
	left, err := s.client.HMGet(ctx, k.bucket, "pass_refused").Result()
	require.NoError(t, err)
	require.Equal(t, []any{"NO_FREE_SLOT"}, left, "kept for the next uses")

	// Found full a moment ago (kept here far longer, so the check does
	// not hang on the clock): refused without a seal.
	require.NoError(t, s.client.HSet(ctx, k.bucket, "pass_refused_until", clockNow(t, s).Add(time.Hour).UnixMilli()).Err())
	before := fence()
	for i := range 5 {
		_, err := s.EnterWithPass(ctx, room, fmt.Sprintf("spam%d", i), p.ID)
		require.ErrorIs(t, err, waitroom.ErrNoFreeSlot)
	}
	require.Equal(t, before, fence(), "no seal for a room found full")
	require.NoError(t, s.client.HDel(ctx, k.bucket, "pass_refused_until").Err())

	spent := waitroom.Pass{ID: waitroom.NewToken(), Uses: 1, Left: 0, ExpiresAt: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}
	require.NoError(t, s.CreatePass(ctx, room, spent))
	revoked := waitroom.Pass{ID: waitroom.NewToken(), Uses: 1, Left: 1, ExpiresAt: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}
	require.NoError(t, s.CreatePass(ctx, room, revoked))
	require.NoError(t, s.RevokePass(ctx, room, revoked.ID))
	for _, tc := range []struct {
		id   string
		want error
	}{{spent.ID, waitroom.ErrPassUsedUp}, {revoked.ID, waitroom.ErrPassInvalid}, {waitroom.NewToken(), waitroom.ErrPassInvalid}} {
		_, err := s.EnterWithPass(ctx, room, "spam", tc.id)
		require.ErrorIs(t, err, tc.want)
	}
	_, err = waitroom.ChangeRoom(ctx, s, room, func(c *waitroom.RoomConfig) error { c.State = waitroom.RoomClosed; return nil })
	require.NoError(t, err)
	_, err = s.EnterWithPass(ctx, room, "spam", p.ID)
	require.ErrorIs(t, err, waitroom.ErrRoomClosed)
	require.Equal(t, before, fence(), "no seal for a pass that lets nobody in")
}
