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

// BenchmarkSpreadEnter times new places taken by a crowd (256 or 1,024
// callers over two instances) in a room on K = 1, 2 and 3 shards of a 3-primary
// Cluster (K = 1: a room on one hash tag, as before shards), and reports
// the CPU every primary's redis-server spent per ENTER (INFO cpu): in all
// (redis-cpu-µs/enter) and on the busiest primary (busiest-cpu-µs/enter),
// whose core saturates first, so 10^6 / busiest is the ENTERs a second
// the room takes when one shard-core is full (room-enters/s-at-1-core).
// The three run in turn, spreadRounds rounds, in one run.
func BenchmarkSpreadEnter(b *testing.B) {
	c := redistest.StartCluster(b, redistest.ClusterOptions{Primaries: 3})
	url := withQuery(c.URL(), suiteTimeouts)
	for _, callers := range []int{256, 1024} {
		// Rounds with the three in turn, each round starting with another.
		for round := range spreadRounds {
			for i := range 3 {
				k := 1 + (i+round)%3
				b.Run(fmt.Sprintf("callers=%d/round=%d/shards=%d", callers, round+1, k), func(b *testing.B) { spreadEnters(b, url, callers, k) })
			}
		}
	}
}

// spreadRounds is how many rounds BenchmarkSpreadEnter runs of each.
const spreadRounds = 5

// spreadEnters is one round of BenchmarkSpreadEnter.
func spreadEnters(b *testing.B, url string, callers, k int) {
	{
		{
			prefix := randomPrefix()
			stores := []*Store{New(openURL(b, url), Options{Prefix: prefix}), New(openURL(b, url), Options{Prefix: prefix})}
			room := benchRoom(b, stores[0], waitroom.RoomConfig{Shards: k, MaxQueue: waitroom.MaxMaxQueue})
			cluster := stores[0].client.(*redis.ClusterClient)
			before := primariesCPU(b, cluster)
			var next atomic.Int64
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range callers {
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
			var total, busiest, calls, inCalls float64
			for addr, a := range after {
				d := a.cpu - before[addr].cpu
				total += d
				busiest = max(busiest, d)
				calls += a.calls - before[addr].calls
				inCalls += a.callsUsec - before[addr].callsUsec
			}
			b.ReportMetric(total/float64(b.N), "redis-cpu-µs/enter")
			b.ReportMetric(float64(b.N)/calls, "enters/call")
			b.ReportMetric(inCalls/float64(b.N), "fcall-µs/enter")
			b.ReportMetric(busiest/float64(b.N), "busiest-cpu-µs/enter")
			b.ReportMetric(1e6*float64(b.N)/busiest, "room-enters/s-at-1-core")
		}
	}
}

// primaryCounts are a primary's redis-server CPU so far, in µs, and its
// function calls and the µs spent in them (INFO commandstats).
type primaryCounts struct{ cpu, calls, callsUsec float64 }

// primariesCPU reads every primary's counts.
func primariesCPU(b *testing.B, c *redis.ClusterClient) map[string]primaryCounts {
	b.Helper()
	var mu sync.Mutex
	out := map[string]primaryCounts{}
	require.NoError(b, c.ForEachMaster(context.Background(), func(ctx context.Context, node *redis.Client) error {
		cpu, err := ServerCPU(ctx, node)
		if err != nil {
			return err
		}
		calls, usec := scriptStats(b, node)
		mu.Lock()
		out[node.Options().Addr] = primaryCounts{float64(cpu.Microseconds()), float64(calls), float64(usec)}
		mu.Unlock()
		return nil
	}))
	return out
}
