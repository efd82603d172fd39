package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
)

// No-shows: a token its holder neither confirms (a second look at it after
// the one that told it) nor claims by FirstUseWithin expires then and gives
// its slot back; a confirmed or claimed one lives its whole TTL.

// confirm is what a holder's page does on "your turn", and an API client
// after admission: it asks for its status once more. Both answers carry the
// token and the whole TTL.
func confirm(t *testing.T, s waitroom.Store, room string, a waitroom.Admission) {
	t.Helper()
	for range 2 {
		st, err := s.Status(ctxFor(t), room, a.User)
		require.NoError(t, err)
		require.Equal(t, waitroom.StateAdmitted, st.State)
		require.Equal(t, a.Token, st.Token)
	}
}

// admitAll primes the bucket and admits until n users hold tokens.
func admitAll(t *testing.T, h Harness, room string, n int) []waitroom.Admission {
	t.Helper()
	var got []waitroom.Admission
	for range 100 {
		adm, err := h.Store.Admit(ctxFor(t), room)
		require.NoError(t, err)
		got = append(got, adm...)
		if len(got) >= n {
			return got
		}
		h.Advance(t, 20*time.Millisecond)
	}
	t.Fatalf("admitted %d of %d", len(got), n)
	return nil
}

// holding makes a room with cfg, enters users and admits them until n
// hold tokens; cfg's cap (MaxActive or Stock) must stop it at n.
func holding(t *testing.T, h Harness, cfg waitroom.RoomConfig, users, n int) (string, []waitroom.Admission) {
	t.Helper()
	room := newRoom(t, h, cfg)
	enterAll(t, h.Store, room, users)
	adm := admitAll(t, h, room, n)
	require.Len(t, adm, n, "the cap holds")
	return room, adm
}

// testUnconfirmedTokenExpiresAtFirstUse: of four holders under a cap of
// four, the one never told and the one told once but never back expire at
// FirstUseWithin as no-shows, and the users behind take their slots; the
// one that confirmed and the one that claimed keep the whole TTL.
func testUnconfirmedTokenExpiresAtFirstUse(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	const ttl, firstUse = 10 * time.Second, time.Second
	room, adm := holding(t, h, waitroom.RoomConfig{Rate: 1000, MaxActive: 4, TokenTTL: ttl, FirstUseWithin: firstUse}, 6, 4)
	never, once, confirmed, claimed := adm[0], adm[1], adm[2], adm[3]

	st, err := h.Store.Status(ctx, room, once.User)
	require.NoError(t, err)
	require.Greater(t, st.ExpiresIn, firstUse, "the holder is told the whole TTL")
	confirm(t, h.Store, room, confirmed)
	hold, err := h.Store.Claim(ctx, room, claimed.User, claimed.Token)
	require.NoError(t, err)
	require.NoError(t, h.Store.Release(ctx, hold))

	h.Advance(t, firstUse+200*time.Millisecond)
	for _, a := range []waitroom.Admission{never, once} {
		_, err := h.Store.Status(ctx, room, a.User)
		require.ErrorIs(t, err, waitroom.ErrNotInQueue, a.User)
	}
	_, err = h.Store.Claim(ctx, room, never.User, never.Token)
	require.ErrorIs(t, err, waitroom.ErrTokenNotFound)
	for _, a := range []waitroom.Admission{confirmed, claimed} {
		st, err := h.Store.Status(ctx, room, a.User)
		require.NoError(t, err, a.User)
		require.Equal(t, waitroom.StateAdmitted, st.State, a.User)
		require.Greater(t, st.ExpiresIn, ttl/2, "%s keeps the whole TTL", a.User)
	}

	// Their two slots come back: the two users behind are admitted.
	got, err := h.Store.Admit(ctx, room)
	require.NoError(t, err)
	require.Equal(t, []string{user(4), user(5)}, users(got))
	stats := testenv.Stats(t, h.Store, room)
	require.Equal(t, int64(2), stats.NoShows)
	require.Equal(t, int64(0), stats.Expired)
	require.Equal(t, int64(4), stats.Active)
	require.Equal(t, int64(6), stats.Admitted)
}

