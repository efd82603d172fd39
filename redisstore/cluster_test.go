package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redistest"
	"github.com/waitroom/waitroom/storetest"
)

// openURL opens url the way the server does and closes it when tb ends.
func openURL(tb testing.TB, url string) redis.UniversalClient {
	tb.Helper()
	c, err := Open(url)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// suiteTimeouts loosen the 1 s client defaults for the conformance suite:
// it checks semantics with ~27 checks at once (one of 5,000 concurrent
// enters) on a shared machine under -race, where a dial may wait for CPU
// longer than a second, and 5,000 callers queue for a pool of a few dozen
// connections. The fault tests keep the defaults.
const suiteTimeouts = "dial_timeout=5s&read_timeout=5s&write_timeout=5s&pool_timeout=30s"

// storeHarness runs the conformance suite on url, every check with its own
// prefix and a peer with its own client, as a second instance would have.
func storeHarness(url string) func(t *testing.T) storetest.Harness {
	url = withQuery(url, suiteTimeouts)
	return func(t *testing.T) storetest.Harness {
		prefix := randomPrefix()
		s := New(openURL(t, url), Options{Prefix: prefix})
		return storetest.Harness{
			Store:       s,
			ReplaceSeed: replaceSeed(s),
			Peer: func(t *testing.T) waitroom.Store {
				return New(openURL(t, url), Options{Prefix: prefix})
			},
			// The Redis clock, moved by the test clock.
			Advance:    func(t *testing.T, d time.Duration) { advance(t, s, d) },
			Now:        func() time.Time { return clockNow(t, s) },
			FakeClock:  false,
			AdmitAfter: admitAfter(s),
		}
	}
}

// TestClusterStore: the conformance suite on a 3-primary Redis Cluster,
// through the client Open makes from the seed list. Its rooms have random
// names, so they spread over the shards.
func TestClusterStore(t *testing.T) {
	// Not parallel with other top-level tests: see heavyTests.
	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3})
	storetest.Run(t, storeHarness(c.URL()))
	t.Run("Notices", func(t *testing.T) { storetest.RunNotices(t, storeHarness(c.URL())) })
	t.Run("Outbox", func(t *testing.T) { storetest.RunOutbox(t, storeHarness(c.URL())) })
	t.Run("History", func(t *testing.T) { storetest.RunHistory(t, storeHarness(c.URL())) })
}

// roomsOnEveryPrimary returns one room name per primary of c, keyed by the
// primary's address.
func roomsOnEveryPrimary(ctx context.Context, t *testing.T, c *redistest.Cluster, s *Store, primaries int) map[string]string {
	t.Helper()
	rooms := map[string]string{}
	for i := 0; len(rooms) < primaries; i++ {
		require.Less(t, i, 200, "random room names keep landing on the same primaries: %v", rooms)
		room := fmt.Sprintf("r-%d-%s", i, randomPrefix()[7:])
		p, err := c.PrimaryFor(ctx, s.keys(room).cfg)
		require.NoError(t, err)
		if _, ok := rooms[p]; !ok {
			rooms[p] = room
		}
	}
	return rooms
}

// TestClusterRoomsOnEveryShard: rooms on each of the three primaries work
// end to end, and each room's keys all live on its primary: one hash tag
// per room, so every script runs on one node.
func TestClusterRoomsOnEveryShard(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3})
	s := New(openURL(t, c.URL()), Options{Prefix: randomPrefix()})
	rooms := roomsOnEveryPrimary(ctx, t, c, s, 3)
	for primary, room := range rooms {
		journey(ctx, t, s, room)
		// Every key the journey wrote sits on the room's primary.
		node := redis.NewClient(&redis.Options{Addr: primary, DisableIdentity: true})
		t.Cleanup(func() { node.Close() })
		k := s.keys(room)
		n, err := node.Exists(ctx, k.cfg, k.seq, k.tok, k.active, k.bucket, k.stats).Result()
		require.NoError(t, err)
		require.EqualValues(t, 6, n, "room %s's keys on %s", room, primary)
	}

	// A node without the library (a primary restarted without
	// persistence, a node new to the cluster): the Store loads it on
	// every primary.
	require.NoError(t, c.Client().ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		return node.FunctionFlush(ctx).Err()
	}))
	for _, room := range rooms {
		st, err := s.Enter(ctx, room, "after-flush")
		require.NoError(t, err)
		require.Equal(t, int64(1), st.Position, "u1 and u2 were admitted")
	}
}

// journey enters two users, admits them, claims and completes one token
// and releases the other: every script once, on room.
func journey(ctx context.Context, t *testing.T, s *Store, room string) {
	t.Helper()
	_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Rate: 1000})
	require.NoError(t, err)
	for i, u := range []string{"u1", "u2"} {
		st, err := s.Enter(ctx, room, u)
		require.NoError(t, err)
		require.Equal(t, int64(i+1), st.Position)
	}
	got := admitN(t, s, room, 2)
	for _, a := range got {
		st, err := s.Status(ctx, room, a.User)
		require.NoError(t, err)
		require.Equal(t, a.Token, st.Token, "status reads the primary: the token Admit just issued")
	}
	h, err := s.Claim(ctx, room, got[0].User, got[0].Token)
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, h))
	h, err = s.Claim(ctx, room, got[1].User, got[1].Token)
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, h))
	stats := testenv.Stats(t, s, room)
	require.Equal(t, int64(2), stats.Admitted)
	require.Equal(t, int64(1), stats.Completed)
}

// testCtx bounds a test's Redis calls, failovers included.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}
