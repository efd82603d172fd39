package admin

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/adminapi"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/memstore"
)

// readCounter counts the store reads the sampler makes, and can make them
// fail: the seam between the sampler and a real memstore.
type readCounter struct {
	waitroom.Store
	rooms, configs, stats atomic.Int64
	fail                  atomic.Bool
}

func (c *readCounter) Rooms(ctx context.Context) ([]string, error) {
	c.rooms.Add(1)
	if c.fail.Load() {
		return nil, waitroom.ErrStoreUnavailable
	}
	return c.Store.Rooms(ctx)
}

func (c *readCounter) RoomConfig(ctx context.Context, room string) (waitroom.RoomConfig, error) {
	c.configs.Add(1)
	return c.Store.RoomConfig(ctx, room)
}

func (c *readCounter) Stats(ctx context.Context, room string) (waitroom.Stats, error) {
	c.stats.Add(1)
	return c.Store.Stats(ctx, room)
}

func (c *readCounter) reads() [3]int64 {
	return [3]int64{c.rooms.Load(), c.configs.Load(), c.stats.Load()}
}

type samplerFixture struct {
	t       *testing.T
	clock   *memstore.ManualClock
	store   *memstore.Store
	counter *readCounter
	sampler *sampler
}

func newSamplerFixture(t *testing.T, rooms map[string]waitroom.RoomConfig) *samplerFixture {
	t.Helper()
	c := memstore.NewManualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	store := memstore.New(memstore.Options{Now: c.Now})
	for name, cfg := range rooms {
		_, err := store.CreateRoom(t.Context(), name, cfg)
		require.NoError(t, err)
	}
	counter := &readCounter{Store: store}
	d := newSampler(counter)
	d.now = c.Now
	return &samplerFixture{t: t, clock: c, store: store, counter: counter, sampler: d}
}

func (f *samplerFixture) read(since int64) adminapi.Dashboard {
	f.t.Helper()
	ans, err := f.sampler.read(f.t.Context(), since)
	require.NoError(f.t, err)
	return ans
}

func (f *samplerFixture) enter(room string, n int) {
	f.t.Helper()
	for i := range n {
		_, err := f.store.Enter(f.t.Context(), room, "u"+strconv.Itoa(i))
		require.NoError(f.t, err)
	}
}

// Many dashboards polling at once cost the store one sample a second:
// they all wait for the same sample and get the same figures.
func TestSamplerSharesOneSampleBetweenDashboards(t *testing.T) {
	t.Parallel()
	f := newSamplerFixture(t, map[string]waitroom.RoomConfig{"a": {}, "b": {}})
	f.enter("a", 3)

	const dashboards = 20
	answers := make([]adminapi.Dashboard, dashboards)
	errs := make([]error, dashboards)
	testenv.AtOnce(dashboards, func(i int) { answers[i], errs[i] = f.sampler.read(t.Context(), 0) })
	for i := range dashboards {
		require.NoError(t, errs[i])
		require.Equal(t, answers[0], answers[i], "dashboard %d", i)
	}
	require.Equal(t, [3]int64{1, 2, 2}, f.counter.reads(), "one list, one settings and one figures read per room")
	require.Len(t, answers[0].Rooms, 2)
	require.Equal(t, "a", answers[0].Rooms[0].Name)
	require.Equal(t, int64(3), answers[0].Rooms[0].Figures.Waiting)

	f.clock.Advance(dashboardEvery - time.Millisecond)
	for range 5 {
		f.read(0)
	}
	require.Equal(t, [3]int64{1, 2, 2}, f.counter.reads(), "within a second the sample is reused")
	f.clock.Advance(time.Millisecond)
	ans := f.read(0)
	require.Equal(t, [3]int64{2, 4, 4}, f.counter.reads(), "a second later, one new sample")
	require.Len(t, ans.Rooms[0].Series, 2)
}

