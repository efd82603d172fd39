package redisstore

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redistest"
)

// TestSpreadDraw: the scheduled opening of a room over 3 shards of a
// 3-primary Cluster, beyond what the conformance suite checks of it.
func TestSpreadDraw(t *testing.T) {
	// Not parallel with other top-level tests: see heavyTests.
	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3})
	url := withQuery(c.URL(), suiteTimeouts)
	prefix := randomPrefix()
	s := New(openURL(t, url), Options{Prefix: prefix})
	peer := New(openURL(t, url), Options{Prefix: prefix})
	ctx := t.Context()

	// A drawer killed after its first chunk of places keeps the lock
	// until its lease runs out; then another admitter draws again, with
	// the same places. Meanwhile one entrant leaves (placed already),
	// another leaves before its chunk, a third enters again and a new
	// arrival enters: afterwards every position is exact, the leavers keep
	// their recorded places but are not queued, the one who entered again
	// has its drawn place, the new arrival comes after every entrant, and
	// admission goes in place order across the sub-shards.
	t.Run("KilledDrawerResumedWithTheSamePlaces", func(t *testing.T) {
		const n = 2*drawChunk + 500
		room := testenv.Unique("draw-")
		opensIn := time.Second
		_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: 3, Rate: 1000, OpensAt: clockNow(t, s).Add(opensIn)})
		require.NoError(t, err)
		before, err := s.Draw(ctx, room)
		require.NoError(t, err)
		users := make([]string, n)
		for i := range users {
			users[i] = fmt.Sprintf("e%05d", i)
		}
		errs := atOnce(n, func(i int) error {
			st, err := []*Store{s, peer}[i%2].Enter(ctx, room, users[i])
			if err == nil && st.State != waitroom.StateScheduled {
				err = fmt.Errorf("%s: %s", users[i], st.State)
			}
			return err
		})
		for _, err := range errs {
			require.NoError(t, err)
		}
		stats, err := s.Stats(ctx, room)
		require.NoError(t, err)
		require.Equal(t, int64(n), stats.Waiting, "early arrivals wait")

		advance(t, s, opensIn+50*time.Millisecond)
		s.drawCut = func(chunk int) bool { return chunk == 1 } // killed after its first chunk
		got, err := s.Admit(ctx, room)
		require.NoError(t, err)
		require.Empty(t, got)
		got, err = peer.Admit(ctx, room)
		require.NoError(t, err)
		require.Empty(t, got, "the lock is the killed drawer's until its lease runs out")
		d, err := peer.Draw(ctx, room)
		require.NoError(t, err)
		require.Equal(t, waitroom.DrawPending, d.State)

		// The counter is past the entrants; those of the chunk written
		// are queued at their places, the others still told the opening.
		seq, err := s.client.Get(ctx, s.keys(room).seq).Int64()
		require.NoError(t, err)
		require.Equal(t, int64(n), seq)

		// The places the seed gives (revealed below, checked against them).
		placedEarly := func(seed string) []string {
			want, err := waitroom.DrawPlaces(waitroom.PrequeueRandom, seed, users)
			require.NoError(t, err)
			return want
		}
		seed, err := s.client.HGet(ctx, s.keys(room).draw, "seed").Result()
		require.NoError(t, err)
		want := placedEarly(seed)
		leftPlaced, leftEarly, again := want[10], want[drawChunk+10], want[drawChunk+20]
		st, err := peer.Status(ctx, room, want[0])
		require.NoError(t, err)
		require.Equal(t, waitroom.Status{State: waitroom.StateWaiting, Position: 1}, st, "placed: its final place")
		st, err = peer.Status(ctx, room, want[drawChunk+5])
		require.NoError(t, err)
		require.Equal(t, waitroom.StateScheduled, st.State, "not placed yet")
		require.NoError(t, peer.Leave(ctx, room, leftPlaced))
		require.NoError(t, peer.Leave(ctx, room, leftEarly))
		st, err = peer.Enter(ctx, room, again)
		require.NoError(t, err)
		require.Equal(t, waitroom.StateWaiting, st.State, "after the opening an ENTER takes a ticket")
		late, err := s.Enter(ctx, room, "late")
		require.NoError(t, err)
		require.Equal(t, waitroom.StateWaiting, late.State)

		advance(t, s, drawLease+100*time.Millisecond)
		got, err = peer.Admit(ctx, room)
		require.NoError(t, err)
		d, err = s.Draw(ctx, room)
		require.NoError(t, err)
		require.Equal(t, waitroom.DrawDone, d.State, "taken over")
		require.Equal(t, int64(n), d.Entrants)
		require.Equal(t, before.Commitment, d.Commitment)
		require.Equal(t, seed, d.Seed)
		digest, err := waitroom.DrawnDigest(d.Seed, want)
		require.NoError(t, err)
		require.Equal(t, digest, d.Digest)
		entrants, err := s.Entrants(ctx, room)
		require.NoError(t, err)
		require.Len(t, entrants, n)
		for i, e := range entrants {
			require.Equal(t, waitroom.Entrant{User: want[i], Place: int64(i + 1)}, e)
		}
		public, err := waitroom.PublicEntrants(d.Seed, entrants)
		require.NoError(t, err)
		diffs, err := waitroom.VerifyDraw(waitroom.DrawRecordCheck{Seed: d.Seed, Commitment: d.Commitment,
			Entrants: d.Entrants, Digest: d.Digest, SavedCommitment: before.Commitment}, public)
		require.NoError(t, err)
		require.Empty(t, diffs, "the draw verifies")
		got2, err := s.Admit(ctx, room)
		require.NoError(t, err, "the killed drawer's Store finds the draw done")
		got = append(got, got2...)

		// Exact positions: place less the leavers ahead, on every sub-shard.
		queued := slices.DeleteFunc(slices.Clone(want), func(u string) bool { return u == leftPlaced || u == leftEarly })
		admittedSoFar := map[string]bool{}
		for _, a := range got {
			admittedSoFar[a.User] = true
		}
		for i, u := range queued {
			if admittedSoFar[u] {
				continue
			}
			st, err := []*Store{s, peer}[i%2].Status(ctx, room, u)
			require.NoError(t, err, u)
			require.Equal(t, waitroom.StateWaiting, st.State, u)
			require.Equal(t, int64(i+1-len(got)), st.Position, "%s at place %d", u, i+1)
		}
		for _, u := range []string{leftPlaced, leftEarly} {
			_, err := s.Status(ctx, room, u)
			require.ErrorIs(t, err, waitroom.ErrNotInQueue, "%s left during the draw", u)
		}
		st, err = s.Status(ctx, room, "late")
		require.NoError(t, err)
		require.Equal(t, int64(len(queued)+1-len(got)), st.Position, "the new arrival after every entrant")

		// Admission in place order, then the new arrival.
		admitted := append([]waitroom.Admission(nil), got...)
		for i := 0; len(admitted) < len(queued)+1 && i < 200; i++ {
			advance(t, s, 100*time.Millisecond)
			more, err := []*Store{s, peer}[i%2].Admit(ctx, room)
			require.NoError(t, err)
			admitted = append(admitted, more...)
		}
		var order []string
		for _, a := range admitted {
			order = append(order, a.User)
		}
		require.Equal(t, append(queued, "late"), order)
	})

	// At the opening new arrivals and two admitters race, all on one
	// signal: whoever seals and sets the counter first, the early
	// arrivals are the draw's entrants, placed 1..P, and every new arrival
	// queues behind them at a place of its own.
	t.Run("OpeningRace", func(t *testing.T) {
		const early, late = 300, 200
		room := testenv.Unique("draw-")
		opensIn := time.Second
		_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: 3, Rate: 1, OpensAt: clockNow(t, s).Add(opensIn)})
		require.NoError(t, err)
		errs := atOnce(early, func(i int) error {
			_, err := []*Store{s, peer}[i%2].Enter(ctx, room, fmt.Sprintf("a%03d", i))
			return err
		})
		for _, err := range errs {
			require.NoError(t, err)
		}
		advance(t, s, opensIn+50*time.Millisecond)
		type outcome struct {
			st  waitroom.Status
			err error
		}
		out := atOnce(late+2, func(i int) outcome {
			who := []*Store{s, peer}[i%2]
			if i >= late {
				_, err := who.Admit(ctx, room)
				return outcome{err: err}
			}
			st, err := who.Enter(ctx, room, fmt.Sprintf("b%03d", i))
			return outcome{st, err}
		})
		latePlaces := map[int64]bool{}
		for i, o := range out {
			require.NoError(t, o.err)
			if i < late {
				require.Equal(t, waitroom.StateWaiting, o.st.State)
				require.Greater(t, o.st.Position, int64(early), "behind every early arrival")
				require.LessOrEqual(t, o.st.Position, int64(early+late))
				require.False(t, latePlaces[o.st.Position], "place %d given twice", o.st.Position)
				latePlaces[o.st.Position] = true
			}
		}
		d := drawDone(t, s, peer, room)
		require.Equal(t, int64(early), d.Entrants)
		entrants, err := s.Entrants(ctx, room)
		require.NoError(t, err)
		for i, e := range entrants {
			st, err := peer.Status(ctx, room, e.User)
			require.NoError(t, err)
			require.Equal(t, waitroom.Status{State: waitroom.StateWaiting, Position: int64(i + 1)}, st, e.User)
		}
	})

	// fifo: the early arrivals' places are their arrival order across the
	// sub-shards, told before the opening and kept by the draw.
	t.Run("FIFOAcrossSubShards", func(t *testing.T) {
		const n = 60
		room := testenv.Unique("draw-")
		opensIn := time.Second
		_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: 3, Rate: 1000, OpensAt: clockNow(t, s).Add(opensIn),
			PrequeueOrder: waitroom.PrequeueFIFO})
		require.NoError(t, err)
		var users []string
		for i := range n {
			u := fmt.Sprintf("f%03d", i)
			users = append(users, u)
			st, err := []*Store{s, peer}[i%2].Enter(ctx, room, u)
			require.NoError(t, err)
			require.Equal(t, waitroom.StateScheduled, st.State)
			require.Equal(t, int64(i+1), st.Position, "its place by arrival")
		}
		l, err := s.layout(ctx, room)
		require.NoError(t, err)
		subs := map[int]bool{}
		for _, u := range users {
			subs[l.of(u)] = true
		}
		require.Len(t, subs, 3, "the arrivals are on every sub-shard")
		require.NoError(t, s.Leave(ctx, room, users[0]))
		st, err := peer.Status(ctx, room, users[n-1])
		require.NoError(t, err)
		require.Equal(t, int64(n-1), st.Position, "the leaver is no longer ahead")

		advance(t, s, opensIn+50*time.Millisecond)
		var admitted []string
		for i := 0; len(admitted) < n-1 && i < 200; i++ {
			got, err := []*Store{s, peer}[i%2].Admit(ctx, room)
			require.NoError(t, err)
			for _, a := range got {
				admitted = append(admitted, a.User)
			}
			advance(t, s, 100*time.Millisecond)
		}
		require.Equal(t, users[1:], admitted, "admitted in arrival order")
	})

	// Early arrivals keep a room's layout: resharding while they wait for
	// the draw, on one shard or on several, is refused; once they left it
	// is not.
	t.Run("ReshardRefusedWhileEarlyArrivalsWait", func(t *testing.T) {
		for _, from := range []int{1, 2} {
			room := testenv.Unique("draw-")
			_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: from, OpensAt: clockNow(t, s).Add(time.Hour)})
			require.NoError(t, err)
			st, err := s.Enter(ctx, room, "early")
			require.NoError(t, err)
			require.Equal(t, waitroom.StateScheduled, st.State)
			reshard := func(c *waitroom.RoomConfig) error { c.Shards = 3; return nil }
			_, err = waitroom.ChangeRoom(ctx, peer, room, reshard)
			require.ErrorIs(t, err, waitroom.ErrShardsNotEmpty, "from %d shards", from)
			require.NoError(t, s.Leave(ctx, room, "early"))
			_, err = waitroom.ChangeRoom(ctx, peer, room, reshard)
			require.NoError(t, err, "from %d shards", from)
			st, err = s.Enter(ctx, room, "early")
			require.NoError(t, err)
			require.Equal(t, waitroom.StateScheduled, st.State, "scheduled on the new layout")
		}
	})

	// Before an opening a buyer (one order per buyer) takes no place, nor
	// does anyone in a sold-out room; a restock lets them wait again.
	t.Run("EarlyArrivalsOfASale", func(t *testing.T) {
		room := testenv.Unique("draw-")
		_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: 3, Rate: 1000, Stock: 1, OneOrderPerUser: true})
		require.NoError(t, err)
		_, err = s.Enter(ctx, room, "buyer")
		require.NoError(t, err)
		var got []waitroom.Admission
		for i := 0; len(got) == 0 && i < 100; i++ {
			advance(t, s, 100*time.Millisecond)
			got, err = s.Admit(ctx, room)
			require.NoError(t, err)
		}
		require.Len(t, got, 1)
		h, err := s.Claim(ctx, room, "buyer", got[0].Token)
		require.NoError(t, err)
		require.NoError(t, s.Complete(ctx, h))
		_, err = waitroom.ChangeRoom(ctx, s, room, func(c *waitroom.RoomConfig) error {
			c.OpensAt = clockNow(t, s).Add(time.Hour)
			return nil
		})
		require.NoError(t, err)
		_, err = peer.Enter(ctx, room, "buyer")
		require.ErrorIs(t, err, waitroom.ErrAlreadyOrdered)
		_, err = peer.Enter(ctx, room, "other")
		require.ErrorIs(t, err, waitroom.ErrSoldOut)
		_, err = waitroom.ChangeRoom(ctx, s, room, func(c *waitroom.RoomConfig) error { c.Stock = 2; return nil })
		require.NoError(t, err)
		st, err := peer.Enter(ctx, room, "other")
		require.NoError(t, err)
		require.Equal(t, waitroom.StateScheduled, st.State, "restocked")
	})

	// max_queue holds for early arrivals: each sub-shard takes its share.
	t.Run("QueueFullBeforeTheOpening", func(t *testing.T) {
		room := testenv.Unique("draw-")
		_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: 3, MaxQueue: 30, OpensAt: clockNow(t, s).Add(time.Hour)})
		require.NoError(t, err)
		errs := atOnce(100, func(i int) error {
			_, err := []*Store{s, peer}[i%2].Enter(ctx, room, fmt.Sprintf("q%03d", i))
			return err
		})
		full := 0
		for _, err := range errs {
			if err != nil {
				require.ErrorIs(t, err, waitroom.ErrQueueFull)
				full++
			}
		}
		stats, err := s.Stats(ctx, room)
		require.NoError(t, err)
		require.Equal(t, int64(30), stats.Waiting, "the room holds max_queue")
		require.Equal(t, 70, full)
		require.Equal(t, int64(70), stats.Full)
	})

	// A STATUS and a Leave are one call on the user's sub-shard, whatever
	// the user is (queued, an early arrival, neither) and whether or not
	// the room has a scheduled opening: the early arrivals' pre is read
	// in that call.
	t.Run("StatusAndLeaveOneCallOnTheSubShard", func(t *testing.T) {
		rec := &tagCalls{}
		client := openURL(t, url)
		client.AddHook(cmdHook(rec.record))
		counted := New(client, Options{Prefix: prefix})
		for _, scheduled := range []bool{false, true} {
			cfg := waitroom.RoomConfig{Shards: 3, Rate: 1000}
			if scheduled {
				cfg.OpensAt = clockNow(t, s).Add(time.Hour)
			}
			room := testenv.Unique("calls-")
			_, err := s.CreateRoom(ctx, room, cfg)
			require.NoError(t, err)
			l, err := counted.layout(ctx, room)
			require.NoError(t, err)
			want := waitroom.StateWaiting
			if scheduled {
				want = waitroom.StateScheduled
			}
			st, err := s.Enter(ctx, room, "here")
			require.NoError(t, err)
			require.Equal(t, want, st.State)
			// only is what fn sent to user's sub-shard, once it checked
			// that fn sent nothing to the other sub-shards.
			only := func(user string, fn func()) []string {
				t.Helper()
				calls := rec.during(fn)
				for i, k := range l.subs {
					if i != l.of(user) {
						require.Empty(t, calls[k.tag], "scheduled %v: %s's call sent nothing to another sub-shard", scheduled, user)
					}
				}
				return calls[l.subs[l.of(user)].tag]
			}
			one := []string{"fcall " + spreadStatusScript.Name()}
			require.Equal(t, one, only("nobody", func() {
				_, err := counted.Status(ctx, room, "nobody")
				require.ErrorIs(t, err, waitroom.ErrNotInQueue)
			}), "scheduled %v: a STATUS of a user not in the room", scheduled)
			require.Equal(t, one, only("here", func() {
				st, err := counted.Status(ctx, room, "here")
				require.NoError(t, err)
				require.Equal(t, want, st.State)
			}), "scheduled %v: a STATUS of a user in the room", scheduled)
			leave := []string{"fcall " + spreadLeaveScript.Name()}
			require.Equal(t, leave, only("nobody", func() { require.NoError(t, counted.Leave(ctx, room, "nobody")) }),
				"scheduled %v: a Leave of a user not in the room", scheduled)
			require.Equal(t, leave, rec.during(func() { require.NoError(t, counted.Leave(ctx, room, "here")) })[l.subs[l.of("here")].tag],
				"scheduled %v: a Leave of a user in the room", scheduled)
			_, err = counted.Status(ctx, room, "here")
			require.ErrorIs(t, err, waitroom.ErrNotInQueue, "scheduled %v: left", scheduled)
			stats, err := s.Stats(ctx, room)
			require.NoError(t, err)
			require.Zero(t, stats.Waiting, "scheduled %v", scheduled)
		}
	})

	// An opening set while users enter, all on one signal: either it is
	// refused (QUEUE_NOT_EMPTY) and every entrant waits with a ticket, or
	// it is set and every entrant is an early arrival, drawn at the
	// opening. Never some of each: a ticket handed out before the opening
	// and placed after it would stand ahead of the draw.
	t.Run("OpeningSetWhileUsersEnter", func(t *testing.T) {
		const rounds, callers, each = 15, 8, 6
		outcomes := map[string]int{}
		for round := range rounds {
			room := testenv.Unique("opening-")
			_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: 3, Rate: 1000})
			require.NoError(t, err)
			from := testenv.RoomConfig(t, s, room)
			to := from
			opensIn := time.Second
			to.OpensAt = clockNow(t, s).Add(opensIn)
			errs := atOnce(callers+1, func(i int) error {
				if i == callers {
					return s.UpdateRoom(ctx, room, from, to)
				}
				// The entrants start a few calls later from round to
				// round, so the update meets them at every step of its own.
				for range round % 5 {
					if _, err := peer.Status(ctx, room, "nobody"); !errors.Is(err, waitroom.ErrNotInQueue) {
						return fmt.Errorf("a status before entering: %v", err)
					}
				}
				for j := range each {
					st, err := []*Store{s, peer}[i%2].Enter(ctx, room, fmt.Sprintf("u%d-%d", i, j))
					if err != nil {
						return err
					}
					if st.State != waitroom.StateWaiting && st.State != waitroom.StateScheduled {
						return fmt.Errorf("entered: %s", st.State)
					}
				}
				return nil
			})
			for _, err := range errs[:callers] {
				require.NoError(t, err)
			}
			set := errs[callers] == nil
			if !set {
				require.ErrorIs(t, errs[callers], waitroom.ErrQueueNotEmpty)
			}
			states := map[waitroom.State]int{}
			for i := range callers {
				for j := range each {
					st, err := peer.Status(ctx, room, fmt.Sprintf("u%d-%d", i, j))
					require.NoError(t, err)
					states[st.State]++
				}
			}
			want := map[waitroom.State]int{waitroom.StateWaiting: callers * each}
			if set {
				want = map[waitroom.State]int{waitroom.StateScheduled: callers * each}
			}
			require.Equal(t, want, states, "round %d: the opening set %v", round, set)
			require.Equal(t, set, !testenv.RoomConfig(t, s, room).OpensAt.IsZero(), "round %d", round)
			outcomes[fmt.Sprint("set ", set)]++
			if !set {
				continue
			}
			advance(t, s, opensIn+50*time.Millisecond)
			d := drawDone(t, s, peer, room)
			require.Equal(t, int64(callers*each), d.Entrants, "round %d: every entrant drawn", round)
		}
		t.Logf("outcomes over %d rounds: %v", rounds, outcomes)
	})
}

// drawDone has admitter ticks make room's draw, once its opening came,
// and returns the published draw.
func drawDone(t *testing.T, s, admitter *Store, room string) waitroom.Draw {
	t.Helper()
	ctx := t.Context()
	for range 100 {
		if d, err := s.Draw(ctx, room); err == nil && d.State == waitroom.DrawDone {
			break
		}
		_, err := admitter.Admit(ctx, room)
		require.NoError(t, err)
		advance(t, s, 10*time.Millisecond)
	}
	d, err := s.Draw(ctx, room)
	require.NoError(t, err)
	require.Equal(t, waitroom.DrawDone, d.State)
	return d
}
