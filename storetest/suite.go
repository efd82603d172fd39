package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
)

// Run runs every semantic check of the Store contract (waitroom.Store in
// waitroom.go, and the code each method answers with in errors.go) against
// the stores newHarness makes. Each check makes its own rooms.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"Rooms", testRooms},
		{"RoomVersionsChangeWithTheSettings", testRoomVersionsChangeWithTheSettings},
		{"RoomConfigRejectsBadValues", testRoomConfigRejectsBadValues},
		{"RoomConfigExtremesRoundTrip", testRoomConfigExtremesRoundTrip},
		{"ShopURLRoundTrip", testShopURLRoundTrip},
		{"NamesRoundTrip", testNamesRoundTrip},
		{"UnknownRoom", testUnknownRoom},
		{"BadUserIDsTakeNoPlace", testBadUserIDsTakeNoPlace},
		{"UpdateRoomComparesAndSets", testUpdateRoomComparesAndSets},
		{"ConcurrentEntersGetDistinctPositions", testConcurrentEntersGetDistinctPositions},
		{"ConcurrentReEntryKeepsOnePlace", testConcurrentReEntryKeepsOnePlace},
		{"QueueFullUnderConcurrency", testQueueFullUnderConcurrency},
		{"ClosedRefusesPausedAccepts", testClosedRefusesPausedAccepts},
		{"StatusAndLeave", testStatusAndLeave},
		{"ArrivalOrderIsAdmissionOrder", testArrivalOrderIsAdmissionOrder},
		{"AdmittedUserGetsOwnTokenOnEnter", testAdmittedUserGetsOwnTokenOnEnter},
		{"EntersRacingAdmits", testEntersRacingAdmits},
		{"FreshBucketStartsEmpty", testFreshBucketStartsEmpty},
		{"AdmitNeverExceedsTickQuota", testAdmitNeverExceedsTickQuota},
		{"AdmitFractionalRateExactly", testAdmitFractionalRateExactly},
		{"AdmitRateWithJitter", testAdmitRateWithJitter},
		{"AdmitsRateTimesElapsed", testAdmitsRateTimesElapsed},
		{"PausedAdmitsNoneAndResumesWithoutBurst", testPausedAdmitsNoneAndResumesWithoutBurst},
		{"MaxActiveCapsLiveTokens", testMaxActiveCapsLiveTokens},
		{"TwoInstancesAdmitTheRateOnce", testTwoInstancesAdmitTheRateOnce},
		{"ConcurrentClaimsOneWins", testConcurrentClaimsOneWins},
		{"ClaimErrors", testClaimErrors},
		{"CompleteSpendsToken", testCompleteSpendsToken},
		{"ReleaseKeepsRemainingTTL", testReleaseKeepsRemainingTTL},
		{"LapsedLeaseFreesToken", testLapsedLeaseFreesToken},
		{"UnsettledHoldKeepsItsUnit", testUnsettledHoldKeepsItsUnit},
		{"PassWaitsForAnUnsettledHold", testPassWaitsForAnUnsettledHold},
		{"StaleReleaseKeepsNewHold", testStaleReleaseKeepsNewHold},
		{"RenewKeepsTokenHeld", testRenewKeepsTokenHeld},
		{"ExpiredTokenNotFound", testExpiredTokenNotFound},
		{"HeldTokenOutlivesTTLUntilLeaseEnds", testHeldTokenOutlivesTTLUntilLeaseEnds},
		{"Stats", testStats},
		{"StockNoShowsGiveUnitsBack", testStockNoShowsGiveUnitsBack},
		{"SoldOutHolderStillOrders", testSoldOutHolderStillOrders},
		{"UnitsLeft", testUnitsLeft},
		{"StockHoldsUnderConcurrency", testStockHoldsUnderConcurrency},
		{"UnitsPerOrderHoldUnderConcurrency", testUnitsPerOrderHoldUnderConcurrency},
		{"UnitsPerOrder", testUnitsPerOrder},
		{"WorkFollowsUsersAndTokens", testWorkFollowsUsersAndTokens},
		{"AdmittersLiveForTheirTTL", testAdmittersLiveForTheirTTL},
		{"WakesWhenAnEmptyRoomGetsAUser", testWakesWhenAnEmptyRoomGetsAUser},
		{"OneOrderPerUser", testOneOrderPerUser},
		{"SilentUserAtHeadIsSkipped", testSilentUserAtHeadIsSkipped},
		{"TwoInstancesSkipSilentUsersOnce", testTwoInstancesSkipSilentUsersOnce},
		{"SilentUserLeftBeforeTheHead", testSilentUserLeftBeforeTheHead},
		{"UnconfirmedTokenExpiresAtFirstUse", testUnconfirmedTokenExpiresAtFirstUse},
		{"NoShowsAreMadeUp", testNoShowsAreMadeUp},
		{"UnconfirmedTokenGivesItsUnitBack", testUnconfirmedTokenGivesItsUnitBack},
		{"PaceIsMeasured", testPaceIsMeasured},
		{"LeaversAreMeasured", testLeaversAreMeasured},
		{"NoShowsAreMeasured", testNoShowsAreMeasured},
		{"PassSkipsTheQueue", testPassSkipsTheQueue},
		{"PassBeforeTheOpening", testPassBeforeTheOpening},
		{"PassRefusals", testPassRefusals},
		{"PassCountsAgainstMaxActiveAndStock", testPassCountsAgainstMaxActiveAndStock},
		{"ConcurrentPassUses", testConcurrentPassUses},
		{"ScheduledOpening", testScheduledOpening},
		{"FirstUseWaitsForTheOpeningsFirstPolls", testFirstUseAfterOpening},
		{"ScheduledRoomRefusals", testScheduledRoomRefusals},
		{"DrawSeedReplaced", testDrawSeedReplaced},
		{"DrawSettingsLocked", testDrawSettingsLocked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, newHarness(t))
		})
	}
}

func ctxFor(t *testing.T) context.Context { return t.Context() }

// newRoom creates a room with a name no other test uses.
func newRoom(t *testing.T, h Harness, cfg waitroom.RoomConfig) string {
	t.Helper()
	room := testenv.Unique("t-")
	created, err := h.Store.CreateRoom(ctxFor(t), room, h.spread(cfg))
	require.NoError(t, err)
	require.True(t, created)
	return room
}

func user(i int) string { return fmt.Sprintf("user-%05d", i) }

// enterAll enters users 0..n-1 in order.
func enterAll(t *testing.T, s waitroom.Store, room string, n int) {
	t.Helper()
	for i := range n {
		st, err := s.Enter(ctxFor(t), room, user(i))
		require.NoError(t, err)
		require.Equal(t, waitroom.StateWaiting, st.State)
	}
}

// admitted makes a room with cfg, enters one user and admits it.
func admitted(t *testing.T, h Harness, cfg waitroom.RoomConfig) (string, waitroom.Admission) {
	t.Helper()
	room := newRoom(t, h, cfg)
	enterAll(t, h.Store, room, 1)
	return room, admitOne(t, h, room)
}

// admitOne primes the bucket and then advances the clock until at least one
// user is admitted, returning it.
func admitOne(t *testing.T, h Harness, room string) waitroom.Admission {
	t.Helper()
	for range 50 {
		got, err := h.Store.Admit(ctxFor(t), room)
		require.NoError(t, err)
		if len(got) > 0 {
			return got[0]
		}
		h.Advance(t, 20*time.Millisecond)
	}
	t.Fatal("nobody was admitted")
	return waitroom.Admission{}
}

