package waitroom_test

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/memstore"
)

// restartable stands for a Redis that restarts empty: the test swaps the
// store behind it (a fake at the seam; the Redis version of this runs in
// redisstore's and cmd's fault tests).
type restartable struct{ waitroom.Store }

func TestRoomKeeperBringsLostRoomsBackAsLastSeen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	before := memstore.New(memstore.Options{})
	store := &restartable{Store: before}
	_, err := before.CreateRoom(ctx, "sale", waitroom.RoomConfig{Rate: 50})
	require.NoError(t, err)
	// The operator changed the declared room, and another instance made a
	// room of its own.
	require.NoError(t, before.UpdateRoom(ctx, "sale", testenv.RoomConfig(t, before, "sale"), waitroom.RoomConfig{Rate: 80}.WithDefaults()))
	_, err = before.CreateRoom(ctx, "vip", waitroom.RoomConfig{Rate: 30})
	require.NoError(t, err)

	var recreated []string
	keeper := &waitroom.RoomKeeper{
		Store:      store,
		Rooms:      map[string]waitroom.RoomConfig{"sale": waitroom.RoomConfig{Rate: 50}.WithDefaults()},
		OnRecreate: func(room string) { recreated = append(recreated, room) },
	}
	got, err := keeper.Tick(ctx)
	require.NoError(t, err)
	require.Empty(t, got, "nothing was lost yet")

	store.Store = memstore.New(memstore.Options{}) // the restart
	known, err := keeper.Restore(ctx, "sale")
	require.NoError(t, err)
	require.True(t, known)
	known, err = keeper.Restore(ctx, "never-seen")
	require.NoError(t, err)
	require.False(t, known, "a room nobody declared or saw is not invented")

	got, err = keeper.Tick(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"vip"}, got, "sale came back already")
	sort.Strings(recreated)
	require.Equal(t, []string{"sale", "vip"}, recreated)

	for room, rate := range map[string]float64{"sale": 80, "vip": 30} {
		cfg, err := store.RoomConfig(ctx, room)
		require.NoError(t, err)
		require.Equal(t, rate, cfg.Rate, "%s comes back as the operator last set it", room)
	}
	rooms, err := store.Rooms(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"sale", "vip"}, rooms)
}
