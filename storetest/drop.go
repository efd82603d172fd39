package storetest

import (
	"encoding/hex"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
)

// testScheduledOpening: 40 early arrivals on two instances, the opening a
// couple of seconds ahead. Before it they are told "scheduled" (a fifo
// room tells their place, a random one none) and nobody is admitted; both
// instances race the opening's admission, and exactly one draw places them
// 1..40, the same on both instances: not in arrival order when random, in
// arrival order when fifo. A late arrival is 41st, the revealed seed
// matches the commitment and reproduces every place, and admission
// follows the places.
func testScheduledOpening(t *testing.T, h Harness) {
	for _, order := range []waitroom.PrequeueOrder{waitroom.PrequeueRandom, waitroom.PrequeueFIFO} {
		t.Run(string(order), func(t *testing.T) {
			scheduledOpening(t, h, order)
		})
	}
}

func scheduledOpening(t *testing.T, h Harness, order waitroom.PrequeueOrder) {
	ctx := ctxFor(t)
	const early = 40
	opensIn := 2 * time.Second
	// Rate 1: the opening's first tick admits nobody, so every early
	// arrival's place can be read afterwards.
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 1, OpensAt: h.now().Add(opensIn), PrequeueOrder: order})
	stores := []waitroom.Store{h.Store, h.Peer(t)}

	before, err := stores[1].Draw(ctx, room)
	require.NoError(t, err)
	require.Equal(t, waitroom.DrawPending, before.State)
	require.Equal(t, order, before.Order)
	require.Len(t, before.Commitment, 64)
	require.Empty(t, before.Seed, "the seed is secret until the draw")
	require.Positive(t, before.OpensIn)
	require.LessOrEqual(t, before.OpensIn, opensIn)

	for i := range early {
		st, err := stores[i%2].Enter(ctx, room, user(i))
		require.NoError(t, err)
		require.Equal(t, waitroom.StateScheduled, st.State)
		require.Positive(t, st.OpensIn)
		require.LessOrEqual(t, st.OpensIn, opensIn)
		if order == waitroom.PrequeueFIFO {
			require.Equal(t, int64(i+1), st.Position)
		} else {
			require.Zero(t, st.Position, "no place before the draw")
		}
	}
	st, err := stores[1].Status(ctx, room, user(0))
	require.NoError(t, err)
	require.Equal(t, waitroom.StateScheduled, st.State)
	got, err := h.Store.Admit(ctx, room)
	require.NoError(t, err)
	require.Empty(t, got, "nobody before the opening")
	stats := testenv.Stats(t, h.Store, room)
	require.Equal(t, int64(early), stats.Waiting)

	h.Advance(t, opensIn+50*time.Millisecond)
	errs := race(4, func(i int) error {
		_, err := stores[i%2].Admit(ctx, room)
		return err
	})
	require.Equal(t, map[string]int{"ok": 4}, countErrors(errs))
	// Another instance may still be placing them when its rival returned:
	// the answers are "scheduled" until the draw is whole.
	var d waitroom.Draw
	for range 200 {
		if d, err = h.Store.Draw(ctx, room); err == nil && d.State == waitroom.DrawDone {
			break
		}
		_, err = h.Store.Admit(ctx, room)
		require.NoError(t, err)
		h.Advance(t, 10*time.Millisecond)
	}
	require.Equal(t, waitroom.DrawDone, d.State)
	require.Equal(t, int64(early), d.Entrants)

	places := map[string]int64{}
	users := make([]string, early)
	for i := range early {
		users[i] = user(i)
		var seen []int64
		for _, s := range stores {
			st, err := s.Status(ctx, room, user(i))
			require.NoError(t, err)
			require.Equal(t, waitroom.StateWaiting, st.State, user(i))
			seen = append(seen, st.Position)
		}
		require.Equal(t, seen[0], seen[1], "%s: both instances answer the same place", user(i))
		places[user(i)] = seen[0]
	}
	inOrder := true
	byPlace := make([]string, early)
	for i, u := range users {
		p := places[u]
		require.True(t, p >= 1 && p <= early, "%s at %d", u, p)
		require.Empty(t, byPlace[p-1], "place %d given twice", p)
		byPlace[p-1] = u
		inOrder = inOrder && p == int64(i+1)
	}
	if order == waitroom.PrequeueFIFO {
		require.True(t, inOrder, "fifo keeps arrival order")
	} else {
		require.False(t, inOrder, "a random draw is not arrival order")
	}

	late, err := h.Store.Enter(ctx, room, "late")
	require.NoError(t, err)
	require.Equal(t, waitroom.StateWaiting, late.State)
	require.Equal(t, int64(early+1), late.Position, "a late arrival queues behind every early one")

	// The revealed seed: it matches the commitment and gives every place.
	require.Equal(t, before.Commitment, d.Commitment)
	commitment, err := waitroom.Commitment(d.Seed)
	require.NoError(t, err)
	require.Equal(t, before.Commitment, commitment)
	want, err := waitroom.DrawPlaces(order, d.Seed, users)
	require.NoError(t, err)
	require.Equal(t, want, byPlace)
	entrants, err := stores[1].Entrants(ctx, room)
	require.NoError(t, err)
	require.Len(t, entrants, early)
	for i, e := range entrants {
		require.Equal(t, waitroom.Entrant{User: byPlace[i], Place: int64(i + 1)}, e)
	}
	// The record's digest is of the entrants as drawn, and the public list
	// (draw values, no ids) verifies against it.
	digest, err := waitroom.DrawnDigest(d.Seed, byPlace)
	require.NoError(t, err)
	require.Equal(t, digest, d.Digest)
	public, err := waitroom.PublicEntrants(d.Seed, entrants)
	require.NoError(t, err)
	if order == waitroom.PrequeueRandom {
		diffs, err := waitroom.VerifyDraw(waitroom.DrawRecordCheck{Seed: d.Seed, Commitment: d.Commitment,
			Entrants: d.Entrants, Digest: d.Digest, SavedCommitment: before.Commitment}, public)
		require.NoError(t, err)
		require.Empty(t, diffs)
	}
	// A user finds their own place: their id and the seed give their
	// value, the value their line.
	mine := hex.EncodeToString(waitroom.DrawValue(mustHex(t, d.Seed), user(7)))
	found := slices.IndexFunc(public, func(e waitroom.DrawnEntrant) bool { return e.Value == mine })
	require.GreaterOrEqual(t, found, 0)
	require.Equal(t, places[user(7)], public[found].Place)

	// The operator clears the opening time after the draw: the drawn
	// still wait ahead of the later arrival, in their places.
	cfg, err := h.Store.RoomConfig(ctx, room)
	require.NoError(t, err)
	cleared := cfg
	cleared.OpensAt = time.Time{}
	require.NoError(t, h.Store.UpdateRoom(ctx, room, cfg, cleared))
	for _, s := range stores {
		st, err := s.Status(ctx, room, byPlace[0])
		require.NoError(t, err)
		require.Equal(t, int64(1), st.Position, "the first drawn, opening time cleared")
		st, err = s.Enter(ctx, room, "late")
		require.NoError(t, err)
		require.Equal(t, int64(early+1), st.Position, "the late arrival, opening time cleared")
	}

	// Admission follows the places.
	var admitted []string
	for i := 0; len(admitted) < 3 && i < 100; i++ {
		h.Advance(t, time.Second)
		got, err := h.Store.Admit(ctx, room)
		require.NoError(t, err)
		for _, a := range got {
			admitted = append(admitted, a.User)
		}
	}
	require.Equal(t, byPlace[:len(admitted)], admitted)
	require.Len(t, admitted, 3)
}