// admitTicks runs n admission ticks, gap apart, and returns everyone they
// admitted.
func admitTicks(t *testing.T, h Harness, room string, n int, gap time.Duration) []waitroom.Admission {
	t.Helper()
	var admitted []waitroom.Admission
	for range n {
		got, err := h.Store.Admit(ctxFor(t), room)
		require.NoError(t, err)
		admitted = append(admitted, got...)
		h.Advance(t, gap)
	}
	return admitted
}

// race runs fn(i) for i in 0..n-1 on n goroutines released at one signal and
// returns every outcome.
func race[T any](n int, fn func(i int) T) []T {
	out := make([]T, n)
	testenv.AtOnce(n, func(i int) { out[i] = fn(i) })
	return out
}

// countErrors tallies errors by their code; nil counts as "ok".
func countErrors(errs []error) map[string]int {
	counts := map[string]int{}
	for _, err := range errs {
		if err == nil {
			counts["ok"]++
			continue
		}
		counts[waitroom.ErrorCode(err)]++
	}
	return counts
}

func testRooms(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 50, MaxQueue: 10})
	cfg, err := h.Store.RoomConfig(ctx, room)
	require.NoError(t, err)
	require.Equal(t, h.spread(waitroom.RoomConfig{Rate: 50, MaxQueue: 10}).WithDefaults(), cfg)

	// Creating again keeps the stored settings: they belong to the operator.
	created, err := h.Store.CreateRoom(ctx, room, h.spread(waitroom.RoomConfig{Rate: 999}))
	require.NoError(t, err)
	require.False(t, created)
	cfg, err = h.Store.RoomConfig(ctx, room)
	require.NoError(t, err)
	require.Equal(t, 50.0, cfg.Rate)

	updated := waitroom.RoomConfig{Rate: 175, MaxQueue: 5, State: waitroom.RoomPaused, MaxActive: 3}.WithDefaults()
	require.NoError(t, h.Store.UpdateRoom(ctx, room, cfg, updated))
	cfg, err = h.Peer(t).RoomConfig(ctx, room)
	require.NoError(t, err)
	require.Equal(t, updated, cfg)

	rooms, err := h.Store.Rooms(ctx)
	require.NoError(t, err)
	require.Contains(t, rooms, room)
}

// testRoomVersionsChangeWithTheSettings: one call answers for many rooms
// (on Cluster, rooms on many slots); a version changes when the settings
// are written, also through another client, and not otherwise; a room
// that does not exist has none.
func testRoomVersionsChangeWithTheSettings(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	rooms := make([]string, 40)
	for i := range rooms {
		rooms[i] = newRoom(t, h, waitroom.RoomConfig{Rate: 50})
	}
	missing := testenv.Unique("missing-")
	versions, err := h.Store.RoomVersions(ctx, append(slices.Clone(rooms), missing))
	require.NoError(t, err)
	require.Len(t, versions, len(rooms)+1)
	require.Empty(t, versions[len(rooms)], "no room, no version")
	seen := map[string]bool{}
	for i, v := range versions[:len(rooms)] {
		require.NotEmpty(t, v, rooms[i])
		seen[v] = true
	}
	require.Len(t, seen, len(rooms), "each room's version is its own")

	created, err := h.Store.CreateRoom(ctx, rooms[3], h.spread(waitroom.RoomConfig{Rate: 99}))
	require.NoError(t, err)
	require.False(t, created)
	cfg, err := h.Store.RoomConfig(ctx, rooms[7])
	require.NoError(t, err)
	to := cfg
	to.Rate = 70
	require.NoError(t, h.Store.UpdateRoom(ctx, rooms[7], cfg, to))
	again, err := h.Peer(t).RoomVersions(ctx, append(slices.Clone(rooms), missing))
	require.NoError(t, err)
	for i := range rooms {
		if i == 7 {
			require.NotEqual(t, versions[i], again[i], "updated")
			require.NotEmpty(t, again[i])
		} else {
			require.Equal(t, versions[i], again[i], "%s: unchanged (creating it again writes nothing)", rooms[i])
		}
	}
	require.Empty(t, again[len(rooms)])
	_, err = h.Store.RoomVersions(ctx, []string{"bad{name"})
	require.ErrorIs(t, err, waitroom.ErrBadRequest)
}

func testRoomConfigRejectsBadValues(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 50})
	for _, bad := range []waitroom.RoomConfig{
		{Rate: -1}, {Rate: math.NaN()}, {MaxQueue: -5}, {State: "melting"},
		{Rate: 100_000, Slice: 10 * time.Second},
		{AbandonAfter: time.Millisecond}, {AbandonAfter: 25 * time.Hour},
		{FirstUseWithin: time.Millisecond}, {TokenTTL: time.Minute, FirstUseWithin: 2 * time.Minute},
		{NotifiedFirstUseWithin: time.Millisecond}, {TokenTTL: time.Minute, NotifiedFirstUseWithin: 2 * time.Minute},
	} {
		_, err := h.Store.CreateRoom(ctx, room+"-bad", bad)
		require.ErrorIs(t, err, waitroom.ErrBadRequest, "%+v", bad)
		require.ErrorIs(t, h.Store.UpdateRoom(ctx, room, waitroom.RoomConfig{Rate: 50}, bad), waitroom.ErrBadRequest, "%+v", bad)
	}
	// Nothing stored was changed by the refused updates.
	cfg, err := h.Store.RoomConfig(ctx, room)
	require.NoError(t, err)
	require.Equal(t, 50.0, cfg.Rate)
}

// testRoomConfigExtremesRoundTrip: every setting at each end of its range
// is stored and read back as given, the room still serves, and an admin can
// still change it; one step past a count's bound is refused, never stored
// to lock the room (a count that overflowed the store's numbers could not
// be read back, and every later update failed).
func testRoomConfigExtremesRoundTrip(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	for _, cfg := range []waitroom.RoomConfig{
		{Rate: waitroom.MinRate, MaxQueue: 1, TokenTTL: waitroom.MinTokenTTL, Lease: waitroom.MinLease, MaxActive: 1,
			AbandonAfter: waitroom.MinAbandonAfter, FirstUseWithin: waitroom.MinFirstUseWithin, NotifiedFirstUseWithin: waitroom.MinFirstUseWithin, Stock: 1},
		{Rate: 100, Slice: waitroom.MaxSlice, MaxQueue: waitroom.MaxMaxQueue, TokenTTL: waitroom.MaxTokenTTL, Lease: waitroom.MaxLease,
			MaxActive: waitroom.MaxMaxActive, AbandonAfter: waitroom.MaxAbandonAfter, FirstUseWithin: waitroom.MaxTokenTTL, NotifiedFirstUseWithin: waitroom.MaxTokenTTL, Stock: waitroom.MaxStock,
			UnitsPerOrder: waitroom.MaxUnitsPerOrder},
		{Rate: waitroom.MaxRate, Slice: waitroom.MinSlice},
	} {
		room := newRoom(t, h, cfg)
		want := h.spread(cfg).WithDefaults()
		got, err := h.Store.RoomConfig(ctx, room)
		require.NoError(t, err)
		require.Equal(t, want, got, "read back as stored")
		_, err = h.Store.Enter(ctx, room, "u1")
		require.NoError(t, err)
		_, err = h.Store.Admit(ctx, room)
		require.NoError(t, err)
		st, err := h.Store.Status(ctx, room, "u1")
		require.NoError(t, err)
		require.GreaterOrEqual(t, waitroom.ETA(st.Position, got.Rate), time.Duration(0), "the ETA never overflows")
		changed, err := waitroom.ChangeRoom(ctx, h.Store, room, func(c *waitroom.RoomConfig) error {
			c.State = waitroom.RoomPaused
			return nil
		})
		require.NoError(t, err, "the room is not locked against changes")
		require.Equal(t, waitroom.RoomPaused, changed.State)
	}
	room := newRoom(t, h, waitroom.RoomConfig{})
	for _, bad := range []waitroom.RoomConfig{
		{MaxActive: waitroom.MaxMaxActive + 1}, {MaxActive: math.MaxInt64}, {MaxQueue: waitroom.MaxMaxQueue + 1},
		{Stock: waitroom.MaxStock + 1}, {Rate: waitroom.MinRate / 2}, {Rate: 1e-300}, {Rate: math.Inf(1)},
		{UnitsPerOrder: waitroom.MaxUnitsPerOrder + 1}, {UnitsPerOrder: -1}, {Stock: 2, UnitsPerOrder: 3},
	} {
		_, err := h.Store.CreateRoom(ctx, room+"-bad", bad)
		require.ErrorIs(t, err, waitroom.ErrBadRequest, "%+v", bad)
		require.ErrorIs(t, h.Store.UpdateRoom(ctx, room, waitroom.RoomConfig{}, bad), waitroom.ErrBadRequest, "%+v", bad)
	}
}

