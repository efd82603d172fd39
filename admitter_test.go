package waitroom_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/memstore"
)

// sickShard is a store one of whose rooms hangs and whose room list fails
// after the first read, as when a cluster shard is black-holed: a fault at
// the store seam.
type sickShard struct {
	waitroom.Store
	sickRoom   string
	listed     atomic.Int64
	hungAdmits atomic.Int64
}

func (s *sickShard) Rooms(ctx context.Context) ([]string, error) {
	if s.listed.Add(1) > 1 {
		return nil, errors.New("CLUSTERDOWN the rooms set's shard is down")
	}
	return s.Store.Rooms(ctx)
}

func (s *sickShard) Admit(ctx context.Context, room string) ([]waitroom.Admission, error) {
	if room == s.sickRoom {
		s.hungAdmits.Add(1)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.Store.Admit(ctx, room)
}

// queuedRoom creates room with cfg and queues users u0 … u(n-1) in it.
func queuedRoom(t *testing.T, store waitroom.Store, room string, cfg waitroom.RoomConfig, n int) {
	t.Helper()
	_, err := store.CreateRoom(t.Context(), room, cfg)
	require.NoError(t, err)
	for i := range n {
		_, err := store.Enter(t.Context(), room, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
	}
}

// TestAdmitterRoomsTickApart: every room ticks on its own, so a room whose
// store hangs costs the others nothing, and a room list that cannot be
// read keeps the rooms already known admitting. Time is synctest's.
func TestAdmitterRoomsTickApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.Options{})
		for _, room := range []string{"healthy", "sick"} {
			queuedRoom(t, store, room, waitroom.RoomConfig{Rate: 100}, 500)
		}
		sick := &sickShard{Store: store, sickRoom: "sick"}
		var mu sync.Mutex
		admitted := map[string]int{}
		admitter := &waitroom.Admitter{Store: sick, Every: 100 * time.Millisecond, OnAdmit: func(room string, a []waitroom.Admission) {
			mu.Lock()
			admitted[room] += len(a)
			mu.Unlock()
		}}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- admitter.Run(ctx) }()

		time.Sleep(2*time.Second + 50*time.Millisecond)
		synctest.Wait()
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)

		// Ticks at 0.1 s (starts the bucket), 0.2 s … 2.0 s: 19 × 10.
		require.Equal(t, map[string]int{"healthy": 190}, admitted)
		require.Greater(t, sick.listed.Load(), int64(1), "the list was read again, and failed")
		require.Positive(t, sick.hungAdmits.Load())
	})
}

func TestAdmitterTickAdmitsEveryRoomOnce(t *testing.T) {
	t.Parallel()
	clock := memstore.NewManualClock(time.Unix(1_800_000_000, 0))
	store := memstore.New(memstore.Options{Now: clock.Now})
	for _, room := range []string{"a", "b"} {
		queuedRoom(t, store, room, waitroom.RoomConfig{Rate: 100}, 30)
	}
	admitter := &waitroom.Admitter{Store: store}
	n, err := admitter.Tick(t.Context())
	require.NoError(t, err)
	require.Zero(t, n, "the first tick starts the buckets")
	clock.Advance(100 * time.Millisecond)
	n, err = admitter.Tick(t.Context())
	require.NoError(t, err)
	require.Equal(t, 20, n, "one quota in each room")
}

// tickLog is a store seam that records every Admit and Work call of one
// admitter instance: who called, which room, when (synctest's clock).
type tickLog struct {
	waitroom.Store
	who string
	mu  *sync.Mutex
	log *[]tickCall
}

type tickCall struct {
	who, room string
	at        time.Duration // since the test began
	work      bool          // a Work probe, not an Admit
	admitted  int
	failed    bool
}

var testStart time.Time

func (s *tickLog) Admit(ctx context.Context, room string) ([]waitroom.Admission, error) {
	got, err := s.Store.Admit(ctx, room)
	s.mu.Lock()
	*s.log = append(*s.log, tickCall{who: s.who, room: room, at: time.Since(testStart), admitted: len(got), failed: err != nil})
	s.mu.Unlock()
	return got, err
}

func (s *tickLog) Work(ctx context.Context, rooms []string) ([]waitroom.Work, error) {
	s.mu.Lock()
	for _, room := range rooms {
		*s.log = append(*s.log, tickCall{who: s.who, room: room, at: time.Since(testStart), work: true})
	}
	s.mu.Unlock()
	return s.Store.Work(ctx, rooms)
}

