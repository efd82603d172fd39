package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
)

// testPaceIsMeasured: the store measures how admissions really went, from
// every instance's ticks: the admitted rate over the configured one, and
// the share of the head found gone.
func testPaceIsMeasured(t *testing.T, h Harness) {
	if h.FakeClock {
		r := paceRound(t, h)
		r.requireShare(t)
		// Admissions came at the rate for the whole span, but the first
		// tick only starts the bucket.
		require.InDelta(t, 1.0, r.pace.Efficiency, 0.1, "%+v", r.pace)
		return
	}
	// Real time: the ticks may lag on a loaded machine, never lead. Ticks
	// that lag past a slice lose their share, and a stretched window
	// weighs the head's early skips less, so the skipped share is judged
	// on a round that ran near its planned time (the third whatever it
	// took), and the efficiency's lower line against what the ticks' gaps
	// could carry at all (reachable).
	for attempt := 1; ; attempt++ {
		r := paceRound(t, h)
		require.LessOrEqual(t, float64(r.admitted), paceRate*r.elapsed.Seconds()+paceRate*0.1+1)
		require.Less(t, r.pace.Efficiency, 1.1, "%+v", r.pace)
		if r.elapsed < paceTicksPlanned*3/2 || attempt == 3 {
			r.requireShare(t)
			require.Greater(t, r.pace.Efficiency, 0.5*r.reachable, "the efficiency is too low: %+v after %s (planned %s, attempt %d; the gaps could carry %.2f of the rate)",
				r.pace, r.elapsed, paceTicksPlanned, attempt, r.reachable)
			return
		}
		t.Logf("attempt %d ran %s instead of about %s on a loaded machine: again", attempt, r.elapsed, paceTicksPlanned)
	}
}

const (
	paceRate         = 30.0
	paceTicks        = 75
	paceTicksPlanned = paceTicks * 20 * time.Millisecond
)

// paceRound queues 100 users in a new paused room (every fifth silent),
// opens it once the silent ones are gone, and has two instances tick it
// for about a second and a half: the measured pace, the admissions, the
// silent users the ticks skipped and how long the ticks took.
func paceRound(t *testing.T, h Harness) paceResult {
	ctx := ctxFor(t)
	// Paused while the silent users turn silent: a pause is not measured.
	room := newRoom(t, h, waitroom.RoomConfig{Rate: paceRate, AbandonAfter: abandonAfter, State: waitroom.RoomPaused})
	var pollers []string
	for i := range 100 {
		_, err := h.Store.Enter(ctx, room, user(i))
		require.NoError(t, err)
		if i%5 != 0 { // every fifth stays silent
			pollers = append(pollers, user(i))
		}
	}
	stats := testenv.Stats(t, h.Store, room)
	require.Equal(t, waitroom.Pace{}, stats.Pace, "nothing measured before the first tick")
	pollWhileSilent(t, h, room, pollers...)
	_, err := waitroom.ChangeRoom(ctx, h.Store, room, func(c *waitroom.RoomConfig) error {
		c.State = waitroom.RoomOpen
		return nil
	})
	require.NoError(t, err)

	// Two instances tick; the pace is the room's.
	peer := h.Peer(t)
	admitted := 0
	start := h.now()
	// A tick carries at most about two slices of allowance (a slice's
	// carry and a slice's quota); the pace counts each gap up to
	// MaxPaceStep.
	var carried, counted time.Duration
	last := start
	for i := range paceTicks {
		s := h.Store
		if i%2 == 1 {
			s = peer
		}
		got, err := s.Admit(ctx, room)
		require.NoError(t, err)
		now := h.now()
		if i > 0 {
			gap := now.Sub(last)
			carried += min(gap, 2*waitroom.DefaultSlice)
			counted += min(gap, waitroom.MaxPaceStep)
		}
		last = now
		admitted += len(got)
		h.Advance(t, 20*time.Millisecond)
		if i%10 == 9 { // the pollers go on polling
			for _, u := range pollers {
				_, err := h.Store.Status(ctx, room, u)
				require.True(t, err == nil || errors.Is(err, waitroom.ErrNotInQueue), "%v", err)
			}
		}
	}
	elapsed := h.now().Sub(start)
	stats = testenv.Stats(t, h.Store, room)
	require.Positive(t, stats.Abandoned)
	require.Greater(t, stats.Pace.Measured, time.Second/2, "the waiting time of the ticks (decayed over the window)")
	reachable := 1.0
	if counted > 0 {
		reachable = min(1, carried.Seconds()/counted.Seconds())
	}
	return paceResult{pace: stats.Pace, admitted: admitted, skipped: int(stats.Abandoned), elapsed: elapsed, reachable: reachable}
}

