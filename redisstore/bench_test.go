package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/baseline"
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

// measure runs the timed part and reports the server's µs per script
// call (the room's functions: FCALL), and the allocations per call of the
// client side.
func measure(b *testing.B, s *Store, timed func()) {
	b.Helper()
	b.ReportAllocs()
	calls0, usec0 := scriptStats(b, s.client)
	b.ResetTimer()
	timed()
	b.StopTimer()
	calls1, usec1 := scriptStats(b, s.client)
	if calls1 > calls0 {
		b.ReportMetric(float64(usec1-usec0)/float64(calls1-calls0), "redis-µs/call")
	}
}

func BenchmarkEnter(b *testing.B) {
	s := newStore(b)
	enterNewUsers(b, s, benchRoom(b, s, waitroom.RoomConfig{MaxQueue: waitroom.MaxMaxQueue}))
}

// enterNewUsers is the timed part of the ENTER benchmarks: a new user per
// Enter, from b.RunParallel's goroutines.
func enterNewUsers(b *testing.B, s *Store, room string) {
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

// BenchmarkEnterCrowd times new places taken by a crowd (256 callers, so
// that a room's calls carry many users), in a plain room, in a room before
// its scheduled opening (early arrivals), in a drop's room (stock, one
// order per buyer) and in a room whose opening has passed but is not drawn
// yet, and reports redis-server's whole CPU per ENTER (INFO cpu: on a
// Redis serving nobody else, what one ENTER costs the room's shard).
func BenchmarkEnterCrowd(b *testing.B) {
	for _, c := range []struct {
		name    string
		cfg     waitroom.RoomConfig
		prepare func(b *testing.B, s *Store, room string) // nil: an empty room
	}{
		{"plain", waitroom.RoomConfig{MaxQueue: waitroom.MaxMaxQueue}, nil},
		{"early-arrivals", waitroom.RoomConfig{MaxQueue: waitroom.MaxMaxQueue, OpensAt: time.Now().Add(time.Hour)}, nil},
		{"drop", waitroom.RoomConfig{MaxQueue: waitroom.MaxMaxQueue, Stock: 10_000, OneOrderPerUser: true}, nil},
		// The opening has passed with 100,000 early arrivals, and nobody
		// drew it yet: new users queue behind them all.
		{"opening", waitroom.RoomConfig{MaxQueue: waitroom.MaxMaxQueue, OpensAt: time.Now().Add(time.Hour)},
			func(b *testing.B, s *Store, room string) {
				earlyArrivals(b, s, room, 100_000)
				openNow(b, s, room, "open")
			}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := newStore(b)
			room := benchRoom(b, s, c.cfg)
			if c.prepare != nil {
				c.prepare(b, s, room)
			}
			cpu0 := redisCPU(b, s.client)
			b.SetParallelism(128)
			enterNewUsers(b, s, room)
			b.ReportMetric((redisCPU(b, s.client)-cpu0)/float64(b.N), "redis-cpu-µs/enter")
		})
	}
}

// redisCPU is redis-server's CPU so far (ServerCPU), in µs.
func redisCPU(b testing.TB, c redis.UniversalClient) float64 {
	b.Helper()
	cpu, err := ServerCPU(context.Background(), c)
	require.NoError(b, err)
	return float64(cpu.Microseconds())
}

func BenchmarkStatus(b *testing.B) {
	const waiting = 100_000
	s := newStore(b)
	room := benchRoom(b, s, waitroom.RoomConfig{MaxQueue: waitroom.MaxMaxQueue})
	fill(b, s, room, waiting)
	pollWaiting(b, s, room, waiting, waitroom.StateWaiting)
}

// earlyArrivals puts n early arrivals u0000000… straight into room's pre,
// as n Enters before its opening would.
func earlyArrivals(b *testing.B, s *Store, room string, n int) {
	ctx := context.Background()
	k := s.keys(room)
	for from := 0; from < n; from += 10_000 {
		p := s.client.Pipeline()
		for i := from; i < min(from+10_000, n); i++ {
			p.ZAdd(ctx, k.pre, redis.Z{Score: float64(i + 1), Member: fmt.Sprintf("u%07d", i)})
		}
		_, err := p.Exec(ctx)
		require.NoError(b, err)
	}
	require.NoError(b, s.client.Set(ctx, k.seq, n, 0).Err())
}

