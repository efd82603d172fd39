package redisstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/redistest"
)

// TestRecordSamplesCost: one function call records any number of rooms
// (off Cluster), and a room nobody is in costs six commands: its rate
// and shards, its last entry, one EXISTS for its queues and tokens, its
// admitted counter, the append and the TTL. A second already recorded
// costs two.
// Counted on a Redis of the test's own (INFO commandstats), not timed.
func TestRecordSamplesCost(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := redistest.StartServer(t)
	admin := openURL(t, srv.URL())
	s := New(openURL(t, srv.URL()), Options{Prefix: randomPrefix()})
	var rooms []string
	for i := range 300 {
		rooms = append(rooms, fmt.Sprintf("r%03d", i))
		_, err := s.CreateRoom(ctx, rooms[i], waitroom.RoomConfig{})
		require.NoError(t, err)
	}
	record := func(at time.Time) map[string]int64 {
		t.Helper()
		return commandsDuring(ctx, t, admin, func() { require.NoError(t, s.RecordSamples(ctx, at, rooms)) })
	}
	at := time.Now()
	require.Equal(t, map[string]int64{
		"fcall": 1, "hmget": 300, "hget": 300, "lindex": 300, "exists": 300, "rpush": 300, "pexpire": 300,
	}, record(at), "no room holds a token: no clock read")
	require.Equal(t, map[string]int64{"fcall": 1, "hmget": 300, "lindex": 300}, record(at), "the second is recorded already")

	_, err := s.Enter(ctx, rooms[7], "u1")
	require.NoError(t, err)
	calls := record(at.Add(time.Second))
	require.Equal(t, int64(3), calls["zcard"], "only the room someone is in counts its queues")
	require.Zero(t, calls["time"], "nor tokens")
	got, err := s.History(ctx, rooms[7], at)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, int64(1), got[0].Waiting)
	ttl, err := admin.PTTL(ctx, s.keys(rooms[7]).hist).Result()
	require.NoError(t, err)
	require.InDelta(t, historyTTL.Seconds(), ttl.Seconds(), 5, "the history goes with its last sample's TTL")
}
