package waitroom_test

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

func TestRateFromCapacity(t *testing.T) {
	t.Parallel()
	rate, err := waitroom.RateFromCapacity(40, 200*time.Millisecond, 0.7)
	require.NoError(t, err)
	require.InDelta(t, 140.0, rate, 1e-9)

	for _, bad := range []struct {
		pool   int
		svc    time.Duration
		margin float64
	}{{0, time.Second, 0.5}, {40, 0, 0.5}, {40, time.Second, 0}, {40, time.Second, 1.5}, {40, time.Second, math.NaN()}} {
		_, err := waitroom.RateFromCapacity(bad.pool, bad.svc, bad.margin)
		require.ErrorIs(t, err, waitroom.ErrBadRequest, "%+v", bad)
	}
}

func TestTickQuotaRoundsUp(t *testing.T) {
	t.Parallel()
	for rate, want := range map[float64]int{140: 14, 175: 18, 1: 1, 0.5: 1, 1000: 100} {
		require.Equal(t, want, waitroom.RoomConfig{Rate: rate}.WithDefaults().TickQuota(), "rate %g", rate)
	}
}

func TestRoomConfigValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, waitroom.RoomConfig{}.WithDefaults().Validate())
	for name, cfg := range map[string]waitroom.RoomConfig{
		"negative rate":   {Rate: -1},
		"NaN rate":        {Rate: math.NaN()},
		"infinite rate":   {Rate: math.Inf(1)},
		"tiny slice":      {Slice: time.Millisecond},
		"huge tick":       {Rate: 90_000, Slice: time.Second},
		"negative max":    {MaxQueue: -1},
		"short ttl":       {TokenTTL: time.Millisecond},
		"long lease":      {Lease: time.Hour},
		"negative active": {MaxActive: -1},
		"unknown state":   {State: "half-open"},
	} {
		err := cfg.WithDefaults().Validate()
		require.ErrorIs(t, err, waitroom.ErrBadRequest, name)
		require.Equal(t, "BAD_REQUEST", waitroom.ErrorCode(err), name)
		require.NotEqual(t, waitroom.ErrBadRequest.Message, waitroom.ErrorMessage(err), "%s: the message says what is wrong", name)
	}
}

func TestTokens(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 1000 {
		tok := waitroom.NewToken()
		require.True(t, waitroom.ValidToken(tok), tok)
		require.False(t, seen[tok])
		seen[tok] = true
	}
	for _, bad := range []string{"", "short", "!!!!!!!!!!!!!!!!!!!!!!", waitroom.NewToken() + "x"} {
		require.False(t, waitroom.ValidToken(bad), bad)
	}
}

func TestNames(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"default", "drop-2026", "a", "x_1"} {
		require.True(t, waitroom.ValidRoomName(ok), ok)
	}
	for _, bad := range []string{"", "-lead", "Upper", "sp ace", "{tag}", "a/b", string(make([]byte, 65))} {
		require.False(t, waitroom.ValidRoomName(bad), bad)
	}
	for _, ok := range []string{"u1", "alice@example.com", "550e8400-e29b-41d4-a716-446655440000"} {
		require.True(t, waitroom.ValidUserID(ok), ok)
	}
	for _, bad := range []string{"", "has space", "tab\t", "nul\x00", "é", string(make([]byte, 129))} {
		require.False(t, waitroom.ValidUserID(bad), bad)
	}
}

func TestPollAfterGrowsWithDistance(t *testing.T) {
	t.Parallel()
	const rate = 140.0
	require.Equal(t, 140*time.Second/140, waitroom.ETA(140, rate))
	prevBase := time.Duration(0)
	for _, pos := range []int64{1, 100, 1_000, 5_000, 20_000, 50_000, 100_000} {
		d := waitroom.PollAfter(pos, rate)
		require.GreaterOrEqual(t, d, waitroom.MinPoll*9/10, "pos %d", pos)
		require.LessOrEqual(t, d, waitroom.NearPoll*11/10, "pos %d", pos)
		// Strip the ±10% spread to compare distances.
		base := d * 10 / 11
		require.GreaterOrEqual(t, base, prevBase*9/11, "pos %d", pos)
		prevBase = base
	}
	require.Greater(t, waitroom.PollAfter(50_000, rate), 10*waitroom.PollAfter(10, rate))
	// Neighbours do not poll in lockstep.
	require.NotEqual(t, waitroom.PollAfter(90_000, rate), waitroom.PollAfter(90_001, rate))
}

// TestPollLoadAtFullQueue: with 100,000 waiting at 140/s the hints ask for a
// few thousand status requests per second in total, not 100,000 — the
// budget the load generator checks against the measured capacity.
func TestPollLoadAtFullQueue(t *testing.T) {
	t.Parallel()
	load := waitroom.PollLoad(100_000, 140)
	t.Logf("polls/s asked of the server at 100,000 waiting, 140/s: %.0f", load)
	require.Less(t, load, 5_000.0)
	require.Greater(t, load, 1_000.0, "front users still poll every second")
}