// TestAdmitterHandoverKeepsRate: two instances share a room's ticks not at
// all (its owner ticks it alone); when the owner dies, the other takes over
// within a slice, and the room's admissions stay exactly rate × time from
// its first tick to its last, through the handover. Time is synctest's.
func TestAdmitterHandoverKeepsRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		testStart = time.Now()
		store := memstore.New(memstore.Options{})
		const rate = 175.0 // 17.5 per slice: a fractional quota
		var rooms []string
		for i := range 8 {
			room := fmt.Sprintf("r%d", i)
			rooms = append(rooms, room)
			_, err := store.CreateRoom(t.Context(), room, waitroom.RoomConfig{Rate: rate})
			require.NoError(t, err)
			for u := range 1000 {
				_, err := store.Enter(t.Context(), room, fmt.Sprintf("u%d", u))
				require.NoError(t, err)
			}
		}
		var mu sync.Mutex
		var calls []tickCall
		ctxA, stopA := context.WithCancel(t.Context())
		ctxB, stopB := context.WithCancel(t.Context())
		done := make(chan error, 2)
		for _, in := range []struct {
			id  string
			ctx context.Context
		}{{"a", ctxA}, {"b", ctxB}} {
			adm := &waitroom.Admitter{ID: in.id, Store: &tickLog{Store: store, who: in.id, mu: &mu, log: &calls}}
			go func() { done <- adm.Run(in.ctx) }()
		}

		time.Sleep(2 * time.Second)
		stopA() // a dies: silent from now on
		require.ErrorIs(t, <-done, context.Canceled)
		time.Sleep(2 * time.Second)
		stopB()
		require.ErrorIs(t, <-done, context.Canceled)
		synctest.Wait()

		owners := map[string]int{}
		for _, room := range rooms {
			owners[waitroom.Owner(room, []string{"a", "b"})]++
		}
		require.Positive(t, owners["a"], "some rooms are a's, else the test shows no handover")
		require.Positive(t, owners["b"])

		settled := 200 * time.Millisecond // both have seen each other
		handover := 2*time.Second + 150*time.Millisecond
		for _, room := range rooms {
			owner := waitroom.Owner(room, []string{"a", "b"})
			var first, last time.Duration = -1, 0
			admitted := 0
			for _, c := range calls {
				if c.room != room || c.work || c.failed {
					continue
				}
				if first < 0 {
					first = c.at
				}
				last = c.at
				admitted += c.admitted
				switch {
				case c.at > settled && c.at < 2*time.Second:
					require.Equal(t, owner, c.who, "room %s: only its owner ticks it", room)
				case c.at > handover:
					require.Equal(t, "b", c.who, "room %s: b took over", room)
				}
			}
			// The bucket starts empty at the first tick; from then on
			// exactly rate × time, whoever ticks.
			want := int(rate * (last - first).Seconds())
			if want != admitted {
				// Show the gaps and empty ticks that explain it.
				var prev time.Duration
				for _, c := range calls {
					if c.room == room && !c.work {
						if c.at-prev > waitroom.DefaultTick || c.admitted == 0 {
							t.Logf("%s ticked at %v (+%v): %d admitted", c.who, c.at, c.at-prev, c.admitted)
						}
						prev = c.at
					}
				}
			}
			require.Equal(t, want, admitted, "room %s: admitted over %s", room, last-first)
			st, err := store.Stats(t.Context(), room)
			require.NoError(t, err)
			require.EqualValues(t, admitted, st.Admitted)
			if owner == "a" {
				// b ticked it within a slice of a's lease running out.
				var afterA []time.Duration
				for _, c := range calls {
					if c.room == room && !c.work && c.who == "b" && c.at >= 2*time.Second {
						afterA = append(afterA, c.at)
					}
				}
				require.NotEmpty(t, afterA)
				require.LessOrEqual(t, afterA[0], 2*time.Second+waitroom.DefaultSlice+waitroom.DefaultTick,
					"room %s: taken over within a slice", room)
			}
		}
	})
}