// testUnconfirmedTokenGivesItsUnitBack: with stock tracked, a token is a
// unit reserved; one never confirmed gives its unit back at
// FirstUseWithin, long before its TTL, and the next in line gets it.
func testUnconfirmedTokenGivesItsUnitBack(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	const ttl, firstUse = 30 * time.Second, time.Second
	room, adm := holding(t, h, waitroom.RoomConfig{Rate: 1000, Stock: 3, TokenTTL: ttl, FirstUseWithin: firstUse}, 5, 3)
	confirm(t, h.Store, room, adm[0])
	h.Advance(t, 100*time.Millisecond)
	got, err := h.Store.Admit(ctx, room)
	require.NoError(t, err)
	require.Empty(t, got, "no unit left to reserve")

	h.Advance(t, firstUse+200*time.Millisecond)
	got, err = h.Store.Admit(ctx, room)
	require.NoError(t, err)
	require.Equal(t, []string{user(3), user(4)}, users(got), "the two no-shows' units, long before their TTL")
	stats := requireWithinStock(t, h.Store, room, 3)
	require.Equal(t, int64(2), stats.NoShows)
	require.Equal(t, int64(3), stats.Active)
	st, err := h.Store.Status(ctx, room, adm[0].User)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, st.State, "the confirmed one keeps its unit")
}

// testNoShowsAreMadeUp: without MaxActive, each no-show is admitted again
// on top of the rate, never faster than twice the rate.
func testNoShowsAreMadeUp(t *testing.T, h Harness) {
	const rate = 20.0
	if h.FakeClock {
		// 1.1 s since the last admission at 20/s gives the first call its
		// quota (2) and the carry's most (one slice's 2 and one user) for
		// the next; the half second of ticks 10; and all 10 no-shows are
		// made up on top.
		admitted, _ := noShowRound(t, h, rate)
		require.Equal(t, 2+3+10+noShowsMadeUp, admitted)
		return
	}
	// Real time. The rate alone gives at most a quota and a carry (5) and
	// the time of the ticks; making up at most doubles the ticks' share.
	// Ticks that lag past a slice on a loaded machine lose their share,
	// which can hide the made-up users below the rate's line; only a round
	// that ran near its planned half second is judged on that line.
	const planned = (noShowTicks + 1) * 20 * time.Millisecond
	for attempt := 1; ; attempt++ {
		admitted, elapsed := noShowRound(t, h, rate)
		secs := elapsed.Seconds()
		require.LessOrEqual(t, float64(admitted), 2+3+2*rate*secs+2, "never above twice the rate")
		if float64(admitted) > 5+rate*secs {
			return // more than the rate alone: the no-shows were made up
		}
		if elapsed < planned*3/2 || attempt == 3 {
			require.Fail(t, "the no-shows were not made up",
				"admitted %d in %s, the rate alone gives %.1f (attempt %d)", admitted, elapsed, 5+rate*secs, attempt)
		}
		t.Logf("attempt %d ran %s instead of about %s on a loaded machine: again", attempt, elapsed, planned)
	}
}

const (
	noShowsMadeUp = 10
	noShowTicks   = 25
)

// noShowRound admits noShowsMadeUp users who never come in a new room,
// queues 190 more, lets the no-shows' first-use deadline pass, and then
// ticks for about half a second; it returns what those ticks admitted and
// how long they took.
func noShowRound(t *testing.T, h Harness, rate float64) (int, time.Duration) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{Rate: rate, TokenTTL: 10 * time.Second, FirstUseWithin: time.Second})
	enterAll(t, h.Store, room, noShowsMadeUp)
	admitAll(t, h, room, noShowsMadeUp)
	for i := noShowsMadeUp; i < 200; i++ {
		_, err := h.Store.Enter(ctx, room, user(i))
		require.NoError(t, err)
	}
	h.Advance(t, 1100*time.Millisecond)

	// The first call finds the no-shows; then half a second of 20 ms ticks
	// (before any token it admits meets its own first-use deadline).
	start := h.now()
	admitted := 0
	for range noShowTicks + 1 {
		got, err := h.Store.Admit(ctx, room)
		require.NoError(t, err)
		admitted += len(got)
		h.Advance(t, 20*time.Millisecond)
	}
	elapsed := h.now().Sub(start)
	stats := testenv.Stats(t, h.Store, room)
	if elapsed < time.Second {
		require.Equal(t, int64(noShowsMadeUp), stats.NoShows)
	} else {
		// Ticks stretched past the first-use deadline: tokens they
		// admitted early met it unconfirmed too.
		require.GreaterOrEqual(t, stats.NoShows, int64(noShowsMadeUp))
	}
	return admitted, elapsed
}

func users(adm []waitroom.Admission) []string {
	out := make([]string, len(adm))
	for i, a := range adm {
		out[i] = a.User
	}
	return out
}
