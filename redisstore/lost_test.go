package redisstore

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

func TestWatermark(t *testing.T) {
	t.Parallel()
	t.Run("out of order replies are no loss", func(t *testing.T) {
		t.Parallel()
		var w watermark
		at := w // two calls sent together
		require.Zero(t, w.observe(at, reading{1, 2}))
		require.Zero(t, w.observe(at, reading{0, 1}), "sent before the other's reply arrived")
		require.Equal(t, int64(2), w.high)
	})
	t.Run("a loss is counted once", func(t *testing.T) {
		t.Parallel()
		w := watermark{high: 100}
		at := w // two calls sent after 100 was confirmed; then a failover to 40
		require.Equal(t, int64(60), w.observe(at, reading{40, 41}), "seqs 41..100 are gone")
		require.Zero(t, w.observe(at, reading{41, 42}), "the same loss, seen by a call sent before it was found")
		require.Equal(t, int64(41), w.high)
		next := w
		require.Zero(t, w.observe(next, reading{42, 43}))
		require.Equal(t, int64(43), w.high)
	})
	t.Run("a call the new primary ran first extends the loss", func(t *testing.T) {
		t.Parallel()
		w := watermark{high: 100}
		at := w // E and D sent together after a failover to 40
		require.Equal(t, int64(59), w.observe(at, reading{41, 42}), "D's reply, seen first, after E ran")
		require.Equal(t, int64(1), w.observe(at, reading{40, 41}), "E ran first: 41 was lost too")
		require.Zero(t, w.observe(at, reading{40, 41}), "no more than once")
		require.Zero(t, w.observe(w, reading{42, 43}))
	})
	t.Run("a late reply from before the loss is ignored", func(t *testing.T) {
		t.Parallel()
		w := watermark{high: 100}
		early := w
		require.Equal(t, int64(60), w.observe(w, reading{40, 41}))
		require.Zero(t, w.observe(early, reading{100, 101}), "the old primary's reply, after the loss was found")
		require.Zero(t, w.observe(w, reading{41, 42}), "no second loss")
	})
}

// TestLostWritesReported: a sequence and an admitted counter that go back
// (here set back by hand, as a failover to a lagging replica does) are
// reported once, by count, to OnLostWrites and in Lost.
func TestLostWritesReported(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newClient(t)
	var mu sync.Mutex
	reported := map[string]Loss{}
	s := New(c, Options{Prefix: testPrefix(t, c), OnLostWrites: func(room string, l Loss) {
		mu.Lock()
		defer mu.Unlock()
		r := reported[room]
		r.Places += l.Places
		r.Tokens += l.Tokens
		reported[room] = r
	}})
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 1000})
	for _, u := range []string{"a", "b", "c", "d", "e"} {
		_, err := s.Enter(ctx, room, u)
		require.NoError(t, err)
	}
	admitN(t, s, room, 5)
	require.Equal(t, Loss{}, s.Lost(), "no loss yet")

	// Redis forgets d's and e's places and two of the five tokens.
	k := s.keys(room)
	require.NoError(t, c.Set(ctx, k.seq, 3, 0).Err())
	require.NoError(t, c.HSet(ctx, k.stats, "admitted", 3).Err())

	// Status sees the sequence went back; the next Admit, the tokens.
	st, err := s.Status(ctx, room, "a")
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, st.State)
	require.Equal(t, Loss{Places: 2}, s.Lost())
	_, err = s.Admit(ctx, room)
	require.NoError(t, err)
	require.Equal(t, Loss{Places: 2, Tokens: 2}, s.Lost())
	mu.Lock()
	require.Equal(t, map[string]Loss{room: {Places: 2, Tokens: 2}}, reported)
	mu.Unlock()

	// Nothing more is lost: nothing more is reported.
	_, err = s.Enter(ctx, room, "f")
	require.NoError(t, err)
	advance(t, s, 10*time.Millisecond)
	_, err = s.Admit(ctx, room)
	require.NoError(t, err)
	require.Equal(t, Loss{Places: 2, Tokens: 2}, s.Lost())
}

// TestLostSpentTokensAreNotLostTokens: of the issues a failover took back,
// those whose tokens this Store saw completed (the orders stand) are
// reported as spent, not as lost tokens.
func TestLostSpentTokensAreNotLostTokens(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newClient(t)
	s := New(c, Options{Prefix: testPrefix(t, c)})
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 1000})
	for _, u := range []string{"a", "b", "c", "d", "e"} {
		_, err := s.Enter(ctx, room, u)
		require.NoError(t, err)
	}
	admitted := admitN(t, s, room, 5)
	// a (issue 1, kept) and e (issue 5, lost) order.
	for _, i := range []int{0, 4} {
		h, err := s.Claim(ctx, room, admitted[i].User, admitted[i].Token)
		require.NoError(t, err)
		require.NoError(t, s.Complete(ctx, h))
	}

	// Redis forgets issues 4 and 5: d's token is lost, e's was spent.
	require.NoError(t, c.HSet(ctx, s.keys(room).stats, "admitted", 3).Err())
	_, err := s.Admit(ctx, room)
	require.NoError(t, err)
	require.Equal(t, Loss{Tokens: 1, Spent: 1}, s.Lost())
}