// testFirstUseAfterOpening: the early arrivals learn their places from
// first polls spread over the seconds after the opening
// (waitroom.FirstPollsSpread), so a token issued within that span counts
// its first-use deadline and its TTL from the span's end; one issued after
// it from its issue.
func testFirstUseAfterOpening(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	const early = 5
	// A TTL shorter than the span too: both count from the span's end.
	firstUse, ttl := waitroom.MinFirstUseWithin, 2*time.Second
	opensIn := time.Second
	opensAt := h.now().Add(opensIn)
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 100, FirstUseWithin: firstUse, TokenTTL: ttl, OpensAt: opensAt})
	for i := range early {
		st, err := h.Store.Enter(ctx, room, user(i))
		require.NoError(t, err)
		require.Equal(t, waitroom.StateScheduled, st.State)
	}
	h.Advance(t, opensIn+50*time.Millisecond)
	span := waitroom.FirstPollsSpread(early)
	require.Greater(t, span, 5*firstUse)
	var admitted []waitroom.Admission
	for i := 0; len(admitted) < early && i < 200; i++ {
		got, err := h.Store.Admit(ctx, room)
		require.NoError(t, err)
		admitted = append(admitted, got...)
		h.Advance(t, 10*time.Millisecond)
	}
	require.Len(t, admitted, early, "every early arrival admitted in the first ticks")
	// Past the first-use time and the TTL, nobody having polled: within
	// the span the tokens are still theirs.
	h.Advance(t, ttl+200*time.Millisecond)
	for _, a := range admitted {
		st, err := h.Store.Status(ctx, room, a.User)
		require.NoError(t, err, "%s: its token outlives the first-use time within the span", a.User)
		require.Equal(t, waitroom.StateAdmitted, st.State)
		require.Equal(t, a.Token, st.Token)
		require.Greater(t, st.ExpiresIn, ttl, "%s: its TTL counts from the span's end", a.User)
	}

	// After the span, a token's first-use deadline counts from its issue.
	h.Advance(t, opensAt.Add(span).Sub(h.now())+100*time.Millisecond)
	st, err := h.Store.Enter(ctx, room, "late")
	require.NoError(t, err)
	require.Equal(t, waitroom.StateWaiting, st.State)
	var late []waitroom.Admission
	for i := 0; len(late) == 0 && i < 200; i++ {
		late, err = h.Store.Admit(ctx, room)
		require.NoError(t, err)
		h.Advance(t, 10*time.Millisecond)
	}
	require.Len(t, late, 1)
	h.Advance(t, firstUse+200*time.Millisecond)
	_, err = h.Store.Status(ctx, room, "late")
	require.ErrorIs(t, err, waitroom.ErrNotInQueue, "issued after the span: gone at its first-use time")
}

