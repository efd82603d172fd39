package storetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

// testAdmitsRateTimesElapsed is the bucket's property, at every rate and
// slice the settings accept: a room with users waiting admits rate ×
// elapsed within one user over any span, however slow the rate (below one
// user per slice the carry must add up to a whole user), and a room that
// ran dry or was parked saves up no burst.
//
// Each case draws a rate (1/3600 to 10,000/s), a slice (10 ms to 10 s) and
// a tick period that earns at most one quota, the admitter's cadence;
// ticks come late by up to a slice on a schedule that does not drift.
// Spells with a full queue alternate with spells in which it runs dry,
// some of them parked (no tick for up to hours). Within a full spell,
// counted from the last tick before it (when nobody waited, so the bucket
// carries at most one user) or from its first tick after a park:
//
//	rate × (scheduled time − start) − 1 ≤ admitted ≤ rate × (actual time − start) + 1
//
// a tick's lateness excused, nothing admitted ahead of the rate beyond
// one user; and every tick within its quota.
func testAdmitsRateTimesElapsed(t *testing.T, h Harness) {
	if h.AdmitAfter == nil {
		// Every store can move its bucket's clock; a harness without it is a
		// missing check, not one to skip.
		t.Fatal("Harness.AdmitAfter is nil: the property needs simulated hours")
	}
	cases := 12
	if h.FakeClock {
		cases = 300
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 23))
	fixed := []waitroom.RoomConfig{
		{Rate: waitroom.MinRate, Slice: waitroom.MinSlice},
		{Rate: waitroom.MinRate, Slice: waitroom.MaxSlice},
		{Rate: 0.5}, {Rate: 4}, {Rate: 5}, {Rate: 9},
		{Rate: 10_000, Slice: waitroom.MinSlice},
		{Rate: 100, Slice: waitroom.MaxSlice},
	}
	for i := range cases {
		var cfg waitroom.RoomConfig
		if i < len(fixed) {
			cfg = fixed[i]
		} else {
			cfg = randomRate(rng)
		}
		seed := rng.Uint64()
		t.Run(fmt.Sprintf("%g/s_%s", cfg.Rate, cmpSlice(cfg)), func(t *testing.T) {
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("ticks drawn from seed %d", seed)
				}
			})
			rateRun(t, h, cfg, rand.New(rand.NewPCG(seed, 1)))
		})
	}
}

func cmpSlice(cfg waitroom.RoomConfig) time.Duration { return cfg.WithDefaults().Slice }

// randomRate draws a rate and slice log-uniformly within the bounds, with
// at most MaxTickQuota users a slice.
func randomRate(rng *rand.Rand) waitroom.RoomConfig {
	logUniform := func(lo, hi float64) float64 {
		return math.Exp(math.Log(lo) + rng.Float64()*(math.Log(hi)-math.Log(lo)))
	}
	for {
		cfg := waitroom.RoomConfig{
			Rate:  math.Round(logUniform(waitroom.MinRate, 10_000)*1e6) / 1e6,
			Slice: time.Duration(logUniform(float64(waitroom.MinSlice), float64(waitroom.MaxSlice))).Round(time.Millisecond),
		}
		if cfg.WithDefaults().Validate() == nil {
			return cfg
		}
	}
}

// rateRun runs one case of testAdmitsRateTimesElapsed.
func rateRun(t *testing.T, h Harness, cfg waitroom.RoomConfig, rng *rand.Rand) {
	ctx := ctxFor(t)
	// No-shows are not made up (MaxActive) and nobody waits long enough to
	// be taken for gone: every admission is the rate's.
	cfg.MaxActive = waitroom.MaxMaxActive
	cfg.AbandonAfter = waitroom.MaxAbandonAfter
	cfg = cfg.WithDefaults()
	room := newRoom(t, h, cfg)
	rate, slice := cfg.Rate, cfg.Slice.Seconds()
	quota := cfg.TickQuota()

	// A tick period that earns between a tenth of a quota and a whole one,
	// kept to about 3,000 users a case on a real store and 30,000 on a
	// fake one.
	budget, ticks := 3000.0, 120
	if h.FakeClock {
		budget, ticks = 30_000, 400
	}
	perTick := min(float64(quota), budget/float64(ticks)) * (0.1 + 0.9*rng.Float64())
	period := perTick / rate
	// Late by up to a slice; on a real store by up to half a slice (and
	// half a period), so that the moments its calls take stay within it.
	lateness := 0.99 * slice
	if !h.FakeClock {
		lateness = 0.5 * min(slice, period)
	}

	entered, waiting := 0, 0
	enter := func(n int) {
		for range n {
			_, err := h.Store.Enter(ctx, room, fmt.Sprintf("user-%07d", entered))
			require.NoError(t, err)
			entered++
			waiting++
		}
	}
	// Users in a slow room wait simulated hours: they poll, as a page does.
	poll := func() {
		for i := entered - waiting; i < entered && waiting <= 4; i++ {
			_, err := h.Store.Status(ctx, room, fmt.Sprintf("user-%07d", i))
			require.NoError(t, err)
		}
	}

	n, _ := h.AdmitAfter(t, room, 0) // starts the bucket
	require.Zero(t, n)
	// Seconds since the bucket started: the last tick, and the start of
	// the schedule, which a park moves on.
	var now, origin float64
	step, admitted := 0, 0
	// The spell's start: a tick after which nobody waited (the bucket
	// carries at most one user), or the first after a park (at most one
	// slice and one user); carried bounds what may go ahead of the rate.
	startAt, startAdmitted, carried := 0.0, 0, 1.0
	lateSince := 0.0 // the latest tick since the start, past its schedule
	for tick := range ticks {
		crowd := (tick/40)%2 == 0 // 40 ticks with a full queue, then 40 running dry
		parked := false
		if crowd && waiting == 0 && rng.IntN(3) == 0 {
			// Parked: no tick for up to six hours, then a crowd.
			origin, step = now+rng.Float64()*6*3600, 0
			parked = true
		}
		if crowd {
			enter(quota + 1 - waiting)
		}
		step++
		scheduled := origin + float64(step)*period
		// Whole µs: the stores' buckets count in them.
		wait := time.Duration(math.Max(scheduled+lateness*rng.Float64()-now, 0)*1e6) * time.Microsecond
		poll()
		got, counted := h.AdmitAfter(t, room, wait)
		now += counted.Seconds()
		require.LessOrEqual(t, got, quota, "tick %d: within the quota", tick)
		require.LessOrEqual(t, got, waiting)
		admitted += got
		waiting -= got
		lateSince = max(lateSince, now-scheduled)

		switch {
		case waiting == 0:
			startAt, startAdmitted, carried, lateSince = now, admitted, 1, 0
		case parked:
			startAt, startAdmitted, carried, lateSince = now, admitted, rate*slice+1, 0
		default:
			// Every tick since the start left users waiting: each admitted
			// all the bucket allowed, within its quota.
			span := float64(admitted - startAdmitted)
			// The store keeps the rate to a millionth of a user per second.
			slack := 1e-6*(now-startAt) + 1e-6
			require.LessOrEqual(t, span, rate*(now-startAt)+carried+slack,
				"tick %d: %g admitted in %.6fs at %g/s (slice %gs, period %gs): ahead of the rate", tick, span, now-startAt, rate, slice, period)
			if lateSince < slice { // a real store's calls may take longer still
				require.GreaterOrEqual(t, span, rate*(scheduled-startAt)-1-slack,
					"tick %d: %g admitted in %.6fs at %g/s (slice %gs, period %gs): behind the rate", tick, span, scheduled-startAt, rate, slice, period)
			}
		}
	}
}
