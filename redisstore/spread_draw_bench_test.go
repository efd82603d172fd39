package redisstore

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/redistest"
)

var spreadDrawEntrants = flag.Int("spread-draw-entrants", 20_000, "early arrivals BenchmarkSpreadDraw draws")

// BenchmarkSpreadDraw times the opening's draw (the Admit that makes it:
// lock, seal, read, order, write every place, publish) of
// -spread-draw-entrants early arrivals in a room on 1 and on 3 shards of
// a 3-primary Cluster, in turn, spreadRounds rounds in one run; ns/op is
// one whole draw, entering the crowd is not timed.
func BenchmarkSpreadDraw(b *testing.B) {
	c := redistest.StartCluster(b, redistest.ClusterOptions{Primaries: 3})
	url := withQuery(c.URL(), suiteTimeouts)
	for round := range spreadRounds {
		for i := range 2 {
			k := []int{1, 3}[(i+round)%2]
			b.Run(fmt.Sprintf("round=%d/shards=%d", round+1, k), func(b *testing.B) { spreadDraw(b, url, k, *spreadDrawEntrants, 0) })
		}
	}
}

// BenchmarkSpreadDrawWait times the draw as BenchmarkSpreadDraw does, on
// 3 shards of a 3-primary Cluster with a replica each: with the WAIT
// after each chunk's places on each sub-shard (Options.WaitTimeout's
// default) and without (negative), in turn, spreadRounds rounds in one
// run.
func BenchmarkSpreadDrawWait(b *testing.B) {
	c := redistest.StartCluster(b, redistest.ClusterOptions{Primaries: 3, ReplicasPerPrimary: 1})
	url := withQuery(c.URL(), suiteTimeouts)
	for round := range spreadRounds {
		for i := range 2 {
			wait := (i+round)%2 == 0
			timeout := time.Duration(-1) // no WAIT
			if wait {
				timeout = DefaultWaitTimeout
			}
			b.Run(fmt.Sprintf("round=%d/wait=%t", round+1, wait), func(b *testing.B) { spreadDraw(b, url, 3, *spreadDrawEntrants, timeout) })
		}
	}
}

// spreadDraw is one round of BenchmarkSpreadDraw, its stores' WAIT
// bounded by wait (Options.WaitTimeout).
func spreadDraw(b *testing.B, url string, k, n int, wait time.Duration) {
	prefix := randomPrefix()
	opts := Options{Prefix: prefix, WaitTimeout: wait}
	stores := []*Store{New(openURL(b, url), opts), New(openURL(b, url), opts)}
	b.StopTimer()
	for range b.N {
		opensIn := time.Hour
		room := benchRoom(b, stores[0], waitroom.RoomConfig{Shards: k, MaxQueue: waitroom.MaxMaxQueue, OpensAt: clockNow(b, stores[0]).Add(opensIn)})
		enterCrowd(b, stores, room, n, 256)
		advance(b, stores[0], opensIn)
		b.StartTimer()
		_, err := stores[0].Admit(b.Context(), room)
		b.StopTimer()
		require.NoError(b, err)
		d, err := stores[0].Draw(b.Context(), room)
		require.NoError(b, err)
		require.Equal(b, waitroom.DrawDone, d.State)
		require.Equal(b, int64(n), d.Entrants)
	}
}

// enterCrowd enters users u1 … un into room, callers at a time, taking
// turns over stores.
func enterCrowd(b *testing.B, stores []*Store, room string, n, callers int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range callers {
		wg.Go(func() {
			s := stores[w%len(stores)]
			for {
				i := next.Add(1)
				if i > int64(n) {
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
}
