package redisstore

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

var channels = []byte(`{"lang":"en","channels":[{"email":"b@shop.example"}]}`)

// entryFields is user's token entry split at its separators.
func entryFields(t *testing.T, s *Store, room, user string) []string {
	t.Helper()
	v, err := s.client.HGet(t.Context(), s.keys(room).tok, user).Result()
	require.NoError(t, err)
	return strings.Split(v, "|")
}

// TestAdmitHandsBackNoticesAmongOthers: in one call of many users, only
// the one who asked gets its channels, a token entry with its link and an
// active entry of its own; the others share the call's, as before.
func TestAdmitHandsBackNoticesAmongOthers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 100, TokenTTL: time.Minute, FirstUseWithin: 10 * time.Second, NotifiedFirstUseWithin: 30 * time.Second})
	for _, u := range []string{"a", "b", "c", "d"} {
		_, err := s.Enter(ctx, room, u)
		require.NoError(t, err)
	}
	require.NoError(t, s.SetNotice(ctx, room, "c", channels))
	kept, err := s.Notice(ctx, room, "c")
	require.NoError(t, err)
	require.Equal(t, channels, kept)
	_, err = s.Admit(ctx, room) // starts the bucket
	require.NoError(t, err)
	advance(t, s, time.Second)
	got, err := s.Admit(ctx, room)
	require.NoError(t, err)
	require.Len(t, got, 4, "one call")
	for _, a := range got {
		if a.User == "c" {
			require.Equal(t, channels, a.Notice)
		} else {
			require.Nil(t, a.Notice, a.User)
		}
		require.Equal(t, a.Token, entryFields(t, s, room, a.User)[0])
	}
	told := entryFields(t, s, room, "c")
	require.Len(t, told, 6)
	require.Equal(t, "n", told[5])
	require.Len(t, entryFields(t, s, room, "a"), 5, "a watching user's entry is as it was")
	members, err := s.client.ZRange(ctx, s.keys(room).active, 0, -1).Result()
	require.NoError(t, err)
	require.Contains(t, members, "c")
	require.Contains(t, members, " a b d", "the others share the call's active entry")
	kept, err = s.Notice(ctx, room, "c")
	require.NoError(t, err)
	require.Nil(t, kept)
}

// TestNoticeMarkGoes: a room where nobody asked has no mark; SetNotice
// sets it, and once the notices are gone the next Admit that pops anyone
// clears it, so the room pays nothing for notices again.
func TestNoticeMarkGoes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 100})
	k := s.keys(room)
	mark := func() bool {
		n, err := s.client.HExists(ctx, k.bucket, "notices").Result()
		require.NoError(t, err)
		return n
	}
	for _, u := range []string{"a", "b"} {
		_, err := s.Enter(ctx, room, u)
		require.NoError(t, err)
	}
	require.False(t, mark())
	require.NoError(t, s.SetNotice(ctx, room, "a", channels))
	require.True(t, mark())
	require.NoError(t, s.SetNotice(ctx, room, "a", nil), "an empty request forgets it")
	kept, err := s.Notice(ctx, room, "a")
	require.NoError(t, err)
	require.Nil(t, kept)
	require.NoError(t, s.SetNotice(ctx, room, "b", channels))
	require.NoError(t, s.Leave(ctx, room, "b"))
	n, err := s.client.Exists(ctx, k.notice).Result()
	require.NoError(t, err)
	require.Zero(t, n, "leaving forgot the last notice")
	require.True(t, mark())
	got := admitN(t, s, room, 1)
	require.Nil(t, got[0].Notice)
	require.False(t, mark(), "Admit cleared the mark")
}

// TestEnterKeepsASilentToldBuyer: silent past abandon_after, a buyer who
// asked keeps its place when it comes back (Enter), where another is
// counted abandoned and queued anew.
func TestEnterKeepsASilentToldBuyer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 1, AbandonAfter: time.Minute})
	for _, u := range []string{"told", "silent", "late"} {
		_, err := s.Enter(ctx, room, u)
		require.NoError(t, err)
	}
	require.NoError(t, s.SetNotice(ctx, room, "told", channels))
	advance(t, s, 2*time.Minute)
	st, err := s.Enter(ctx, room, "told")
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Position, "its place kept")
	st, err = s.Enter(ctx, room, "silent")
	require.NoError(t, err)
	require.Equal(t, int64(3), st.Position, "queued anew, behind late")
	kept, err := s.Notice(ctx, room, "told")
	require.NoError(t, err)
	require.Equal(t, channels, kept)
}