// openNow moves room's opening to now, in state.
func openNow(b *testing.B, s *Store, room, state string) {
	ctx := context.Background()
	now, err := s.client.Time(ctx).Result()
	require.NoError(b, err)
	require.NoError(b, s.client.HSet(ctx, s.keys(room).cfg, "opens_at_ms", now.UnixMilli(), "state", state).Err())
}

// pollWaiting is the timed part of the STATUS benchmarks: polls of users
// u0000000… drawn at random among waiting, each of whom must be in state.
func pollWaiting(b *testing.B, s *Store, room string, waiting int, state waitroom.State) {
	measure(b, s, func() {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				st, err := s.Status(context.Background(), room, fmt.Sprintf("u%07d", rand.IntN(waiting)))
				if err != nil || st.State != state {
					b.Error(st, err)
					return
				}
			}
		})
	})
}

// BenchmarkStatusCrowd times polls by a crowd (256 callers) of 100,000
// waiting, in a plain room, in a room whose opening drew them, in a drop's
// room (stock, one order per buyer: the units are short for all but the
// first 10,000) and in a room whose opening has passed but is not drawn
// yet (they are told so), and reports redis-server's whole CPU per poll
// (INFO cpu; a private Redis).
func BenchmarkStatusCrowd(b *testing.B) {
	const waiting = 100_000
	queued := func(b *testing.B, s *Store, room string) waitroom.State {
		fill(b, s, room, waiting)
		return waitroom.StateWaiting
	}
	for _, c := range []struct {
		name string
		cfg  waitroom.RoomConfig
		// prepare puts the waiting in room and returns the state each poll
		// must answer.
		prepare func(b *testing.B, s *Store, room string) waitroom.State
	}{
		{"drawn=false", waitroom.RoomConfig{Rate: 1, MaxQueue: waitroom.MaxMaxQueue}, queued},
		{"drawn=true", waitroom.RoomConfig{Rate: 1, MaxQueue: waitroom.MaxMaxQueue, OpensAt: time.Now().Add(time.Hour)},
			func(b *testing.B, s *Store, room string) waitroom.State {
				// Paused: the draw is made, and nobody admitted meanwhile.
				earlyArrivals(b, s, room, waiting)
				openNow(b, s, room, "paused")
				for d, err := s.Draw(b.Context(), room); d.State != waitroom.DrawDone; d, err = s.Draw(b.Context(), room) {
					require.NoError(b, err)
					_, err = s.Admit(b.Context(), room)
					require.NoError(b, err)
				}
				return waitroom.StateWaiting
			}},
		{"drop", waitroom.RoomConfig{Rate: 1, MaxQueue: waitroom.MaxMaxQueue, Stock: 10_000, OneOrderPerUser: true}, queued},
		{"opening", waitroom.RoomConfig{Rate: 1, MaxQueue: waitroom.MaxMaxQueue, OpensAt: time.Now().Add(time.Hour)},
			func(b *testing.B, s *Store, room string) waitroom.State {
				earlyArrivals(b, s, room, waiting)
				openNow(b, s, room, "open")
				return waitroom.StateScheduled
			}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := newStore(b)
			room := benchRoom(b, s, c.cfg)
			state := c.prepare(b, s, room)
			cpu0 := redisCPU(b, s.client)
			b.SetParallelism(128)
			pollWaiting(b, s, room, waiting, state)
			b.ReportMetric((redisCPU(b, s.client)-cpu0)/float64(b.N), "redis-cpu-µs/poll")
		})
	}
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

