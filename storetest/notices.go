package storetest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
)

// RunNotices checks a waitroom.NoticeStore: buyers who asked to be told
// of their turn are kept through silence and get their first-use
// deadline from the notice, and a return link spends once. A store runs
// it besides Run once it keeps notice requests (memstore and redisstore
// do).
func RunNotices(t *testing.T, newHarness func(t *testing.T) Harness) {
	runExtension(t, newHarness, "notice requests", []extensionCase[waitroom.NoticeStore]{
		{"NoticeKeepsASilentBuyer", testNoticeKeepsASilentBuyer},
		{"NoticeStartsTheFirstUseDeadline", testNoticeStartsTheFirstUseDeadline},
		{"ReturnLinkSpendsOnce", testReturnLinkSpendsOnce},
		{"SetNoticeRefuses", testSetNoticeRefuses},
	})
}

var notice = []byte(`{"lang":"de","channels":[{"email":"b@shop.example"}]}`)

// testNoticeKeepsASilentBuyer: silent past AbandonAfter, the buyer who
// asked to be told is admitted with its notice and the other is skipped;
// the notice is then forgotten. Past MaxNoticeSilence even such a buyer
// has gone.
func testNoticeKeepsASilentBuyer(t *testing.T, h Harness, n waitroom.NoticeStore) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 10, Slice: 100 * time.Millisecond, AbandonAfter: abandonAfter})
	for _, u := range []string{"silent", "told", "gone"} {
		_, err := h.Store.Enter(ctx, room, u)
		require.NoError(t, err)
	}
	require.NoError(t, n.SetNotice(ctx, room, "told", notice))
	require.NoError(t, n.SetNotice(ctx, room, "gone", notice))
	_, err := h.Store.Admit(ctx, room) // starts the bucket
	require.NoError(t, err)
	h.Advance(t, silentFor)
	got, err := h.Store.Admit(ctx, room)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "told", got[0].User)
	require.True(t, bytes.Equal(notice, got[0].Notice), "the notice comes with the admission")
	kept, err := n.Notice(ctx, room, "told")
	require.NoError(t, err)
	require.Empty(t, kept, "kept past the turn")
	require.Equal(t, int64(1), testenv.Stats(t, h.Store, room).Abandoned)

	// "gone" still waits; a day and a moment of silence later it has left.
	st, err := h.Store.Status(ctx, room, "gone")
	require.NoError(t, err)
	require.Equal(t, waitroom.StateWaiting, st.State)
	h.Advance(t, waitroom.MaxNoticeSilence+2*time.Second)
	_, err = h.Store.Status(ctx, room, "gone")
	require.ErrorIs(t, err, waitroom.ErrNotInQueue)
	kept, err = n.Notice(ctx, room, "gone")
	require.NoError(t, err)
	require.Empty(t, kept, "kept past the drop")
}

// admitTold queues users, the first asking to be told, and admits them all.
func admitTold(t *testing.T, h Harness, n waitroom.NoticeStore, cfg waitroom.RoomConfig, users ...string) (string, []waitroom.Admission) {
	t.Helper()
	ctx := ctxFor(t)
	room := newRoom(t, h, cfg)
	for _, u := range users {
		_, err := h.Store.Enter(ctx, room, u)
		require.NoError(t, err)
	}
	require.NoError(t, n.SetNotice(ctx, room, users[0], notice))
	_, err := h.Store.Admit(ctx, room)
	require.NoError(t, err)
	h.Advance(t, time.Second)
	got, err := h.Store.Admit(ctx, room)
	require.NoError(t, err)
	require.Len(t, got, len(users))
	return room, got
}

