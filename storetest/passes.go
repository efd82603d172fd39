package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
)

// newPass stores a pass with uses uses that expires far ahead.
func newPass(t *testing.T, s waitroom.Store, room string, uses int) waitroom.Pass {
	t.Helper()
	p := waitroom.Pass{ID: waitroom.NewToken(), Uses: uses, Left: uses, ExpiresAt: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}
	require.NoError(t, s.CreatePass(ctxFor(t), room, p))
	return p
}

func passLeft(t *testing.T, s waitroom.Store, room, id string) int {
	t.Helper()
	passes, err := s.Passes(ctxFor(t), room)
	require.NoError(t, err)
	for _, p := range passes {
		if p.ID == id {
			return p.Left
		}
	}
	t.Fatalf("pass %s is not listed", id)
	return 0
}

// testPassSkipsTheQueue: a pass gives a token at once, to a newcomer and
// to a queued user (who leaves the queue), one use each, even in a paused
// room; a holder who comes back keeps its token and the pass its uses; a
// used-up pass is PASS_USED_UP.
func testPassSkipsTheQueue(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 1, State: waitroom.RoomPaused})
	enterAll(t, h.Store, room, 3)
	p := newPass(t, h.Store, room, 2)

	staff, err := h.Store.EnterWithPass(ctx, room, "staff", p.ID)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, staff.State)
	require.True(t, waitroom.ValidToken(staff.Token))
	require.Greater(t, staff.ExpiresIn, time.Duration(0))
	again, err := h.Store.EnterWithPass(ctx, room, "staff", p.ID)
	require.NoError(t, err)
	require.Equal(t, staff.Token, again.Token, "a holder keeps its token")
	require.Equal(t, 1, passLeft(t, h.Store, room, p.ID), "and the pass its use")

	queued, err := h.Store.EnterWithPass(ctx, room, user(1), p.ID)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, queued.State)
	st, err := h.Store.Status(ctx, room, user(2))
	require.NoError(t, err)
	require.Equal(t, int64(2), st.Position, "the pass user left the queue")
	require.Equal(t, 0, passLeft(t, h.Store, room, p.ID))

	_, err = h.Store.EnterWithPass(ctx, room, "late", p.ID)
	require.ErrorIs(t, err, waitroom.ErrPassUsedUp)
	_, err = h.Store.Status(ctx, room, "late")
	require.ErrorIs(t, err, waitroom.ErrNotInQueue, "a refused pass takes no place")

	stats := testenv.Stats(t, h.Store, room)
	require.Equal(t, int64(2), stats.Admitted)
	require.Equal(t, int64(2), stats.Active)
	require.Equal(t, int64(2), stats.Waiting)

	// The token opens the gate like any other.
	hold, err := h.Store.Claim(ctx, room, "staff", staff.Token)
	require.NoError(t, err)
	require.NoError(t, h.Store.Complete(ctx, hold))
}

// testPassBeforeTheOpening: a pass lets its holder in at once before a
// scheduled opening too, also an early arrival already waiting for the
// draw; the draw then places that holder like the others, and the
// admitter passes over it: it keeps the pass's token, nobody is admitted
// twice, and no token is counted gone.
func testPassBeforeTheOpening(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 1000, OpensAt: h.now().Add(time.Second)})
	for _, u := range []string{"vip", "fan"} {
		st, err := h.Store.Enter(ctx, room, u)
		require.NoError(t, err)
		require.Equal(t, waitroom.StateScheduled, st.State)
	}
	p := newPass(t, h.Store, room, 1)
	vip, err := h.Store.EnterWithPass(ctx, room, "vip", p.ID)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, vip.State, "a pass does not wait for the opening")

	h.Advance(t, 1100*time.Millisecond)
	admitted := map[string]int{}
	for i := 0; admitted["fan"] == 0 && i < 50; i++ {
		got, err := h.Store.Admit(ctx, room)
		require.NoError(t, err)
		for _, a := range got {
			admitted[a.User]++
		}
		h.Advance(t, 50*time.Millisecond)
	}
	require.Equal(t, map[string]int{"fan": 1}, admitted)
	st, err := h.Store.Status(ctx, room, "vip")
	require.NoError(t, err)
	require.Equal(t, vip.Token, st.Token, "the holder keeps the pass's token")
	stats := testenv.Stats(t, h.Store, room)
	require.Equal(t, int64(2), stats.Admitted)
	require.Equal(t, int64(2), stats.Active)
	require.Zero(t, stats.NoShows+stats.Expired, "no token was superseded")
}