// testShopURLRoundTrip: the room's shop link is stored and read back as
// given, changed and cleared by an update, and a link a page must not
// follow (another scheme, relative, with credentials) is refused by both
// CreateRoom and UpdateRoom, never stored.
func testShopURLRoundTrip(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	const shop = "https://shop.example/sale?from=queue&x=%C3%A9#top"
	room := newRoom(t, h, waitroom.RoomConfig{ShopURL: shop})
	got, err := h.Store.RoomConfig(ctx, room)
	require.NoError(t, err)
	require.Equal(t, shop, got.ShopURL)
	for _, next := range []string{"http://127.0.0.1:8080/", ""} {
		changed, err := waitroom.ChangeRoom(ctx, h.Store, room, func(c *waitroom.RoomConfig) error {
			c.ShopURL = next
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, next, changed.ShopURL)
		got, err := h.Store.RoomConfig(ctx, room)
		require.NoError(t, err)
		require.Equal(t, next, got.ShopURL, "read back after the update")
	}
	got, err = h.Store.RoomConfig(ctx, room)
	require.NoError(t, err)
	for _, bad := range []string{"javascript:alert(1)", "/relative", "//shop.example/", "ftp://shop.example/",
		"https://user:pw@shop.example/", "https:///nohost", "https://shop.example/ a", "data:text/html,x"} {
		_, err := h.Store.CreateRoom(ctx, room+"-bad", waitroom.RoomConfig{ShopURL: bad})
		require.ErrorIs(t, err, waitroom.ErrBadRequest, bad)
		require.ErrorIs(t, h.Store.UpdateRoom(ctx, room, got, waitroom.RoomConfig{ShopURL: bad}.WithDefaults()), waitroom.ErrBadRequest, bad)
	}
	got2, err := h.Store.RoomConfig(ctx, room)
	require.NoError(t, err)
	require.Equal(t, got, got2, "nothing refused was stored")
}

// testNamesRoundTrip: the shop's and the product's names are stored and
// read back byte for byte (any script, markup and quotes included: the
// page escapes them), changed and cleared by an update; a name that is
// not one line of text is refused by CreateRoom and UpdateRoom, with the
// field named, and never stored.
func testNamesRoundTrip(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	const shop, product = `Kim's "Shop" <b>&amp;</b>`, "한정판 스니커즈 · 🎧 Édition №1"
	room := newRoom(t, h, waitroom.RoomConfig{ShopName: shop, ProductName: product})
	got, err := h.Store.RoomConfig(ctx, room)
	require.NoError(t, err)
	require.Equal(t, shop, got.ShopName)
	require.Equal(t, product, got.ProductName)
	longest := strings.Repeat("가", waitroom.MaxNameBytes/3) + strings.Repeat("x", waitroom.MaxNameBytes%3)
	for _, next := range [][2]string{{longest, "Drop"}, {"", ""}} {
		changed, err := waitroom.ChangeRoom(ctx, h.Store, room, func(c *waitroom.RoomConfig) error {
			c.ShopName, c.ProductName = next[0], next[1]
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, next, [2]string{changed.ShopName, changed.ProductName})
		got, err := h.Store.RoomConfig(ctx, room)
		require.NoError(t, err)
		require.Equal(t, next, [2]string{got.ShopName, got.ProductName}, "read back after the update")
	}
	got, err = h.Store.RoomConfig(ctx, room)
	require.NoError(t, err)
	for _, bad := range []string{longest + "x", "two\nlines", "tab\there", "esc\x1b[31m", "bidi\u202egnp.exe", "line\u2028sep",
		"\xff\xfe", " padded", "padded ", "nul\x00"} {
		for _, cfg := range []waitroom.RoomConfig{{ShopName: bad}, {ProductName: bad}} {
			field := "shop_name"
			if cfg.ProductName != "" {
				field = "product_name"
			}
			_, err := h.Store.CreateRoom(ctx, room+"-bad", cfg)
			require.ErrorIs(t, err, waitroom.ErrBadRequest, "%q", bad)
			require.ErrorContains(t, err, field)
			err = h.Store.UpdateRoom(ctx, room, got, cfg.WithDefaults())
			require.ErrorIs(t, err, waitroom.ErrBadRequest, "%q", bad)
			require.ErrorContains(t, err, field)
		}
	}
	got2, err := h.Store.RoomConfig(ctx, room)
	require.NoError(t, err)
	require.Equal(t, got, got2, "nothing refused was stored")
	_, err = h.Store.RoomConfig(ctx, room+"-bad")
	require.ErrorIs(t, err, waitroom.ErrRoomNotFound, "no refused room was made")
}

// testUpdateRoomComparesAndSets: an update over settings someone else
// changed meanwhile is refused, never written over theirs; of concurrent
// read-change-write cycles every one lands, none is lost.
func testUpdateRoomComparesAndSets(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 50})
	read, err := h.Store.RoomConfig(ctx, room)
	require.NoError(t, err)
	paused := read
	paused.State = waitroom.RoomPaused
	require.NoError(t, h.Peer(t).UpdateRoom(ctx, room, read, paused), "the operator pauses")
	faster := read
	faster.Rate = 80
	require.ErrorIs(t, h.Store.UpdateRoom(ctx, room, read, faster), waitroom.ErrRoomChanged, "a writer that read before the pause")
	cfg, err := h.Store.RoomConfig(ctx, room)
	require.NoError(t, err)
	require.Equal(t, paused, cfg, "the pause stands")

	// Ten writers each add one to MaxActive through ChangeRoom at once.
	errs := race(10, func(int) error {
		_, err := waitroom.ChangeRoom(ctx, h.Store, room, func(c *waitroom.RoomConfig) error {
			c.MaxActive++
			return nil
		})
		return err
	})
	counts := countErrors(errs)
	cfg, err = h.Store.RoomConfig(ctx, room)
	require.NoError(t, err)
	require.Equal(t, counts["ok"], cfg.MaxActive, "every change that said ok landed: %v", counts)
	require.Equal(t, 10, counts["ok"]+counts["ROOM_CHANGED"], "every outcome is ok or ROOM_CHANGED: %v", counts)
	require.GreaterOrEqual(t, counts["ok"], 5, "retries let most writers through")
	require.Equal(t, waitroom.RoomPaused, cfg.State)
}

