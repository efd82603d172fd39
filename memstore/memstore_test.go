package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/storetest"
)

func newFakeClock() *memstore.ManualClock {
	return memstore.NewManualClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
}

// newRoom returns a store on a fake clock with one room made from cfg.
func newRoom(t *testing.T, cfg waitroom.RoomConfig) (*memstore.Store, *memstore.ManualClock, string) {
	t.Helper()
	clock := newFakeClock()
	s := memstore.New(memstore.Options{Now: clock.Now})
	const room = "sale"
	created, err := s.CreateRoom(t.Context(), room, cfg)
	require.NoError(t, err)
	require.True(t, created)
	return s, clock, room
}

func enterAll(t *testing.T, s *memstore.Store, room string, users ...string) {
	t.Helper()
	for _, u := range users {
		_, err := s.Enter(t.Context(), room, u)
		require.NoError(t, err)
	}
}

func users(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

func admittedUsers(adm []waitroom.Admission) []string {
	out := make([]string, len(adm))
	for i, a := range adm {
		out[i] = a.User
	}
	return out
}

// startBucket makes the room's first Admit call, which only starts the
// bucket's clock, and checks that it admits nobody.
func startBucket(t *testing.T, s *memstore.Store, room string) {
	t.Helper()
	adm, err := s.Admit(t.Context(), room)
	require.NoError(t, err)
	require.Empty(t, adm)
}

// admitOne queues user alone in a room that admits one user a second, and
// admits it a second after starting the bucket.
// annAdmitted is ann admitted in a fresh room (1/s, token TTL 1 min,
// lease 5 s) with her token: where the token tests start.
func annAdmitted(t *testing.T) (*memstore.Store, *memstore.ManualClock, string, string) {
	t.Helper()
	s, clock, room := newRoom(t, waitroom.RoomConfig{Rate: 1, Slice: time.Second, TokenTTL: time.Minute, Lease: 5 * time.Second})
	return s, clock, room, admitOne(t, s, clock, room, "ann")
}

// annClaimed is annAdmitted with ann's token claimed: h holds it.
func annClaimed(t *testing.T) (s *memstore.Store, clock *memstore.ManualClock, room, token string, h waitroom.Hold) {
	t.Helper()
	s, clock, room, token = annAdmitted(t)
	return s, clock, room, token, claim(t, s, room, "ann", token)
}

func admitOne(t *testing.T, s *memstore.Store, clock *memstore.ManualClock, room, user string) string {
	t.Helper()
	enterAll(t, s, room, user)
	startBucket(t, s, room)
	clock.Advance(time.Second)
	adm, err := s.Admit(t.Context(), room)
	require.NoError(t, err)
	require.Len(t, adm, 1)
	require.Equal(t, user, adm[0].User)
	require.True(t, waitroom.ValidToken(adm[0].Token))
	return adm[0].Token
}

// oneAtATime admits one user per second: easy to count.
var oneAtATime = waitroom.RoomConfig{Rate: 1, Slice: time.Second}

func TestRooms(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := memstore.New(memstore.Options{})

	created, err := s.CreateRoom(ctx, "b-room", waitroom.RoomConfig{Rate: 50})
	require.NoError(t, err)
	require.True(t, created)
	created, err = s.CreateRoom(ctx, "b-room", waitroom.RoomConfig{Rate: 99})
	require.NoError(t, err)
	require.False(t, created, "an existing room is kept")
	_, err = s.CreateRoom(ctx, "a-room", waitroom.RoomConfig{})
	require.NoError(t, err)

	cfg, err := s.RoomConfig(ctx, "b-room")
	require.NoError(t, err)
	require.Equal(t, waitroom.RoomConfig{Rate: 50}.WithDefaults(), cfg)

	require.NoError(t, s.UpdateRoom(ctx, "b-room", testenv.RoomConfig(t, s, "b-room"), waitroom.RoomConfig{Rate: 70, State: waitroom.RoomPaused}))
	cfg, err = s.RoomConfig(ctx, "b-room")
	require.NoError(t, err)
	require.Equal(t, 70.0, cfg.Rate)
	require.Equal(t, waitroom.RoomPaused, cfg.State)

	names, err := s.Rooms(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"a-room", "b-room"}, names)

	_, err = s.CreateRoom(ctx, "c-room", waitroom.RoomConfig{Rate: -1})
	require.ErrorIs(t, err, waitroom.ErrBadRequest)
	_, err = s.CreateRoom(ctx, "Bad Name", waitroom.RoomConfig{})
	require.ErrorIs(t, err, waitroom.ErrBadRequest)
	require.ErrorIs(t, s.UpdateRoom(ctx, "b-room", testenv.RoomConfig(t, s, "b-room"), waitroom.RoomConfig{State: "ajar"}), waitroom.ErrBadRequest)
	require.NoError(t, s.Ping(ctx))
}

