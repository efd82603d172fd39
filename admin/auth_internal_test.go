package admin

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/memstore"
)

// TestAuthFailuresStayBounded: a guesser with more addresses than
// maxAuthAddresses cannot grow the table beyond it; the addresses beyond
// share one count, which limits them together, while an address counted
// already keeps its own; counts that ran out are dropped.
func TestAuthFailuresStayBounded(t *testing.T) {
	t.Parallel()
	clock := memstore.NewManualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	limit := waitroom.Limit{Rate: 1, Burst: 2}
	a := newAuthFailures(limit, clock.Now)
	for i := range maxAuthAddresses {
		refused, _ := a.attempt("10.0."+strconv.Itoa(i), false)
		require.False(t, refused)
	}
	require.Len(t, a.tats, maxAuthAddresses)
	outcomes := map[bool]int{}
	for i := range 5 {
		refused, _ := a.attempt("198.51.100."+strconv.Itoa(i), false)
		outcomes[refused]++
	}
	require.Equal(t, map[bool]int{false: limit.Burst, true: 5 - limit.Burst}, outcomes, "the rest share one count")
	require.Len(t, a.tats, maxAuthAddresses+1)
	refused, _ := a.attempt("198.51.100.99", true)
	require.True(t, refused, "a new address beyond the table is judged by the shared count")
	refused, _ = a.attempt("10.0.7", true)
	require.False(t, refused, "a counted address keeps its own count")

	clock.Advance(time.Duration(limit.Burst+1) * time.Second)
	refused, _ = a.attempt("198.51.100.99", true)
	require.False(t, refused)
	require.Empty(t, a.tats, "the counts that ran out are dropped")
}
