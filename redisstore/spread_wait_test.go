package redisstore

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redistest"
)

// TestSpreadWaitsForReplicas: a spread room WAITs for a replica of each
// sub-shard's primary after the writes users are told of, so that a
// failover then takes back none of them.
func TestSpreadWaitsForReplicas(t *testing.T) {
	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3, ReplicasPerPrimary: 1})
	ctx := t.Context()
	s := New(openURL(t, withQuery(c.URL(), suiteTimeouts)), Options{Prefix: randomPrefix(), WaitTimeout: 2 * time.Second})

	// The tick WAITs on each sub-shard's primary that issued tokens, so
	// that by the time Admit returns a replica holds them: as many WAITs
	// on a primary as ticks that issued there, none where nothing was
	// issued, and the tokens on the replicas.
	t.Run("Admit", func(t *testing.T) {
		room := testenv.Unique("spread-")
		_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: 3, Rate: 200, MaxQueue: 1000})
		require.NoError(t, err)
		l, err := s.layout(ctx, room)
		require.NoError(t, err)

		primaries, replicas := subShardNodes(t, c, l)
		for i := range 60 {
			_, err := s.Enter(ctx, room, "w-"+strconv.Itoa(i))
			require.NoError(t, err)
		}
		issuedOn := map[int]int64{} // ticks that issued tokens, per sub-shard
		admitted := 0
		for tick := 0; admitted < 60 && tick < 200; tick++ {
			advance(t, s, 100*time.Millisecond)
			got, err := s.Admit(ctx, room)
			require.NoError(t, err)
			admitted += len(got)
			here := map[int]bool{}
			for _, a := range got {
				i := l.of(a.User)
				here[i] = true
				// On the replica once Admit returned.
				tok, err := replicas[i].HGet(ctx, l.subs[i].tok, a.User).Result()
				require.NoError(t, err, "%s's token is on its sub-shard's replica", a.User)
				require.Contains(t, tok, a.Token)
			}
			for i := range here {
				issuedOn[i]++
			}
		}
		require.Equal(t, 60, admitted)
		require.Len(t, issuedOn, 3, "every sub-shard issued some")
		require.Equal(t, map[int]int64(issuedOn), waitsOn(t, primaries), "one WAIT per tick that issued on a sub-shard")
	})

	// The draw WAITs on each sub-shard's primary after each chunk of
	// places it wrote there, as the tick does after its pops, so by the
	// time the draw is published a replica holds every place: as many
	// WAITs on a primary as chunks with entrants there, and every entrant
	// queued on its sub-shard's replica once Admit returned. The room is
	// paused: the tick after the draw issues no token, and waits for none.
	t.Run("Draw", func(t *testing.T) {
		room := testenv.Unique("spread-")
		opensIn := time.Second
		_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: 3, Rate: 200, State: waitroom.RoomPaused,
			OpensAt: clockNow(t, s).Add(opensIn)})
		require.NoError(t, err)
		l, err := s.layout(ctx, room)
		require.NoError(t, err)
		primaries, replicas := subShardNodes(t, c, l)

		const n = drawChunk + 200 // two chunks
		for _, err := range atOnce(n, func(i int) error {
			_, err := s.Enter(ctx, room, fmt.Sprintf("e%04d", i))
			return err
		}) {
			require.NoError(t, err)
		}
		advance(t, s, opensIn+50*time.Millisecond)
		drawDone(t, s, s, room)

		entrants, err := s.Entrants(ctx, room)
		require.NoError(t, err)
		require.Len(t, entrants, n)
		chunks := map[int]map[int64]bool{} // per sub-shard, the chunks with entrants there
		for _, e := range entrants {
			i := l.of(e.User)
			if chunks[i] == nil {
				chunks[i] = map[int64]bool{}
			}
			chunks[i][(e.Place-1)/drawChunk] = true
			// On the replica once Admit returned.
			_, err := replicas[i].ZScore(ctx, l.subs[i].q, e.User).Result()
			require.NoError(t, err, "%s's place is on its sub-shard's replica", e.User)
		}
		want := map[int]int64{}
		for i, cs := range chunks {
			want[i] = int64(len(cs))
		}
		require.Len(t, want, 3, "entrants on every sub-shard")
		require.Equal(t, want, waitsOn(t, primaries), "one WAIT per chunk with places on a sub-shard")
	})
}

// subShardNodes returns clients of each sub-shard's primary, its command
// stats reset, and of its replica (READONLY), by the sub-shard's index
// in l.
func subShardNodes(t *testing.T, c *redistest.Cluster, l *spreadLayout) (primaries, replicas map[int]*redis.Client) {
	t.Helper()
	ctx := t.Context()
	primaries, replicas = map[int]*redis.Client{}, map[int]*redis.Client{}
	for _, addr := range c.Addrs {
		cl := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = cl.Close() })
		for i, k := range l.subs {
			owner, err := c.PrimaryFor(ctx, k.tok)
			require.NoError(t, err)
			if addr == owner {
				primaries[i] = cl
				continue
			}
			role, err := cl.Do(ctx, "ROLE").Slice()
			require.NoError(t, err)
			if role[0] == "slave" && role[1].(string)+":"+strconv.FormatInt(role[2].(int64), 10) == owner {
				replicas[i] = cl
			}
		}
	}
	require.Len(t, primaries, len(l.subs))
	require.Len(t, replicas, len(l.subs), "each sub-shard's primary has its replica")
	for _, r := range replicas {
		require.NoError(t, r.Do(ctx, "READONLY").Err())
	}
	for _, p := range primaries {
		require.NoError(t, p.ConfigResetStat(ctx).Err())
	}
	return primaries, replicas
}

// waitsOn reads the WAITs each primary ran since its stats were reset.
func waitsOn(t *testing.T, primaries map[int]*redis.Client) map[int]int64 {
	t.Helper()
	out := map[int]int64{}
	for i, p := range primaries {
		stats, err := CommandStats(t.Context(), p)
		require.NoError(t, err)
		out[i] = stats["wait"].Calls
	}
	return out
}