// A room that does not exist is ErrRoomNotFound, except where the answer
// is about a token or a place, which such a room does not have either (as
// in redisstore). A name no room can have is a bad request everywhere.
func TestUnknownRoom(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := memstore.New(memstore.Options{})
	for _, tt := range []struct {
		room string
		want error // nil where not BAD_REQUEST
	}{
		{"nope", nil},
		{"No Such {Room}", waitroom.ErrBadRequest},
	} {
		hold := waitroom.Hold{Room: tt.room, User: "u", Token: "t", Lease: "l"}
		orNotFound := func(notFound error) error {
			if tt.want != nil {
				return tt.want
			}
			return notFound
		}
		require.ErrorIs(t, s.UpdateRoom(ctx, tt.room, waitroom.RoomConfig{}, waitroom.RoomConfig{}), orNotFound(waitroom.ErrRoomNotFound))
		_, err := s.RoomConfig(ctx, tt.room)
		require.ErrorIs(t, err, orNotFound(waitroom.ErrRoomNotFound))
		_, err = s.Enter(ctx, tt.room, "u")
		require.ErrorIs(t, err, orNotFound(waitroom.ErrRoomNotFound))
		_, err = s.Status(ctx, tt.room, "u")
		require.ErrorIs(t, err, orNotFound(waitroom.ErrRoomNotFound))
		_, err = s.Admit(ctx, tt.room)
		require.ErrorIs(t, err, orNotFound(waitroom.ErrRoomNotFound))
		_, err = s.Stats(ctx, tt.room)
		require.ErrorIs(t, err, orNotFound(waitroom.ErrRoomNotFound))
		_, err = s.Claim(ctx, tt.room, "u", "t")
		require.ErrorIs(t, err, orNotFound(waitroom.ErrTokenNotFound))
		require.ErrorIs(t, s.Complete(ctx, hold), orNotFound(waitroom.ErrTokenNotFound))
		if tt.want == nil {
			require.NoError(t, s.Leave(ctx, tt.room, "u"))
			require.NoError(t, s.Release(ctx, hold))
		} else {
			require.ErrorIs(t, s.Leave(ctx, tt.room, "u"), tt.want)
			require.ErrorIs(t, s.Release(ctx, hold), tt.want)
		}
	}
	rooms, err := s.Rooms(ctx)
	require.NoError(t, err)
	require.Empty(t, rooms)
}

