package redisstore

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redistest"
	"github.com/waitroom/waitroom/storetest"
)

// TestSpreadRoom: a room over 3 shards of a 3-primary Cluster. Its
// sub-shards land on 3 primaries; many users enter at one signal through
// two instances; every position is distinct, 1..n; admission goes in
// ticket order, each user once, the rate's count exactly; the gate's
// calls run on the user's sub-shard. Settings a spread room does not
// support, and shards off Cluster, are refused with their codes; stock
// and one order per buyer hold over the sub-shards under races.
func TestSpreadRoom(t *testing.T) {
	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3})
	url := withQuery(c.URL(), suiteTimeouts)
	prefix := randomPrefix()
	s := New(openURL(t, url), Options{Prefix: prefix})
	peer := New(openURL(t, url), Options{Prefix: prefix})
	ctx := t.Context()

	t.Run("TagsOnEveryPrimary", func(t *testing.T) {
		room := testenv.Unique("spread-")
		_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: 3})
		require.NoError(t, err)
		l, err := s.layout(ctx, room)
		require.NoError(t, err)
		require.Equal(t, 3, l.shards)
		primaries := map[string]bool{}
		for _, k := range l.subs {
			p, err := c.PrimaryFor(ctx, k.q)
			require.NoError(t, err)
			primaries[p] = true
		}
		require.Len(t, primaries, 3, "each sub-shard on a primary of its own")
	})

	t.Run("Refusals", func(t *testing.T) {
		_, err := s.CreateRoom(ctx, testenv.Unique("spread-"), waitroom.RoomConfig{Shards: 17})
		require.ErrorIs(t, err, waitroom.ErrBadRequest)
		plain := newStore(t)
		_, err = plain.CreateRoom(ctx, testenv.Unique("spread-"), waitroom.RoomConfig{Shards: 2})
		require.ErrorIs(t, err, waitroom.ErrShardsNeedCluster)

		room := testenv.Unique("spread-")
		_, err = s.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: 2})
		require.NoError(t, err)
		require.ErrorIs(t, s.SetNotice(ctx, room, "waiter", []byte(`{}`)), waitroom.ErrNotInQueue, "notices are kept, for the queued")
		// Resharding while someone waits is refused; once empty it is not.
		_, err = s.Enter(ctx, room, "waiter")
		require.NoError(t, err)
		_, err = waitroom.ChangeRoom(ctx, s, room, func(c *waitroom.RoomConfig) error { c.Shards = 3; return nil })
		require.ErrorIs(t, err, waitroom.ErrShardsNotEmpty)
		st, err := peer.Status(ctx, room, "waiter")
		require.NoError(t, err, "a refused reshard leaves the room as it was")
		require.Equal(t, int64(1), st.Position)
		require.NoError(t, s.Leave(ctx, room, "waiter"))
		_, err = waitroom.ChangeRoom(ctx, s, room, func(c *waitroom.RoomConfig) error { c.Shards = 3; return nil })
		require.NoError(t, err)
		// The peer's cached layout is the old one: it finds the new.
		st, err = peer.Enter(ctx, room, "after")
		require.NoError(t, err)
		require.Equal(t, waitroom.StateWaiting, st.State)
		cfg, err := s.RoomConfig(ctx, room)
		require.NoError(t, err)
		require.Equal(t, 3, cfg.Shards)
	})

	// max_queue is split over the sub-shards, each share checked with the
	// place: a crowd fills every share, and the room holds max_queue.
	t.Run("QueueFullAtOnce", func(t *testing.T) {
		room := testenv.Unique("spread-")
		_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: 3, MaxQueue: 100})
		require.NoError(t, err)
		errs := atOnce(1000, func(i int) error {
			_, err := []*Store{s, peer}[i%2].Enter(ctx, room, fmt.Sprintf("f%04d", i))
			return err
		})
		full := 0
		for _, err := range errs {
			if err != nil {
				require.ErrorIs(t, err, waitroom.ErrQueueFull)
				full++
			}
		}
		require.Equal(t, 900, full)
		stats, err := s.Stats(ctx, room)
		require.NoError(t, err)
		require.Equal(t, int64(100), stats.Waiting)
		require.Equal(t, int64(100), stats.Entered)
		require.Equal(t, int64(900), stats.Full)
	})

	// The dashboard's history of a spread room is what its sub-shards
	// hold, recorded in the same batch as a plain room on the cluster;
	// one second is recorded once however many admitters record it.
	t.Run("HistoryFromTheSubShards", func(t *testing.T) {
		spread, plain := testenv.Unique("spread-"), testenv.Unique("plain-")
		_, err := s.CreateRoom(ctx, spread, waitroom.RoomConfig{Shards: 3, Rate: 7})
		require.NoError(t, err)
		_, err = s.CreateRoom(ctx, plain, waitroom.RoomConfig{Rate: 5})
		require.NoError(t, err)
		for i := range 30 {
			_, err := s.Enter(ctx, spread, fmt.Sprintf("h%02d", i))
			require.NoError(t, err)
		}
		_, err = s.Enter(ctx, plain, "p1")
		require.NoError(t, err)
		at := time.Unix(time.Now().Unix(), 0)
		for _, st := range []*Store{s, peer} {
			require.NoError(t, st.RecordSamples(ctx, at, []string{spread, plain}))
		}
		got, err := s.History(ctx, spread, at.Add(-time.Second))
		require.NoError(t, err)
		require.Equal(t, []waitroom.Sample{{At: at, Rate: 7, Waiting: 30}}, got)
		got, err = s.History(ctx, plain, at.Add(-time.Second))
		require.NoError(t, err)
		require.Equal(t, []waitroom.Sample{{At: at, Rate: 5, Waiting: 1}}, got)
	})

	// A spread room keeping an outbox tells its admissions as user.admitted
	// from each sub-shard's own stream, written in the pop's own step (an
	// admitter killed before the tick's end loses none), each stream in
	// the order the merged heads admitted its users; the room's own
	// stream holds nothing.
	t.Run("OutboxTellsTheAdmitted", func(t *testing.T) {
		room := testenv.Unique("spread-")
		_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: 3, Rate: 100})
		require.NoError(t, err)
		require.NoError(t, s.SetOutbox(ctx, room, true))
		for i := range 40 {
			_, err := s.Enter(ctx, room, fmt.Sprintf("o%02d", i))
			require.NoError(t, err)
		}
		var admitted []string
		for i := 0; len(admitted) < 40 && i < 200; i++ {
			advance(t, s, 100*time.Millisecond)
			got, err := s.Admit(ctx, room)
			require.NoError(t, err)
			for _, a := range got {
				admitted = append(admitted, a.User)
			}
		}
		require.Len(t, admitted, 40)
		read, err := s.ReadOutbox(ctx, room, 100)
		require.NoError(t, err)
		told := map[string][]string{}
		for _, e := range read.Entries {
			require.Equal(t, waitroom.OutboxAdmitted, e.Type)
			told[e.Stream] = append(told[e.Stream], e.Users...)
		}
		l, err := s.layout(ctx, room)
		require.NoError(t, err)
		require.Zero(t, s.client.XLen(ctx, s.keys(room).out).Val(), "the room's own stream")
		for i, sk := range l.subs {
			want := slices.DeleteFunc(slices.Clone(admitted), func(u string) bool { return l.of(u) != i })
			require.Equal(t, want, told[sk.tag], "%s's stream, in admission order", sk.tag)
		}
		require.ErrorIs(t, s.TrimOutbox(ctx, room, "other#1/1-0"), waitroom.ErrBadRequest, "another room's sub-shard")
		require.ErrorIs(t, s.TrimOutbox(ctx, room, room+"#x/1-0"), waitroom.ErrBadRequest)
	})

	// A sub-shard's counters going back (its primary failed over to a
	// replica that lacked the last writes) is a loss, reported under the
	// sub-shard's tag.
	t.Run("LostWritesPerShard", func(t *testing.T) {
		var mu sync.Mutex
		lost := map[string]Loss{}
		watcher := New(openURL(t, url), Options{Prefix: prefix, OnLostWrites: func(room string, l Loss) {
			mu.Lock()
			defer mu.Unlock()
			lost[room] = l
		}})
		room := testenv.Unique("spread-")
		_, err := watcher.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: 3, Rate: 1000})
		require.NoError(t, err)
		for i := range 30 {
			_, err := watcher.Enter(ctx, room, fmt.Sprintf("l%02d", i))
			require.NoError(t, err)
		}
		admitted := 0
		for admitted < 30 {
			advance(t, watcher, 100*time.Millisecond)
			got, err := watcher.Admit(ctx, room)
			require.NoError(t, err)
			admitted += len(got)
		}
		l, err := watcher.layout(ctx, room)
		require.NoError(t, err)
		k := l.subs[1]
		n, err := watcher.client.HGet(ctx, k.stats, "admitted").Int64()
		require.NoError(t, err)
		require.Positive(t, n)
		require.NoError(t, watcher.client.HSet(ctx, k.stats, "admitted", 0).Err())
		advance(t, watcher, 100*time.Millisecond)
		_, err = watcher.Admit(ctx, room)
		require.NoError(t, err)
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, map[string]Loss{k.tag: {Tokens: n}}, lost)
	})

	t.Run("StockAndOneOrder", func(t *testing.T) { spreadPromises(t, s, peer) })
	t.Run("LostSalePush", func(t *testing.T) { spreadLostSalePush(t, s) })

	t.Run("EntersAtOnceThenAdmissionInTicketOrder", func(t *testing.T) {
		const n = 600
		room := testenv.Unique("spread-")
		_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: 3, Rate: 1000})
		require.NoError(t, err)
		type outcome struct {
			st  waitroom.Status
			err error
		}
		out := atOnce(n, func(i int) outcome {
			who := s
			if i%2 == 1 {
				who = peer
			}
			st, err := who.Enter(ctx, room, fmt.Sprintf("u%04d", i))
			return outcome{st, err}
		})
		var positions []int64
		for _, o := range out {
			require.NoError(t, o.err)
			require.Equal(t, waitroom.StateWaiting, o.st.State)
			positions = append(positions, o.st.Position)
		}
		slices.Sort(positions)
		for i, p := range positions {
			require.Equal(t, int64(i+1), p, "positions are a permutation of 1..n")
		}

		byPosition := make([]string, n)
		pos := map[string]int64{}
		for i, o := range out {
			byPosition[o.st.Position-1] = fmt.Sprintf("u%04d", i)
			pos[fmt.Sprintf("u%04d", i)] = o.st.Position
		}
		// Both instances tick at once, as in an ownership handover.
		var admitted []string
		seen := map[string]bool{}
		for round := 0; len(admitted) < n; round++ {
			require.Less(t, round, 400, "admitted %d of %d", len(admitted), n)
			advance(t, s, 50*time.Millisecond)
			got := atOnce(2, func(i int) []waitroom.Admission {
				a, err := []*Store{s, peer}[i].Admit(ctx, room)
				require.NoError(t, err)
				return a
			})
			// Each tick's users in ticket order, and every user of a round
			// behind every user of the rounds before: the two ticks at once
			// never pass each other.
			first := len(admitted)
			for _, tick := range got {
				for j, a := range tick {
					require.False(t, seen[a.User], "admitted twice: %s", a.User)
					seen[a.User] = true
					admitted = append(admitted, a.User)
					if j > 0 {
						require.Less(t, pos[tick[j-1].User], pos[a.User], "a tick's users in ticket order")
					}
				}
			}
			round := admitted[first:]
			slices.SortFunc(round, func(a, b string) int { return int(pos[a] - pos[b]) })
			if first > 0 && len(round) > 0 {
				require.Less(t, pos[admitted[first-1]], pos[round[0]], "a later round behind the earlier ones")
			}
		}
		require.Equal(t, byPosition, admitted)
		stats, err := s.Stats(ctx, room)
		require.NoError(t, err)
		require.Equal(t, int64(n), stats.Entered)
		require.Equal(t, int64(n), stats.Admitted)
		require.Equal(t, int64(0), stats.Waiting)

		// The gate on the user's sub-shard.
		st, err := peer.Status(ctx, room, byPosition[0])
		require.NoError(t, err)
		require.Equal(t, waitroom.StateAdmitted, st.State)
		h, err := s.Claim(ctx, room, byPosition[0], st.Token)
		require.NoError(t, err)
		_, err = peer.Claim(ctx, room, byPosition[0], st.Token)
		require.ErrorIs(t, err, waitroom.ErrTokenInUse)
		require.NoError(t, peer.Complete(ctx, h))
		stats, err = s.Stats(ctx, room)
		require.NoError(t, err)
		require.Equal(t, int64(1), stats.Completed)
	})
}

