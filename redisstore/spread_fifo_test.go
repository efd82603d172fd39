package redisstore

import (
	"flag"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redistest"
)

var spreadFIFOUsers = flag.Int("spread-fifo-users", 1_000_000, "users TestSpreadFIFO enters")

// TestSpreadFIFO: a room over 3 shards takes a million users entering
// through two instances, 256 requests in flight (the Enters of a room
// share calls, as under a crowd): every position is distinct, 1..n, and
// admission, 1,000 a tick, goes exactly in that order, each user once.
func TestSpreadFIFO(t *testing.T) {
	// Not parallel with other top-level tests: see heavyTests.
	n := *spreadFIFOUsers
	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3})
	url := withQuery(c.URL(), suiteTimeouts)
	prefix := randomPrefix()
	stores := []*Store{New(openURL(t, url), Options{Prefix: prefix}), New(openURL(t, url), Options{Prefix: prefix})}
	ctx := t.Context()
	room := testenv.Unique("fifo-")
	// Tokens outlive the run: no no-show is made up beyond the quota.
	cfg := waitroom.RoomConfig{Shards: 3, Rate: 10_000, MaxQueue: n, TokenTTL: time.Hour, FirstUseWithin: time.Hour}
	_, err := stores[0].CreateRoom(ctx, room, cfg)
	require.NoError(t, err)

	start := time.Now()
	positions := make([]int64, n)
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	for w := range 256 {
		wg.Go(func() {
			s := stores[w%2]
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				st, err := s.Enter(ctx, room, fmt.Sprintf("u%07d", i))
				if err != nil || st.State != waitroom.StateWaiting {
					failed.Add(1)
					continue
				}
				positions[i] = st.Position
			}
		})
	}
	wg.Wait()
	entered := time.Since(start)
	require.Zero(t, failed.Load(), "enters that failed or did not wait")
	byPosition := make([]int, n)
	for i, p := range positions {
		require.True(t, p >= 1 && p <= int64(n), "position %d of %d", p, n)
		require.Zero(t, byPosition[p-1], "position %d given twice", p)
		byPosition[p-1] = i + 1
	}

	start = time.Now()
	quota := cfg.WithDefaults().TickQuota()
	admitted := 0
	for tick := 0; admitted < n; tick++ {
		require.Less(t, tick, 2*n/quota+100, "admitted %d of %d", admitted, n)
		advance(t, stores[0], cfg.WithDefaults().Slice)
		got, err := stores[tick%2].Admit(ctx, room)
		require.NoError(t, err)
		require.LessOrEqual(t, len(got), quota)
		for _, a := range got {
			require.Equal(t, fmt.Sprintf("u%07d", byPosition[admitted]-1), a.User, "admission %d", admitted+1)
			admitted++
		}
	}
	t.Logf("%d users: entered in %s (%.0f/s), admitted in %s", n, entered.Round(time.Millisecond),
		float64(n)/entered.Seconds(), time.Since(start).Round(time.Millisecond))
	stats, err := stores[0].Stats(ctx, room)
	require.NoError(t, err)
	require.Equal(t, int64(n), stats.Entered)
	require.Equal(t, int64(n), stats.Admitted)
	require.Zero(t, stats.Waiting)
	require.True(t, slices.Index(byPosition, 0) < 0)
}
