package memstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

// A full outbox drops its oldest entry for the next and counts it, as
// redisstore's does (TestOutboxFullDropsTheOldestCounted).
func TestOutboxFullDropsTheOldestCounted(t *testing.T) {
	t.Parallel()
	clock := NewManualClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	s := New(Options{Now: clock.Now})
	ctx := t.Context()
	_, err := s.CreateRoom(ctx, "r", waitroom.RoomConfig{Rate: 100})
	require.NoError(t, err)
	require.NoError(t, s.SetOutbox(ctx, "r", true))
	r := s.rooms["r"]
	for range waitroom.OutboxMaxEntries {
		r.out.tell(clock.Now(), &toldUsers{admitted: []string{"old"}})
	}
	first, err := s.ReadOutbox(ctx, "r", 1)
	require.NoError(t, err)
	require.Zero(t, first.Lost)

	_, err = s.Enter(ctx, "r", "new")
	require.NoError(t, err)
	for range 3 {
		clock.Advance(100 * time.Millisecond)
		_, err = s.Admit(ctx, "r")
		require.NoError(t, err)
	}
	require.Len(t, r.out.entries, waitroom.OutboxMaxEntries)
	read, err := s.ReadOutbox(ctx, "r", 1)
	require.NoError(t, err)
	require.Equal(t, int64(1), read.Lost)
	require.NotEqual(t, first.Entries[0].ID, read.Entries[0].ID, "the oldest went")
	require.Equal(t, []string{"new"}, r.out.entries[len(r.out.entries)-1].Users)
}