// testScheduledRoomRefusals: a room's closing time refuses new entries,
// leaving before the opening gives up the entry, a room without an
// opening has no draw, and entrants before the draw are not for export.
func testScheduledRoomRefusals(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{OpensAt: h.now().Add(time.Hour), PrequeueOrder: waitroom.PrequeueFIFO})
	enterAll := func(n int) {
		for i := range n {
			st, err := h.Store.Enter(ctx, room, user(i))
			require.NoError(t, err)
			require.Equal(t, waitroom.StateScheduled, st.State)
		}
	}
	enterAll(3)
	require.NoError(t, h.Store.Leave(ctx, room, user(0)))
	_, err := h.Store.Status(ctx, room, user(0))
	require.ErrorIs(t, err, waitroom.ErrNotInQueue)
	st, err := h.Store.Status(ctx, room, user(2))
	require.NoError(t, err)
	require.Equal(t, int64(2), st.Position, "the one who left is no longer ahead")
	_, err = h.Store.Entrants(ctx, room)
	require.ErrorIs(t, err, waitroom.ErrDrawPending)

	plain := newRoom(t, h, waitroom.RoomConfig{})
	_, err = h.Store.Draw(ctx, plain)
	require.ErrorIs(t, err, waitroom.ErrNoDraw)
	_, err = h.Store.Entrants(ctx, plain)
	require.ErrorIs(t, err, waitroom.ErrNoDraw)

	closing := newRoom(t, h, waitroom.RoomConfig{ClosesAt: h.now().Add(time.Second)})
	_, err = h.Store.Enter(ctx, closing, "before")
	require.NoError(t, err)
	h.Advance(t, 1100*time.Millisecond)
	_, err = h.Store.Enter(ctx, closing, "after")
	require.ErrorIs(t, err, waitroom.ErrRoomClosed)
	st, err = h.Store.Enter(ctx, closing, "before")
	require.NoError(t, err, "those queued keep their place")
	require.Equal(t, waitroom.StateWaiting, st.State)

	for _, bad := range []waitroom.RoomConfig{
		{PrequeueOrder: "lottery"},
		{OpensAt: h.now().Add(time.Hour), ClosesAt: h.now()},
	} {
		_, err := h.Store.CreateRoom(ctx, fmt.Sprintf("bad-%d", time.Now().UnixNano()), bad)
		require.ErrorIs(t, err, waitroom.ErrBadRequest, "%+v", bad)
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	return b
}