// TestAdmitterParksIdleRooms: rooms nobody is in are never ticked, only
// named in one batched probe a second; a user entering one wakes it
// (Store.Wakes) and is admitted within a few ticks, and only that room
// ticks. With the wake lost the probe finds the user within a second.
func TestAdmitterParksIdleRooms(t *testing.T) {
	for _, tc := range []struct {
		name   string
		deaf   bool
		within time.Duration
	}{
		// The wake, then a tick that starts the fresh bucket, then one
		// that admits.
		{"woken", false, 2 * waitroom.DefaultTick},
		{"wake lost", true, time.Second + waitroom.DefaultSlice + 2*waitroom.DefaultTick},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testAdmitterParksIdleRooms(t, tc.deaf, tc.within) })
		})
	}
}

// deafStore loses every wake.
type deafStore struct{ waitroom.Store }

func (deafStore) Wakes(context.Context) <-chan string { return nil }

func testAdmitterParksIdleRooms(t *testing.T, deaf bool, within time.Duration) {
	testStart = time.Now()
	var store waitroom.Store = memstore.New(memstore.Options{})
	if deaf {
		store = deafStore{store}
	}
	const n = 100
	for i := range n {
		_, err := store.CreateRoom(t.Context(), fmt.Sprintf("idle%d", i), waitroom.RoomConfig{})
		require.NoError(t, err)
	}
	var mu sync.Mutex
	var calls []tickCall
	var admittedAt time.Duration
	adm := &waitroom.Admitter{Store: &tickLog{Store: store, who: "a", mu: &mu, log: &calls},
		OnAdmit: func(room string, a []waitroom.Admission) {
			mu.Lock()
			admittedAt = time.Since(testStart)
			mu.Unlock()
		}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- adm.Run(ctx) }()
	defer func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	}()

	time.Sleep(10 * time.Second)
	synctest.Wait()
	mu.Lock()
	admits, probes := 0, 0
	for _, c := range calls {
		if c.work {
			probes++
		} else {
			admits++
		}
	}
	calls = nil
	mu.Unlock()
	require.Zero(t, admits, "idle rooms are probed, never ticked")
	// One probe when the rooms were first seen, then one a second, each
	// naming every room.
	require.InDelta(t, (10*time.Second/emptyProbeEvery+1)*n, probes, float64(n))

	entered := time.Since(testStart)
	_, err := store.Enter(t.Context(), "idle7", "u1")
	require.NoError(t, err)
	time.Sleep(2 * time.Second)
	synctest.Wait()
	mu.Lock()
	defer mu.Unlock()
	require.Positive(t, admittedAt)
	require.LessOrEqual(t, admittedAt-entered, within, "how long a user entering an idle room waits")
	for _, c := range calls {
		require.True(t, c.work || c.room == "idle7", "only the woken room ticks: %+v", c)
	}
}

// emptyProbeEvery is the admitter's probe interval for rooms nobody is in.
const emptyProbeEvery = time.Second

// A room whose slice is shorter than the admitter's tick is still admitted
// at its rate: the admitter ticks each room often enough for its own slice,
// as the ETA promises. Time is synctest's.
func TestAdmitterTicksEachRoomForItsSlice(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.Options{})
		rooms := map[string]time.Duration{"fine": 10 * time.Millisecond, "coarse": time.Second}
		for room, slice := range rooms {
			queuedRoom(t, store, room, waitroom.RoomConfig{Rate: 100, Slice: slice}, 1000)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = (&waitroom.Admitter{Store: store, Every: 100 * time.Millisecond}).Run(ctx)
		}()
		time.Sleep(5 * time.Second)
		cancel()
		<-done
		for room := range rooms {
			st, err := store.Stats(t.Context(), room)
			require.NoError(t, err)
			// 5 s at 100/s; the first slice only starts the bucket.
			require.InDelta(t, 500, st.Admitted, 25, "room %s", room)
		}
	})
}