type paceResult struct {
	pace              waitroom.Pace
	admitted, skipped int
	elapsed           time.Duration
	// reachable is the share of the rate the ticks' gaps could carry on
	// the real clock: 1 when every tick came within two slices.
	reachable float64
}

// requireShare: the measured share of the head found gone is the share
// the ticks really skipped.
func (r paceResult) requireShare(t *testing.T) {
	t.Helper()
	require.InDelta(t, float64(r.skipped)/float64(r.skipped+r.admitted), r.pace.AbandonShare, 0.05, "%+v", r.pace)
}

// testLeaversAreMeasured: users who leave the queue are counted for the
// pace, with how many came after each before it left, from the ticks of
// any instance; leaving twice, or leaving when admitted or never queued,
// counts nothing.
func testLeaversAreMeasured(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 10})
	for i := range 100 {
		_, err := h.Store.Enter(ctx, room, user(i))
		require.NoError(t, err)
	}
	got, err := h.Store.Admit(ctx, room) // starts the bucket: admits nobody
	require.NoError(t, err)
	require.Empty(t, got)
	for i := 100; i < 140; i++ { // 40 arrivals in the measured tick
		_, err := h.Store.Enter(ctx, room, user(i))
		require.NoError(t, err)
	}
	for i := 50; i < 60; i++ { // user i has 139 − i arrivals after it
		require.NoError(t, h.Store.Leave(ctx, room, user(i)))
		require.NoError(t, h.Store.Leave(ctx, room, user(i)))
	}
	require.NoError(t, h.Store.Leave(ctx, room, "never-queued"))
	h.Advance(t, 100*time.Millisecond)
	admitted, err := h.Peer(t).Admit(ctx, room)
	require.NoError(t, err)
	require.NotEmpty(t, admitted)
	require.NoError(t, h.Store.Leave(ctx, room, admitted[0].User))

	stats, err := h.Store.Stats(ctx, room)
	require.NoError(t, err)
	p := stats.Pace
	require.InDelta(t, 10.0/40, p.LeaveShare, 1e-9, "%+v", p)
	require.InDelta(t, 84.5, p.LeaveAfter, 1e-9, "%+v", p) // mean of 89 … 80
}

// testNoShowsAreMeasured: tokens found expired unconfirmed count in the
// pace as no-shows, over the admissions, whichever operation found them
// (here a late claim, not the admitter's cleanup); the
// pace says whether the room makes them up (no MaxActive).
func testNoShowsAreMeasured(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	for _, maxActive := range []int{0, 1000} {
		room := newRoom(t, h, waitroom.RoomConfig{Rate: 50, FirstUseWithin: time.Second, MaxActive: maxActive})
		for i := range 200 {
			_, err := h.Store.Enter(ctx, room, user(i))
			require.NoError(t, err)
		}
		got := admitAll(t, h, room, 2)
		for i, a := range got {
			if i%2 == 0 {
				confirm(t, h.Store, room, a)
			}
		}
		h.Advance(t, waitroom.MinFirstUseWithin+100*time.Millisecond)
		// The holders come too late: their claims find the no-shows before
		// the admitter's cleanup does.
		for i, a := range got {
			if i%2 == 1 {
				_, err := h.Store.Claim(ctx, room, a.User, a.Token)
				require.ErrorIs(t, err, waitroom.ErrTokenNotFound)
			}
		}
		_, err := h.Peer(t).Admit(ctx, room)
		require.NoError(t, err)

		stats, err := h.Store.Stats(ctx, room)
		require.NoError(t, err)
		require.Equal(t, int64(len(got)/2), stats.NoShows)
		p := stats.Pace
		require.Positive(t, p.NoShowShare, "%+v", p)
		require.LessOrEqual(t, p.NoShowShare, float64(len(got)/2)/float64(len(got)), "no more than the unconfirmed share of the first admissions: %+v", p)
		require.Equal(t, maxActive == 0, p.MakeUp, "%+v", p)
	}
}
