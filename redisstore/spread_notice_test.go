package redisstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
)

// testSpreadEarlyNotices: on a room spread over 3 shards, early arrivals
// of a scheduled opening on every sub-shard ask to be told of their turn;
// one leaves before the opening and its request goes with it. After the
// draw each asker is admitted with its channels (the others without),
// its token waits for the notice (Notified starts its deadline) and its
// return link spends once; the requests are forgotten.
func testSpreadEarlyNotices(t *testing.T, s *Store) {
	ctx := testCtx(t)
	room := testenv.Unique("told-")
	_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Shards: 3, Rate: 1000, TokenTTL: time.Minute,
		FirstUseWithin: 2 * time.Second, NotifiedFirstUseWithin: 20 * time.Second, OpensAt: clockNow(t, s).Add(time.Hour)})
	require.NoError(t, err)
	l, err := s.layout(ctx, room)
	require.NoError(t, err)

	// Two askers and one watcher on every sub-shard, and a leaver.
	var askers, watchers []string
	for i := 0; len(askers) < 6 || len(watchers) < 3; i++ {
		u := fmt.Sprintf("u%03d", i)
		switch n := l.of(u); {
		case countOn(l, askers, n) < 2:
			askers = append(askers, u)
		case countOn(l, watchers, n) < 1:
			watchers = append(watchers, u)
		}
	}
	channels := func(u string) []byte { return []byte(`{"channels":[{"email":"` + u + `@shop.example"}]}`) }
	for _, u := range append(append([]string{"leaver"}, askers...), watchers...) {
		st, err := s.Enter(ctx, room, u)
		require.NoError(t, err)
		require.Equal(t, waitroom.StateScheduled, st.State)
	}
	require.ErrorIs(t, s.SetNotice(ctx, room, "nobody", channels("nobody")), waitroom.ErrNotInQueue)
	for _, u := range append([]string{"leaver"}, askers...) {
		require.NoError(t, s.SetNotice(ctx, room, u, channels(u)))
		kept, err := s.Notice(ctx, room, u)
		require.NoError(t, err)
		require.Equal(t, channels(u), kept)
	}
	require.NoError(t, s.Leave(ctx, room, "leaver"))
	kept, err := s.Notice(ctx, room, "leaver")
	require.NoError(t, err)
	require.Empty(t, kept, "leaving forgot it")

	advance(t, s, time.Hour+50*time.Millisecond)
	admitted := map[string]waitroom.Admission{}
	for i := 0; len(admitted) < len(askers)+len(watchers) && i < 50; i++ {
		got, err := s.Admit(ctx, room)
		require.NoError(t, err)
		for _, a := range got {
			admitted[a.User] = a
		}
		advance(t, s, 100*time.Millisecond)
	}
	require.Len(t, admitted, len(askers)+len(watchers))
	for _, u := range askers {
		require.Equal(t, channels(u), admitted[u].Notice, u)
		kept, err := s.Notice(ctx, room, u)
		require.NoError(t, err)
		require.Empty(t, kept, "forgotten at its turn")
	}
	for _, u := range watchers {
		require.Nil(t, admitted[u].Notice, u)
	}

	// Past first_use_within (from the end of the opening's spread): the
	// watchers are no-shows; the askers, not told yet, keep their tokens;
	// told, each has notified_first_use_within.
	advance(t, s, waitroom.OpeningSpread+3*time.Second)
	_, err = s.Admit(ctx, room)
	require.NoError(t, err)
	stats, err := s.Stats(ctx, room)
	require.NoError(t, err)
	require.Equal(t, int64(len(watchers)), stats.NoShows)
	for _, u := range askers {
		left, err := s.Notified(ctx, room, u, "nonce-"+u)
		require.NoError(t, err)
		require.InDelta(t, (57 * time.Second).Seconds(), left.Seconds(), 2, u) // its TTL from the end of the spread
	}
	errs := atOnce(8, func(int) error { return s.UseReturnLink(ctx, room, askers[0], "nonce-"+askers[0]) })
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
			continue
		}
		require.ErrorIs(t, err, waitroom.ErrReturnLinkUsed)
	}
	require.Equal(t, 1, won)
	require.ErrorIs(t, s.UseReturnLink(ctx, room, askers[1], "nonce-"+askers[0]), waitroom.ErrReturnLinkUsed, "another's nonce")
	st, err := s.Status(ctx, room, askers[0])
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, st.State)
}

// countOn counts users on sub-shard n of l.
func countOn(l *spreadLayout, users []string, n int) int {
	c := 0
	for _, u := range users {
		if l.of(u) == n {
			c++
		}
	}
	return c
}
