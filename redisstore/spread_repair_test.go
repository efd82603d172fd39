package redisstore

import (
	"bytes"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redistest"
)

// TestSpreadSubShardLostSettings: a sub-shard whose keys are gone (its
// primary restarted without its data) is given its settings again by the
// first ENTER that reaches it, or by the next tick: the room goes on
// there, with what the sub-shard held lost, and says so in the log. A
// room whose layout changed meanwhile is not given them back.
func TestSpreadSubShardLostSettings(t *testing.T) {
	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3})
	ctx := t.Context()
	var logged bytes.Buffer
	s := New(openURL(t, withQuery(c.URL(), suiteTimeouts)), Options{Prefix: randomPrefix(),
		Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	room := testenv.Unique("spread-")
	_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: 3, Rate: 1000, MaxQueue: 1000})
	require.NoError(t, err)
	l, err := s.layout(ctx, room)
	require.NoError(t, err)
	on := func(sub int, name string) string { // a new user on sub-shard sub
		for i := 0; ; i++ {
			if u := fmt.Sprintf("%s-%d", name, i); l.of(u) == sub {
				return u
			}
		}
	}
	lose := func(sub int) {
		k := l.subs[sub]
		require.NoError(t, s.client.Del(ctx, k.cfg, k.q, k.tok, k.active, k.stats, k.mirror, k.left, k.buyers, k.units).Err())
	}
	before := on(1, "before")
	_, err = s.Enter(ctx, room, before)
	require.NoError(t, err)

	// ENTER repairs it.
	lose(1)
	after := on(1, "after")
	st, err := s.Enter(ctx, room, after)
	require.NoError(t, err, "an ENTER on the sub-shard that lost its settings")
	require.Equal(t, waitroom.StateWaiting, st.State)
	_, err = s.Status(ctx, room, before)
	require.ErrorIs(t, err, waitroom.ErrNotInQueue, "what the sub-shard held is lost")
	require.Contains(t, logged.String(), "had lost its settings")

	// A tick repairs it, and admits there from the next one.
	lose(2)
	lost := on(2, "tick")
	for tick := 0; ; tick++ {
		require.Less(t, tick, 10, "the room admits again")
		advance(t, s, 100*time.Millisecond)
		if _, err := s.Admit(ctx, room); err == nil {
			break
		}
	}
	st, err = s.Enter(ctx, room, lost)
	require.NoError(t, err)
	for tick := 0; st.State != waitroom.StateAdmitted; tick++ {
		require.Less(t, tick, 10)
		advance(t, s, 100*time.Millisecond)
		_, err := s.Admit(ctx, room)
		require.NoError(t, err)
		st, err = s.Status(ctx, room, lost)
		require.NoError(t, err)
	}

	// Another layout now: nothing written back over it.
	stale := &spreadLayout{shards: l.shards, id: "an-old-layout", subs: l.subs}
	lose(0)
	require.False(t, s.repairSub(ctx, room, stale, 0))
	require.Zero(t, s.client.Exists(ctx, l.subs[0].cfg).Val())
}

// TestReshardChecksThePlainRoomInOneStep: spreading a room on one shard
// is refused in the step that switches its layout while its own keys
// hold a token, a sale or a buyer, so an admission between a check and
// the switch cannot leave a token the new layout would not find. The
// switch is called here as UpdateRoom calls it, with no check before.
func TestReshardChecksThePlainRoomInOneStep(t *testing.T) {
	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3})
	ctx := t.Context()
	s := New(openURL(t, withQuery(c.URL(), suiteTimeouts)), Options{Prefix: randomPrefix()})
	from := waitroom.RoomConfig{Rate: 1000, MaxQueue: 1000}.WithDefaults()
	to := from
	to.Shards = 3
	for name, fill := range map[string]func(room string){
		"token": func(room string) {
			_, err := s.Enter(ctx, room, "holder")
			require.NoError(t, err)
			for tick := 0; ; tick++ {
				require.Less(t, tick, 10)
				advance(t, s, 100*time.Millisecond)
				if got, err := s.Admit(ctx, room); err == nil && len(got) == 1 {
					return
				}
			}
		},
		"sale":  func(room string) { require.NoError(t, s.client.HSet(ctx, s.keys(room).stats, "sold", 1).Err()) },
		"buyer": func(room string) { require.NoError(t, s.client.SAdd(ctx, s.keys(room).buyers, "b").Err()) },
	} {
		t.Run(name, func(t *testing.T) {
			room := testenv.Unique("plain-")
			_, err := s.CreateRoom(ctx, room, from)
			require.NoError(t, err)
			fill(room)
			fields, _, err := s.spreadFields(ctx, room, to)
			require.NoError(t, err)
			err = s.updateControl(ctx, room, from, to, fields, true, "")
			require.ErrorIs(t, err, waitroom.ErrShardsNotEmpty)
			cfg, err := s.RoomConfig(ctx, room)
			require.NoError(t, err)
			require.Equal(t, 1, max(cfg.Shards, 1), "the room stays on one shard")
		})
	}
}
