package admin

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
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
