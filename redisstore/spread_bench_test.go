package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

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
			b.ResetTimer()
			enterCrowd(b, stores, room, b.N, callers)
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

// BenchmarkSpreadStock times what stock costs a spread room (K = 3 on a
// 3-primary Cluster): an admission tick of 14 users (rate 140, one slice
// apart), then a settle (Claim and Complete) of each admitted token, in a
// room without stock and one with a stock it never runs out of, and
// reports the CPU every primary's redis-server spent per tick
// (redis-cpu-µs/tick) and per settle (redis-cpu-µs/settle), and the wall
// time of each. The two run in turn, spreadRounds rounds, in one run.
func BenchmarkSpreadStock(b *testing.B) {
	c := redistest.StartCluster(b, redistest.ClusterOptions{Primaries: 3})
	url := withQuery(c.URL(), suiteTimeouts)
	for round := range spreadRounds {
		for i := range 2 {
			stock := []int{0, waitroom.MaxStock}[(i+round)%2]
			b.Run(fmt.Sprintf("round=%d/stock=%t", round+1, stock > 0), func(b *testing.B) { spreadStockRound(b, url, stock) })
		}
	}
}

func spreadStockRound(b *testing.B, url string, stock int) {
	ctx := context.Background()
	s := New(openURL(b, url), Options{Prefix: randomPrefix()})
	room := benchRoom(b, s, waitroom.RoomConfig{Shards: 3, Rate: 140, Stock: stock, MaxQueue: waitroom.MaxMaxQueue})
	cluster := s.client.(*redis.ClusterClient)
	users := 14 * b.N
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Go(func() {
			for i := w; i < users; i += 64 {
				if _, err := s.Enter(ctx, room, "u"+strconv.Itoa(i)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	advance(b, s, 100*time.Millisecond)
	_, err := s.Admit(ctx, room) // the bucket's first tick starts it empty
	require.NoError(b, err)

	var admitted []waitroom.Admission
	before := primariesCPU(b, cluster)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		advance(b, s, 100*time.Millisecond)
		got, err := s.Admit(ctx, room)
		require.NoError(b, err)
		admitted = append(admitted, got...)
	}
	tickWall := time.Since(start)
	mid := primariesCPU(b, cluster)
	start = time.Now()
	for _, a := range admitted {
		h, err := s.Claim(ctx, room, a.User, a.Token)
		require.NoError(b, err)
		require.NoError(b, s.Complete(ctx, h))
	}
	settleWall := time.Since(start)
	b.StopTimer()
	after := primariesCPU(b, cluster)
	cpu := func(from, to map[string]primaryCounts) (total float64) {
		for addr, a := range to {
			total += a.cpu - from[addr].cpu
		}
		return total
	}
	b.ReportMetric(float64(len(admitted))/float64(b.N), "users/tick")
	b.ReportMetric(cpu(before, mid)/float64(b.N), "redis-cpu-µs/tick")
	b.ReportMetric(float64(tickWall.Microseconds())/float64(b.N), "wall-µs/tick")
	if len(admitted) > 0 {
		b.ReportMetric(cpu(mid, after)/float64(len(admitted)), "redis-cpu-µs/settle")
		b.ReportMetric(float64(settleWall.Microseconds())/float64(len(admitted)), "wall-µs/settle")
	}
}