func TestCanceledContext(t *testing.T) {
	t.Parallel()
	s, _, room := newRoom(t, waitroom.RoomConfig{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.Enter(ctx, room, "u")
	require.ErrorIs(t, err, context.Canceled)
	st, err := s.Stats(t.Context(), room)
	require.NoError(t, err)
	require.Zero(t, st.Waiting, "a canceled enter writes nothing")
}

func TestEnter(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, _, room := newRoom(t, waitroom.RoomConfig{MaxQueue: 3})

	for i, u := range []string{"ann", "bob", "cat"} {
		st, err := s.Enter(ctx, room, u)
		require.NoError(t, err)
		require.Equal(t, waitroom.Status{State: waitroom.StateWaiting, Position: int64(i + 1)}, st)
	}
	st, err := s.Enter(ctx, room, "bob")
	require.NoError(t, err)
	require.Equal(t, int64(2), st.Position, "entering again keeps the place")

	_, err = s.Enter(ctx, room, "dan")
	require.ErrorIs(t, err, waitroom.ErrQueueFull)
	_, err = s.Status(ctx, room, "dan")
	require.ErrorIs(t, err, waitroom.ErrNotInQueue, "a refused enter writes nothing")

	require.NoError(t, s.Leave(ctx, room, "ann"))
	require.NoError(t, s.Leave(ctx, room, "ann"), "leaving twice is no error")
	st, err = s.Status(ctx, room, "cat")
	require.NoError(t, err)
	require.Equal(t, int64(2), st.Position)
	st, err = s.Enter(ctx, room, "dan")
	require.NoError(t, err)
	require.Equal(t, int64(3), st.Position)

	_, err = s.Enter(ctx, room, "")
	require.ErrorIs(t, err, waitroom.ErrBadRequest)

	stats := testenv.Stats(t, s, room)
	require.Equal(t, waitroom.Stats{Waiting: 3, Entered: 4, Full: 1}, stats)
}

func TestEnterClosedAndPaused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, _, room := newRoom(t, waitroom.RoomConfig{State: waitroom.RoomPaused})
	st, err := s.Enter(ctx, room, "ann")
	require.NoError(t, err, "a paused room accepts entries")
	require.Equal(t, int64(1), st.Position)

	require.NoError(t, s.UpdateRoom(ctx, room, testenv.RoomConfig(t, s, room), waitroom.RoomConfig{State: waitroom.RoomClosed}))
	_, err = s.Enter(ctx, room, "bob")
	require.ErrorIs(t, err, waitroom.ErrRoomClosed)
	st, err = s.Enter(ctx, room, "ann")
	require.NoError(t, err, "a closed room still answers those already queued")
	require.Equal(t, int64(1), st.Position)
}

func TestEnterWithLiveToken(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, clock, room := newRoom(t, waitroom.RoomConfig{Rate: 1, Slice: time.Second, TokenTTL: time.Minute})
	token := admitOne(t, s, clock, room, "ann")

	clock.Advance(10 * time.Second)
	want := waitroom.Status{State: waitroom.StateAdmitted, Token: token, ExpiresIn: 50 * time.Second}
	st, err := s.Enter(ctx, room, "ann")
	require.NoError(t, err)
	require.Equal(t, want, st, "no second place while holding a token")
	st, err = s.Status(ctx, room, "ann")
	require.NoError(t, err)
	require.Equal(t, want, st)

	require.NoError(t, s.UpdateRoom(ctx, room, testenv.RoomConfig(t, s, room), waitroom.RoomConfig{Rate: 1, Slice: time.Second, TokenTTL: time.Minute, State: waitroom.RoomClosed}))
	st, err = s.Enter(ctx, room, "ann")
	require.NoError(t, err, "the token outranks a closed room")
	require.Equal(t, waitroom.StateAdmitted, st.State)

	// Once expired, the user is a stranger again.
	clock.Advance(50 * time.Second)
	_, err = s.Status(ctx, room, "ann")
	require.ErrorIs(t, err, waitroom.ErrNotInQueue)
}

// The first Admit only starts the bucket's clock, however long the room
// existed before: the time before it saves up nothing.
func TestAdmitFirstCallStartsBucket(t *testing.T) {
	t.Parallel()
	// Waiting users stay for the hour.
	s, clock, room := newRoom(t, waitroom.RoomConfig{Rate: 20, AbandonAfter: 2 * time.Hour})
	enterAll(t, s, room, users("u", 100)...)
	clock.Advance(time.Hour)
	startBucket(t, s, room)
	clock.Advance(100 * time.Millisecond)
	adm, err := s.Admit(t.Context(), room)
	require.NoError(t, err)
	require.Equal(t, []string{"u0", "u1"}, admittedUsers(adm))
}

// At 175/s in 100 ms ticks the quota per tick is 17.5: the admitter must
// alternate 17 and 18, exactly 175 a second, never round up to 18 a tick.
func TestAdmitFractionalQuotaIsExact(t *testing.T) {
	t.Parallel()
	s, clock, room := newRoom(t, waitroom.RoomConfig{Rate: 175, MaxQueue: 10_000})
	enterAll(t, s, room, users("u", 5000)...)
	startBucket(t, s, room)

	var counts []int
	var order []string
	for range 100 {
		clock.Advance(100 * time.Millisecond)
		adm, err := s.Admit(t.Context(), room)
		require.NoError(t, err)
		counts = append(counts, len(adm))
		order = append(order, admittedUsers(adm)...)
	}
	for i, n := range counts {
		require.Equal(t, 17+i%2, n, "tick %d", i)
	}
	const want = 1750 // ten seconds at exactly 175/s
	require.Equal(t, users("u", want), order, "admitted in arrival order")

	st, err := s.Stats(t.Context(), room)
	require.NoError(t, err)
	require.Equal(t, int64(want), st.Admitted)
	require.Equal(t, int64(want), st.Active)
	require.Equal(t, int64(5000-want), st.Waiting)
}

func TestAdmitAverageIsExactUnderJitter(t *testing.T) {
	t.Parallel()
	s, clock, room := newRoom(t, waitroom.RoomConfig{Rate: 33.3, MaxQueue: 10_000})
	enterAll(t, s, room, users("u", 5000)...)
	startBucket(t, s, room)
	total := 0
	// Ticks of 70, 130, 90, 110 ms: a jittery admitter, 10 s in all.
	jitter := []time.Duration{70, 130, 90, 110}
	for i := range 100 {
		clock.Advance(jitter[i%4] * time.Millisecond)
		adm, err := s.Admit(t.Context(), room)
		require.NoError(t, err)
		require.LessOrEqual(t, len(adm), 4, "tick quota ceil(3.33)")
		total += len(adm)
	}
	require.Equal(t, 333, total, "10 s × 33.3/s")
}

func TestAdmitSlowRate(t *testing.T) {
	t.Parallel()
	s, clock, room := newRoom(t, waitroom.RoomConfig{Rate: 0.5, Slice: time.Second})
	enterAll(t, s, room, users("u", 10)...)
	startBucket(t, s, room)
	var counts []int
	for range 6 {
		clock.Advance(time.Second)
		adm, err := s.Admit(t.Context(), room)
		require.NoError(t, err)
		counts = append(counts, len(adm))
	}
	require.Equal(t, []int{0, 1, 0, 1, 0, 1}, counts, "one user every two seconds")
}

func TestAdmitNoBurstAfterIdleOrPause(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg := waitroom.RoomConfig{Rate: 100}
	s, clock, room := newRoom(t, cfg)
	startBucket(t, s, room)

	// An idle hour with nobody queued saves up at most one slice.
	clock.Advance(time.Hour)
	admit(t, s, room)
	enterAll(t, s, room, users("u", 1000)...)
	clock.Advance(100 * time.Millisecond)
	adm := admit(t, s, room)
	require.Len(t, adm, 10, "capped by the tick quota")
	clock.Advance(100 * time.Millisecond)
	adm = admit(t, s, room)
	require.Len(t, adm, 10)

	// A pause admits nobody and saves up nothing.
	paused := cfg
	paused.State = waitroom.RoomPaused
	require.NoError(t, s.UpdateRoom(ctx, room, testenv.RoomConfig(t, s, room), paused))
	for range 50 {
		clock.Advance(100 * time.Millisecond)
		adm = admit(t, s, room)
		require.Empty(t, adm)
	}
	require.NoError(t, s.UpdateRoom(ctx, room, testenv.RoomConfig(t, s, room), cfg))
	clock.Advance(50 * time.Millisecond)
	adm = admit(t, s, room)
	require.Len(t, adm, 5, "only the time since the pause ended counts")
}

func TestAdmitClosedRoomDrainsQueue(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, clock, room := newRoom(t, oneAtATime)
	enterAll(t, s, room, "ann", "bob")
	require.NoError(t, s.UpdateRoom(ctx, room, testenv.RoomConfig(t, s, room), waitroom.RoomConfig{Rate: 1, Slice: time.Second, State: waitroom.RoomClosed}))
	startBucket(t, s, room)
	clock.Advance(time.Second)
	adm := admit(t, s, room)
	require.Equal(t, []string{"ann"}, admittedUsers(adm))
}

func TestAdmitMaxActive(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, clock, room := newRoom(t, waitroom.RoomConfig{Rate: 100, MaxActive: 3, TokenTTL: 10 * time.Second})
	enterAll(t, s, room, users("u", 10)...)
	startBucket(t, s, room)
	clock.Advance(100 * time.Millisecond)
	adm := admit(t, s, room)
	require.Len(t, adm, 3)

	clock.Advance(100 * time.Millisecond)
	adm = admit(t, s, room)
	require.Empty(t, adm, "the cap is reached")

	// A spent token frees a place.
	h := claim(t, s, room, "u0", tokenOf(t, s, room, "u0"))
	require.NoError(t, s.Complete(ctx, h))
	clock.Advance(100 * time.Millisecond)
	adm = admit(t, s, room)
	require.Equal(t, []string{"u3"}, admittedUsers(adm))

	// Expired tokens free theirs.
	clock.Advance(10 * time.Second)
	adm = admit(t, s, room)
	require.Len(t, adm, 3)
	st := testenv.Stats(t, s, room)
	require.Less(t, st.Pace.Efficiency, 0.1, "the cap, not the rate, held admissions back")
	st.Pace = waitroom.Pace{}
	require.Equal(t, waitroom.Stats{Waiting: 3, Active: 3, Entered: 10, Admitted: 7, Completed: 1, Sold: 1, NoShows: 3}, st, "never confirmed: no-shows")
}

// admit runs one Admit and fails the test if the store refuses.
func admit(t *testing.T, s *memstore.Store, room string) []waitroom.Admission {
	t.Helper()
	adm, err := s.Admit(t.Context(), room)
	require.NoError(t, err)
	return adm
}

// claim claims user's token and fails the test if the store refuses.
func claim(t *testing.T, s *memstore.Store, room, user, token string) waitroom.Hold {
	t.Helper()
	h, err := s.Claim(t.Context(), room, user, token)
	require.NoError(t, err)
	return h
}

func tokenOf(t *testing.T, s *memstore.Store, room, user string) string {
	t.Helper()
	st, err := s.Status(t.Context(), room, user)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, st.State)
	return st.Token
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, clock, room := newRoom(t, waitroom.RoomConfig{Rate: 1, Slice: time.Second, TokenTTL: time.Minute})
	ann := admitOne(t, s, clock, room, "ann")
	enterAll(t, s, room, "bob")
	clock.Advance(time.Second)
	bob := tokenOfAdmitted(t, s, room)

	clock.Advance(time.Minute)
	st := testenv.Stats(t, s, room)
	require.Zero(t, st.Active, "expired tokens are not active even before they are dropped")
	require.Zero(t, st.NoShows, "expiry is counted when a token is dropped")

	// Claim drops the expired token it finds, Admit all the others; never
	// confirmed, they are no-shows.
	_, err := s.Claim(ctx, room, "ann", ann)
	require.ErrorIs(t, err, waitroom.ErrTokenNotFound)
	st = testenv.Stats(t, s, room)
	require.Equal(t, int64(1), st.NoShows)
	admit(t, s, room)
	st = testenv.Stats(t, s, room)
	require.Equal(t, int64(2), st.NoShows)
	_, err = s.Claim(ctx, room, "bob", bob)
	require.ErrorIs(t, err, waitroom.ErrTokenNotFound)
}

