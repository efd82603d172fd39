package redisstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

// AllowAfter counts the requests an instance let through on its own share
// first, whatever it answers about the next one; Allow is AllowAfter with
// none.
func TestAllowAfterCountsWhatPassedFirst(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := t.Context()
	l := waitroom.Limit{Rate: 1, Burst: 4} // an interval of 1 s, long beside the test

	ok, _, err := s.AllowAfter(ctx, "k", l, 3)
	require.NoError(t, err)
	require.True(t, ok, "3 passed and this one: the burst of 4")
	ok, wait, err := s.Allow(ctx, "k", l)
	require.NoError(t, err)
	require.False(t, ok)
	requireWait(t, time.Second, wait)

	// Refused, the requests handed over still count: 2 more push the next
	// slot 2 s further.
	ok, wait, err = s.AllowAfter(ctx, "refused", l, 5)
	require.NoError(t, err)
	require.False(t, ok)
	requireWait(t, 2*time.Second, wait)
	ok, wait, err = s.Allow(ctx, "refused", l)
	require.NoError(t, err)
	require.False(t, ok)
	requireWait(t, 2*time.Second, wait) // the 5 were written

	_, _, err = s.AllowAfter(ctx, "k", l, -1)
	require.ErrorIs(t, err, waitroom.ErrBadRequest)
}

// requireWait checks a wait computed at most half an interval (of 1 s)
// after the count it comes from.
func requireWait(t *testing.T, want, got time.Duration) {
	t.Helper()
	require.LessOrEqual(t, got, want)
	require.Greater(t, got, want-500*time.Millisecond)
}
