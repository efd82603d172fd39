package waitroom_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/memstore"
)

// sickShard is a store one of whose rooms hangs and whose room list fails
// after the first read, as when a cluster shard is black-holed: a fault at
// the store seam.
type sickShard struct {
	waitroom.Store
	sickRoom   string
	listed     atomic.Int64
	hungAdmits atomic.Int64
}

func (s *sickShard) Rooms(ctx context.Context) ([]string, error) {
	if s.listed.Add(1) > 1 {
		return nil, errors.New("CLUSTERDOWN the rooms set's shard is down")
	}
	return s.Store.Rooms(ctx)
}

func (s *sickShard) Admit(ctx context.Context, room string) ([]waitroom.Admission, error) {
	if room == s.sickRoom {
		s.hungAdmits.Add(1)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.Store.Admit(ctx, room)
}

// TestAdmitterRoomsTickApart: every room ticks on its own, so a room whose
// store hangs costs the others nothing, and a room list that cannot be
// read keeps the rooms already known admitting. Time is synctest's.
func TestAdmitterRoomsTickApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.Options{})
		for _, room := range []string{"healthy", "sick"} {
			_, err := store.CreateRoom(t.Context(), room, waitroom.RoomConfig{Rate: 100})
			require.NoError(t, err)
			for i := range 500 {
				_, err := store.Enter(t.Context(), room, fmt.Sprintf("u%d", i))
				require.NoError(t, err)
			}
		}
		sick := &sickShard{Store: store, sickRoom: "sick"}
		var mu sync.Mutex
		admitted := map[string]int{}
		admitter := &waitroom.Admitter{Store: sick, Every: 100 * time.Millisecond, OnAdmit: func(room string, a []waitroom.Admission) {
			mu.Lock()
			admitted[room] += len(a)
			mu.Unlock()
		}}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- admitter.Run(ctx) }()

		time.Sleep(2*time.Second + 50*time.Millisecond)
		synctest.Wait()
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)

		// Ticks at 0.1 s (starts the bucket), 0.2 s … 2.0 s: 19 × 10.
		require.Equal(t, map[string]int{"healthy": 190}, admitted)
		require.Greater(t, sick.listed.Load(), int64(1), "the list was read again, and failed")
		require.Positive(t, sick.hungAdmits.Load())
	})
}

func TestAdmitterTickAdmitsEveryRoomOnce(t *testing.T) {
	t.Parallel()
	clock := memstore.NewManualClock(time.Unix(1_800_000_000, 0))
	store := memstore.New(memstore.Options{Now: clock.Now})
	for _, room := range []string{"a", "b"} {
		_, err := store.CreateRoom(t.Context(), room, waitroom.RoomConfig{Rate: 100})
		require.NoError(t, err)
		for i := range 30 {
			_, err := store.Enter(t.Context(), room, fmt.Sprintf("u%d", i))
			require.NoError(t, err)
		}
	}
	admitter := &waitroom.Admitter{Store: store}
	n, err := admitter.Tick(t.Context())
	require.NoError(t, err)
	require.Zero(t, n, "the first tick starts the buckets")
	clock.Advance(100 * time.Millisecond)
	n, err = admitter.Tick(t.Context())
	require.NoError(t, err)
	require.Equal(t, 20, n, "one quota in each room")
}