// Admissions per second are the admitted counter's growth between two
// samples; a gap (nobody watching) measures nothing rather than an average
// over minutes nobody saw.
func TestSamplerMeasuresAdmissions(t *testing.T) {
	t.Parallel()
	f := newSamplerFixture(t, map[string]waitroom.RoomConfig{"r": {Rate: 10}})
	f.enter("r", 100)
	admitter := &waitroom.Admitter{Store: f.store}
	_, err := admitter.Tick(t.Context()) // starts the bucket
	require.NoError(t, err)

	first := f.read(0).Rooms[0]
	require.Nil(t, first.Figures.AdmittedPerSecond, "one sample measures no rate")
	require.Len(t, first.Series, 1)
	require.Nil(t, first.Series[0].AdmittedPerSecond)
	require.Equal(t, 100.0/10, *first.ETALastSeconds, "the last of 100 waits 10 s at 10/s")

	admitted := 0
	for range 10 {
		f.clock.Advance(100 * time.Millisecond)
		n, err := admitter.Tick(t.Context())
		require.NoError(t, err)
		admitted += n
	}
	require.Equal(t, 10, admitted)
	ans := f.read(0)
	r := ans.Rooms[0]
	require.NotNil(t, r.Figures.AdmittedPerSecond)
	require.Equal(t, 10.0, *r.Figures.AdmittedPerSecond)
	require.Equal(t, int64(90), r.Figures.Waiting)
	require.Equal(t, int64(10), r.Figures.LiveTokens)
	require.Equal(t, 9.0, *r.ETALastSeconds)
	require.Len(t, r.Series, 2)
	require.Equal(t, 10.0, *r.Series[1].AdmittedPerSecond)
	require.Equal(t, adminapi.DashboardPoint{T: ans.SampledAt, AdmittedPerSecond: r.Series[1].AdmittedPerSecond, Rate: 10, Waiting: 90, LiveTokens: 10}, r.Series[1])

	// Only the samples after since.
	require.Equal(t, r.Series[1:], f.read(r.Series[0].T).Rooms[0].Series)
	require.Empty(t, f.read(ans.SampledAt).Rooms[0].Series)

	// Paused: nobody is admitted, so the last place has no ETA.
	cfg, err := f.store.RoomConfig(t.Context(), "r")
	require.NoError(t, err)
	paused := cfg
	paused.State = waitroom.RoomPaused
	require.NoError(t, f.store.UpdateRoom(t.Context(), "r", cfg, paused))
	f.clock.Advance(4 * dashboardEvery) // a gap
	r = f.read(0).Rooms[0]
	require.Equal(t, waitroom.RoomPaused, r.State)
	require.Nil(t, r.ETALastSeconds)
	require.Nil(t, r.Figures.AdmittedPerSecond, "after a gap nothing is measured")
	require.Len(t, r.Series, 3)
}

// The sample history is bounded per room.
func TestSamplerKeepsTenMinutes(t *testing.T) {
	t.Parallel()
	f := newSamplerFixture(t, map[string]waitroom.RoomConfig{"r": {}})
	var last adminapi.Dashboard
	for range dashboardKeep + 50 {
		last = f.read(0)
		f.clock.Advance(dashboardEvery)
	}
	series := last.Rooms[0].Series
	require.Len(t, series, dashboardKeep)
	require.Equal(t, last.SampledAt, series[len(series)-1].T)
	require.Equal(t, last.SampledAt-int64(dashboardKeep-1)*dashboardEvery.Milliseconds(), series[0].T)
}

// A failed sample keeps the last figures and says so, and is not retried
// before a second has passed: an outage does not turn the dashboards into a
// flood.
func TestSamplerWhenTheStoreFails(t *testing.T) {
	t.Parallel()
	f := newSamplerFixture(t, map[string]waitroom.RoomConfig{"r": {}})
	ok := f.read(0)

	f.counter.fail.Store(true)
	f.clock.Advance(dashboardEvery)
	for range 5 {
		ans, err := f.sampler.read(t.Context(), 0)
		require.True(t, errors.Is(err, waitroom.ErrStoreUnavailable), "%v", err)
		require.Equal(t, &adminapi.DashboardError{Code: "STORE_UNAVAILABLE", Message: waitroom.ErrStoreUnavailable.Message}, ans.Error)
		require.Equal(t, ok.SampledAt, ans.SampledAt, "the figures are those of the last sample that worked")
		require.Equal(t, ok.Rooms, ans.Rooms)
	}
	require.Equal(t, int64(2), f.counter.rooms.Load(), "one failed try a second")

	f.counter.fail.Store(false)
	f.clock.Advance(dashboardEvery)
	ans := f.read(0)
	require.Nil(t, ans.Error)
	require.Greater(t, ans.SampledAt, ok.SampledAt)
}