// testDrawSeedReplaced: a seed replaced behind the store's back after its
// commitment was published (Harness.ReplaceSeed: the key written on
// Redis) is refused loudly: the record is not served with a different
// commitment, the draw places nobody, and after the draw the record is
// refused too.
func testDrawSeedReplaced(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	require.NotNil(t, h.ReplaceSeed, "the harness must be able to tamper with a seed")
	opensIn := time.Second
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 1, OpensAt: h.now().Add(opensIn)})
	_, err := h.Store.Draw(ctx, room)
	require.NoError(t, err, "the commitment is published")
	for i := range 3 {
		_, err := h.Store.Enter(ctx, room, user(i))
		require.NoError(t, err)
	}
	h.ReplaceSeed(t, room, waitroom.NewSeed())
	for _, s := range []waitroom.Store{h.Store, h.Peer(t)} {
		d, err := s.Draw(ctx, room)
		require.ErrorIs(t, err, waitroom.ErrDrawSeedMismatch, "served as %+v", d)
	}
	h.Advance(t, opensIn+50*time.Millisecond)
	_, err = h.Store.Admit(ctx, room)
	require.ErrorIs(t, err, waitroom.ErrDrawSeedMismatch, "the draw is refused")
	st, err := h.Store.Status(ctx, room, user(0))
	require.NoError(t, err)
	require.Equal(t, waitroom.StateScheduled, st.State, "nobody placed by a replaced seed")

	// After the draw: the revealed seed replaced.
	drawn := newRoom(t, h, waitroom.RoomConfig{Rate: 1, OpensAt: h.now().Add(opensIn)})
	_, err = h.Store.Enter(ctx, drawn, user(0))
	require.NoError(t, err)
	h.Advance(t, opensIn+50*time.Millisecond)
	drawDone(t, h, drawn)
	h.ReplaceSeed(t, drawn, waitroom.NewSeed())
	_, err = h.Store.Draw(ctx, drawn)
	require.ErrorIs(t, err, waitroom.ErrDrawSeedMismatch)
	_, err = h.Store.Entrants(ctx, drawn)
	require.ErrorIs(t, err, waitroom.ErrDrawSeedMismatch)
}

// drawDone admits until room's draw is done and returns its record.
func drawDone(t *testing.T, h Harness, room string) waitroom.Draw {
	t.Helper()
	for range 200 {
		_, err := h.Store.Admit(ctxFor(t), room)
		require.NoError(t, err)
		d, err := h.Store.Draw(ctxFor(t), room)
		require.NoError(t, err)
		if d.State == waitroom.DrawDone {
			return d
		}
		h.Advance(t, 10*time.Millisecond)
	}
	t.Fatal("the draw was not done")
	return waitroom.Draw{}
}

// testDrawSettingsLocked: once a room is scheduled its commitment is
// published, and its prequeue order cannot change (DRAW_PUBLISHED), before
// the draw or after it; other settings can. An opening cannot be set on a
// room with people in its queue (QUEUE_NOT_EMPTY): the early arrivals
// would be placed ahead of them.
func testDrawSettingsLocked(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	opensIn := time.Second
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 1, OpensAt: h.now().Add(opensIn)})
	_, err := h.Store.Enter(ctx, room, user(0))
	require.NoError(t, err)
	change := func(room string, f func(*waitroom.RoomConfig)) error {
		_, err := waitroom.ChangeRoom(ctx, h.Store, room, func(c *waitroom.RoomConfig) error { f(c); return nil })
		return err
	}
	fifo := func(c *waitroom.RoomConfig) { c.PrequeueOrder = waitroom.PrequeueFIFO }
	require.ErrorIs(t, change(room, fifo), waitroom.ErrDrawPublished)
	require.NoError(t, change(room, func(c *waitroom.RoomConfig) { c.PrequeueOrder = waitroom.PrequeueRandom }), "the same order")
	require.NoError(t, change(room, func(c *waitroom.RoomConfig) { c.Rate = 2 }))
	h.Advance(t, opensIn+50*time.Millisecond)
	d := drawDone(t, h, room)
	require.ErrorIs(t, change(room, fifo), waitroom.ErrDrawPublished, "after the draw")
	after, err := h.Store.Draw(ctx, room)
	require.NoError(t, err)
	require.Equal(t, waitroom.PrequeueRandom, after.Order)
	require.Equal(t, d.Commitment, after.Commitment)

	// No opening yet: the order is free, and an opening over a queue is
	// refused; once the queue is empty it is taken.
	plain := newRoom(t, h, waitroom.RoomConfig{Rate: 1})
	require.NoError(t, change(plain, fifo))
	enterAll(t, h.Store, plain, 2)
	opening := func(c *waitroom.RoomConfig) { c.OpensAt = h.now().Add(time.Hour) }
	require.ErrorIs(t, change(plain, opening), waitroom.ErrQueueNotEmpty)
	cfg, err := h.Store.RoomConfig(ctx, plain)
	require.NoError(t, err)
	require.True(t, cfg.OpensAt.IsZero(), "nothing written")
	for i := range 2 {
		require.NoError(t, h.Store.Leave(ctx, plain, user(i)))
	}
	require.NoError(t, change(plain, opening))
}