// testNoticeStartsTheFirstUseDeadline: the told buyer's token outlives
// first_use_within (it is not watching), runs notified_first_use_within
// from the notice, and is a no-show after it; the other buyer's runs
// first_use_within.
func testNoticeStartsTheFirstUseDeadline(t *testing.T, h Harness, n waitroom.NoticeStore) {
	ctx := ctxFor(t)
	room, _ := admitTold(t, h, n, waitroom.RoomConfig{Rate: 100, TokenTTL: time.Minute, FirstUseWithin: 2 * time.Second, NotifiedFirstUseWithin: 10 * time.Second}, "told", "watching")
	h.Advance(t, 4*time.Second) // past first_use_within: "watching" is a no-show
	_, err := h.Store.Admit(ctx, room)
	require.NoError(t, err)
	require.Equal(t, int64(1), testenv.Stats(t, h.Store, room).NoShows)

	left, err := n.Notified(ctx, room, "told", "nonce-1")
	require.NoError(t, err)
	require.InDelta(t, (55 * time.Second).Seconds(), left.Seconds(), 2, "the token's TTL is told")
	h.Advance(t, 8*time.Second) // within the notified deadline
	_, err = h.Store.Admit(ctx, room)
	require.NoError(t, err)
	require.Equal(t, int64(1), testenv.Stats(t, h.Store, room).NoShows, "told 8 s ago, it still has its token")
	h.Advance(t, 4*time.Second) // past it
	_, err = h.Store.Admit(ctx, room)
	require.NoError(t, err)
	require.Equal(t, int64(2), testenv.Stats(t, h.Store, room).NoShows)
	_, err = n.Notified(ctx, room, "told", "nonce-2")
	require.ErrorIs(t, err, waitroom.ErrTokenNotFound)
}

// testReturnLinkSpendsOnce: of concurrent spends of one link exactly one
// wins; a wrong nonce never does; the winner's token is confirmed and
// lives its whole TTL.
func testReturnLinkSpendsOnce(t *testing.T, h Harness, n waitroom.NoticeStore) {
	ctx := ctxFor(t)
	room, _ := admitTold(t, h, n, waitroom.RoomConfig{Rate: 100, TokenTTL: time.Minute, NotifiedFirstUseWithin: 5 * time.Second}, "told")
	_, err := n.Notified(ctx, room, "told", "nonce")
	require.NoError(t, err)
	require.ErrorIs(t, n.UseReturnLink(ctx, room, "told", "other"), waitroom.ErrReturnLinkUsed)
	require.ErrorIs(t, n.UseReturnLink(ctx, room, "told", ""), waitroom.ErrReturnLinkUsed)
	const tries = 16
	errs := race(tries, func(int) error { return n.UseReturnLink(ctx, room, "told", "nonce") })
	won, used := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, waitroom.ErrReturnLinkUsed):
			used++
		default:
			t.Fatalf("unexpected: %v", err)
		}
	}
	require.Equal(t, 1, won)
	require.Equal(t, tries-1, used)
	h.Advance(t, 20*time.Second) // past the notified deadline: confirmed, it lives on
	st, err := h.Store.Status(ctx, room, "told")
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, st.State)
	require.Equal(t, int64(0), testenv.Stats(t, h.Store, room).NoShows)
}

// testSetNoticeRefuses: only a waiting user's place keeps a notice, of a
// bounded size; leaving forgets it.
func testSetNoticeRefuses(t *testing.T, h Harness, n waitroom.NoticeStore) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{})
	require.ErrorIs(t, n.SetNotice(ctx, room, "nobody", notice), waitroom.ErrNotInQueue)
	require.ErrorIs(t, n.SetNotice(ctx, "no-such-room-"+room, "u", notice), waitroom.ErrRoomNotFound)
	require.ErrorIs(t, n.SetNotice(ctx, room, "bad user", notice), waitroom.ErrBadRequest)
	_, err := h.Store.Enter(ctx, room, "u")
	require.NoError(t, err)
	require.ErrorIs(t, n.SetNotice(ctx, room, "u", make([]byte, waitroom.MaxNoticeBytes+1)), waitroom.ErrBadRequest)
	require.NoError(t, n.SetNotice(ctx, room, "u", notice))
	require.NoError(t, h.Store.Leave(ctx, room, "u"))
	_, err = h.Store.Enter(ctx, room, "u")
	require.NoError(t, err)
	kept, err := n.Notice(ctx, room, "u")
	require.NoError(t, err)
	require.Empty(t, kept, "leaving forgot the notice")
	_, err = n.Notified(ctx, room, "u", "nonce")
	require.ErrorIs(t, err, waitroom.ErrTokenNotFound, "no token, no notice")
}
