package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A round whose trivial slice answered nothing (a starved machine) gives
// no ratio: the table says n/a instead of failing.
func TestWriteMarkdownWithoutRatios(t *testing.T) {
	t.Parallel()
	r := &Result{
		cfg: Config{Memstore: true, Rounds: 1, Slice: time.Second, Clients: 1, Waiting: 10, Rate: 140},
		http: []httpFigures{
			{store: "memstore", enter: []float64{100}, status: []float64{200}, trivial: []float64{0}},
			{store: "redis", enter: []float64{100}, status: []float64{200}, trivial: []float64{300}},
		},
	}
	var out strings.Builder
	r.WriteMarkdown(&out)
	require.Contains(t, out.String(), "| memstore | 100 | 200 | 0 | n/a | n/a | 0 |")
	require.Contains(t, out.String(), "| redis | 100 | 200 | 300 | **0.33** (0.33–0.33) | 0.67 (0.67–0.67) | 0 |")
}

// The baseline table ends with what one shard's core takes at the room's CPU
// per call: 1,000,000 µs over the median, and every round's figure.
func TestWriteBaselineShardCapacity(t *testing.T) {
	t.Parallel()
	r := &Result{baseline: []baselineFigure{
		{op: "enter", ours: []float64{10, 12}, baseline: []float64{5, 6}, oursCPU: []float64{20, 25}, baselineCPU: []float64{10, 10}, oursUsers: []float64{15.5, 16}},
		{op: "status", ours: []float64{8, 8}, baseline: []float64{4, 4}, oursCPU: []float64{10, 40}},
		{op: "admit", ours: []float64{3}, baseline: []float64{2}},
		{op: "seen", ours: []float64{8, 8}, baseline: []float64{8, 8}, oursCPU: []float64{10, 40}},
		{op: "admit hot", ours: []float64{3}, baseline: []float64{2}, oursUsers: []float64{14}, baselineUs: []float64{14}},
	}}
	var out strings.Builder
	r.writeBaseline(&out)
	require.Contains(t, out.String(), "about 44k ENTERs/s (each round, thousands: 50.00, 40.00) or 40k STATUS polls/s (each round: 100.00, 25.00)")
	// Only ENTER's CPU has a baseline to be compared with, and a target.
	require.Contains(t, out.String(), "| enter | 11.00 | 5.50 |")
	require.Equal(t, 1, strings.Count(out.String(), "(≤ 1.25)"))
	require.Contains(t, out.String(), "| status | 8.00 | 4.00 | **2.00** (2.00–2.00) (≤ 1.0 + last-seen) | 25.00 | | |")
	// The room's ENTERs share calls: how many a call carried.
	require.Contains(t, out.String(), "its µs and CPU above are per ENTER): 15.8 (each round: 15.50, 16.00)")
	// ADMIT's target is the hot loop's; the cold one is reported.
	require.Contains(t, out.String(), "| admit hot | 3.00 | 2.00 | **1.50** (1.50–1.50) (≤ 1.5) |")
	require.Contains(t, out.String(), "| admit | 3.00 | 2.00 | **1.50** (1.50–1.50) (reported) |")
	require.Contains(t, out.String(), "Users per admit call, hot: room 14.0, baseline 14.0.")
	require.NotContains(t, out.String(), "Users per admit call, cold", "the cold admit measured no users here")
}

// The webhook table gives each side's median and the medians of the
// rounds' own ratios on ÷ off, then every round as run; a run of the
// side "on" alone gives no ratio; the text names the receiver.
func TestWriteWebhooks(t *testing.T) {
	t.Parallel()
	r := &Result{cfg: Config{Waiting: 10, Rate: 140}, webhooks: []webhookFigures{
		{store: "memstore", enterOff: []float64{100, 200}, enterOn: []float64{110, 180}, statusOff: []float64{400, 0}, statusOn: []float64{200, 300},
			attempts: []int64{2, 3}, admitted: 4, errorsOff: 1, errorsOn: 2, firstAttempt: 1500 * time.Millisecond},
		{store: "redis", enterOn: []float64{50}, statusOn: []float64{60}, attempts: []int64{0}},
	}}
	var out strings.Builder
	r.writeWebhooks(&out)
	require.Contains(t, out.String(), "| memstore | 150 | 145 | **1.00** (0.90–1.10) | 200 | 250 | **0.50** (0.50–0.50) | 1, 2 | 5 in the slices; 4 `user.admitted` in all; the first 1.5s after the start |")
	require.Contains(t, out.String(), "| memstore | 1 | 100 | 110 | 1.10 | 400 | 200 | 0.50 | 2 |")
	require.Contains(t, out.String(), "| memstore | 2 | 200 | 180 | 0.90 | 0 | 300 | n/a | 3 |")
	require.Contains(t, out.String(), "| redis | – | 50 | n/a | – | 60 | n/a | 0, 0 | 0 in the slices;")
	require.Contains(t, out.String(), "| redis | 1 | – | 50 | n/a | – | 60 | n/a | 0 |")

	require.Contains(t, out.String(), "to a dead receiver, a loopback listener that reads each request and never answers")
	r.cfg.SlowReceiver = 20 * time.Millisecond
	var slow strings.Builder
	r.writeWebhooks(&slow)
	require.Contains(t, slow.String(), "to a slow receiver, a loopback listener that takes every message, answering 204 after 20ms.")

	var none strings.Builder
	(&Result{}).writeWebhooks(&none)
	require.Empty(t, none.String(), "no webhook table without the measurement")
}
