package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/redistest"
)

// BenchmarkSpreadEnter times new places taken by a crowd (256 callers
// over two instances) in a room on K = 1, 2 and 3 shards of a 3-primary
// Cluster (K = 1: a room on one hash tag, as before shards), and reports
// the CPU every primary's redis-server spent per ENTER (INFO cpu): in all
// (redis-cpu-µs/enter) and on the busiest primary (busiest-cpu-µs/enter),
// whose core saturates first, so 10^6 / busiest is the ENTERs a second
// the room takes when one shard-core is full (room-enters/s-at-1-core).
// Run with -count to alternate the three in one run.
func BenchmarkSpreadEnter(b *testing.B) {
	c := redistest.StartCluster(b, redistest.ClusterOptions{Primaries: 3})
	url := withQuery(c.URL(), suiteTimeouts)
	for _, k := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("shards=%d", k), func(b *testing.B) {
			prefix := randomPrefix()
			stores := []*Store{New(openURL(b, url), Options{Prefix: prefix}), New(openURL(b, url), Options{Prefix: prefix})}
			room := benchRoom(b, stores[0], waitroom.RoomConfig{Shards: k, MaxQueue: waitroom.MaxMaxQueue})
			cluster := stores[0].client.(*redis.ClusterClient)
			before := primariesCPU(b, cluster)
			var next atomic.Int64
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range 256 {
				wg.Go(func() {
					s := stores[w%2]
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						if _, err := s.Enter(context.Background(), room, "u"+strconv.FormatInt(i, 10)); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			after := primariesCPU(b, cluster)
			var total, busiest float64
			for addr, us := range after {
				d := us - before[addr]
				total += d
				busiest = max(busiest, d)
			}
			b.ReportMetric(total/float64(b.N), "redis-cpu-µs/enter")
			b.ReportMetric(busiest/float64(b.N), "busiest-cpu-µs/enter")
			b.ReportMetric(1e6*float64(b.N)/busiest, "room-enters/s-at-1-core")
		})
	}
}

// primariesCPU is each primary's redis-server CPU so far, in µs.
func primariesCPU(b *testing.B, c *redis.ClusterClient) map[string]float64 {
	b.Helper()
	var mu sync.Mutex
	out := map[string]float64{}
	require.NoError(b, c.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
		cpu, err := ServerCPU(ctx, node)
		if err != nil {
			return err
		}
		mu.Lock()
		out[node.Options().Addr] = float64(cpu.Microseconds())
		mu.Unlock()
		return nil
	}))
	return out
}