// tokenOfAdmitted admits exactly one user and returns its token.
func tokenOfAdmitted(t *testing.T, s *memstore.Store, room string) string {
	t.Helper()
	adm, err := s.Admit(t.Context(), room)
	require.NoError(t, err)
	require.Len(t, adm, 1)
	return adm[0].Token
}

func TestClaimCompleteRelease(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, clock, room, token := annAdmitted(t)

	_, err := s.Claim(ctx, room, "bob", token)
	require.ErrorIs(t, err, waitroom.ErrTokenNotFound)
	_, err = s.Claim(ctx, room, "ann", waitroom.NewToken())
	require.ErrorIs(t, err, waitroom.ErrTokenInvalid)

	h := claim(t, s, room, "ann", token)
	require.Equal(t, waitroom.Hold{Room: room, User: "ann", Token: token, Lease: h.Lease, LeaseFor: 5 * time.Second, Units: 1}, h)
	require.NotEmpty(t, h.Lease)
	_, err = s.Claim(ctx, room, "ann", token)
	require.ErrorIs(t, err, waitroom.ErrTokenInUse)

	// The order failed: the token comes back with the TTL it had left.
	clock.Advance(2 * time.Second)
	require.NoError(t, s.Release(ctx, h))
	require.NoError(t, s.Release(ctx, h), "a second release is a no-op")
	st, err := s.Status(ctx, room, "ann")
	require.NoError(t, err)
	require.Equal(t, 58*time.Second, st.ExpiresIn)

	h2 := claim(t, s, room, "ann", token)
	require.NotEqual(t, h.Lease, h2.Lease)
	require.NoError(t, s.Release(ctx, h), "an old hold releases nothing")
	_, err = s.Claim(ctx, room, "ann", token)
	require.ErrorIs(t, err, waitroom.ErrTokenInUse)

	require.ErrorIs(t, s.Complete(ctx, waitroom.Hold{Room: room, User: "ann", Token: waitroom.NewToken()}), waitroom.ErrTokenInvalid)
	require.NoError(t, s.Complete(ctx, h2))
	require.ErrorIs(t, s.Complete(ctx, h2), waitroom.ErrTokenNotFound)
	_, err = s.Claim(ctx, room, "ann", token)
	require.ErrorIs(t, err, waitroom.ErrTokenNotFound, "a spent token is gone")
	_, err = s.Status(ctx, room, "ann")
	require.ErrorIs(t, err, waitroom.ErrNotInQueue)

	stats := testenv.Stats(t, s, room)
	require.Equal(t, waitroom.Stats{Entered: 1, Admitted: 1, Completed: 1, Sold: 1, Released: 1}, stats)
}