// testPassRefusals: unknown, expired, revoked, another room's pass and a
// closed room are refused with their codes; bad passes are not stored;
// passes list oldest first.
func testPassRefusals(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{})
	other := newRoom(t, h, waitroom.RoomConfig{})
	first := newPass(t, h.Store, room, 1)
	second := newPass(t, h.Store, room, 3)
	elsewhere := newPass(t, h.Store, other, 1)
	expired := waitroom.Pass{ID: waitroom.NewToken(), Uses: 1, Left: 1, ExpiresAt: time.Unix(1, 0)}
	require.NoError(t, h.Store.CreatePass(ctx, room, expired))

	for name, id := range map[string]string{"unknown": waitroom.NewToken(), "expired": expired.ID, "another room's": elsewhere.ID, "not an id": "x"} {
		_, err := h.Store.EnterWithPass(ctx, room, "u", id)
		require.ErrorIs(t, err, waitroom.ErrPassInvalid, name)
	}
	require.NoError(t, h.Store.RevokePass(ctx, room, second.ID))
	_, err := h.Store.EnterWithPass(ctx, room, "u", second.ID)
	require.ErrorIs(t, err, waitroom.ErrPassInvalid, "revoked")
	require.ErrorIs(t, h.Store.RevokePass(ctx, room, waitroom.NewToken()), waitroom.ErrPassInvalid)

	passes, err := h.Store.Passes(ctx, room)
	require.NoError(t, err)
	require.Len(t, passes, 3)
	require.Equal(t, []string{first.ID, second.ID, expired.ID}, []string{passes[0].ID, passes[1].ID, passes[2].ID}, "oldest first")
	require.Equal(t, waitroom.Pass{ID: second.ID, Uses: 3, Left: 3, ExpiresAt: second.ExpiresAt, Revoked: true}, passes[1])
	require.True(t, passes[2].ExpiresAt.Equal(expired.ExpiresAt))

	for name, bad := range map[string]waitroom.Pass{
		"bad id":       {ID: "short", Uses: 1, Left: 1, ExpiresAt: first.ExpiresAt},
		"no uses":      {ID: waitroom.NewToken(), Uses: 0, Left: 0, ExpiresAt: first.ExpiresAt},
		"left > uses":  {ID: waitroom.NewToken(), Uses: 1, Left: 2, ExpiresAt: first.ExpiresAt},
		"no expiry":    {ID: waitroom.NewToken(), Uses: 1, Left: 1},
		"id taken":     first,
		"too may uses": {ID: waitroom.NewToken(), Uses: waitroom.MaxPassUses + 1, Left: 1, ExpiresAt: first.ExpiresAt},
	} {
		require.ErrorIs(t, h.Store.CreatePass(ctx, room, bad), waitroom.ErrBadRequest, name)
	}
	passes, err = h.Store.Passes(ctx, room)
	require.NoError(t, err)
	require.Len(t, passes, 3, "nothing bad was stored")

	closed := newRoom(t, h, waitroom.RoomConfig{State: waitroom.RoomClosed})
	p := newPass(t, h.Store, closed, 1)
	_, err = h.Store.EnterWithPass(ctx, closed, "u", p.ID)
	require.ErrorIs(t, err, waitroom.ErrRoomClosed)
	require.Equal(t, 1, passLeft(t, h.Store, closed, p.ID))
	// Past its closes_at a room refuses a pass as it refuses an entry.
	closing := newRoom(t, h, waitroom.RoomConfig{ClosesAt: h.now().Add(300 * time.Millisecond)})
	p = newPass(t, h.Store, closing, 1)
	h.Advance(t, 400*time.Millisecond)
	_, err = h.Store.EnterWithPass(ctx, closing, "u", p.ID)
	require.ErrorIs(t, err, waitroom.ErrRoomClosed)
	require.Equal(t, 1, passLeft(t, h.Store, closing, p.ID))

	// invite_only is a setting like the others: stored, read, changed.
	invite := newRoom(t, h, waitroom.RoomConfig{InviteOnly: true})
	cfg, err := h.Store.RoomConfig(ctx, invite)
	require.NoError(t, err)
	require.True(t, cfg.InviteOnly)
	// Only pass holders get in; a pass holder keeps its token on a plain
	// enter, and a user queued before the room turned invite-only keeps
	// its place.
	_, err = h.Store.Enter(ctx, invite, "stranger")
	require.ErrorIs(t, err, waitroom.ErrInviteOnly)
	ip := newPass(t, h.Store, invite, 1)
	guest, err := h.Store.EnterWithPass(ctx, invite, "guest", ip.ID)
	require.NoError(t, err)
	back, err := h.Store.Enter(ctx, invite, "guest")
	require.NoError(t, err)
	require.Equal(t, guest.Token, back.Token)
	open := cfg
	open.InviteOnly = false
	require.NoError(t, h.Store.UpdateRoom(ctx, invite, cfg, open))
	_, err = h.Store.Enter(ctx, invite, "early")
	require.NoError(t, err)
	require.NoError(t, h.Store.UpdateRoom(ctx, invite, open, cfg))
	early, err := h.Store.Enter(ctx, invite, "early")
	require.NoError(t, err)
	require.Equal(t, waitroom.StateWaiting, early.State, "queued before: keeps the place")
	require.NoError(t, h.Store.UpdateRoom(ctx, invite, cfg, open))
	cfg, err = h.Store.RoomConfig(ctx, invite)
	require.NoError(t, err)
	require.False(t, cfg.InviteOnly)

	missing := "no-such-room-" + room
	require.ErrorIs(t, h.Store.CreatePass(ctx, missing, newPassValue()), waitroom.ErrRoomNotFound)
	_, err = h.Store.Passes(ctx, missing)
	require.ErrorIs(t, err, waitroom.ErrRoomNotFound)
	_, err = h.Store.EnterWithPass(ctx, missing, "u", first.ID)
	require.ErrorIs(t, err, waitroom.ErrRoomNotFound)
}

