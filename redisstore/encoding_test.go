package redisstore

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

// The hashes the hot scripts read many fields of at a time, the settings
// and the bucket, are hash tables (keep_hash_table); a room made before
// converts its settings at their next update, its bucket at its next
// Admit.
func TestHotHashesAreHashTables(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	limit, err := s.client.ConfigGet(ctx, "hash-max-listpack-value").Result()
	require.NoError(t, err)
	max, err := strconv.Atoi(limit["hash-max-listpack-value"])
	require.NoError(t, err)
	require.Greater(t, len(hashTableNote), max, "the note must be longer than the Redis's hash-max-listpack-value")
	encoding := func(key string) string {
		t.Helper()
		enc, err := s.client.ObjectEncoding(ctx, key).Result()
		require.NoError(t, err)
		return enc
	}
	// asWrittenBefore rewrites key as a version before the note wrote it:
	// its fields without the note, a listpack.
	asWrittenBefore := func(key string) {
		t.Helper()
		fields, err := s.client.HGetAll(ctx, key).Result()
		require.NoError(t, err)
		delete(fields, hashTableField)
		require.NoError(t, s.client.Del(ctx, key).Err())
		require.NoError(t, s.client.HSet(ctx, key, fields).Err())
		require.Equal(t, "listpack", encoding(key))
	}

	room := newRoom(t, s, waitroom.RoomConfig{Rate: 100})
	k := s.keys(room)
	require.Equal(t, "hashtable", encoding(k.cfg))
	_, err = s.Enter(ctx, room, "u1")
	require.NoError(t, err)
	_, err = s.Admit(ctx, room) // starts the bucket
	require.NoError(t, err)
	require.Equal(t, "hashtable", encoding(k.bucket))
	cfg, err := s.RoomConfig(ctx, room)
	require.NoError(t, err)
	require.Equal(t, 100.0, cfg.Rate, "the note is no setting")

	// A bucket written by a version before: its next Admit converts it.
	asWrittenBefore(k.bucket)
	_, err = s.Admit(ctx, room)
	require.NoError(t, err)
	require.Equal(t, "hashtable", encoding(k.bucket))

	// A room made by a version before: its settings without the note, a
	// listpack. It works as it is, and its next update converts it.
	old := newRoom(t, s, waitroom.RoomConfig{Rate: 100})
	ko := s.keys(old)
	asWrittenBefore(ko.cfg)
	st, err := s.Enter(ctx, old, "u1")
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Position)
	from, err := s.RoomConfig(ctx, old)
	require.NoError(t, err)
	to := from
	to.Rate = 50
	require.NoError(t, s.UpdateRoom(ctx, old, from, to))
	require.Equal(t, "hashtable", encoding(ko.cfg))
	got, err := s.RoomConfig(ctx, old)
	require.NoError(t, err)
	require.Equal(t, 50.0, got.Rate)
}