func testUnknownRoom(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	const room = "no-such-room-anywhere"
	_, err := h.Store.Enter(ctx, room, "u")
	require.ErrorIs(t, err, waitroom.ErrRoomNotFound)
	_, err = h.Store.Status(ctx, room, "u")
	require.ErrorIs(t, err, waitroom.ErrRoomNotFound)
	_, err = h.Store.RoomConfig(ctx, room)
	require.ErrorIs(t, err, waitroom.ErrRoomNotFound)
	_, err = h.Store.Admit(ctx, room)
	require.ErrorIs(t, err, waitroom.ErrRoomNotFound)
	_, err = h.Store.Stats(ctx, room)
	require.ErrorIs(t, err, waitroom.ErrRoomNotFound)
	require.ErrorIs(t, h.Store.UpdateRoom(ctx, room, waitroom.RoomConfig{}, waitroom.RoomConfig{}), waitroom.ErrRoomNotFound)
	_, err = h.Store.Claim(ctx, room, "u", waitroom.NewToken())
	require.ErrorIs(t, err, waitroom.ErrTokenNotFound)
	rooms, err := h.Store.Rooms(ctx)
	require.NoError(t, err)
	require.NotContains(t, rooms, room, "a refused enter must not create the room")
}

// A user id outside ValidUserID is refused as a bad request, alone or
// among good ones, and takes no place; asked about, it is nobody in the
// queue.
func testBadUserIDsTakeNoPlace(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{})
	bad := []string{"", " ", "a b", "é", strings.Repeat("x", waitroom.MaxUserIDLen+1)}
	const good = 2
	userAt := func(i int) string {
		if i < len(bad) {
			return bad[i]
		}
		return fmt.Sprintf("good-%d", i-len(bad))
	}
	// each runs op for every user at once and checks the bad ids' errors.
	each := func(op func(user string) error, badErr func(err error) bool) {
		t.Helper()
		for i, err := range race(len(bad)+good, func(i int) error { return op(userAt(i)) }) {
			if i < len(bad) {
				require.True(t, badErr(err), "%q: %v", bad[i], err)
			} else {
				require.NoError(t, err)
			}
		}
	}
	each(func(user string) error {
		_, err := h.Store.Enter(ctx, room, user)
		return err
	}, func(err error) bool { return waitroom.ErrorCode(err) == "BAD_REQUEST" })
	stats, err := h.Store.Stats(ctx, room)
	require.NoError(t, err)
	require.Equal(t, int64(good), stats.Entered)
	require.Equal(t, int64(good), stats.Waiting)
	each(func(user string) error {
		_, err := h.Store.Status(ctx, room, user)
		return err
	}, func(err error) bool { return errors.Is(err, waitroom.ErrNotInQueue) })
}

func testConcurrentEntersGetDistinctPositions(t *testing.T, h Harness) {
	room := newRoom(t, h, waitroom.RoomConfig{})
	type outcome struct {
		st  waitroom.Status
		err error
	}
	out := race(50, func(i int) outcome {
		st, err := h.Store.Enter(ctxFor(t), room, user(i))
		return outcome{st, err}
	})
	var positions []int64
	for _, o := range out {
		require.NoError(t, o.err)
		require.Equal(t, waitroom.StateWaiting, o.st.State)
		positions = append(positions, o.st.Position)
	}
	sort.Slice(positions, func(i, j int) bool { return positions[i] < positions[j] })
	for i, p := range positions {
		require.Equal(t, int64(i+1), p)
	}
	// Status agrees with what Enter said.
	for i, o := range out {
		st, err := h.Store.Status(ctxFor(t), room, user(i))
		require.NoError(t, err)
		require.Equal(t, o.st.Position, st.Position)
	}
}

func testConcurrentReEntryKeepsOnePlace(t *testing.T, h Harness) {
	room := newRoom(t, h, waitroom.RoomConfig{})
	enterAll(t, h.Store, room, 3)
	type outcome struct {
		st  waitroom.Status
		err error
	}
	out := race(10, func(int) outcome {
		st, err := h.Store.Enter(ctxFor(t), room, "refresher")
		return outcome{st, err}
	})
	for _, o := range out {
		require.NoError(t, o.err)
		require.Equal(t, int64(4), o.st.Position)
	}
	stats, err := h.Store.Stats(ctxFor(t), room)
	require.NoError(t, err)
	require.Equal(t, int64(4), stats.Waiting)
	require.Equal(t, int64(4), stats.Entered)
}

func testQueueFullUnderConcurrency(t *testing.T, h Harness) {
	room := newRoom(t, h, waitroom.RoomConfig{MaxQueue: 1000})
	errs := race(5000, func(i int) error {
		_, err := h.Store.Enter(ctxFor(t), room, user(i))
		return err
	})
	for _, err := range errs {
		if err != nil {
			require.ErrorIs(t, err, waitroom.ErrQueueFull)
		}
	}
	require.Equal(t, map[string]int{"ok": 1000, "QUEUE_FULL": 4000}, countErrors(errs))
	stats, err := h.Store.Stats(ctxFor(t), room)
	require.NoError(t, err)
	require.Equal(t, int64(1000), stats.Waiting)
	require.Equal(t, int64(1000), stats.Entered)
	require.Equal(t, int64(4000), stats.Full)

	// A queued user re-entering a full queue keeps its place.
	for i, err := range errs {
		if err == nil {
			st, err := h.Store.Enter(ctxFor(t), room, user(i))
			require.NoError(t, err)
			require.Equal(t, waitroom.StateWaiting, st.State)
			break
		}
	}
}

func testClosedRefusesPausedAccepts(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{State: waitroom.RoomPaused})
	st, err := h.Store.Enter(ctx, room, "early")
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Position)

	_, err = waitroom.ChangeRoom(ctx, h.Store, room, func(c *waitroom.RoomConfig) error {
		c.State = waitroom.RoomClosed
		return nil
	})
	require.NoError(t, err)
	_, err = h.Store.Enter(ctx, room, "late")
	require.ErrorIs(t, err, waitroom.ErrRoomClosed)
	// Who was already queued keeps the place.
	st, err = h.Store.Enter(ctx, room, "early")
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Position)
	_, err = h.Store.Status(ctx, room, "late")
	require.ErrorIs(t, err, waitroom.ErrNotInQueue)
}

func testStatusAndLeave(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{})
	enterAll(t, h.Store, room, 5)
	_, err := h.Store.Status(ctx, room, "stranger")
	require.ErrorIs(t, err, waitroom.ErrNotInQueue)

	require.NoError(t, h.Store.Leave(ctx, room, user(1)))
	require.NoError(t, h.Store.Leave(ctx, room, user(1)), "leaving twice is no error")
	_, err = h.Store.Status(ctx, room, user(1))
	require.ErrorIs(t, err, waitroom.ErrNotInQueue)
	for i, want := range map[int]int64{0: 1, 2: 2, 3: 3, 4: 4} {
		st, err := h.Store.Status(ctx, room, user(i))
		require.NoError(t, err)
		require.Equal(t, want, st.Position, user(i))
		require.Equal(t, want-1, st.Ahead())
	}
	// Coming back after leaving queues at the back.
	st, err := h.Store.Enter(ctx, room, user(1))
	require.NoError(t, err)
	require.Equal(t, int64(5), st.Position)
}

