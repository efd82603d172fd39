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

// testSpreadPassStalesATick: a pass used while a tick of a spread room
// is between reading the heads and popping them (max_active 1, one user
// queued) takes the slot, and the tick, sealed out, admits nobody: one
// live token, not two.
func testSpreadPassStalesATick(t *testing.T, s, peer *Store) {
	ctx := testCtx(t)
	room := testenv.Unique("vip-")
	_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: 3, Rate: 1000, MaxActive: 1, TokenTTL: time.Hour, FirstUseWithin: time.Hour})
	require.NoError(t, err)
	_, err = s.Enter(ctx, room, "queued")
	require.NoError(t, err)
	p := waitroom.Pass{ID: waitroom.NewToken(), Uses: 1, Left: 1, ExpiresAt: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}
	require.NoError(t, s.CreatePass(ctx, room, p))
	_, err = s.Admit(ctx, room) // starts the bucket
	require.NoError(t, err)
	advance(t, s, 100*time.Millisecond)

	var passErr error
	s.tickCut = func() {
		s.tickCut = nil
		_, passErr = peer.EnterWithPass(ctx, room, "vip", p.ID)
	}
	got, err := s.Admit(ctx, room)
	require.NoError(t, err)
	require.NoError(t, passErr)
	require.Empty(t, got, "sealed out by the pass's use")
	stats, err := s.Stats(ctx, room)
	require.NoError(t, err)
	require.Equal(t, int64(1), stats.Active)
	st, err := s.Status(ctx, room, "queued")
	require.NoError(t, err)
	require.Equal(t, waitroom.Status{State: waitroom.StateWaiting, Position: 1}, st)
}