func newPassValue() waitroom.Pass {
	return waitroom.Pass{ID: waitroom.NewToken(), Uses: 1, Left: 1, ExpiresAt: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// testPassCountsAgainstMaxActiveAndStock: a pass's token is a live token
// like any: none beyond max_active or the unsold stock (NO_FREE_SLOT, the
// use kept), none once sold out (SOLD_OUT), and the admitter admits nobody
// while pass holders hold every unit.
func testPassCountsAgainstMaxActiveAndStock(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	capped := newRoom(t, h, waitroom.RoomConfig{Rate: 1000, MaxActive: 2})
	p := newPass(t, h.Store, capped, 5)
	for _, u := range []string{"a", "b"} {
		_, err := h.Store.EnterWithPass(ctx, capped, u, p.ID)
		require.NoError(t, err)
	}
	_, err := h.Store.EnterWithPass(ctx, capped, "c", p.ID)
	require.ErrorIs(t, err, waitroom.ErrNoFreeSlot)
	require.Equal(t, 3, passLeft(t, h.Store, capped, p.ID), "a refused use is kept")

	stocked := newRoom(t, h, waitroom.RoomConfig{Rate: 1000, Stock: 2})
	enterAll(t, h.Store, stocked, 3)
	sp := newPass(t, h.Store, stocked, 5)
	var tokens []waitroom.Admission
	for _, u := range []string{"a", "b"} {
		st, err := h.Store.EnterWithPass(ctx, stocked, u, sp.ID)
		require.NoError(t, err)
		tokens = append(tokens, waitroom.Admission{User: u, Token: st.Token})
	}
	_, err = h.Store.EnterWithPass(ctx, stocked, "c", sp.ID)
	require.ErrorIs(t, err, waitroom.ErrNoFreeSlot, "both units are reserved")
	for range 5 {
		h.Advance(t, 100*time.Millisecond)
		got, err := h.Store.Admit(ctx, stocked)
		require.NoError(t, err)
		require.Empty(t, got, "the pass holders hold every unit")
	}
	for _, a := range tokens {
		require.NoError(t, buy(t, h.Store, stocked, a))
	}
	_, err = h.Store.EnterWithPass(ctx, stocked, "c", sp.ID)
	require.ErrorIs(t, err, waitroom.ErrSoldOut)
	requireWithinStock(t, h.Store, stocked, 2)
	require.Equal(t, 3, passLeft(t, h.Store, stocked, sp.ID))
}

// testConcurrentPassUses: 40 users at once on a 5-use pass: exactly 5 get
// in, 35 PASS_USED_UP; 10 calls of one user on a 3-use pass: one token,
// one use.
func testConcurrentPassUses(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{})
	p := newPass(t, h.Store, room, 5)
	peer := h.Peer(t)
	const users = 40
	errs := make([]error, users)
	sts := make([]waitroom.Status, users)
	testenv.AtOnce(users, func(i int) {
		s := h.Store
		if i%2 == 1 {
			s = peer
		}
		sts[i], errs[i] = s.EnterWithPass(ctx, room, user(i), p.ID)
	})
	admitted, usedUp := 0, 0
	for i, err := range errs {
		switch {
		case err == nil:
			require.Equal(t, waitroom.StateAdmitted, sts[i].State)
			admitted++
		case errors.Is(err, waitroom.ErrPassUsedUp):
			usedUp++
		default:
			t.Fatalf("%s: unexpected %v", user(i), err)
		}
	}
	require.Equal(t, 5, admitted)
	require.Equal(t, users-5, usedUp)
	require.Equal(t, 0, passLeft(t, h.Store, room, p.ID))
	stats := testenv.Stats(t, h.Store, room)
	require.Equal(t, int64(5), stats.Admitted)

	one := newPass(t, h.Store, room, 3)
	const calls = 10
	tokens := make([]string, calls)
	errs = make([]error, calls)
	testenv.AtOnce(calls, func(i int) {
		st, err := h.Store.EnterWithPass(ctx, room, "same-user", one.ID)
		if err != nil {
			errs[i] = fmt.Errorf("call %d: %w", i, err)
			return
		}
		tokens[i] = st.Token
	})
	for i := range calls {
		require.NoError(t, errs[i])
		require.Equal(t, tokens[0], tokens[i], "one user, one token")
	}
	require.Equal(t, 2, passLeft(t, h.Store, room, one.ID), "one use")
}