func testArrivalOrderIsAdmissionOrder(t *testing.T, h Harness) {
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 200})
	const n = 60
	enterAll(t, h.Store, room, n)
	var admitted []string
	for len(admitted) < n {
		got, err := h.Store.Admit(ctxFor(t), room)
		require.NoError(t, err)
		for _, a := range got {
			admitted = append(admitted, a.User)
			require.True(t, waitroom.ValidToken(a.Token), "token %q", a.Token)
		}
		h.Advance(t, 50*time.Millisecond)
	}
	for i, u := range admitted {
		require.Equal(t, user(i), u)
	}
}

func testAdmittedUserGetsOwnTokenOnEnter(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room, a := admitted(t, h, waitroom.RoomConfig{})
	for _, op := range []func() (waitroom.Status, error){
		func() (waitroom.Status, error) { return h.Store.Enter(ctx, room, a.User) },
		func() (waitroom.Status, error) { return h.Store.Status(ctx, room, a.User) },
	} {
		st, err := op()
		require.NoError(t, err)
		require.Equal(t, waitroom.StateAdmitted, st.State)
		require.Equal(t, a.Token, st.Token)
		require.Greater(t, st.ExpiresIn, time.Duration(0))
		require.LessOrEqual(t, st.ExpiresIn, waitroom.DefaultTokenTTL)
	}
	stats := testenv.Stats(t, h.Store, room)
	require.Equal(t, int64(0), stats.Waiting, "a token holder takes no second place")
}

func testEntersRacingAdmits(t *testing.T, h Harness) {
	// The admitter's fake clock runs fast while the enters race (minutes on
	// a loaded machine): no token expires and nobody counts as gone.
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 2000, TokenTTL: waitroom.MaxTokenTTL,
		FirstUseWithin: waitroom.MaxTokenTTL, AbandonAfter: waitroom.MaxAbandonAfter})
	const enterers = 400
	admitted := map[string]int{}
	var mu sync.Mutex
	stop := make(chan struct{})
	var admitErrs []error
	// The admitter ticks every 10 ms, on a fake clock at most 1,000 times
	// (10 s, far below the token TTL): unbounded, a fast run lets minutes
	// pass and the tokens expire before they are checked. Past the bound it
	// keeps racing the enters without moving the clock.
	const maxTicks = 1000
	var wg sync.WaitGroup
	wg.Go(func() {
		for ticks := 0; ; ticks++ {
			select {
			case <-stop:
				return
			default:
			}
			got, err := h.Store.Admit(ctxFor(t), room)
			mu.Lock()
			if err != nil {
				admitErrs = append(admitErrs, err)
			}
			for _, a := range got {
				admitted[a.User]++
			}
			mu.Unlock()
			if !h.FakeClock || ticks < maxTicks {
				h.Advance(t, 10*time.Millisecond)
			}
		}
	})
	errs := race(enterers, func(i int) error {
		_, err := h.Store.Enter(ctxFor(t), room, user(i))
		return err
	})
	close(stop)
	wg.Wait()
	require.Empty(t, admitErrs)
	require.Equal(t, map[string]int{"ok": enterers}, countErrors(errs))

	stats, err := h.Store.Stats(ctxFor(t), room)
	require.NoError(t, err)
	for u, times := range admitted {
		require.Equal(t, 1, times, "%s admitted twice", u)
	}
	require.Equal(t, int64(enterers), stats.Waiting+int64(len(admitted)), "waiting + admitted = accepted")
	require.Equal(t, int64(len(admitted)), stats.Admitted)
	for i := range enterers {
		st, err := h.Store.Status(ctxFor(t), room, user(i))
		require.NoError(t, err, "nobody is lost")
		require.Equal(t, admitted[user(i)] == 1, st.State == waitroom.StateAdmitted, user(i))
	}
}

// testFreshBucketStartsEmpty: a room's first admission tick starts the
// bucket and admits nobody, so opening a room never starts with a burst and
// every store counts admissions from the same moment.
func testFreshBucketStartsEmpty(t *testing.T, h Harness) {
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 1000})
	enterAll(t, h.Store, room, 10)
	got, err := h.Store.Admit(ctxFor(t), room)
	require.NoError(t, err)
	require.Empty(t, got)
}

func testAdmitNeverExceedsTickQuota(t *testing.T, h Harness) {
	cfg := waitroom.RoomConfig{Rate: 140}
	room := newRoom(t, h, cfg)
	enterAll(t, h.Store, room, 100)
	_, err := h.Store.Admit(ctxFor(t), room)
	require.NoError(t, err)
	// A long pause saves up no burst: one tick admits one slice's quota.
	h.Advance(t, time.Second)
	// On a real clock, from here on the calls take time of their own, which
	// earns admissions at the rate.
	start := h.now()
	got, err := h.Store.Admit(ctxFor(t), room)
	require.NoError(t, err)
	quota := cfg.WithDefaults().TickQuota()
	require.LessOrEqual(t, len(got), quota)
	require.Positive(t, len(got))
	// What the pause saved beyond the tick is carried only up to one quota,
	// so immediate further ticks cannot drain a second's worth in a burst.
	burst := len(got)
	for range 3 {
		again, err := h.Store.Admit(ctxFor(t), room)
		require.NoError(t, err)
		require.LessOrEqual(t, len(again), quota)
		burst += len(again)
	}
	// An unbounded carry would give a whole second's worth (140) instead.
	earned := 0
	if !h.FakeClock {
		earned = int(math.Ceil(h.now().Sub(start).Seconds() * cfg.Rate))
	}
	require.LessOrEqual(t, burst, 2*quota+1+earned)
}

// testAdmitFractionalRateExactly: at 175/s in 100 ms slices the quota is 17.5;
// ticks let through 17 and 18 in turn, 175 a second, never 18 × 10 = 180.
func testAdmitFractionalRateExactly(t *testing.T, h Harness) {
	if !h.FakeClock {
		t.Log("exact tick arithmetic needs a fake clock; real-clock stores are held to the rate by AdmitRateWithJitter and TwoInstancesAdmitTheRateOnce")
		testAdmitRateRealClock(t, h, 175)
		return
	}
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 175})
	enterAll(t, h.Store, room, 2000)
	_, err := h.Store.Admit(ctxFor(t), room) // starts the bucket
	require.NoError(t, err)
	perSecond := 0
	for tick := 1; tick <= 100; tick++ {
		h.Advance(t, 100*time.Millisecond)
		got, err := h.Store.Admit(ctxFor(t), room)
		require.NoError(t, err)
		require.Contains(t, []int{17, 18}, len(got), "tick %d", tick)
		perSecond += len(got)
		if tick%10 == 0 {
			require.Equal(t, 175, perSecond, "second %d", tick/10)
			perSecond = 0
		}
	}
}

