package waitroom_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

// TestShardsRefusal: off Cluster shards above 1 is SHARDS_NEED_CLUSTER;
// the bound is Validate's.
func TestShardsRefusal(t *testing.T) {
	t.Parallel()
	require.NoError(t, waitroom.ShardsRefusal(waitroom.RoomConfig{Shards: 1}))
	err := waitroom.ShardsRefusal(waitroom.RoomConfig{Shards: 4})
	require.ErrorIs(t, err, waitroom.ErrShardsNeedCluster)
	require.Equal(t, 400, waitroom.Classify(err).Status)

	require.Equal(t, 1, waitroom.RoomConfig{}.WithDefaults().Shards)
	for _, n := range []int{-1, waitroom.MaxShards + 1} {
		require.Equal(t, fmt.Sprintf("shards: must be in [1, 16], got %d", n), waitroom.ErrorMessage(waitroom.RoomConfig{Shards: n}.WithDefaults().Validate()))
	}
	require.NoError(t, waitroom.RoomConfig{Shards: waitroom.MaxShards}.WithDefaults().Validate())
	require.Equal(t, 409, waitroom.Classify(waitroom.ErrShardsNotEmpty).Status)
}
