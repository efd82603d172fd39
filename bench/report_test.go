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