// TestReturnLinkOutlivesAClaim: the link kept by Notified survives a
// claim and its release, and spending it leaves a five-field entry; a
// watching user's Notified keeps the nonce but not its deadline.
func TestReturnLinkOutlivesAClaim(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 100, TokenTTL: time.Minute, FirstUseWithin: 10 * time.Second, NotifiedFirstUseWithin: 20 * time.Second})
	for _, u := range []string{"told", "watching"} {
		_, err := s.Enter(ctx, room, u)
		require.NoError(t, err)
	}
	require.NoError(t, s.SetNotice(ctx, room, "told", channels))
	got := admitN(t, s, room, 2)
	require.Equal(t, "told", got[0].User)

	before := entryFields(t, s, room, "watching")
	left, err := s.Notified(ctx, room, "watching", "w-nonce")
	require.NoError(t, err)
	require.InDelta(t, time.Minute.Seconds(), left.Seconds(), 2)
	after := entryFields(t, s, room, "watching")
	require.Equal(t, before[4], after[4], "a watching user's deadline is its own")
	require.Equal(t, "ww-nonce", after[5])

	_, err = s.Notified(ctx, room, "told", "nonce")
	require.NoError(t, err)
	h, err := s.Claim(ctx, room, "told", got[0].Token)
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, h))
	require.ErrorIs(t, s.UseReturnLink(ctx, room, "told", "other"), waitroom.ErrReturnLinkUsed)
	require.ErrorIs(t, s.UseReturnLink(ctx, room, "told", "no|nce"), waitroom.ErrReturnLinkUsed)
	require.NoError(t, s.UseReturnLink(ctx, room, "told", "nonce"))
	require.Len(t, entryFields(t, s, room, "told"), 5, "spent: no link left")
	require.ErrorIs(t, s.UseReturnLink(ctx, room, "told", "nonce"), waitroom.ErrReturnLinkUsed)

	_, err = s.Notified(ctx, room, "told", "bad|nonce")
	require.ErrorIs(t, err, waitroom.ErrBadRequest)
	_, err = s.Notified(ctx, room, "told", "")
	require.ErrorIs(t, err, waitroom.ErrBadRequest)
	require.ErrorIs(t, s.UseReturnLink(ctx, room, "nobody", "nonce"), waitroom.ErrTokenNotFound)
	_, err = s.Notice(ctx, "no-such-"+room, "u")
	require.ErrorIs(t, err, waitroom.ErrRoomNotFound)
}

// TestEarlyArrivalsNoticeOutlivesTheDraw: an early arrival who asked
// before the opening is drawn with its notice kept, and its admission
// brings it.
func TestEarlyArrivalsNoticeOutlivesTheDraw(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	opensAt := time.Now().Add(time.Hour) // reached by the test clock (advanceTo), never by waiting
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 100, OpensAt: opensAt})
	for _, u := range []string{"a", "told", "b"} {
		st, err := s.Enter(ctx, room, u)
		require.NoError(t, err)
		require.Equal(t, waitroom.StateScheduled, st.State)
	}
	require.NoError(t, s.SetNotice(ctx, room, "told", channels))
	advanceTo(t, s, opensAt.Add(50*time.Millisecond))
	// The call that makes the draw may admit too: its admissions count.
	var admitted []waitroom.Admission
	for d, err := s.Draw(ctx, room); d.State != waitroom.DrawDone; d, err = s.Draw(ctx, room) {
		require.NoError(t, err)
		got, err := s.Admit(ctx, room)
		require.NoError(t, err)
		admitted = append(admitted, got...)
	}
	for i := 0; len(admitted) < 3 && i < 100; i++ {
		advance(t, s, 100*time.Millisecond)
		got, err := s.Admit(ctx, room)
		require.NoError(t, err)
		admitted = append(admitted, got...)
	}
	require.Len(t, admitted, 3)
	for _, a := range admitted {
		if a.User == "told" {
			require.Equal(t, channels, a.Notice)
		} else {
			require.Nil(t, a.Notice, a.User)
		}
	}
}