// The chart is the store's history, recorded by the admitter whether or
// not a dashboard is open: the first dashboard load draws the minute and a
// half before it, a busy room a point a second, a quiet room (recorded
// once a minute) flat from its sample up to the second before the
// dashboard's. Time is synctest's, so the points' seconds are exact.
func TestSamplerDrawsWhatTheAdmitterRecorded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New(memstore.Options{})
		store := waitroom.Guard(mem, waitroom.GuardOptions{})
		// The busy room's buyers keep their tokens past the 90 s: no
		// no-shows.
		for name, cfg := range map[string]waitroom.RoomConfig{"busy": {Rate: 2, FirstUseWithin: 2 * time.Minute}, "quiet": {Rate: 7}} {
			_, err := store.CreateRoom(t.Context(), name, cfg)
			require.NoError(t, err)
		}
		for i := range 100 {
			_, err := store.Enter(t.Context(), "busy", "u"+strconv.Itoa(i))
			require.NoError(t, err)
		}
		t0 := time.Now()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = (&waitroom.Admitter{Store: store}).Run(ctx)
		}()
		defer func() { cancel(); <-done }()
		time.Sleep(90*time.Second + 500*time.Millisecond)

		d := newSampler(store)
		require.NotNil(t, d.history, "the guarded memstore keeps history")
		ans, err := d.read(t.Context(), 0)
		require.NoError(t, err)
		require.Len(t, ans.Rooms, 2)
		busy, quiet := ans.Rooms[0], ans.Rooms[1]
		require.Equal(t, []string{"busy", "quiet"}, []string{busy.Name, quiet.Name})

		seconds := func(series []adminapi.DashboardPoint) []int64 {
			var out []int64
			for _, p := range series {
				out = append(out, (p.T-t0.UnixMilli())/1000)
			}
			return out
		}
		upTo := func(from, to int64) []int64 {
			var out []int64
			for s := from; s <= to; s++ {
				out = append(out, s)
			}
			return out
		}
		require.Equal(t, upTo(0, 90), seconds(busy.Series), "a point every second since the admitter started")
		require.Equal(t, int64(100), busy.Series[0].Waiting)
		require.Nil(t, busy.Series[0].AdmittedPerSecond, "the first point measures no rate")
		admitted := 0.0
		for i, p := range busy.Series {
			require.Equal(t, int64(100), p.Waiting+p.LiveTokens, "point %d: every user waits or holds a token", i)
			require.Equal(t, 2.0, p.Rate)
			if i > 0 {
				require.NotNil(t, p.AdmittedPerSecond, "point %d", i)
				admitted += *p.AdmittedPerSecond
			}
		}
		last := busy.Series[len(busy.Series)-1]
		require.Equal(t, float64(last.LiveTokens-busy.Series[0].LiveTokens), admitted, "the rates add up to the tokens issued")
		require.Equal(t, int64(100), last.LiveTokens, "all admitted, 2 a second")

		// The quiet room: its sample at its second of the first minute,
		// then flat up to the second before the dashboard's (and its
		// second sample, if its second is the 30th).
		got := seconds(quiet.Series)
		require.NotEmpty(t, got)
		first := got[0]
		require.True(t, first > 0 && first <= 60, "the first sample within the first minute, at %d s", first)
		require.Contains(t, [][]int64{upTo(first, 89), upTo(first, 90)}, got)
		for i, p := range quiet.Series {
			require.Equal(t, adminapi.DashboardPoint{T: p.T, AdmittedPerSecond: p.AdmittedPerSecond, Rate: 7}, p, "point %d", i)
			if i > 0 {
				require.Equal(t, 0.0, *p.AdmittedPerSecond, "point %d", i)
			}
		}

		// A second later, only what came since.
		time.Sleep(time.Second)
		next, err := d.read(t.Context(), last.T)
		require.NoError(t, err)
		require.Equal(t, []int64{91}, seconds(next.Rooms[0].Series))
	})
}

// chartPoints draws a quiet room's gaps flat, never another gap or one
// longer than a quiet room's, and extends a quiet last sample only while
// the live figures are still its own.
func TestChartPointsFillQuietGaps(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(0, 0).Add(1000 * time.Hour)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	samples := []waitroom.Sample{
		{At: at(0), Rate: 5, Admitted: 4},              // quiet
		{At: at(60), Rate: 5, Admitted: 4},             // quiet, a minute later
		{At: at(62), Rate: 5, Waiting: 3, Admitted: 4}, // woken
		{At: at(63), Rate: 5, Waiting: 1, LiveTokens: 2, Admitted: 6},
		{At: at(70), Rate: 5, Admitted: 6, LiveTokens: 1}, // a gap after a busy sample
		{At: at(100), Rate: 5, Admitted: 6},               // quiet
		{At: at(200), Rate: 5, Admitted: 6},               // after more than a quiet room's gap
	}
	var got []int
	var perSec []*float64
	points := chartPoints(nil, samples, waitroom.Stats{Admitted: 6}, at(205).Add(300*time.Millisecond), 0)
	for _, p := range points {
		got = append(got, int((p.T-t0.UnixMilli())/1000))
		perSec = append(perSec, p.AdmittedPerSecond)
	}
	var want []int
	for s := 0; s <= 60; s++ {
		want = append(want, s)
	}
	// 60 to 62 is no gap (the chart joins points up to PerSecondGap apart).
	want = append(want, 62, 63, 70, 100, 200, 201, 202, 203, 204)
	require.Equal(t, want, got)
	require.Nil(t, perSec[0])
	require.Equal(t, 0.0, *perSec[1], "flat: nobody admitted")
	require.Equal(t, 0.0, *perSec[60], "measured from the flat stretch's last second")
	require.Equal(t, 0.0, *perSec[61], "woken, nobody admitted yet")
	require.Equal(t, 2.0, *perSec[62])
	require.Nil(t, perSec[63], "after a gap")
	for i := 64; i < len(want); i++ {
		require.Equal(t, adminapi.DashboardPoint{T: points[i].T, AdmittedPerSecond: points[i].AdmittedPerSecond, Rate: 5}, points[i])
	}

	// The live figures moved on: no flat tail; since leaves out the rest.
	points = chartPoints(nil, samples, waitroom.Stats{Admitted: 6, Waiting: 1}, at(205), at(100).UnixMilli())
	require.Len(t, points, 1)
	require.Equal(t, at(200).UnixMilli(), points[0].T)
}