func TestLeaseRunsOut(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, clock, room, token, h := annClaimed(t)
	clock.Advance(5 * time.Second)
	_, err := s.Claim(ctx, room, "ann", token)
	require.ErrorIs(t, err, waitroom.ErrTokenInUse, "within the settle window the holder may be retrying a Complete")
	clock.Advance(waitroom.SettleWindow)
	// The holder died: the token is usable again by itself, and the dead
	// holder's late release cannot undo the new claim.
	h2 := claim(t, s, room, "ann", token)
	require.NoError(t, s.Release(ctx, h))
	_, err = s.Claim(ctx, room, "ann", token)
	require.ErrorIs(t, err, waitroom.ErrTokenInUse)

	// A late completion by the dead holder still spends the token: its
	// order went through.
	require.NoError(t, s.Complete(ctx, h))
	require.NoError(t, s.Release(ctx, h2), "nothing left to release")
	_, err = s.Claim(ctx, room, "ann", token)
	require.ErrorIs(t, err, waitroom.ErrTokenNotFound)
}

// A release after the lease ran out, with nobody claiming meanwhile, still
// finds its own hold and gives the token back (as in redisstore): the
// token was claimable anyway, so only Released tells the difference.
func TestReleaseAfterLapsedLease(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, clock, room, token, h := annClaimed(t)
	clock.Advance(6 * time.Second)
	require.NoError(t, s.Release(ctx, h))
	st, err := s.Status(ctx, room, "ann")
	require.NoError(t, err)
	require.Equal(t, 54*time.Second, st.ExpiresIn)
	stats := testenv.Stats(t, s, room)
	require.Equal(t, int64(1), stats.Released)
	_, err = s.Claim(ctx, room, "ann", token)
	require.NoError(t, err)
}