// admitFloor is the least an admission with the room's contract does: read
// the settings, the clock, what cleanup may remove, the counters the Store
// watches for lost writes, the bucket and the queue's length; pop the
// head, check it holds no live token, write its tokens and their one
// cleanup entry, count them, write the bucket. No bucket arithmetic, no
// pace, no abandoned users, no no-shows, no stock: a yardstick for what
// the admit function's own logic costs beyond these, with the room's keys
// (KEYS as admitScript's) and tokens (ARGV). Returns the users admitted.
var admitFloor = redis.NewScript(`
local cfg = redis.call('HMGET', KEYS[1], 'state', 'rate', 'slice_ms', 'quota', 'ttl_ms', 'max_active', 'stock', 'one_order', 'abandon_ms', 'first_use_ms', 'opens_at_ms', 'had_opening')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now, 'LIMIT', 0, 1000)
local counts = redis.call('HMGET', KEYS[6], 'admitted', 'no_shows', 'completed', 'left', 'left_after')
local seq = redis.call('GET', KEYS[7])
local b = redis.call('HMGET', KEYS[2], 'last_us', 'carry', 'made_up')
local waiting = redis.call('ZCARD', KEYS[3])
local popped = redis.call('ZPOPMIN', KEYS[3], #ARGV)
local users = {}
for i = 1, #popped, 2 do
  users[#users + 1] = popped[i]
end
local olds = redis.call('HMGET', KEYS[4], unpack(users))
local entries = {}
local suffix = '|new||' .. (now + 300000) .. '|' .. (now + 60000)
for i = 1, #users do
  entries[#entries + 1] = users[i]
  entries[#entries + 1] = ARGV[i] .. suffix
end
entries[#entries + 1] = '` + tokHashTableField + `' -- issue_tokens' field, with its note
entries[#entries + 1] = '` + hashTableNote + `'
redis.call('HSET', KEYS[4], unpack(entries))
redis.call('ZADD', KEYS[5], now + 60000, ' ' .. table.concat(users, ' '))
redis.call('HINCRBY', KEYS[6], 'admitted', #users)
redis.call('HSET', KEYS[2], 'last_us', t[1] .. t[2], 'carry', 0, 'made_up', 0)
return users
`)

// BenchmarkAdmitAgainstBaseline compares the admit function with the
// baseline ADMIT (ZPOPMIN + SET EX per user) on the same Redis in hot
// loops (waitroom bench makes the same comparison through the Store, over
// many rooms, hot and cold), and with admitFloor: each round (one per b.N) sends the three, in an order
// that rotates, as pipelines of 10 calls that each admit quota users.
// Reported: each side's script µs per admitted user (INFO commandstats)
// and the ratios to the baseline, medians of the rounds.
func BenchmarkAdmitAgainstBaseline(b *testing.B) {
	for _, quota := range []int{14, 100} {
		b.Run(fmt.Sprintf("quota=%d", quota), func(b *testing.B) {
			ctx := context.Background()
			s := newStore(b)
			room := benchRoom(b, s, waitroom.RoomConfig{MaxQueue: waitroom.MaxMaxQueue, TokenTTL: time.Hour})
			require.NoError(b, s.client.HSet(ctx, s.keys(room).cfg, "rate", 1e9, "quota", quota).Err())
			_, err := s.Admit(ctx, room) // starts the bucket
			require.NoError(b, err)
			require.NoError(b, baseline.Admit.Load(ctx, s.client).Err())
			require.NoError(b, admitFloor.Load(ctx, s.client).Err())
			floorRoom := benchRoom(b, s, waitroom.RoomConfig{MaxQueue: waitroom.MaxMaxQueue, TokenTTL: time.Hour})
			baselineQ, baselineTok := s.prefix+":{base}:q", s.prefix+":{base}:tok:"
			const pipelines, calls = 20, 10
			users := pipelines * calls * quota
			tokens := func() []any {
				t := make([]any, quota)
				for i := range t {
					t[i] = waitroom.NewToken()
				}
				return t
			}
			// side sends the pipelines of one side and returns its µs per
			// admitted user.
			side := func(admit func(p redis.Pipeliner) func() int) float64 {
				_, usec0 := scriptStats(b, s.client)
				admitted := 0
				for range pipelines {
					p := s.client.Pipeline()
					counts := make([]func() int, calls)
					for i := range counts {
						counts[i] = admit(p)
					}
					_, err := p.Exec(ctx)
					require.NoError(b, err)
					for _, n := range counts {
						admitted += n()
					}
				}
				_, usec1 := scriptStats(b, s.client)
				require.Equal(b, users, admitted, "every call admits its quota")
				return float64(usec1-usec0) / float64(admitted)
			}
			oursSide := func(p redis.Pipeliner) func() int {
				keys, _ := s.admitArgs(room, 0)
				cmd := p.FCall(ctx, admitScript.Name(), keys, tokens()...)
				return func() int {
					res, err := cmd.Slice()
					require.NoError(b, err)
					return len(res) - admitHeader
				}
			}
			baselineSide := func(p redis.Pipeliner) func() int {
				cmd := p.EvalSha(ctx, baseline.Admit.Hash(), []string{baselineQ}, append([]any{quota, 3600, baselineTok}, tokens()...)...)
				return func() int {
					n, err := cmd.Int64()
					require.NoError(b, err)
					return int(n)
				}
			}
			floorKeys, _ := s.admitArgs(floorRoom, 0)
			floorSide := func(p redis.Pipeliner) func() int {
				cmd := p.EvalSha(ctx, admitFloor.Hash(), floorKeys, tokens()...)
				return func() int {
					res, err := cmd.StringSlice()
					require.NoError(b, err)
					return len(res)
				}
			}
			sides := []func(p redis.Pipeliner) func() int{oursSide, baselineSide, floorSide}
			var ours, baselines, floors, ratios, floorRatios []float64
			b.ResetTimer()
			for round := range b.N {
				b.StopTimer()
				// New names each round: the last round's users hold
				// tokens still, and are not admitted again.
				fillNamed(b, s, room, fmt.Sprintf("r%d-", round), users)
				fillNamed(b, s, floorRoom, fmt.Sprintf("r%d-", round), users)
				p := s.client.Pipeline()
				for i := range users {
					p.ZAdd(ctx, baselineQ, redis.Z{Score: float64(i), Member: fmt.Sprintf("r%d-%07d", round, i)})
				}
				_, err := p.Exec(ctx)
				require.NoError(b, err)
				b.StartTimer()
				got := rotate(round, len(sides), func(j int) float64 { return side(sides[j]) })
				o, sd, f := got[0], got[1], got[2]
				ours, baselines, floors = append(ours, o), append(baselines, sd), append(floors, f)
				ratios, floorRatios = append(ratios, o/sd), append(floorRatios, f/sd)
			}
			b.ReportMetric(median(ours), "room-µs/user")
			b.ReportMetric(median(baselines), "baseline-µs/user")
			b.ReportMetric(median(floors), "floor-µs/user")
			b.ReportMetric(median(ratios), "room÷baseline")
			b.ReportMetric(median(floorRatios), "floor÷baseline")
			b.Logf("room ÷ baseline, every round: %.2f", ratios)
			b.Logf("floor ÷ baseline, every round: %.2f", floorRatios)
		})
	}
}

