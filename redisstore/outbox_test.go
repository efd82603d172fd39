package redisstore

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redistest"
)

// TestOutboxKeyOnlyWhenOn: a room whose outbox is off never has the
// outbox key nor a named_* field in its bucket, however many it admits,
// cleans up and skips (so its admissions ran neither the XADD nor the
// HINCRBY that would make them: they cost what they cost before
// outboxes); turned on, the next admission makes them; turned off again,
// admissions add nothing.
func TestOutboxKeyOnlyWhenOn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 1000, FirstUseWithin: time.Second, AbandonAfter: time.Second})
	k := s.keys(room)
	for i := range 20 {
		_, err := s.Enter(ctx, room, "u"+string(rune('a'+i)))
		require.NoError(t, err)
	}
	for range 5 {
		_, err := s.Admit(ctx, room)
		require.NoError(t, err)
		advance(t, s, 3*time.Second) // no-shows, and silence past AbandonAfter
		_, err = s.Enter(ctx, room, "late")
		require.NoError(t, err)
	}
	st := testenv.Stats(t, s, room)
	require.Positive(t, st.NoShows)
	require.Positive(t, st.Abandoned)
	require.Zero(t, s.client.Exists(ctx, k.out).Val(), "off: never made")
	named := []string{"named_no_shows", "named_expired", "named_abandoned"}
	require.Equal(t, []any{nil, nil, nil}, s.client.HMGet(ctx, k.bucket, named...).Val(), "off: nothing counted")

	require.NoError(t, s.SetOutbox(ctx, room, true))
	_, err := s.Enter(ctx, room, "on")
	require.NoError(t, err)
	advance(t, s, 100*time.Millisecond)
	got, err := s.Admit(ctx, room)
	require.NoError(t, err)
	require.NotEmpty(t, got)
	n := s.client.XLen(ctx, k.out).Val()
	require.Positive(t, n)
	counted := s.client.HMGet(ctx, k.bucket, named...).Val()

	require.NoError(t, s.SetOutbox(ctx, room, false))
	_, err = s.Enter(ctx, room, "off")
	require.NoError(t, err)
	advance(t, s, 100*time.Millisecond)
	got, err = s.Admit(ctx, room)
	require.NoError(t, err)
	require.NotEmpty(t, got)
	require.Equal(t, n, s.client.XLen(ctx, k.out).Val(), "off again: nothing added")
	require.Equal(t, counted, s.client.HMGet(ctx, k.bucket, named...).Val(), "off again: nothing counted")
}

// TestOutboxFullDropsTheOldestCounted: an outbox at OutboxMaxEntries (a
// relay that could not append for hours) drops its oldest entry for the
// admission's new one, and counts it in Lost.
func TestOutboxFullDropsTheOldestCounted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 1000})
	require.NoError(t, s.SetOutbox(ctx, room, true))
	k := s.keys(room)
	// In pipelines of a few thousand: one of 100,000 commands is megabytes
	// the client must write within its write timeout, which a loaded CI
	// host does not always manage.
	const chunk = 2000
	for done := 0; done < waitroom.OutboxMaxEntries; done += chunk {
		_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for range min(chunk, waitroom.OutboxMaxEntries-done) {
				p.XAdd(ctx, &redis.XAddArgs{Stream: k.out, Values: []any{"t", waitroom.OutboxAdmitted, "at", 1, "u", "old"}})
			}
			return nil
		})
		require.NoError(t, err)
	}
	require.Equal(t, int64(waitroom.OutboxMaxEntries), s.client.XLen(ctx, k.out).Val())
	first, err := s.ReadOutbox(ctx, room, 1)
	require.NoError(t, err)
	require.Zero(t, first.Lost)

	_, err = s.Enter(ctx, room, "new")
	require.NoError(t, err)
	_, err = s.Admit(ctx, room) // starts the bucket
	require.NoError(t, err)
	advance(t, s, 100*time.Millisecond)
	got, err := s.Admit(ctx, room)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, int64(waitroom.OutboxMaxEntries), s.client.XLen(ctx, k.out).Val())
	read, err := s.ReadOutbox(ctx, room, 1)
	require.NoError(t, err)
	require.Equal(t, int64(1), read.Lost)
	require.NotEqual(t, first.Entries[0].ID, read.Entries[0].ID, "the oldest went")
	last, err := s.client.XRevRangeN(ctx, k.out, "+", "-", 1).Result()
	require.NoError(t, err)
	require.Equal(t, "new", last[0].Values["u"])
}

// TestOutboxAdmitCommands counts, on a Redis of its own (INFO
// commandstats is the whole server's), the commands of one admission
// that cleans up two no-shows and skips two leavers, in a room whose
// outbox is off and in one whose outbox is on, the same otherwise: the
// one on runs exactly an XADD per type it names, one XTRIM and a HINCRBY
// of each named counter more; the one off runs none of them.
func TestOutboxAdmitCommands(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := redistest.StartServer(t)
	admin := openURL(t, srv.URL())
	s := New(openURL(t, srv.URL()), Options{Prefix: randomPrefix()})
	cfg := waitroom.RoomConfig{Rate: 1000, MaxActive: 2, FirstUseWithin: time.Second, TokenTTL: 3 * time.Second,
		AbandonAfter: time.Second}
	off, on := newRoom(t, s, cfg), newRoom(t, s, cfg)
	require.NoError(t, s.SetOutbox(ctx, on, true))
	for _, room := range []string{off, on} {
		for _, u := range []string{"holder-1", "holder-2", "silent-1", "silent-2"} {
			_, err := s.Enter(ctx, room, u)
			require.NoError(t, err)
		}
		_, err := s.Admit(ctx, room) // starts the bucket
		require.NoError(t, err)
	}
	advance(t, s, 100*time.Millisecond)
	for _, room := range []string{off, on} {
		got, err := s.Admit(ctx, room)
		require.NoError(t, err)
		require.Len(t, got, 2)
	}
	advance(t, s, 3*time.Second) // the holders never came; the others fell silent
	admit := func(room string) map[string]int64 {
		return commandsDuring(ctx, t, admin, func() {
			_, err := s.Admit(ctx, room)
			require.NoError(t, err)
		})
	}
	offCalls, onCalls := admit(off), admit(on)
	require.NotContains(t, offCalls, "xadd")
	require.NotContains(t, offCalls, "xtrim")
	more := map[string]int64{}
	for cmd, n := range onCalls {
		if d := n - offCalls[cmd]; d != 0 {
			more[cmd] = d
		}
	}
	for cmd, n := range offCalls {
		if _, ok := onCalls[cmd]; !ok {
			more[cmd] = -n
		}
	}
	require.Equal(t, map[string]int64{"xadd": 2, "xtrim": 1, "hincrby": 2}, more,
		"on: a no-show entry and a leavers' entry, their trim, named_no_shows and named_abandoned; off: %v", offCalls)
	for _, room := range []string{off, on} {
		st := testenv.Stats(t, s, room)
		require.Equal(t, [2]int64{2, 2}, [2]int64{st.NoShows, st.Abandoned})
	}
	read, err := s.ReadOutbox(ctx, on, 10)
	require.NoError(t, err)
	require.Equal(t, waitroom.OutboxNamed{NoShows: 2, Abandoned: 2}, read.Named)
}
