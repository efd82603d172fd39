package redisstore

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redistest"
)

// TestSpreadAdmitWaitsForReplicas: a spread room's tick WAITs on each
// sub-shard's primary that issued tokens, so that by the time Admit
// returns a replica holds them (a failover then takes back no token a
// user was told of): as many WAITs on a primary as ticks that issued
// there, none where nothing was issued, and the tokens on the replicas.
func TestSpreadAdmitWaitsForReplicas(t *testing.T) {
	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3, ReplicasPerPrimary: 1})
	ctx := t.Context()
	s := New(openURL(t, withQuery(c.URL(), suiteTimeouts)), Options{Prefix: randomPrefix(), WaitTimeout: 2 * time.Second})
	room := testenv.Unique("spread-")
	_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: 3, Rate: 200, MaxQueue: 1000})
	require.NoError(t, err)
	l, err := s.layout(ctx, room)
	require.NoError(t, err)

	// Each sub-shard's primary and replica.
	primaries, replicas := map[int]*redis.Client{}, map[int]*redis.Client{}
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
	require.Len(t, primaries, 3)
	require.Len(t, replicas, 3, "each sub-shard's primary has its replica")
	for _, r := range replicas {
		require.NoError(t, r.Do(ctx, "READONLY").Err())
	}
	waits := func() map[int]int64 {
		out := map[int]int64{}
		for i, p := range primaries {
			stats, err := CommandStats(ctx, p)
			require.NoError(t, err)
			out[i] = stats["wait"].Calls
		}
		return out
	}
	for _, p := range primaries {
		require.NoError(t, p.ConfigResetStat(ctx).Err())
	}

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
	require.Equal(t, map[int]int64(issuedOn), waits(), "one WAIT per tick that issued on a sub-shard")
}