// A user whose token expired while an order still holds it may queue
// again (its token is no longer live) but is not admitted again while the
// hold may yet settle: a new token would replace the old, and the order's
// late Complete could no longer sell its unit.
func TestNotReadmittedWhileExpiredTokenIsHeld(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, clock, room := newRoom(t, waitroom.RoomConfig{Rate: 1, Slice: time.Second, TokenTTL: 10 * time.Second, Lease: 30 * time.Second})
	old := admitOne(t, s, clock, room, "ann")
	h := claim(t, s, room, "ann", old)
	clock.Advance(11 * time.Second)

	st, err := s.Enter(ctx, room, "ann")
	require.NoError(t, err)
	require.Equal(t, waitroom.StateWaiting, st.State)
	clock.Advance(time.Second)
	admitted, err := s.Admit(ctx, room)
	require.NoError(t, err)
	require.Empty(t, admitted, "the held token stays hers")

	require.NoError(t, s.Complete(ctx, h))
	stats := testenv.Stats(t, s, room)
	require.Equal(t, waitroom.Stats{Entered: 2, Admitted: 1, Completed: 1, Sold: 1}, stats)
}

func TestLeaseOutlivesExpiry(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg := waitroom.RoomConfig{Rate: 1, Slice: time.Second, TokenTTL: 10 * time.Second, Lease: 30 * time.Second}
	s, clock, room := newRoom(t, cfg)
	ann := admitOne(t, s, clock, room, "ann")
	enterAll(t, s, room, "bob")
	clock.Advance(time.Second)
	bob := tokenOfAdmitted(t, s, room)

	hAnn := claim(t, s, room, "ann", ann)
	hBob := claim(t, s, room, "bob", bob)

	// Both tokens expire while their orders run; Admit must not drop them.
	clock.Advance(20 * time.Second)
	admit(t, s, room)
	st := testenv.Stats(t, s, room)
	require.Equal(t, int64(2), st.Active)
	require.Zero(t, st.Expired)
	_, err := s.Claim(ctx, room, "ann", ann)
	require.ErrorIs(t, err, waitroom.ErrTokenInUse, "an expired token an order holds is in use")

	require.NoError(t, s.Complete(ctx, hAnn), "the order succeeded")
	require.NoError(t, s.Release(ctx, hBob), "the order failed after expiry: the token is dropped")
	_, err = s.Claim(ctx, room, "bob", bob)
	require.ErrorIs(t, err, waitroom.ErrTokenNotFound)

	st = testenv.Stats(t, s, room)
	require.Equal(t, waitroom.Stats{Entered: 2, Admitted: 2, Completed: 1, Sold: 1, Expired: 1}, st)
}

