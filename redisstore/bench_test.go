package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

// Each benchmark also reports redis-µs/call: the server time per FCALL in
// its timed part, from INFO commandstats before and after. On a Redis that
// serves only the benchmark, that is the script's own cost.

func benchRoom(b *testing.B, s *Store, cfg waitroom.RoomConfig) string {
	b.Helper()
	room := fmt.Sprintf("bench-%d", rand.Uint64())
	_, err := s.CreateRoom(b.Context(), room, cfg)
	require.NoError(b, err)
	return room
}

// fcallStats returns calls and µs of FCALL so far.
func fcallStats(b testing.TB, c redis.UniversalClient) (calls, usec int64) {
	b.Helper()
	stats, err := CommandStats(context.Background(), c)
	require.NoError(b, err)
	return stats["fcall"].Calls, stats["fcall"].Usec
}

// measure runs the timed part and reports the server's µs per FCALL, and
// the allocations per call of the client side.
func measure(b *testing.B, s *Store, timed func()) {
	b.Helper()
	b.ReportAllocs()
	calls0, usec0 := fcallStats(b, s.client)
	b.ResetTimer()
	timed()
	b.StopTimer()
	calls1, usec1 := fcallStats(b, s.client)
	if calls1 > calls0 {
		b.ReportMetric(float64(usec1-usec0)/float64(calls1-calls0), "redis-µs/call")
	}
}

func BenchmarkEnter(b *testing.B) {
	s := newStore(b)
	room := benchRoom(b, s, waitroom.RoomConfig{MaxQueue: waitroom.MaxMaxQueue})
	var next atomic.Int64
	measure(b, s, func() {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.Enter(context.Background(), room, "u"+strconv.FormatInt(next.Add(1), 10)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

func BenchmarkStatus(b *testing.B) {
	const waiting = 100_000
	s := newStore(b)
	room := benchRoom(b, s, waitroom.RoomConfig{MaxQueue: waitroom.MaxMaxQueue})
	fill(b, s, room, waiting)
	measure(b, s, func() {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				st, err := s.Status(context.Background(), room, fmt.Sprintf("u%07d", rand.IntN(waiting)))
				if err != nil || st.State != waitroom.StateWaiting {
					b.Error(st, err)
					return
				}
			}
		})
	})
}

// BenchmarkAdmit times ticks that each admit a full quota. The room's rate
// is raised past what Validate allows, straight in the cfg hash, so that
// back-to-back calls always find a full bucket; the quota stays realistic.
func BenchmarkAdmit(b *testing.B) {
	for _, quota := range []int{14, 1000} {
		b.Run(fmt.Sprintf("quota=%d", quota), func(b *testing.B) {
			ctx := context.Background()
			s := newStore(b)
			room := benchRoom(b, s, waitroom.RoomConfig{MaxQueue: waitroom.MaxMaxQueue})
			k := s.keys(room)
			require.NoError(b, s.client.HSet(ctx, k.cfg, "rate", 1e9, "quota", quota).Err())
			fill(b, s, room, (b.N+2)*quota)
			_, err := s.Admit(ctx, room) // starts the bucket, learns the quota
			require.NoError(b, err)
			admitted := 0
			measure(b, s, func() {
				for range b.N {
					got, err := s.Admit(ctx, room)
					if err != nil {
						b.Fatal(err)
					}
					admitted += len(got)
				}
			})
			b.ReportMetric(float64(admitted)/float64(b.N), "users/call")
		})
	}
}

// BenchmarkClaim times successful claims, each of a different token.
func BenchmarkClaim(b *testing.B) {
	ctx := context.Background()
	s := newStore(b)
	room := benchRoom(b, s, waitroom.RoomConfig{MaxQueue: waitroom.MaxMaxQueue})
	k := s.keys(room)
	require.NoError(b, s.client.HSet(ctx, k.cfg, "rate", 1e9, "quota", waitroom.MaxTickQuota).Err())
	fill(b, s, room, b.N)
	var tokens []waitroom.Admission
	for len(tokens) < b.N {
		got, err := s.Admit(ctx, room)
		require.NoError(b, err)
		tokens = append(tokens, got...)
	}
	var next atomic.Int64
	measure(b, s, func() {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				a := tokens[next.Add(1)-1]
				if _, err := s.Claim(context.Background(), room, a.User, a.Token); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
