package redistest_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/redistest"
)

// Rooms whose hash tags fall in the three slot ranges redis-cli gives three
// primaries (0-5460, 5461-10922, 10923-16383), so each room lives on its own
// primary.
var rooms = []struct {
	tag  string
	slot int64
}{
	{"{room-a}", 10946},
	{"{room-b}", 6817},
	{"{room-c}", 2688},
}

// testCtx bounds a test's Redis calls, failovers included.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestCluster_SetGet(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3})
	require.Len(t, c.Addrs, 3)

	cl := c.Client()
	require.NoError(t, cl.Set(ctx, "wr:{room-a}:seq", "42", 0).Err())
	got, err := cl.Get(ctx, "wr:{room-a}:seq").Result()
	require.NoError(t, err)
	require.Equal(t, "42", got)

	// The seed list must survive url.Parse, which redisstore will use.
	u, err := url.Parse(c.URL())
	require.NoError(t, err)
	require.Equal(t, "redis+cluster", u.Scheme)
	require.Equal(t, c.Addrs, strings.Split(u.Host, ","))
}

func TestCluster_RoomsSpreadOverPrimaries(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3})
	cl := c.Client()

	primaries := map[string]string{} // primary → room
	for _, r := range rooms {
		for _, suffix := range []string{":q", ":seq", ":tok", ":bucket"} {
			slot, err := cl.ClusterKeySlot(ctx, "wr:"+r.tag+suffix).Result()
			require.NoError(t, err)
			require.Equal(t, r.slot, slot, "every key of %s hashes by its tag", r.tag)
		}
		p, err := c.PrimaryFor(ctx, "wr:"+r.tag+":q")
		require.NoError(t, err)
		require.NotContains(t, primaries, p, "%s and %s share a primary", r.tag, primaries[p])
		primaries[p] = r.tag
	}

	// A script over one room's keys runs on its primary; one over two
	// rooms' keys is refused, which is why scripts take only one room.
	script := redis.NewScript(`redis.call("INCR", KEYS[1]); return redis.call("ZCARD", KEYS[2])`)
	n, err := script.Run(ctx, cl, []string{"wr:{room-a}:seq", "wr:{room-a}:q"}).Int()
	require.NoError(t, err)
	require.Equal(t, 0, n)
	err = script.Run(ctx, cl, []string{"wr:{room-a}:seq", "wr:{room-b}:q"}).Err()
	require.ErrorContains(t, err, "CROSSSLOT")
}

// setRooms writes one key per room and returns the keys by room.
func setRooms(ctx context.Context, t *testing.T, cl *redis.ClusterClient) map[string]string {
	keys := map[string]string{}
	for _, r := range rooms {
		k := "wr:" + r.tag + ":seq"
		require.NoError(t, cl.Set(ctx, k, r.tag, 0).Err())
		keys[r.tag] = k
	}
	return keys
}

// waitMarkedFailed waits until every node but dead flags dead as failed,
// i.e. the cluster has decided, not just lost a connection.
func waitMarkedFailed(ctx context.Context, t *testing.T, c *redistest.Cluster, dead string) {
	for _, addr := range c.Addrs {
		if addr == dead {
			continue
		}
		cl := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true})
		t.Cleanup(func() { cl.Close() })
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			nodes, err := cl.ClusterNodes(ctx).Result()
			require.NoError(ct, err)
			for _, line := range strings.Split(nodes, "\n") {
				if f := strings.Fields(line); len(f) > 2 && strings.HasPrefix(f[1], dead+"@") {
					require.Contains(ct, strings.Split(f[2], ","), "fail", "%s sees %s", addr, line)
					return
				}
			}
			ct.Errorf("%s does not list %s", addr, dead)
		}, 20*time.Second, 50*time.Millisecond)
	}
}

func TestCluster_PrimaryDownOtherRoomsServe(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	// Without full coverage the shards that still have a primary keep
	// serving; that is the setting waitroom wants, one room per shard.
	c := redistest.StartCluster(t, redistest.ClusterOptions{
		Primaries: 3,
		Args:      []string{"--cluster-require-full-coverage", "no"},
	})
	cl := c.Client()
	keys := setRooms(ctx, t, cl)
	dead, err := c.PrimaryFor(ctx, keys["{room-a}"])
	require.NoError(t, err)

	start := time.Now()
	c.Kill(dead)
	waitMarkedFailed(ctx, t, c, dead)
	t.Logf("%s marked failed after %v", dead, time.Since(start).Round(time.Millisecond))

	for _, r := range rooms[1:] {
		got, err := cl.Get(ctx, keys[r.tag]).Result()
		require.NoError(t, err, r.tag)
		require.Equal(t, r.tag, got)
		require.NoError(t, cl.Set(ctx, keys[r.tag], "after", 0).Err(), r.tag)
	}
	// The dead shard's room fails (connection refused or CLUSTERDOWN)
	// rather than answering from nowhere.
	err = cl.Get(ctx, keys["{room-a}"]).Err()
	require.Error(t, err)
	require.NotErrorIs(t, err, redis.Nil)
	require.NoError(t, ctx.Err(), "the failing call must fail fast, not run out the test's time")
}