// testAdmitRateRealClock ticks on the store's real clock for about two
// seconds and holds the total to rate × elapsed: never more than one quota
// above, and not far below.
func testAdmitRateRealClock(t *testing.T, h Harness, rate float64) {
	cfg := waitroom.RoomConfig{Rate: rate}.WithDefaults()
	room := newRoom(t, h, cfg)
	enterAll(t, h.Store, room, int(rate*3))
	start := h.now() // before the bucket starts, so elapsed bounds the store's span
	_, err := h.Store.Admit(ctxFor(t), room)
	require.NoError(t, err)
	total, calls := 0, 0
	for h.now().Sub(start) < 2*time.Second {
		h.Advance(t, cfg.Slice)
		got, err := h.Store.Admit(ctxFor(t), room)
		require.NoError(t, err)
		require.LessOrEqual(t, len(got), cfg.TickQuota())
		total += len(got)
		calls++
	}
	elapsed := h.now().Sub(start).Seconds()
	require.LessOrEqual(t, float64(total), rate*elapsed+float64(cfg.TickQuota()), "more than the rate")
	require.GreaterOrEqual(t, total, earnedAtLeast(calls, rate, cfg.Slice, cfg.Slice), "below the rate")
}

// earnedAtLeast is the fewest users calls admissions must let through when
// at least gap passes before each (a wait never ends early, even on a busy
// machine): each call earns rate × gap; a call that cannot pass all it has
// passes its whole quota, which is more; and the bucket carries the rest,
// so at most one slice's worth and one user (the carry's cap) is still in
// it at the end.
func earnedAtLeast(calls int, rate float64, gap, slice time.Duration) int {
	return int(math.Floor(float64(calls)*rate*gap.Seconds() - rate*slice.Seconds() - 1))
}

// testAdmitRateWithJitter: ticks that come early and late still add up to
// the rate, within one quota, and no tick exceeds its quota.
func testAdmitRateWithJitter(t *testing.T, h Harness) {
	if !h.FakeClock {
		testAdmitRateRealClock(t, h, 140)
		return
	}
	cfg := waitroom.RoomConfig{Rate: 140}.WithDefaults()
	room := newRoom(t, h, cfg)
	enterAll(t, h.Store, room, 2000)
	_, err := h.Store.Admit(ctxFor(t), room)
	require.NoError(t, err)
	gaps := []time.Duration{100, 130, 70, 100, 150, 50, 90, 110, 120, 80} // ms; mean 100
	total := 0
	var elapsed time.Duration
	for i := range 100 {
		gap := gaps[i%len(gaps)] * time.Millisecond
		h.Advance(t, gap)
		elapsed += gap
		got, err := h.Store.Admit(ctxFor(t), room)
		require.NoError(t, err)
		require.LessOrEqual(t, len(got), cfg.TickQuota(), "tick %d", i)
		total += len(got)
	}
	want := cfg.Rate * elapsed.Seconds()
	require.InDelta(t, want, float64(total), cfg.Rate*cfg.Slice.Seconds(), "over %s", elapsed)
}

func testPausedAdmitsNoneAndResumesWithoutBurst(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	cfg := waitroom.RoomConfig{Rate: 100, State: waitroom.RoomPaused}.WithDefaults()
	room := newRoom(t, h, cfg)
	enterAll(t, h.Store, room, 50)
	for range 5 {
		got, err := h.Store.Admit(ctx, room)
		require.NoError(t, err)
		require.Empty(t, got)
		h.Advance(t, 200*time.Millisecond)
	}
	cfg, err := waitroom.ChangeRoom(ctx, h.Store, room, func(c *waitroom.RoomConfig) error {
		c.State = waitroom.RoomOpen
		return nil
	})
	require.NoError(t, err)
	got, err := h.Store.Admit(ctx, room)
	require.NoError(t, err)
	require.LessOrEqual(t, len(got), cfg.TickQuota(), "a pause saves up no burst")
	h.Advance(t, 100*time.Millisecond)
	more, err := h.Store.Admit(ctx, room)
	require.NoError(t, err)
	require.Positive(t, len(got)+len(more), "admission resumes")
}

func testMaxActiveCapsLiveTokens(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 1000, MaxActive: 3})
	enterAll(t, h.Store, room, 10)
	admitted := admitTicks(t, h, room, 5, 100*time.Millisecond)
	require.Len(t, admitted, 3)
	// Spending one token makes room for one more.
	hold, err := h.Store.Claim(ctx, room, admitted[0].User, admitted[0].Token)
	require.NoError(t, err)
	require.NoError(t, h.Store.Complete(ctx, hold))
	h.Advance(t, 100*time.Millisecond)
	got, err := h.Store.Admit(ctx, room)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, user(3), got[0].User)
}

// testTwoInstancesAdmitTheRateOnce: two instances ticking on one store share
// one bucket: together they admit the room's rate, not twice it, and each
// user once.
func testTwoInstancesAdmitTheRateOnce(t *testing.T, h Harness) {
	cfg := waitroom.RoomConfig{Rate: 100}.WithDefaults()
	room := newRoom(t, h, cfg)
	instances := []waitroom.Store{h.Store, h.Peer(t)}
	enterAll(t, h.Store, room, 1000)
	start := h.now() // before the bucket starts, so elapsed bounds the store's span
	_, err := h.Store.Admit(ctxFor(t), room)
	require.NoError(t, err)

	seen := map[string]int{}
	total := 0
	var simulated time.Duration
	// Both instances tick every slice, half a slice apart.
	for tick := 0; tick < 40; tick++ {
		h.Advance(t, cfg.Slice/2)
		simulated += cfg.Slice / 2
		got, err := instances[tick%2].Admit(ctxFor(t), room)
		require.NoError(t, err)
		for _, a := range got {
			seen[a.User]++
		}
		total += len(got)
	}
	for u, n := range seen {
		require.Equal(t, 1, n, "%s admitted twice", u)
	}
	elapsed := simulated.Seconds()
	if !h.FakeClock {
		elapsed = h.now().Sub(start).Seconds()
	}
	require.LessOrEqual(t, float64(total), cfg.Rate*elapsed+float64(cfg.TickQuota()),
		"two instances admitted %d in %.2fs at %g/s", total, elapsed, cfg.Rate)
	require.GreaterOrEqual(t, total, earnedAtLeast(40, cfg.Rate, cfg.Slice/2, cfg.Slice), "below the rate")
	stats, err := h.Store.Stats(ctxFor(t), room)
	require.NoError(t, err)
	require.Equal(t, int64(total), stats.Admitted)
}

func testConcurrentClaimsOneWins(t *testing.T, h Harness) {
	room, a := admitted(t, h, waitroom.RoomConfig{})
	type outcome struct {
		hold waitroom.Hold
		err  error
	}
	out := race(50, func(int) outcome {
		hold, err := h.Store.Claim(ctxFor(t), room, a.User, a.Token)
		return outcome{hold, err}
	})
	errs := make([]error, len(out))
	var winner waitroom.Hold
	for i, o := range out {
		errs[i] = o.err
		if o.err == nil {
			winner = o.hold
		} else {
			require.ErrorIs(t, o.err, waitroom.ErrTokenInUse)
		}
	}
	require.Equal(t, map[string]int{"ok": 1, "TOKEN_IN_USE": 49}, countErrors(errs))
	require.Equal(t, waitroom.Hold{Room: room, User: a.User, Token: a.Token, Lease: winner.Lease, LeaseFor: waitroom.DefaultLease, Units: 1}, winner)
	require.NotEmpty(t, winner.Lease)
}

