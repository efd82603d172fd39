package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redisstore"
)

// roomMemory counts what one room's keys take, every element, and
// nothing of another room's or of what Redis frees meanwhile: a room twice
// as full takes about twice as much, and an empty one next to it little.
func TestRoomMemoryCountsTheRoomsKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := redisstore.Open(testenv.RedisURL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	prefix := testenv.Unique("wrbench:")
	t.Cleanup(func() { _ = redisstore.DeletePrefix(context.Background(), c, prefix) })
	fill := func(room string, n int) {
		p := c.Pipeline()
		for i := range n {
			p.ZAdd(ctx, prefix+":{"+room+"}:q", redis.Z{Score: float64(i), Member: fmt.Sprintf("user%07d", i)})
		}
		_, err := p.Exec(ctx)
		require.NoError(t, err)
	}
	fill("small", 2000)
	fill("big", 4000)
	small, big := roomMemory(ctx, c, prefix, "small"), roomMemory(ctx, c, prefix, "big")
	require.Greater(t, small, int64(2000*40), "at least the members' bytes")
	require.InDelta(t, 2, float64(big)/float64(small), 0.3, "small %d, big %d", small, big)
	require.Zero(t, roomMemory(ctx, c, prefix, "none"))
}