func TestCluster_PrimaryDownFullCoverageStopsAll(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	// Redis's default: once a shard has no primary the whole cluster
	// refuses, every room with it. Operators must know.
	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3})
	cl := c.Client()
	keys := setRooms(ctx, t, cl)
	dead, err := c.PrimaryFor(ctx, keys["{room-a}"])
	require.NoError(t, err)

	c.Kill(dead)
	waitMarkedFailed(ctx, t, c, dead)
	for _, r := range rooms[1:] {
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			require.ErrorContains(ct, cl.Get(ctx, keys[r.tag]).Err(), "CLUSTERDOWN", r.tag)
		}, 10*time.Second, 50*time.Millisecond)
	}
}

func TestCluster_ReplicaTakesOver(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3, ReplicasPerPrimary: 1})
	require.Len(t, c.Addrs, 6)
	cl := c.Client()
	keys := setRooms(ctx, t, cl)
	key := keys["{room-a}"]

	// Only a write the replica has acknowledged survives the failover.
	primary, err := cl.MasterForKey(ctx, key)
	require.NoError(t, err)
	acked, err := primary.Wait(ctx, 1, 5*time.Second).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, acked)

	dead, err := c.PrimaryFor(ctx, key)
	require.NoError(t, err)
	require.Equal(t, primary.Options().Addr, dead)
	start := time.Now()
	c.Kill(dead)

	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		p, err := c.PrimaryFor(ctx, key)
		require.NoError(ct, err)
		require.NotEqual(ct, dead, p, "slot still on the dead primary")
	}, 20*time.Second, 50*time.Millisecond)
	promoted := time.Since(start)

	// The client learns the new slot map by itself.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		got, err := cl.Get(ctx, key).Result()
		require.NoError(ct, err)
		require.Equal(ct, "{room-a}", got)
		require.NoError(ct, cl.Set(ctx, key, "after", 0).Err())
	}, 20*time.Second, 50*time.Millisecond)
	t.Logf("replica promoted after %v, client served after %v", promoted.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

	for _, r := range rooms[1:] {
		got, err := cl.Get(ctx, keys[r.tag]).Result()
		require.NoError(t, err, r.tag)
		require.Equal(t, r.tag, got)
	}
}

func TestSentinel_Failover(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := redistest.StartSentinel(t, redistest.SentinelOptions{Replicas: 1, Sentinels: 3, MasterName: "wr-master"})
	require.Len(t, s.SentinelAddrs, 3)
	require.Equal(t, "redis+sentinel://"+strings.Join(s.SentinelAddrs, ",")+"/wr-master", s.URL())

	cl := s.FailoverClient()
	require.NoError(t, cl.Set(ctx, "wr:{room-a}:seq", "7", 0).Err())
	acked, err := cl.Wait(ctx, 1, 5*time.Second).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, acked, "the replica must hold the write before the primary dies")

	start := time.Now()
	old := s.KillPrimary(ctx)
	primary, err := s.WaitFailover(ctx, old)
	require.NoError(t, err)
	require.NotEqual(t, old, primary)
	failedOver := time.Since(start)

	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		got, err := cl.Get(ctx, "wr:{room-a}:seq").Result()
		require.NoError(ct, err)
		require.Equal(ct, "7", got)
		require.NoError(ct, cl.Incr(ctx, "wr:{room-a}:seq").Err())
	}, 20*time.Second, 50*time.Millisecond)
	t.Logf("failover to %s after %v, client served after %v", primary, failedOver.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

	got, err := s.PrimaryAddr(ctx)
	require.NoError(t, err)
	require.Equal(t, primary, got)
}

func TestServer_RestartKill(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	// An append-only file in the server's dir keeps data across restarts.
	s := redistest.StartServer(t, "--appendonly", "yes")
	opts, err := redis.ParseURL(s.URL())
	require.NoError(t, err)
	require.Equal(t, s.Addr, opts.Addr)

	cl := s.Client()
	require.NoError(t, cl.Set(ctx, "k", "v", 0).Err())
	s.Restart()
	got, err := cl.Get(ctx, "k").Result()
	require.NoError(t, err, "the client reconnects to the same port")
	require.Equal(t, "v", got)

	s.Kill()
	err = cl.Ping(ctx).Err()
	require.Error(t, err)
	require.False(t, errors.Is(err, context.DeadlineExceeded), "a dead server is refused at once")
	s.Restart()
	require.NoError(t, cl.Ping(ctx).Err())
}