func testClaimErrors(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	// A slow rate keeps user(1) waiting while user(0) is admitted.
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 10})
	enterAll(t, h.Store, room, 2)
	a := admitOne(t, h, room)
	_, err := h.Store.Claim(ctx, room, a.User, waitroom.NewToken())
	require.ErrorIs(t, err, waitroom.ErrTokenInvalid)
	_, err = h.Store.Claim(ctx, room, user(1), a.Token)
	require.ErrorIs(t, err, waitroom.ErrTokenNotFound, "a waiting user has no token")
	_, err = h.Store.Claim(ctx, room, "stranger", a.Token)
	require.ErrorIs(t, err, waitroom.ErrTokenNotFound)
	// The refused claims changed nothing: the owner can still claim.
	_, err = h.Store.Claim(ctx, room, a.User, a.Token)
	require.NoError(t, err)
}

func testCompleteSpendsToken(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room, a := admitted(t, h, waitroom.RoomConfig{})
	hold, err := h.Store.Claim(ctx, room, a.User, a.Token)
	require.NoError(t, err)
	require.ErrorIs(t, h.Store.Complete(ctx, waitroom.Hold{Room: room, User: a.User, Token: waitroom.NewToken(), Lease: hold.Lease}), waitroom.ErrTokenInvalid)
	require.NoError(t, h.Store.Complete(ctx, hold))
	_, err = h.Store.Claim(ctx, room, a.User, a.Token)
	require.ErrorIs(t, err, waitroom.ErrTokenNotFound, "a spent token is gone")
	require.ErrorIs(t, h.Store.Complete(ctx, hold), waitroom.ErrTokenNotFound, "no double spend")
	_, err = h.Store.Status(ctx, room, a.User)
	require.ErrorIs(t, err, waitroom.ErrNotInQueue)
	// After spending, the user may queue again, at the back.
	st, err := h.Store.Enter(ctx, room, a.User)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateWaiting, st.State)
}

func testReleaseKeepsRemainingTTL(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room, a := admitted(t, h, waitroom.RoomConfig{TokenTTL: 20 * time.Second})
	before, err := h.Store.Status(ctx, room, a.User)
	require.NoError(t, err)
	hold, err := h.Store.Claim(ctx, room, a.User, a.Token)
	require.NoError(t, err)
	h.Advance(t, 300*time.Millisecond)
	require.NoError(t, h.Store.Release(ctx, hold))
	after, err := h.Store.Status(ctx, room, a.User)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, after.State)
	require.Equal(t, a.Token, after.Token)
	// The TTL kept running while the token was held: no fresh TTL.
	require.LessOrEqual(t, after.ExpiresIn, before.ExpiresIn-300*time.Millisecond)
	require.Positive(t, after.ExpiresIn)
	// Released, it can be claimed again at once.
	_, err = h.Store.Claim(ctx, room, a.User, a.Token)
	require.NoError(t, err)
}

func testLapsedLeaseFreesToken(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room, a := admitted(t, h, waitroom.RoomConfig{Lease: 200 * time.Millisecond})
	_, err := h.Store.Claim(ctx, room, a.User, a.Token)
	require.NoError(t, err)
	_, err = h.Store.Claim(ctx, room, a.User, a.Token)
	require.ErrorIs(t, err, waitroom.ErrTokenInUse)
	// Within the settle window after the lease its gate may be retrying a
	// Complete: still in use.
	h.Advance(t, 250*time.Millisecond)
	_, err = h.Store.Claim(ctx, room, a.User, a.Token)
	require.ErrorIs(t, err, waitroom.ErrTokenInUse)
	// The holder died: once the window is over the token is usable again.
	h.Advance(t, waitroom.SettleWindow)
	_, err = h.Store.Claim(ctx, room, a.User, a.Token)
	require.NoError(t, err)
}

func testRenewKeepsTokenHeld(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	const lease = 300 * time.Millisecond
	room, a := admitted(t, h, waitroom.RoomConfig{Lease: lease})
	hold, err := h.Store.Claim(ctx, room, a.User, a.Token)
	require.NoError(t, err)
	require.Equal(t, lease, hold.LeaseFor, "the hold says how long it lasts, so the holder knows when to renew")
	// The order runs past two leases, renewing every half lease: the token
	// stays held all along.
	for range 4 {
		h.Advance(t, lease/2)
		require.NoError(t, h.Store.Renew(ctx, hold))
		_, err = h.Store.Claim(ctx, room, a.User, a.Token)
		require.ErrorIs(t, err, waitroom.ErrTokenInUse)
	}
	// Renewal stops (the holder died): the lease and the settle window
	// after it free the token.
	h.Advance(t, lease+waitroom.SettleWindow+50*time.Millisecond)
	fresh, err := h.Store.Claim(ctx, room, a.User, a.Token)
	require.NoError(t, err)
	// The first holder wakes up: its hold is lost, and renewing it neither
	// succeeds nor disturbs the new hold.
	require.ErrorIs(t, h.Store.Renew(ctx, hold), waitroom.ErrTokenNotFound)
	require.NoError(t, h.Store.Renew(ctx, fresh))
	_, err = h.Store.Claim(ctx, room, a.User, a.Token)
	require.ErrorIs(t, err, waitroom.ErrTokenInUse)
	require.NoError(t, h.Store.Complete(ctx, fresh))
	require.ErrorIs(t, h.Store.Renew(ctx, fresh), waitroom.ErrTokenNotFound, "a spent token cannot be renewed")
}

func testStaleReleaseKeepsNewHold(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room, a := admitted(t, h, waitroom.RoomConfig{Lease: 200 * time.Millisecond})
	stale, err := h.Store.Claim(ctx, room, a.User, a.Token)
	require.NoError(t, err)
	h.Advance(t, 250*time.Millisecond+waitroom.SettleWindow)
	fresh, err := h.Store.Claim(ctx, room, a.User, a.Token)
	require.NoError(t, err)
	require.NotEqual(t, stale.Lease, fresh.Lease)
	// The first holder wakes up and releases: the second hold stands.
	require.NoError(t, h.Store.Release(ctx, stale))
	_, err = h.Store.Claim(ctx, room, a.User, a.Token)
	require.ErrorIs(t, err, waitroom.ErrTokenInUse)
}

func testExpiredTokenNotFound(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room, a := admitted(t, h, waitroom.RoomConfig{TokenTTL: time.Second})
	confirm(t, h.Store, room, a)
	h.Advance(t, 1100*time.Millisecond)
	_, err := h.Store.Claim(ctx, room, a.User, a.Token)
	require.ErrorIs(t, err, waitroom.ErrTokenNotFound)
	_, err = h.Store.Status(ctx, room, a.User)
	require.ErrorIs(t, err, waitroom.ErrNotInQueue)
	// The expired token no longer counts as live, and is counted as expired.
	_, err = h.Store.Admit(ctx, room)
	require.NoError(t, err)
	stats := testenv.Stats(t, h.Store, room)
	require.Equal(t, int64(0), stats.Active)
	require.Equal(t, int64(1), stats.Expired)
	require.Equal(t, int64(0), stats.NoShows, "it was confirmed")
}

func testHeldTokenOutlivesTTLUntilLeaseEnds(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room, a := admitted(t, h, waitroom.RoomConfig{TokenTTL: time.Second, Lease: 3 * time.Second})
	hold, err := h.Store.Claim(ctx, room, a.User, a.Token)
	require.NoError(t, err)
	// The order is still running when the TTL passes: the hold stands, and
	// the order's success spends the token.
	h.Advance(t, 1100*time.Millisecond)
	_, err = h.Store.Admit(ctx, room) // runs expiry cleanup
	require.NoError(t, err)
	require.NoError(t, h.Store.Complete(ctx, hold))
	stats := testenv.Stats(t, h.Store, room)
	require.Equal(t, int64(1), stats.Completed)
	require.Equal(t, int64(0), stats.Expired)
}

