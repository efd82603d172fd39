package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
)

// requireStanding asks for user's status and checks its state and, when
// waiting, the units it is told (FewLeft only when they are short).
func requireStanding(t *testing.T, s waitroom.Store, room, user string, state waitroom.State, position, left int64, few bool) {
	t.Helper()
	st, err := s.Status(ctxFor(t), room, user)
	require.NoError(t, err)
	require.Equal(t, state, st.State, user)
	if state != waitroom.StateWaiting {
		return
	}
	require.Equal(t, position, st.Position, user)
	require.Equal(t, few, st.FewLeft, user)
	if few {
		require.Equal(t, left, st.UnitsLeft, user)
	}
}

// testUnitsPerOrder: with 3 units per order a stock of 10 takes 3 tokens
// (the 10th unit is never reserved: a token needs 3 left); a waiting user
// is told the units left when fewer than 3 per user up to it remain; a
// claim carries the 3 units, a completed order sells them, a pass is
// counted the same, and with 1 unit unsold the room is sold out until a
// restock.
func testUnitsPerOrder(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 1000, Stock: 10, UnitsPerOrder: 3})
	enterAll(t, h.Store, room, 5)
	peer := h.Peer(t)
	requireStanding(t, peer, room, user(2), waitroom.StateWaiting, 3, 0, false) // 9 units for 3 orders
	requireStanding(t, h.Store, room, user(3), waitroom.StateWaiting, 4, 10, true)
	st, err := h.Store.Enter(ctx, room, user(4))
	require.NoError(t, err)
	require.Equal(t, waitroom.Status{State: waitroom.StateWaiting, Position: 5, UnitsLeft: 10, FewLeft: true}, st)

	// Ticks until nobody more is admitted: exactly 3 tokens, 9 units.
	adm := admitTicks(t, h, room, 20, 20*time.Millisecond)
	require.Len(t, adm, 3, "10 units hold 3 orders of 3")
	requireWithinStock(t, h.Store, room, 10)
	requireStanding(t, h.Store, room, user(3), waitroom.StateWaiting, 1, 1, true)
	requireStanding(t, peer, room, user(4), waitroom.StateWaiting, 2, 1, true)

	// A pass is a token like any: no 3 units left for it (a spread room
	// has no passes).
	var pass waitroom.Pass
	if h.Shards <= 1 {
		pass = newPass(t, h.Store, room, 1)
		_, err = h.Store.EnterWithPass(ctx, room, "with-pass", pass.ID)
		require.ErrorIs(t, err, waitroom.ErrNoFreeSlot)
	}

	// Each claim carries the 3 units; each completed order sells them.
	for i, a := range adm {
		hold, err := peer.Claim(ctx, room, a.User, a.Token)
		require.NoError(t, err)
		require.Equal(t, 3, hold.Units)
		require.NoError(t, h.Store.Complete(ctx, hold))
		st := testenv.Stats(t, h.Store, room)
		require.Equal(t, int64(i+1), st.Completed)
		require.Equal(t, int64(3*(i+1)), st.Sold)
	}
	// 1 unit unsold: less than an order takes, so the room is sold out.
	requireStanding(t, h.Store, room, user(3), waitroom.StateSoldOut, 0, 0, false)
	_, err = peer.Enter(ctx, room, "latecomer")
	require.ErrorIs(t, err, waitroom.ErrSoldOut)
	if h.Shards <= 1 {
		_, err = h.Store.EnterWithPass(ctx, room, "with-pass", pass.ID)
		require.ErrorIs(t, err, waitroom.ErrSoldOut)
	}

	// A restock of 2 makes 3 left: one more order, for user 3 at the head.
	_, err = waitroom.ChangeRoom(ctx, h.Store, room, func(c *waitroom.RoomConfig) error {
		c.Stock = 12
		return nil
	})
	require.NoError(t, err)
	requireStanding(t, h.Store, room, user(3), waitroom.StateWaiting, 1, 0, false)
	requireStanding(t, peer, room, user(4), waitroom.StateWaiting, 2, 3, true)
	more := admitTicks(t, h, room, 20, 20*time.Millisecond)
	require.Equal(t, []string{user(3)}, users(more))
	requireWithinStock(t, h.Store, room, 12)

	// A claim carries the room's setting at the claim, and Complete sells
	// what the hold says, even after the setting changed.
	_, err = waitroom.ChangeRoom(ctx, h.Store, room, func(c *waitroom.RoomConfig) error {
		c.UnitsPerOrder = 2
		return nil
	})
	require.NoError(t, err)
	hold, err := h.Store.Claim(ctx, room, more[0].User, more[0].Token)
	require.NoError(t, err)
	require.Equal(t, 2, hold.Units)
	require.NoError(t, peer.Complete(ctx, hold))
	figures := testenv.Stats(t, h.Store, room)
	require.Equal(t, int64(11), figures.Sold)
	require.Equal(t, int64(4), figures.Completed)
}