// Exactly one of many concurrent claims of one token wins.
func TestConcurrentClaims(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, clock, room := newRoom(t, oneAtATime)
	token := admitOne(t, s, clock, room, "ann")

	const n = 64
	errs := make([]error, n)
	testenv.AtOnce(n, func(i int) { _, errs[i] = s.Claim(ctx, room, "ann", token) })
	won, inUse := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, waitroom.ErrTokenInUse):
			inUse++
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	require.Equal(t, 1, won)
	require.Equal(t, n-1, inUse)
}

// Concurrent enters get distinct places, and the queue refuses exactly
// those beyond its bound.
func TestConcurrentEnters(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const n, maxQueue = 400, 300
	s, _, room := newRoom(t, waitroom.RoomConfig{MaxQueue: maxQueue})

	positions, errs := testenv.EntersAtOnce(ctx, s, room, n)
	seen := make(map[int64]bool)
	full := 0
	for i, err := range errs {
		switch {
		case err == nil:
			require.False(t, seen[positions[i]], "position %d given twice", positions[i])
			seen[positions[i]] = true
		case errors.Is(err, waitroom.ErrQueueFull):
			full++
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	require.Len(t, seen, maxQueue)
	require.Equal(t, n-maxQueue, full)
	for p := int64(1); p <= maxQueue; p++ {
		require.True(t, seen[p], "position %d", p)
	}
}

// Several admitters ("instances") ticking at once admit the room's rate
// once, and each user once.
func TestConcurrentAdmitters(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, clock, room := newRoom(t, waitroom.RoomConfig{Rate: 140})
	enterAll(t, s, room, users("u", 2000)...)
	startBucket(t, s, room)

	var mu sync.Mutex
	admitted := make(map[string]int)
	for range 10 {
		clock.Advance(100 * time.Millisecond)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				<-start
				adm, err := s.Admit(ctx, room)
				if err != nil {
					t.Errorf("admit: %v", err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, a := range adm {
					admitted[a.User]++
				}
			})
		}
		close(start)
		wg.Wait()
	}
	require.Len(t, admitted, 140, "one second's worth")
	for u, n := range admitted {
		require.Equal(t, 1, n, u)
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, harness)
}

func TestPageConformance(t *testing.T) {
	t.Parallel()
	storetest.RunPages(t, harness)
}

func TestNoticeConformance(t *testing.T) {
	t.Parallel()
	storetest.RunNotices(t, harness)
}

func TestOutboxConformance(t *testing.T) {
	t.Parallel()
	storetest.RunOutbox(t, harness)
}

func TestHistoryConformance(t *testing.T) {
	t.Parallel()
	storetest.RunHistory(t, harness)
}

// harness is a memstore on a fake clock.
func harness(t *testing.T) storetest.Harness {
	clock := newFakeClock()
	s := memstore.New(memstore.Options{Now: clock.Now})
	return storetest.Harness{
		Store:     s,
		Peer:      func(*testing.T) waitroom.Store { return s },
		Advance:   func(_ *testing.T, d time.Duration) { clock.Advance(d) },
		FakeClock: true,
		Now:       clock.Now,
		AdmitAfter: func(t *testing.T, room string, d time.Duration) (int, time.Duration) {
			clock.Advance(d)
			got, err := s.Admit(t.Context(), room)
			require.NoError(t, err)
			return len(got), d
		},
		ReplaceSeed: func(_ *testing.T, room, seed string) {
			memstore.ReplaceSeed(s, room, seed)
		},
	}
}

func TestLimiter(t *testing.T) {
	t.Parallel()
	c := memstore.NewManualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	lim := waitroom.NewLocalLimiter(c.Now)
	storetest.RunLimiter(t, lim, lim, func(_ *testing.T, d time.Duration) { c.Advance(d) })
}

// TestPassTakesAnEarlyArrivalOutOfTheDraw: an early arrival who enters
// with a pass before the opening leaves the line, as a queued user does:
// nobody counts it ahead any more, the draw does not place it, and once it
// has bought with the pass's token the queue does not admit it again.
// (storetest's PassBeforeTheOpening checks what both stores share.)
func TestPassTakesAnEarlyArrivalOutOfTheDraw(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, clock, room := newRoom(t, waitroom.RoomConfig{Rate: 1000, OpensAt: newFakeClock().Now().Add(time.Second), PrequeueOrder: waitroom.PrequeueFIFO})
	enterAll(t, s, room, "vip", "fan")
	pass := waitroom.Pass{ID: waitroom.NewToken(), Uses: 1, Left: 1, ExpiresAt: clock.Now().Add(time.Hour)}
	require.NoError(t, s.CreatePass(ctx, room, pass))
	vip, err := s.EnterWithPass(ctx, room, "vip", pass.ID)
	require.NoError(t, err)
	fan, err := s.Status(ctx, room, "fan")
	require.NoError(t, err)
	require.Equal(t, int64(1), fan.Position, "the pass holder is no longer ahead")
	hold := claim(t, s, room, "vip", vip.Token)
	require.NoError(t, s.Complete(ctx, hold))

	clock.Advance(1100 * time.Millisecond)
	var admitted []string
	for range 20 {
		got := admit(t, s, room)
		admitted = append(admitted, admittedUsers(got)...)
		clock.Advance(50 * time.Millisecond)
	}
	require.Equal(t, []string{"fan"}, admitted, "bought with the pass: not admitted again")
	entrants, err := s.Entrants(ctx, room)
	require.NoError(t, err)
	require.Equal(t, []waitroom.Entrant{{User: "fan", Place: 1}}, entrants)
}
