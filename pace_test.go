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

// TestETAFlashCrowd: a crowd arrives at 2.4 times the rate for 21 s into
// a room with no history, a fifth of it leaving the queue at its first
// poll, on a fake clock; the pace is read once a second, as the server
// does. The ETA each user gets at entry is within 10% of its wait for
// most, within 25% for 90%, and errs long by less than a second on
// average (the leavers not yet gone, learnt late as the queue grows).
func TestETAFlashCrowd(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := memstore.NewManualClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	s := memstore.New(memstore.Options{Now: clock.Now})
	const room = "flash"
	_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Rate: 100})
	require.NoError(t, err)
	cfg, err := s.RoomConfig(ctx, room)
	require.NoError(t, err)

	type waiter struct {
		leaveAt  time.Time // zero: stays
		left     bool
		entered  time.Time
		eta      time.Duration
		admitted time.Time
	}
	users := map[string]*waiter{}
	var order []string
	var pace waitroom.Pace
	var paceRead time.Time
	readPace := func() {
		st, err := s.Stats(ctx, room)
		require.NoError(t, err)
		pace, paceRead = st.Pace, clock.Now()
		pace.Waiting = st.Waiting
	}
	const (
		crowd   = 5000
		perTick = 6 // 240 a second against the rate of 100
		step    = 25 * time.Millisecond
	)
	start := clock.Now()
	for waiting := true; waiting || len(order) < crowd; {
		if clock.Now().Sub(paceRead) >= time.Second {
			readPace()
		}
		for i := 0; i < perTick && len(order) < crowd; i++ {
			u := fmt.Sprintf("u%05d", len(order))
			st, err := s.Enter(ctx, room, u)
			require.NoError(t, err)
			est := cfg.Estimate(st.Position, pace)
			w := &waiter{entered: clock.Now(), eta: est.ETA}
			if len(order)%5 == 2 {
				w.leaveAt = clock.Now().Add(cfg.PollAfter(st.Position, est.Rate))
			}
			users[u] = w
			order = append(order, u)
		}
		clock.Advance(step)
		for _, u := range order {
			if w := users[u]; !w.left && !w.leaveAt.IsZero() && w.admitted.IsZero() && !clock.Now().Before(w.leaveAt) {
				require.NoError(t, s.Leave(ctx, room, u))
				w.left = true
			}
		}
		got, err := s.Admit(ctx, room)
		require.NoError(t, err)
		for _, a := range got {
			users[a.User].admitted = clock.Now()
		}
		st, err := s.Stats(ctx, room)
		require.NoError(t, err)
		waiting = st.Waiting > 0
		require.Less(t, clock.Now().Sub(start), 5*time.Minute, "the queue empties")
	}

	var rel []float64
	var errSum float64
	for _, u := range order {
		w := users[u]
		if w.left {
			continue
		}
		require.False(t, w.admitted.IsZero(), u)
		wait := w.admitted.Sub(w.entered).Seconds()
		errSum += w.eta.Seconds() - wait
		rel = append(rel, math.Abs(w.eta.Seconds()-wait)/max(wait, 1e-3))
	}
	slices.Sort(rel)
	mean, p50, p90 := errSum/float64(len(rel)), rel[len(rel)/2], rel[len(rel)*9/10]
	t.Logf("%d users: mean error %+.3fs, relative p50 %.3f, p90 %.3f", len(rel), mean, p50, p90)
	require.LessOrEqual(t, p50, 0.10)
	require.LessOrEqual(t, p90, 0.25)
	require.Less(t, math.Abs(mean), 1.0)
}

// TestLeaveShareInAGrowingCrowd: a fifth of a crowd that began coming 8 s
// ago leaves 3 s after entering. The leavers of the last 3 s are not
// counted yet, and the share the pace gives counts them: a fifth, not the
// 0.14 the sums hold; once the crowd has come for minutes it is a fifth
// either way.
func TestLeaveShareInAGrowingCrowd(t *testing.T) {
	t.Parallel()
	const (
		step     = 50 * time.Millisecond
		arrivals = 5 // a tick: 100 a second
		leavers  = 1 // a tick, of the arrivals of 3 s before: a fifth
		delay    = 60 * arrivals
	)
	var sums waitroom.PaceSums
	ticks := 0
	run := func(until time.Duration) {
		for ; time.Duration(ticks)*step < until; ticks++ {
			pt := waitroom.PaceTick{Admitted: 4, Regular: 4, Arrivals: arrivals}
			if time.Duration(ticks)*step >= 3*time.Second {
				pt.Left, pt.LeftAfter = leavers, leavers*delay
			}
			sums.Add(step.Seconds(), pt, 80, true)
		}
	}
	run(8 * time.Second)
	young := sums.Pace(true)
	require.InDelta(t, delay, young.LeaveAfter, 1e-6)
	require.InDelta(t, 0.14, sums.Left/sums.Arrivals, 0.01, "the sums lag")
	require.InDelta(t, 0.2, young.LeaveShare, 0.005, "the pace does not")

	run(3 * time.Minute)
	require.InDelta(t, 0.2, sums.Pace(true).LeaveShare, 0.001)
}
