package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
)

// testUnsettledHoldKeepsItsUnit: an order whose gate lost touch with the
// store (no renewal, no Complete yet) outlives both its lease and its
// token's TTL: until the settle window is over the token is not cleaned
// up, keeps its unit from the next buyer and cannot be claimed again, so
// the Complete that lands late sells the unit and records the buyer.
func testUnsettledHoldKeepsItsUnit(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 100, TokenTTL: time.Second, Lease: 200 * time.Millisecond,
		Stock: 1, OneOrderPerUser: true})
	enterAll(t, h.Store, room, 2)
	a := admitOne(t, h, room)
	hold, err := h.Store.Claim(ctx, room, a.User, a.Token)
	require.NoError(t, err)

	h.Advance(t, 1200*time.Millisecond)  // past the TTL and the lease
	got, err := h.Store.Admit(ctx, room) // runs expiry cleanup
	require.NoError(t, err)
	require.Empty(t, got, "the held token keeps the only unit")
	stats := testenv.Stats(t, h.Store, room)
	require.Equal(t, int64(1), stats.Active, "still reserved")
	require.Zero(t, stats.Expired+stats.NoShows, "not cleaned up")
	_, err = h.Store.Claim(ctx, room, a.User, a.Token)
	require.ErrorIs(t, err, waitroom.ErrTokenInUse, "a second order with the token must not pass")

	require.NoError(t, h.Store.Complete(ctx, hold))
	got, err = h.Store.Admit(ctx, room)
	require.NoError(t, err)
	require.Empty(t, got, "sold out")
	stats = testenv.Stats(t, h.Store, room)
	require.Equal(t, int64(1), stats.Completed)
	require.Zero(t, stats.Active)
	_, err = h.Store.Enter(ctx, room, a.User)
	require.ErrorIs(t, err, waitroom.ErrAlreadyOrdered, "the buyer is recorded")
}

// testPassWaitsForAnUnsettledHold: a pass does not give a user a second
// token while an order may still complete the first (its lease lapsed in
// a stall, the settle window still open): the new token would reserve the
// unit the first may have sold.
func testPassWaitsForAnUnsettledHold(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 100, TokenTTL: time.Second, Lease: 200 * time.Millisecond, Stock: 2})
	enterAll(t, h.Store, room, 1)
	a := admitOne(t, h, room)
	hold, err := h.Store.Claim(ctx, room, a.User, a.Token)
	require.NoError(t, err)
	pass := newPass(t, h.Store, room, 2)

	h.Advance(t, 1200*time.Millisecond) // past the TTL and the lease
	_, err = h.Store.EnterWithPass(ctx, room, a.User, pass.ID)
	require.ErrorIs(t, err, waitroom.ErrTokenInUse, "no second token beside an unsettled hold")
	stats := testenv.Stats(t, h.Store, room)
	require.Equal(t, int64(1), stats.Admitted)
	require.Equal(t, int64(1), stats.Active, "the held token alone reserves a unit")

	require.NoError(t, h.Store.Complete(ctx, hold), "the late Complete still lands")
	st, err := h.Store.EnterWithPass(ctx, room, a.User, pass.ID)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, st.State, "once settled, the pass lets the user in")
	stats = testenv.Stats(t, h.Store, room)
	require.Equal(t, int64(1), stats.Completed)
	require.Equal(t, int64(2), stats.Admitted)
	passes, err := h.Store.Passes(ctx, room)
	require.NoError(t, err)
	require.Equal(t, 1, passes[0].Left, "the refused use was not taken")
}
