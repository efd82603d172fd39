package waitroom_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

// A rate is measured only between two samples at most PerSecondGap apart,
// in time order, whose counter did not go back.
func TestSamplePerSecond(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(0, 0).Add(1000 * time.Hour)
	at := func(d time.Duration, admitted int64) waitroom.Sample {
		return waitroom.Sample{At: t0.Add(d), Admitted: admitted}
	}
	for _, c := range []struct {
		name      string
		prev, cur waitroom.Sample
		want      float64
		ok        bool
	}{
		{"a second apart", at(0, 10), at(time.Second, 25), 15, true},
		{"the longest gap", at(0, 10), at(waitroom.PerSecondGap, 22), 4, true},
		{"longer", at(0, 10), at(waitroom.PerSecondGap+time.Millisecond, 22), 0, false},
		{"no previous sample", waitroom.Sample{}, at(time.Second, 5), 0, false},
		{"the same second", at(0, 10), at(0, 12), 0, false},
		{"out of order", at(time.Second, 10), at(0, 12), 0, false},
		{"the counter went back", at(0, 10), at(time.Second, 9), 0, false},
		{"nobody admitted", at(0, 10), at(2*time.Second, 10), 0, true},
	} {
		got, ok := c.cur.PerSecond(c.prev)
		require.Equal(t, c.ok, ok, c.name)
		require.Equal(t, c.want, got, c.name)
	}
	require.True(t, waitroom.Sample{Rate: 5, Admitted: 7}.Quiet())
	require.False(t, waitroom.Sample{Waiting: 1}.Quiet())
	require.False(t, waitroom.Sample{LiveTokens: 1}.Quiet())
}