// TestAdmitterRecordsHistory: the admitter records the rooms it owns once
// a second, a quiet one (parked, nothing at its last probe, no wake since)
// only at its second of each minute, and once more when it turns quiet
// under this admitter; a user entering wakes it, and it is recorded every
// second until it is quiet again. Time is synctest's, so every sample's
// second is exact.
func TestAdmitterRecordsHistory(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.Options{})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		const room = "quiet-then-busy"
		queuedRoom(t, store, room, waitroom.RoomConfig{Rate: 10}, 0)
		t0 := time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = (&waitroom.Admitter{Store: store}).Run(ctx)
		}()

		// Quiet from the start; at 150.5 s a user enters and is admitted;
		// at 160.5 s the order spends the token, and the room is quiet
		// again from its next probe (160.975 s: idle rooms are probed
		// every second, at the tick before the recording one).
		time.Sleep(150*time.Second + 500*time.Millisecond)
		_, err := store.Enter(ctx, room, "buyer")
		require.NoError(t, err)
		time.Sleep(10 * time.Second)
		st, err := store.Status(ctx, room, "buyer")
		require.NoError(t, err)
		require.Equal(t, waitroom.StateAdmitted, st.State)
		hold, err := store.Claim(ctx, room, "buyer", st.Token)
		require.NoError(t, err)
		require.NoError(t, store.Complete(ctx, hold))
		time.Sleep(250*time.Second - time.Since(t0))
		cancel()
		<-done

		var want []time.Duration
		// A quiet spell's samples: at the room's second of each minute,
		// the same for every admitter (QuietDue).
		quiet := func(from, until time.Duration) {
			for at := waitroom.QuietDue(room, t0.Add(from)); at.Sub(t0) < until; at = waitroom.QuietDue(room, at) {
				want = append(want, at.Sub(t0))
			}
		}
		// Gained quiet: nothing at once, the room's minute is kept.
		quiet(0, 150*time.Second+500*time.Millisecond)
		require.NotEmpty(t, want, "a quiet room is recorded within every minute")
		for at := 151 * time.Second; at < 161*time.Second; at += time.Second {
			want = append(want, at)
		}
		// Turned quiet under this admitter: a sample at once, then its
		// minute again.
		want = append(want, 161*time.Second)
		quiet(161*time.Second, 250*time.Second)

		got, err := store.History(t.Context(), room, time.Time{})
		require.NoError(t, err)
		var at []time.Duration
		for _, s := range got {
			at = append(at, s.At.Sub(t0))
		}
		require.Equal(t, want, at, "the samples' seconds")
		for _, s := range got {
			switch d := s.At.Sub(t0); {
			case d < 151*time.Second:
				require.Equal(t, waitroom.Sample{At: s.At, Rate: 10}, s, "quiet, before the buyer")
			case d < 161*time.Second:
				require.Equal(t, waitroom.Sample{At: s.At, Rate: 10, LiveTokens: 1, Admitted: 1}, s, "the buyer's token")
			default:
				require.Equal(t, waitroom.Sample{At: s.At, Rate: 10, Admitted: 1}, s, "quiet, after the order")
			}
		}
	})
}

// TestAdmitterHandsOverQuietRoomsWithoutSamples: a second admitter
// joining takes about half the rooms; those it gains quiet keep their
// second of the minute, so a handover costs no sample of each room it
// moves, and no minute is missed. Time is synctest's.
func TestAdmitterHandsOverQuietRoomsWithoutSamples(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.Options{})
		var rooms []string
		for i := range 20 {
			rooms = append(rooms, fmt.Sprintf("quiet-%02d", i))
			queuedRoom(t, store, rooms[i], waitroom.RoomConfig{Rate: 5}, 0)
		}
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		run := func(id string) {
			wg.Go(func() { _ = (&waitroom.Admitter{Store: store, ID: id}).Run(ctx) })
		}
		t0 := time.Now()
		run("a")
		time.Sleep(100*time.Second + 500*time.Millisecond)
		run("b")
		time.Sleep(200*time.Second - time.Since(t0))
		cancel()
		wg.Wait()

		peers, err := store.Admitters(t.Context(), "reader", time.Millisecond)
		require.NoError(t, err)
		require.Equal(t, []string{"a", "b", "reader"}, peers)
		peers = peers[:2]
		moved := 0
		for _, room := range rooms {
			if waitroom.Owner(room, peers) == "b" {
				moved++
			}
			var want, got []time.Duration
			for at := waitroom.QuietDue(room, t0); at.Sub(t0) < 200*time.Second; at = waitroom.QuietDue(room, at) {
				want = append(want, at.Sub(t0))
			}
			samples, err := store.History(t.Context(), room, time.Time{})
			require.NoError(t, err)
			for _, s := range samples {
				got = append(got, s.At.Sub(t0))
			}
			require.Equal(t, want, got, "room %s", room)
		}
		require.Positive(t, moved, "b took rooms over")
		require.Less(t, moved, len(rooms), "a kept some")
	})
}