// scriptStats returns calls and µs of FCALL and EVALSHA so far.
func scriptStats(b testing.TB, c redis.UniversalClient) (calls, usec int64) {
	b.Helper()
	stats, err := CommandStats(context.Background(), c)
	require.NoError(b, err)
	f, e := stats["fcall"], stats["evalsha"]
	return f.Calls + e.Calls, f.Usec + e.Usec
}

// rotate runs sides 0…n-1 in an order that turns with round, so that no
// side always goes first, and returns each one's figure.
func rotate(round, n int, side func(j int) float64) []float64 {
	got := make([]float64, n)
	for i := range n {
		j := (i + round) % n
		got[j] = side(j)
	}
	return got
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	return s[len(s)/2]
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

// admitPipelines runs pipelines of calls admissions of quota users each
// in room and returns the script µs per admitted user; every call must
// admit its quota.
func admitPipelines(b *testing.B, s *Store, room string, quota, pipelines, calls int) float64 {
	ctx := context.Background()
	_, usec0 := scriptStats(b, s.client)
	admitted := 0
	for range pipelines {
		p := s.client.Pipeline()
		cmds := make([]*redis.Cmd, calls)
		for i := range cmds {
			keys, tokens := s.admitArgs(room, quota)
			cmds[i] = p.FCall(ctx, admitScript.Name(), keys, tokens...)
		}
		_, err := p.Exec(ctx)
		require.NoError(b, err)
		for _, c := range cmds {
			res, err := c.Slice()
			require.NoError(b, err)
			admitted += len(res) - admitHeader
		}
	}
	_, usec1 := scriptStats(b, s.client)
	require.Equal(b, pipelines*calls*quota, admitted, "every call admits its quota")
	return float64(usec1-usec0) / float64(admitted)
}

// BenchmarkAdmitNotices times what notices cost Admit, in rounds like
// BenchmarkAdmitAgainstBaseline's (pipelines of 10 calls that each admit
// quota users, the rooms' order rotating): a room where nobody asked
// ("plain"), one whose bucket is marked (set_notice) while none of the
// admitted asked ("marked": the notices' HMGET per call), and one where
// a tenth of the users asked ("told"). Reported: script µs per admitted
// user of each, and marked's and told's ratio to plain, medians of the
// rounds.
func BenchmarkAdmitNotices(b *testing.B) {
	const quota, pipelines, calls = 100, 10, 10
	ctx := context.Background()
	s := newStore(b)
	cfg := waitroom.RoomConfig{MaxQueue: waitroom.MaxMaxQueue, TokenTTL: time.Hour}
	rooms := []string{benchRoom(b, s, cfg), benchRoom(b, s, cfg), benchRoom(b, s, cfg)}
	for _, room := range rooms {
		require.NoError(b, s.client.HSet(ctx, s.keys(room).cfg, "rate", 1e9, "quota", quota).Err())
		_, err := s.Admit(ctx, room) // starts the bucket
		require.NoError(b, err)
	}
	users := pipelines * calls * quota
	side := func(room string) float64 { return admitPipelines(b, s, room, quota, pipelines, calls) }
	var plain, marked, told, markedRatios, toldRatios []float64
	b.ResetTimer()
	for round := range b.N {
		b.StopTimer()
		prefix := fmt.Sprintf("r%d-", round)
		for _, room := range rooms {
			fillNamed(b, s, room, prefix, users)
		}
		p := s.client.Pipeline()
		p.HSet(ctx, s.keys(rooms[1]).notice, "nobody-queued", channels)
		p.HSet(ctx, s.keys(rooms[1]).bucket, "notices", "1")
		for i := 0; i < users; i += 10 {
			p.HSet(ctx, s.keys(rooms[2]).notice, fmt.Sprintf("%s%07d", prefix, i), channels)
		}
		p.HSet(ctx, s.keys(rooms[2]).bucket, "notices", "1")
		_, err := p.Exec(ctx)
		require.NoError(b, err)
		b.StartTimer()
		got := rotate(round, len(rooms), func(j int) float64 { return side(rooms[j]) })
		plain, marked, told = append(plain, got[0]), append(marked, got[1]), append(told, got[2])
		markedRatios, toldRatios = append(markedRatios, got[1]/got[0]), append(toldRatios, got[2]/got[0])
	}
	b.ReportMetric(median(plain), "plain-µs/user")
	b.ReportMetric(median(marked), "marked-µs/user")
	b.ReportMetric(median(told), "told-µs/user")
	b.ReportMetric(median(markedRatios), "marked÷plain")
	b.ReportMetric(median(toldRatios), "told÷plain")
}

// BenchmarkAdmitOutbox times what the outbox costs Admit, in
// BenchmarkAdmitNotices' rounds: a room whose outbox is off ("off", what
// every room without a webhook endpoint wanting per-user events is) and
// one whose outbox is on ("on": each call writes one entry of its quota
// users; the relay's trim is left out, as it runs apart). Reported:
// script µs per admitted user of each and on's ratio to off, medians of
// the rounds; every round is logged.
func BenchmarkAdmitOutbox(b *testing.B) {
	const quota, pipelines, calls = 100, 10, 10
	ctx := context.Background()
	s := newStore(b)
	cfg := waitroom.RoomConfig{MaxQueue: waitroom.MaxMaxQueue, TokenTTL: time.Hour}
	rooms := []string{benchRoom(b, s, cfg), benchRoom(b, s, cfg)}
	for _, room := range rooms {
		require.NoError(b, s.client.HSet(ctx, s.keys(room).cfg, "rate", 1e9, "quota", quota).Err())
		_, err := s.Admit(ctx, room) // starts the bucket
		require.NoError(b, err)
	}
	require.NoError(b, s.SetOutbox(ctx, rooms[1], true))
	users := pipelines * calls * quota
	side := func(room string) float64 { return admitPipelines(b, s, room, quota, pipelines, calls) }
	var off, on, ratios []float64
	b.ResetTimer()
	for round := range b.N {
		b.StopTimer()
		prefix := fmt.Sprintf("r%d-", round)
		for _, room := range rooms {
			fillNamed(b, s, room, prefix, users)
		}
		require.NoError(b, s.client.Del(ctx, s.keys(rooms[1]).out).Err())
		b.StartTimer()
		got := rotate(round, len(rooms), func(j int) float64 { return side(rooms[j]) })
		off, on, ratios = append(off, got[0]), append(on, got[1]), append(ratios, got[1]/got[0])
	}
	require.Zero(b, s.client.Exists(ctx, s.keys(rooms[0]).out).Val(), "off: no outbox")
	b.ReportMetric(median(off), "off-µs/user")
	b.ReportMetric(median(on), "on-µs/user")
	b.ReportMetric(median(ratios), "on÷off")
	b.Logf("off µs/user, every round: %.3f", off)
	b.Logf("on µs/user, every round: %.3f", on)
	b.Logf("on ÷ off, every round: %.3f", ratios)
}
