package waitroom_test

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/memstore"
)

// TestETASteadyState: a room at a steady rate where every fifth user goes
// silent after entering (and is skipped at the head), on a fake clock; and
// the same where another fifth leaves the queue at its first poll after
// 10 s, with twice the arrivals. The ETA each user is given at entry, from the
// store's measured pace, is within 10% of the wait it really had for most
// users, and its 10–90% range holds most real waits. Then an operator
// doubles the rate: the ETA halves at once, with no new measurement.
func TestETASteadyState(t *testing.T) {
	t.Parallel()
	for _, leavers := range []bool{false, true} {
		t.Run(fmt.Sprintf("leavers=%t", leavers), func(t *testing.T) {
			t.Parallel()
			testETASteadyState(t, leavers)
		})
	}
}

func testETASteadyState(t *testing.T, leavers bool) {
	ctx := t.Context()
	clock := memstore.NewManualClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	s := memstore.New(memstore.Options{Now: clock.Now})
	const room = "steady"
	_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Rate: 20, AbandonAfter: 10 * time.Second})
	require.NoError(t, err)

	type waiter struct {
		silent     bool
		leaver     bool // leaves the queue at its first poll 10 s after entering
		left       bool
		entered    time.Time
		est        waitroom.Estimate
		measured   bool // the estimate came from a measured pace
		admittedAt time.Time
	}
	users := map[string]*waiter{}
	var order []string
	enter := func(i int) {
		u := fmt.Sprintf("u%05d", i)
		st, err := s.Enter(ctx, room, u)
		require.NoError(t, err)
		stats, err := s.Stats(ctx, room)
		require.NoError(t, err)
		cfg, err := s.RoomConfig(ctx, room)
		require.NoError(t, err)
		users[u] = &waiter{
			silent: i%5 == 0, leaver: leavers && i%5 == 2, entered: clock.Now(),
			est:      cfg.Estimate(st.Position, stats.Pace),
			measured: stats.Pace.Measured >= waitroom.MinPaceMeasured,
		}
		order = append(order, u)
	}
	next := 0
	for range 1000 { // a queue of 40 s at the start
		enter(next)
		next++
	}
	const step = 50 * time.Millisecond
	start := clock.Now()
	for tick := 1; tick <= 2400; tick++ { // two minutes
		clock.Advance(step)
		enter(next) // 20 arrivals a second, as many as the rate
		next++
		if leavers { // and as many again, a fifth of whom leave
			enter(next)
			next++
		}
		got, err := s.Admit(ctx, room)
		require.NoError(t, err)
		for _, a := range got {
			w := users[a.User]
			w.admittedAt = clock.Now()
			if !w.silent { // the open page shows "your turn" and confirms
				for range 2 {
					_, err := s.Status(ctx, room, a.User)
					require.NoError(t, err)
				}
			}
		}
		if tick%40 == 0 { // every 2 s the open pages poll
			for _, u := range order {
				w := users[u]
				switch {
				case w.silent || w.left || !w.admittedAt.IsZero():
				case w.leaver && clock.Now().Sub(w.entered) >= 10*time.Second:
					require.NoError(t, s.Leave(ctx, room, u))
					w.left = true
				default:
					_, err := s.Status(ctx, room, u)
					require.NoError(t, err)
				}
			}
		}
	}

	var relErrs []float64
	inRange := 0
	for _, u := range order {
		w := users[u]
		// The steady state: after the first silent users were skipped and
		// the pace window (30 s) has seen it.
		if !w.measured || w.admittedAt.IsZero() || w.left || w.entered.Sub(start) < 45*time.Second {
			continue
		}
		wait := w.admittedAt.Sub(w.entered)
		if w.silent {
			// Reached the head before its silence counted as gone.
			require.LessOrEqual(t, wait, 10*time.Second, u)
			continue
		}
		relErrs = append(relErrs, math.Abs(w.est.ETA.Seconds()-wait.Seconds())/wait.Seconds())
		if wait >= w.est.Low && wait <= w.est.High {
			inRange++
		}
	}
	require.Greater(t, len(relErrs), 200, "enough users entered under a measured pace and were admitted")
	slices.Sort(relErrs)
	p50, p90 := relErrs[len(relErrs)/2], relErrs[len(relErrs)*9/10]
	share := float64(inRange) / float64(len(relErrs))
	t.Logf("%d users: relative error p50 %.3f, p90 %.3f; wait within the range: %.2f", len(relErrs), p50, p90, share)
	require.LessOrEqual(t, p50, 0.10)
	require.LessOrEqual(t, p90, 0.25)
	require.GreaterOrEqual(t, share, 0.8)

	// The operator doubles the rate: the next answer's ETA halves.
	stats, err := s.Stats(ctx, room)
	require.NoError(t, err)
	silentAtHead := 0.2 // of those who reach the head, leavers never do
	if leavers {
		silentAtHead = 0.25
		require.InDelta(t, 0.2, stats.Pace.LeaveShare, 0.05)
	}
	require.InDelta(t, silentAtHead, stats.Pace.AbandonShare, 0.05)
	require.InDelta(t, 1.0, stats.Pace.Efficiency, 0.05)
	before, err := s.RoomConfig(ctx, room)
	require.NoError(t, err)
	after, err := waitroom.ChangeRoom(ctx, s, room, func(c *waitroom.RoomConfig) error {
		c.Rate *= 2
		return nil
	})
	require.NoError(t, err)
	const position = 200
	pace := stats.Pace
	pace.Waiting = stats.Waiting // as the server reads it: a user with many behind
	was, now := before.Estimate(position, pace), after.Estimate(position, pace)
	require.InDelta(t, 0.5, now.ETA.Seconds()/was.ETA.Seconds(), 0.01, "%v → %v", was.ETA, now.ETA)
	require.Less(t, now.High, was.Low)
}