// atOnce runs fn(0..n-1) on n goroutines started at one signal and
// returns every outcome.
func atOnce[T any](n int, fn func(i int) T) []T {
	out := make([]T, n)
	testenv.AtOnce(n, func(i int) { out[i] = fn(i) })
	return out
}

// TestSpreadStore: the conformance suite on rooms spread over 3 shards of
// a 3-primary Cluster, and the notices' suite; what a spread room
// refuses, the suite checks it refuses.
func TestSpreadStore(t *testing.T) {
	// Not parallel with other top-level tests: see heavyTests.
	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3})
	harness := storeHarness(c.URL())
	spread := func(t *testing.T) storetest.Harness {
		h := harness(t)
		h.Shards = 3
		return h
	}
	storetest.Run(t, spread)
	t.Run("Notices", func(t *testing.T) { storetest.RunNotices(t, spread) })
	t.Run("Outbox", func(t *testing.T) { storetest.RunOutbox(t, spread) })
	t.Run("NoticesOfEarlyArrivals", func(t *testing.T) { testSpreadEarlyNotices(t, harness(t).Store.(*Store)) })
	t.Run("PassesRaceTheTicks", func(t *testing.T) {
		h := harness(t)
		testSpreadPassesRaceTheTicks(t, h.Store.(*Store), h.Peer(t).(*Store))
	})
	t.Run("PassWaitsForATick", func(t *testing.T) {
		h := harness(t)
		testSpreadPassWaitsForATick(t, h.Store.(*Store), h.Peer(t).(*Store))
	})
	t.Run("TickStalesAPass", func(t *testing.T) {
		h := harness(t)
		testSpreadTickStalesAPass(t, h.Store.(*Store), h.Peer(t).(*Store))
	})
	t.Run("PassRefusedBeforeSealing", func(t *testing.T) { testSpreadPassRefusedBeforeSealing(t, harness(t).Store.(*Store)) })
}
