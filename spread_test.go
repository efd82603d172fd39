package waitroom_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

// TestSpreadRefusal: shards above 1 refuse, with SHARDS_UNSUPPORTED and
// the settings named, what a spread room does not do; one shard refuses
// nothing; off Cluster shards above 1 is SHARDS_NEED_CLUSTER; the bound
// is Validate's.
func TestSpreadRefusal(t *testing.T) {
	t.Parallel()
	require.NoError(t, waitroom.SpreadRefusal(waitroom.RoomConfig{Shards: 1, Stock: 5, OneOrderPerUser: true}))
	require.NoError(t, waitroom.SpreadRefusal(waitroom.RoomConfig{Shards: 3, MaxActive: 10, ClosesAt: time.Now()}))
	require.NoError(t, waitroom.SpreadRefusal(waitroom.RoomConfig{Shards: 3, Stock: 5, UnitsPerOrder: 2, OneOrderPerUser: true}),
		"stock and one order per buyer hold on a spread room")
	err := waitroom.SpreadRefusal(waitroom.RoomConfig{Shards: 2, Stock: 5, OpensAt: time.Now(), InviteOnly: true, OneOrderPerUser: true})
	require.ErrorIs(t, err, waitroom.ErrShardsUnsupported)
	a := waitroom.Classify(err)
	require.Equal(t, 400, a.Status)
	require.Equal(t, "SHARDS_UNSUPPORTED", a.Code)
	require.Equal(t, "shards 2 does not support invite_only", a.Message)

	require.NoError(t, waitroom.ShardsRefusal(waitroom.RoomConfig{Shards: 1}))
	err = waitroom.ShardsRefusal(waitroom.RoomConfig{Shards: 4})
	require.ErrorIs(t, err, waitroom.ErrShardsNeedCluster)
	require.Equal(t, 400, waitroom.Classify(err).Status)

	require.Equal(t, 1, waitroom.RoomConfig{}.WithDefaults().Shards)
	for _, n := range []int{-1, waitroom.MaxShards + 1} {
		require.Equal(t, fmt.Sprintf("shards: must be in [1, 16], got %d", n), waitroom.ErrorMessage(waitroom.RoomConfig{Shards: n}.WithDefaults().Validate()))
	}
	require.NoError(t, waitroom.RoomConfig{Shards: waitroom.MaxShards}.WithDefaults().Validate())
	require.Equal(t, 409, waitroom.Classify(waitroom.ErrShardsNotEmpty).Status)
}