// TestPollAfterFarBack: beyond NearPoll × FarPolls places the ceiling
// grows with the distance (position ÷ FarPolls seconds) up to MaxPoll, and
// a hint is still never more than a quarter of the expected wait.
func TestPollAfterFarBack(t *testing.T) {
	t.Parallel()
	const slow = 10.0 // users/s: far back the wait is long, the ceiling decides
	near := int64(waitroom.NearPoll.Seconds() * waitroom.FarPolls)
	within := func(d, want time.Duration) bool { return d >= want*9/10 && d <= want*11/10 }
	for _, c := range []struct {
		pos  int64
		want time.Duration
	}{
		{near / 2, waitroom.NearPoll},
		{near, waitroom.NearPoll},
		{2 * near, 2 * waitroom.NearPoll},
		{5 * near, 5 * waitroom.NearPoll},
		{100 * near, waitroom.MaxPoll},
		{waitroom.MaxMaxQueue, waitroom.MaxPoll},
		{math.MaxInt64, waitroom.MaxPoll},
	} {
		d := waitroom.PollAfter(c.pos, slow)
		require.True(t, within(d, c.want), "position %d: %s, want %s ±10%%", c.pos, d, c.want)
	}
	// A fast room: the quarter of the wait comes first.
	const fast = 10_000.0
	for _, pos := range []int64{near, 10 * near} {
		d := waitroom.PollAfter(pos, fast)
		require.Less(t, waitroom.ETA(pos, fast)/4, waitroom.PollAfter(pos, slow)*9/11, "position %d", pos)
		require.True(t, within(d, waitroom.ETA(pos, fast)/4), "position %d: %s", pos, d)
	}
}

// TestPollLoadOfTheBiggestDrop: 10,000,000 waiting at 140/s ask for a
// fifth of the polls a flat NearPoll ceiling would, within half of what
// one Redis shard answered with that many waiting (~70,000 polls/s,
// BENCHMARKS.md), as the poll hints must; and ten times the queue asks
// for less than two and a half times the polls (a flat ceiling: ten).
func TestPollLoadOfTheBiggestDrop(t *testing.T) {
	t.Parallel()
	const rate = 140.0
	load := waitroom.PollLoad(10_000_000, rate)
	flat := 10_000_000 / waitroom.NearPoll.Seconds()
	t.Logf("polls/s at 10,000,000 waiting, %g/s: %.0f (a flat %s ceiling: over %.0f)", rate, load, waitroom.NearPoll, flat)
	require.Less(t, load, 35_000.0)
	require.Less(t, load, flat/5)
	require.Less(t, load, 2.5*waitroom.PollLoad(1_000_000, rate))
}

// TestOpeningPollsOfACrowd: early arrivals poll before the opening at the
// pace of a queue their size, and make their first polls after it over
// FirstPollsSpread, OpeningSpread for up to 300,000 of them and longer for
// more, so that millions ask at most OpeningPolls times a second; a token
// issued within that span counts its first use from the span's end.
func TestOpeningPollsOfACrowd(t *testing.T) {
	t.Parallel()
	require.Equal(t, waitroom.OpeningSpread, waitroom.FirstPollsSpread(0))
	require.Equal(t, waitroom.OpeningSpread, waitroom.FirstPollsSpread(300_000))
	require.Equal(t, 100*time.Second, waitroom.FirstPollsSpread(3_000_000).Round(time.Second))
	require.Equal(t, waitroom.MaxPoll, waitroom.FirstPollsSpread(waitroom.MaxMaxQueue))
	require.Equal(t, waitroom.MaxPoll, waitroom.FirstPollsSpread(math.MaxInt64))

	for early, before := range map[int64]time.Duration{100: waitroom.NearPoll, 100_000: waitroom.NearPoll, 10_000_000: waitroom.MaxPoll} {
		// Long before the opening: half the time left, at most the
		// ceiling of a queue as long.
		require.Equal(t, before, waitroom.OpeningPollAfter(2*time.Hour, 0.5, early), "early %d", early)
		// Near it: a moment after it, within the span, each user its own.
		span := waitroom.FirstPollsSpread(early)
		first := map[time.Duration]bool{}
		for i := range 1000 {
			d := waitroom.OpeningPollAfter(span, float64(i)/1000, early)
			require.Greater(t, d, span, "early %d: after the opening", early)
			require.LessOrEqual(t, d, 2*span, "early %d: within the span", early)
			first[d] = true
		}
		require.Greater(t, len(first), 900, "early %d: spread, not one moment", early)
		load := float64(early) / (span - waitroom.MinPoll).Seconds()
		require.LessOrEqual(t, load, max(float64(waitroom.OpeningPolls)*1.05, 300_000/(waitroom.OpeningSpread-waitroom.MinPoll).Seconds()), "early %d", early)
	}

	opensAt := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	span := waitroom.FirstPollsSpread(5_000_000)
	for _, c := range []struct {
		now, want time.Time
		opensAt   time.Time
	}{
		{opensAt.Add(-time.Second), opensAt.Add(-time.Second), opensAt},             // before the opening: a pass
		{opensAt, opensAt.Add(span), opensAt},                                       // at it
		{opensAt.Add(span / 2), opensAt.Add(span), opensAt},                         // within the span
		{opensAt.Add(span), opensAt.Add(span), opensAt},                             // at its end
		{opensAt.Add(span + time.Second), opensAt.Add(span + time.Second), opensAt}, // after it
		{opensAt.Add(time.Second), opensAt.Add(time.Second), time.Time{}},           // no opening
	} {
		require.Equal(t, c.want, waitroom.TokenStart(c.now, c.opensAt, 5_000_000), "now %s", c.now)
	}
}