// TestEstimate: before a measurement the configured rate stands; a
// measured pace moves the ETA by its efficiency and abandonment; the range
// surrounds the ETA; a tiny rate does not overflow.
func TestEstimate(t *testing.T) {
	t.Parallel()
	cfg := waitroom.RoomConfig{Rate: 10}.WithDefaults()
	e := cfg.Estimate(101, waitroom.Pace{})
	require.Equal(t, 10*time.Second+100*time.Millisecond, e.ETA, "101 at the configured 10/s")
	require.Equal(t, 10.0, e.Rate)
	unmeasured := cfg.Estimate(101, waitroom.Pace{Efficiency: 0.5, Measured: time.Second})
	require.Equal(t, e.ETA, unmeasured.ETA, "a second of measurement is not enough")

	half := cfg.Estimate(101, waitroom.Pace{Efficiency: 0.5, Measured: time.Minute})
	require.Equal(t, 2*e.ETA, half.ETA)
	gone := cfg.Estimate(101, waitroom.Pace{Efficiency: 1, AbandonShare: 0.5, Measured: time.Minute})
	require.Equal(t, 5100*time.Millisecond, gone.ETA, "half of the 100 ahead are gone: 51 at 10/s")
	for _, est := range []waitroom.Estimate{e, half, gone} {
		require.Less(t, est.Low, est.ETA)
		require.Greater(t, est.High, est.ETA)
	}
	require.Zero(t, cfg.Estimate(0, waitroom.Pace{}))

	// A fifth of arrivals leave, 100 arrivals after their own: a newcomer
	// has 20 of them ahead, a user with 50 behind 10, one with 100 behind
	// none left to go.
	leavers := waitroom.Pace{Efficiency: 1, Measured: time.Minute, LeaveShare: 0.2, LeaveAfter: 100}
	require.Equal(t, 48100*time.Millisecond, cfg.Estimate(501, leavers).ETA, "480 of the 500 ahead stay")
	leavers.Waiting = 551
	require.Equal(t, 49100*time.Millisecond, cfg.Estimate(501, leavers).ETA)
	leavers.Waiting = 601
	require.Equal(t, 50100*time.Millisecond, cfg.Estimate(501, leavers).ETA)
	leavers.Waiting, leavers.LeaveAfter = 0, 1e6
	require.Equal(t, 25100*time.Millisecond, cfg.Estimate(501, leavers).ETA, "at most half of those ahead leave")

	tiny := waitroom.RoomConfig{Rate: 1e-9}.WithDefaults().Estimate(waitroom.MaxMaxQueue, waitroom.Pace{})
	require.Equal(t, waitroom.MaxETA, tiny.ETA)
	require.Positive(t, tiny.High)
}

// TestEstimateNoShows: where no-shows are made up, the ETA counts on the
// pace the room settles at, 1 ÷ (1 − the no-show share) times the rate;
// right after admissions begin it corrects the share for the no-shows not
// found yet, and before any admission is a first-use deadline old it
// knows nothing of them.
func TestEstimateNoShows(t *testing.T) {
	t.Parallel()
	cfg := waitroom.RoomConfig{Rate: 10, FirstUseWithin: 10 * time.Second}.WithDefaults()
	settled := waitroom.Pace{Efficiency: 1, MakeUp: true, NoShowShare: 0.3, Measured: waitroom.PaceWindow}
	require.InDelta(t, 7.07, cfg.Estimate(101, settled).ETA.Seconds(), 1e-6, "101 at 10 ÷ 0.7 a second")
	settled.MakeUp = false // MaxActive: the slots are refilled within the rate
	require.Equal(t, 10100*time.Millisecond, cfg.Estimate(101, settled).ETA)

	young := waitroom.Pace{Efficiency: 1, MakeUp: true, NoShowShare: 0.2, Measured: waitroom.MinPaceMeasured}
	require.Equal(t, 10100*time.Millisecond, cfg.Estimate(101, young).ETA, "no admission is a first-use deadline old yet")
	// Measured over 80% of the window: the no-shows found belong to the
	// admissions of the first part only, so the share is more than 0.2.
	young.Measured = waitroom.PaceWindow * 8 / 10
	require.Less(t, cfg.Estimate(101, young).ETA, 8080*time.Millisecond)
	require.Greater(t, cfg.Estimate(101, young).ETA, 5050*time.Millisecond, "the make-up at most doubles the rate")
}