func testStats(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{MaxQueue: 4, Rate: 1000})
	enterAll(t, h.Store, room, 4)
	_, err := h.Store.Enter(ctx, room, "overflow")
	require.ErrorIs(t, err, waitroom.ErrQueueFull)
	var admitted []waitroom.Admission
	for len(admitted) < 2 {
		got, err := h.Store.Admit(ctx, room)
		require.NoError(t, err)
		admitted = append(admitted, got...)
		h.Advance(t, time.Millisecond)
	}
	admitted = admitted[:2]
	first, err := h.Store.Claim(ctx, room, admitted[0].User, admitted[0].Token)
	require.NoError(t, err)
	require.NoError(t, h.Store.Complete(ctx, first))
	second, err := h.Store.Claim(ctx, room, admitted[1].User, admitted[1].Token)
	require.NoError(t, err)
	require.NoError(t, h.Store.Release(ctx, second))

	stats := testenv.Stats(t, h.Store, room)
	require.Equal(t, int64(4), stats.Entered)
	require.Equal(t, int64(1), stats.Full)
	require.Equal(t, int64(1), stats.Completed)
	require.Equal(t, int64(1), stats.Released)
	require.Equal(t, stats.Admitted, stats.Active+1, "live tokens = admitted − completed")
	require.Equal(t, 4-stats.Admitted, stats.Waiting)
}

// testWorkFollowsUsersAndTokens: Work says WorkQueue while users wait,
// WorkTokens while only tokens are held, WorkNone for an empty or unknown
// room, in the order of the rooms asked about; bad input is refused.
func testWorkFollowsUsersAndTokens(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	empty := newRoom(t, h, waitroom.RoomConfig{})
	queued := newRoom(t, h, waitroom.RoomConfig{})
	enterAll(t, h.Store, queued, 1)
	held := newRoom(t, h, waitroom.RoomConfig{Rate: 1000})
	enterAll(t, h.Store, held, 1)
	a := admitOne(t, h, held)
	unknown := empty + "-none"

	work, err := h.Store.Work(ctx, []string{queued, empty, held, unknown, queued})
	require.NoError(t, err)
	require.Equal(t, []waitroom.Work{waitroom.WorkQueue, waitroom.WorkNone, waitroom.WorkTokens, waitroom.WorkNone, waitroom.WorkQueue}, work)

	// Leaving empties the queue; spending the token leaves nothing.
	require.NoError(t, h.Store.Leave(ctx, queued, user(0)))
	hold, err := h.Store.Claim(ctx, held, a.User, a.Token)
	require.NoError(t, err)
	require.NoError(t, h.Store.Complete(ctx, hold))
	work, err = h.Store.Work(ctx, []string{queued, held})
	require.NoError(t, err)
	require.Equal(t, []waitroom.Work{waitroom.WorkNone, waitroom.WorkNone}, work)

	work, err = h.Store.Work(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, work)
	_, err = h.Store.Work(ctx, []string{queued, "bad{name}"})
	require.ErrorIs(t, err, waitroom.ErrBadRequest)
	_, err = h.Store.Work(ctx, make([]string, waitroom.MaxWorkRoomsBatch+1))
	require.ErrorIs(t, err, waitroom.ErrBadRequest)
}

// testWakesWhenAnEmptyRoomGetsAUser: a user entering a room nobody waits
// in wakes every reader of Wakes, on the store and on a peer; a second
// user, a refused entry or a user already queued does not; a room emptied
// by leaving wakes again. Other tests share the backend, so only this
// test's rooms are looked at.
func testWakesWhenAnEmptyRoomGetsAUser(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	a := newRoom(t, h, waitroom.RoomConfig{})
	b := newRoom(t, h, waitroom.RoomConfig{})
	closed := newRoom(t, h, waitroom.RoomConfig{State: waitroom.RoomClosed})
	readers := map[string]<-chan string{"store": h.Store.Wakes(ctx), "peer": h.Peer(t).Wakes(ctx)}
	next := func(name string, wakes <-chan string) string {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case room, ok := <-wakes:
				require.True(t, ok, "%s: the wakes ended early", name)
				if room == a || room == b || room == closed {
					return room
				}
			case <-timeout:
				return "(none within 10s)"
			}
		}
	}
	testenv.AwaitWakes(t, h.Store, b, 10*time.Second, readers["store"], readers["peer"])

	enter := func(room, u string) {
		t.Helper()
		_, err := h.Store.Enter(ctx, room, u)
		require.NoError(t, err)
	}
	enter(a, user(0)) // wakes a
	enter(a, user(1)) // a had a user
	enter(a, user(0)) // already queued
	_, err := h.Store.Enter(ctx, closed, user(0))
	require.ErrorIs(t, err, waitroom.ErrRoomClosed)
	require.NoError(t, h.Store.Leave(ctx, a, user(0)))
	require.NoError(t, h.Store.Leave(ctx, a, user(1)))
	enter(a, user(2)) // a was empty again
	enter(b, user(0)) // wakes b
	for name, wakes := range readers {
		got := map[string]int{}
		for range 3 {
			got[next(name, wakes)]++
		}
		// A Cluster relays a publication from another node later than
		// its own node's: the order holds within a room, not across
		// rooms, so a wrong wake may come after b's. Listen a moment
		// for one.
		select {
		case room := <-wakes:
			if room == a || room == b || room == closed {
				got[room]++
			}
		case <-time.After(300 * time.Millisecond):
		}
		require.Equal(t, map[string]int{a: 2, b: 1}, got, "%s", name)
	}
}

// testAdmittersLiveForTheirTTL: each call keeps its admitter alive for its
// ttl and lists the live ones, sorted; one that stops renewing drops out
// once its ttl has passed, by the store's clock. Other tests' admitters
// may share the backend, so only this test's ids are looked at.
func testAdmittersLiveForTheirTTL(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	prefix := testenv.Unique("adm-") + "-"
	short, long := prefix+"b-short", prefix+"a-long"
	mine := func(ids []string) []string {
		require.True(t, sort.StringsAreSorted(ids), "%v", ids)
		var out []string
		for _, id := range ids {
			if len(id) > len(prefix) && id[:len(prefix)] == prefix {
				out = append(out, id)
			}
		}
		return out
	}

	ids, err := h.Store.Admitters(ctx, short, 300*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, []string{short}, mine(ids))
	ids, err = h.Store.Admitters(ctx, long, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{long, short}, mine(ids))
	// Renewing keeps one place.
	ids, err = h.Store.Admitters(ctx, long, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{long, short}, mine(ids))

	h.Advance(t, 400*time.Millisecond)
	ids, err = h.Store.Admitters(ctx, long, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{long}, mine(ids), "the silent admitter is gone after its ttl")
	// A peer instance sees the same list.
	ids, err = h.Peer(t).Admitters(ctx, short, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []string{long, short}, mine(ids))

	for _, bad := range []struct {
		id  string
		ttl time.Duration
	}{{"", time.Second}, {"has space", time.Second}, {prefix, 0}, {prefix, -time.Second}, {prefix, 2 * waitroom.MaxAdmitterTTL}} {
		_, err := h.Store.Admitters(ctx, bad.id, bad.ttl)
		require.ErrorIs(t, err, waitroom.ErrBadRequest, "%q %s", bad.id, bad.ttl)
	}
}
