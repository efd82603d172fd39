package loadtest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestJudgeETAByWait checks the ETA figures against hand-made samples:
// the relative error of waits of 30 s or more, the absolute error of the
// shorter ones, and the figures over every user beside them.
func TestJudgeETAByWait(t *testing.T) {
	t.Parallel()
	s := func(eta, low, high, wait float64) etaSample {
		d := func(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }
		return etaSample{ETA: d(eta), Low: d(low), High: d(high), Wait: d(wait)}
	}
	samples := []etaSample{
		// Shorter than 30 s: absolute errors 1, 1, 4, 1.5.
		s(1, 0, 2, 0),        // no wait: no relative error
		s(3, 1, 4, 2),        // 0.5
		s(14, 11, 16, 10),    // 0.4, outside its range
		s(31, 28, 33, 29.5),  // 0.0508, just short of 30 s
		s(33, 27, 36, 30),    // 0.1, exactly 30 s: a long wait
		s(36, 30, 39, 40),    // 0.1, outside its range
		s(75, 60, 90, 60),    // 0.25
		s(100, 90, 110, 100), // 0
	}
	var a AdmissionStats
	waits := a.judgeETA(samples)
	require.Equal(t, []float64{0, 2, 10, 29.5, 30, 40, 60, 100}, waits)

	require.Equal(t, 8, a.ETAUsers)
	require.InDelta(t, 29.5, a.WaitP50S, 1e-9)
	require.InDelta(t, 100, a.WaitP99S, 1e-9)
	require.InDelta(t, 100, a.WaitMaxS, 1e-9)
	require.InDelta(t, 21.5/8, a.ETAErrorMeanS, 1e-9)
	require.InDelta(t, 29.5/8, a.ETAAbsErrorMean, 1e-9)
	require.InDelta(t, 15, a.ETAAbsErrorP90, 1e-9, "the 60 s wait promised 75 s")
	require.InDelta(t, 6.0/8, a.ETAInRangeShare, 1e-9)
	// All users with a wait: 0, 0.0508, 0.1, 0.1, 0.25, 0.4, 0.5.
	require.InDelta(t, 0.1, a.ETARelErrorP50, 1e-9)
	require.InDelta(t, 0.5, a.ETARelErrorP90, 1e-9)

	// Waits of 30 s or more: 0, 0.1, 0.1, 0.25.
	require.Equal(t, 4, a.ETAUsers30s)
	require.InDelta(t, 0.1, a.ETARelErrorP50Long, 1e-9)
	require.InDelta(t, 0.25, a.ETARelErrorP90Long, 1e-9)
	// Shorter waits: 1, 1, 1.5, 4 — not the 15 s of the 60 s wait.
	require.InDelta(t, 4, a.ETAAbsErrorP90Short, 1e-9)

	// The names are a contract.
	raw, err := json.Marshal(a)
	require.NoError(t, err)
	var fields map[string]any
	require.NoError(t, json.Unmarshal(raw, &fields))
	require.InDelta(t, 0.1, fields["eta_rel_error_p50_30s"].(float64), 1e-9)
	require.InDelta(t, 0.25, fields["eta_rel_error_p90_30s"].(float64), 1e-9)
	require.InDelta(t, 4, fields["eta_abs_error_p90_short_s"].(float64), 1e-9)
	require.InDelta(t, 4, fields["eta_users_30s"].(float64), 1e-9)

	var text strings.Builder
	require.NoError(t, (&Report{Admissions: a}).WriteText(&text))
	require.Contains(t, text.String(), "by wait: 4 waited 30s or more, relative error p50 0.100, p90 0.250; 4 waited less, p90 |error| 4.00s")
}

// TestJudgeETAWithoutLongWaits: with no wait of 30 s, the long-wait
// figures are zero and say so by their count, and the shorter waits
// still have theirs.
func TestJudgeETAWithoutLongWaits(t *testing.T) {
	t.Parallel()
	var a AdmissionStats
	a.judgeETA([]etaSample{
		{ETA: 4 * time.Second, High: 5 * time.Second, Wait: 2 * time.Second},
		{ETA: 3 * time.Second, High: 5 * time.Second, Wait: 3 * time.Second},
	})
	require.Equal(t, 2, a.ETAUsers)
	require.Zero(t, a.ETAUsers30s)
	require.Zero(t, a.ETARelErrorP50Long)
	require.Zero(t, a.ETARelErrorP90Long)
	require.InDelta(t, 2, a.ETAAbsErrorP90Short, 1e-9)
	require.InDelta(t, 1, a.ETARelErrorP90, 1e-9)
}
