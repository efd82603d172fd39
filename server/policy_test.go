package server

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseFailurePolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    FailurePolicy
		wantErr string
	}{
		{"", FailurePolicy{}, ""},
		{"closed", FailurePolicy{Default: PolicyClosed}, ""},
		{"open", FailurePolicy{Default: PolicyOpen}, ""},
		{"default=open, sale=closed", FailurePolicy{Default: PolicyOpen, Rooms: map[string]Policy{"sale": PolicyClosed}}, ""},
		{"sale=open", FailurePolicy{Rooms: map[string]Policy{"sale": PolicyOpen}}, ""},
		{"ajar", FailurePolicy{}, "must be closed or open"},
		{"sale=Open", FailurePolicy{}, "must be closed or open"},
		{"open,default=closed", FailurePolicy{}, "default policy is given twice"},
		{"sale=open,sale=closed", FailurePolicy{}, "room sale is given twice"},
		{"{x}=open", FailurePolicy{}, "not a room name"},
	}
	for _, tt := range tests {
		got, err := ParseFailurePolicy(tt.in)
		if tt.wantErr != "" {
			require.ErrorContains(t, err, tt.wantErr, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		require.Equal(t, tt.want, got, tt.in)
	}

	p, err := ParseFailurePolicy("default=open,sale=closed")
	require.NoError(t, err)
	require.Equal(t, PolicyOpen, p.For("default"), "the room called default follows the default")
	require.Equal(t, PolicyOpen, p.For("other"))
	require.Equal(t, PolicyClosed, p.For("sale"))
	require.Equal(t, "default=open,sale=closed", p.String())
	require.Equal(t, PolicyClosed, FailurePolicy{}.For("any"), "the zero value fails closed")
}

// TestLimiterBound: over every window of T, at most burst + T×rate
// requests pass, however they arrive; a steady stream gets the rate.
func TestLimiterBound(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_700_000_000, 0)
	const rate, burst = 7.0, 2
	var l limiter
	var passed []time.Time
	now := start
	rng := rand.New(rand.NewPCG(1, 2))
	for now.Before(start.Add(60 * time.Second)) {
		// Arrivals in clumps and gaps: up to 20 at one instant, then a
		// pause of up to 400 ms.
		for range rng.IntN(20) {
			if l.allow(now, rate, burst) {
				passed = append(passed, now)
			}
		}
		now = now.Add(time.Duration(rng.IntN(400)) * time.Millisecond)
	}
	for _, window := range []time.Duration{0, 100 * time.Millisecond, time.Second, 10 * time.Second} {
		bound := burst + int(window.Seconds()*rate)
		for i := range passed {
			n := 0
			for j := i; j < len(passed) && passed[j].Sub(passed[i]) <= window; j++ {
				n++
			}
			require.LessOrEqual(t, n, bound, "window %s from %s", window, passed[i].Sub(start))
		}
	}
	require.NotEmpty(t, passed)
}

func TestLimiterSteadyStreamGetsTheRate(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_700_000_000, 0)
	var l limiter
	n := 0
	// A request every millisecond for 10 s at 10/s with burst 1: one every
	// 100 ms, exactly.
	for ms := range 10_000 {
		if l.allow(start.Add(time.Duration(ms)*time.Millisecond), 10, 1) {
			n++
		}
	}
	require.Equal(t, 100, n)

	// After a long pause only the burst passes at once.
	later := start.Add(time.Hour)
	n = 0
	for range 50 {
		if l.allow(later, 10, 3) {
			n++
		}
	}
	require.Equal(t, 3, n)
	require.False(t, (&limiter{}).allow(start, 0, 1), "no known rate: nothing passes")
}

func TestOpenRate(t *testing.T) {
	t.Parallel()
	told := map[string]float64{}
	lastRate := func(room string) (float64, bool) { r, ok := told[room]; return r, ok }
	f := newPolicyEnforcer(FailurePolicy{Default: PolicyOpen, Instances: 4, DeclaredRate: 200}, lastRate, nil)
	require.InDelta(t, 25.0, f.openRate("r"), 1e-9, "declared 200 × default share 0.5 / 4 instances")
	told["r"] = 80
	require.InDelta(t, 10.0, f.openRate("r"), 1e-9, "the store's rate replaces the declared one")
	require.Equal(t, 3, openBurst(25), "a tenth of a second's share, rounded up")
	require.Equal(t, 1, openBurst(0.5))
	require.Nil(t, newPolicyEnforcer(FailurePolicy{}, lastRate, nil).storeDown("r"), "closed: the gate gets no StoreDown")
}