func TestRoomConfigChanges(t *testing.T) {
	t.Parallel()
	from := waitroom.RoomConfig{}.WithDefaults()
	require.Empty(t, from.Changes(from))
	to := from
	to.Rate, to.State = 200, waitroom.RoomPaused
	require.Equal(t, []waitroom.FieldChange{
		{Field: "state", From: waitroom.RoomOpen, To: waitroom.RoomPaused},
		{Field: "rate", From: 140.0, To: 200.0},
	}, from.Changes(to))
}

// At the far end of the longest queue and the slowest rate the ETA
// saturates instead of overflowing into "now", and the poll hint stays at
// its most rather than asking everyone to poll every second.
func TestETASaturatesAtExtremes(t *testing.T) {
	t.Parallel()
	for _, rate := range []float64{waitroom.MinRate, 1e-9, 1e-300} {
		eta := waitroom.ETA(waitroom.MaxMaxQueue, rate)
		require.Positive(t, eta, "rate %g", rate)
		require.GreaterOrEqual(t, eta, waitroom.ETA(waitroom.MaxMaxQueue/2, rate))
		poll := waitroom.PollAfter(waitroom.MaxMaxQueue, rate)
		require.GreaterOrEqual(t, poll, waitroom.MaxPoll*9/10, "rate %g", rate)
	}
}

// VerifyDraw judges a whole, well-formed public list: a bad draw value,
// a place out of range or given twice, a count or a digest other than the
// record's, a commitment other than the saved one, each is said, not
// compared place by place.
func TestVerifyDrawChecksTheList(t *testing.T) {
	t.Parallel()
	seed := waitroom.NewSeed()
	commitment, err := waitroom.Commitment(seed)
	require.NoError(t, err)
	order, err := waitroom.DrawPlaces(waitroom.PrequeueRandom, seed, []string{"ann", "bob", "cy"})
	require.NoError(t, err)
	var entrants []waitroom.Entrant
	for i, u := range order {
		entrants = append(entrants, waitroom.Entrant{User: u, Place: int64(i + 1)})
	}
	digest, err := waitroom.DrawnDigest(seed, order)
	require.NoError(t, err)
	record := waitroom.DrawRecordCheck{Seed: seed, Commitment: commitment, Entrants: 3, Digest: digest, SavedCommitment: commitment}
	public, err := waitroom.PublicEntrants(seed, entrants)
	require.NoError(t, err)
	diffs, err := waitroom.VerifyDraw(record, public)
	require.NoError(t, err)
	require.Empty(t, diffs)

	edited := func(edit func([]waitroom.DrawnEntrant)) []waitroom.DrawnEntrant {
		l := slices.Clone(public)
		edit(l)
		return l
	}
	renumbered := func(l []waitroom.DrawnEntrant) []waitroom.DrawnEntrant {
		l = slices.Clone(l)
		for i := range l {
			l[i].Place = int64(i + 1)
		}
		return l
	}
	saved := record
	saved.SavedCommitment = strings.Repeat("0", 64)
	fewer := record
	fewer.Entrants = 2
	for name, c := range map[string]struct {
		record waitroom.DrawRecordCheck
		list   []waitroom.DrawnEntrant
		says   string
	}{
		"bad value":     {record, edited(func(l []waitroom.DrawnEntrant) { l[1].Value = "zz" }), "entrant 2"},
		"place 0":       {record, edited(func(l []waitroom.DrawnEntrant) { l[2].Place = 0 }), "entrant 3"},
		"place twice":   {record, edited(func(l []waitroom.DrawnEntrant) { l[2].Place = 1 }), "entrant 3"},
		"renumbered":    {record, edited(func(l []waitroom.DrawnEntrant) { l[0].Place, l[1].Place = 2, 1 }), "digest"},
		"one removed":   {fewer, renumbered(public[1:]), "digest"},
		"count":         {record, public[1:], "the list has 2 entrants, the draw's record 3"},
		"saved differs": {saved, public, "saved before the opening"},
	} {
		_, err := waitroom.VerifyDraw(c.record, c.list)
		require.ErrorIs(t, err, waitroom.ErrBadRequest, name)
		require.Contains(t, waitroom.ErrorMessage(err), c.says, name)
	}
}
