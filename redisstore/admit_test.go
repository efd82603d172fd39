package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redistest"
)

// admittedInOneCall makes a room of cfg with queued users waiting and has
// one Admit call admit the first n of them: the first call only starts the
// bucket, the second finds the rate high enough for all n.
func admittedInOneCall(t *testing.T, cfg waitroom.RoomConfig, queued, n int) (*Store, string, []waitroom.Admission) {
	t.Helper()
	ctx := t.Context()
	s := newStore(t)
	room := newRoom(t, s, cfg)
	fill(t, s, room, queued)
	require.NoError(t, s.client.HSet(ctx, s.keys(room).cfg, "rate", 1e9, "quota", n).Err())
	_, err := s.Admit(ctx, room)
	require.NoError(t, err)
	advance(t, s, time.Millisecond)
	got, err := s.Admit(ctx, room)
	require.NoError(t, err)
	require.Len(t, got, n)
	return s, room, got
}

// TestAdmitCallIndexesItsTokensOnce: the tokens of one Admit call share
// one cleanup entry, not one each: the call's cost per user is its token's
// hash field, and the entry names them all.
func TestAdmitCallIndexesItsTokensOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, room, got := admittedInOneCall(t, waitroom.RoomConfig{}, 8, 5)
	k := s.keys(room)

	entries, err := s.client.ZRangeWithScores(ctx, k.active, 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, " u0000000 u0000001 u0000002 u0000003 u0000004", entries[0].Member)
	require.Len(t, tokenHolders(t, s, k), 5)
	st := testenv.Stats(t, s, room)
	require.Equal(t, int64(5), st.Active)

	// Each holder's own calls see its token, as before.
	for _, a := range got {
		status, err := s.Status(ctx, room, a.User)
		require.NoError(t, err)
		require.Equal(t, waitroom.StateAdmitted, status.State, a.User)
		require.Equal(t, a.Token, status.Token, a.User)
	}
}

// TestTokenHashStaysAHashTable: the token hash is a hash table from its
// first token on (a listpack, which Redis keeps for up to 512 short
// entries, is scanned by every read of a user's entry); its marker field
// is no token: max_active and Stats count the holders only, and it goes
// with the last token.
func TestTokenHashStaysAHashTable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, room, got := admittedInOneCall(t, waitroom.RoomConfig{MaxActive: 4}, 8, 3)
	k := s.keys(room)
	require.Equal(t, "hashtable", s.client.ObjectEncoding(ctx, k.tok).Val())
	require.Len(t, tokenHolders(t, s, k), 3)
	require.Equal(t, int64(4), s.client.HLen(ctx, k.tok).Val(), "3 tokens and the marker")
	require.Equal(t, int64(3), testenv.Stats(t, s, room).Active)

	more, err := s.Admit(ctx, room)
	require.NoError(t, err)
	require.Len(t, more, 1, "max_active 4 less 3 live tokens: the marker takes no slot")
	for _, a := range append(got, more...) {
		h, err := s.Claim(ctx, room, a.User, a.Token)
		require.NoError(t, err)
		require.NoError(t, s.Complete(ctx, h))
	}
	require.Zero(t, s.client.Exists(ctx, k.tok, k.active).Val(), "the marker goes with the last token")
	require.Equal(t, int64(0), testenv.Stats(t, s, room).Active)
}

// TestTokenHashFieldIsNobodysToken: a caller naming the token hash's own
// field as its user (the store's callers other than Enter do not check
// user ids; the server does) finds no token and no place, and changes
// nothing.
func TestTokenHashFieldIsNobodysToken(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, room, got := admittedInOneCall(t, waitroom.RoomConfig{}, 4, 2)
	k := s.keys(room)
	before := s.client.HGetAll(ctx, k.tok).Val()
	_, err := s.Enter(ctx, room, tokHashTableField)
	require.Equal(t, "BAD_REQUEST", waitroom.ErrorCode(err), "%v", err)
	_, err = s.Status(ctx, room, tokHashTableField)
	require.ErrorIs(t, err, waitroom.ErrNotInQueue)
	_, err = s.Claim(ctx, room, tokHashTableField, got[0].Token)
	require.ErrorIs(t, err, waitroom.ErrTokenNotFound)
	require.NoError(t, s.Leave(ctx, room, tokHashTableField))
	require.Equal(t, before, s.client.HGetAll(ctx, k.tok).Val())
	require.Equal(t, int64(2), testenv.Stats(t, s, room).Active)
}

// TestStockCountsReadOncePerCall: in a room with stock, a Status call of
// many waiting users reads the units sold and the live tokens once, not
// once a user (a private Redis, whose commandstats count the function's
// commands), and every user short of a unit is told the same count.
func TestStockCountsReadOncePerCall(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := redistest.StartServer(t)
	s := New(openURL(t, srv.URL()), Options{Prefix: randomPrefix()})
	room := newRoom(t, s, waitroom.RoomConfig{Stock: 6, MaxQueue: 1000})
	fill(t, s, room, 10)
	require.NoError(t, s.client.HSet(ctx, s.keys(room).cfg, "rate", 1e9, "quota", 2).Err())
	for range 2 { // the first starts the bucket
		advance(t, s, time.Millisecond)
		_, err := s.Admit(ctx, room)
		require.NoError(t, err)
	}
	k := s.keys(room)
	require.Len(t, tokenHolders(t, s, k), 2)
	users := make([]any, 8)
	for i := range users {
		users[i] = fmt.Sprintf("u%07d", i+2) // the 8 still waiting, positions 1 to 8
	}
	pc := srv.Client()
	require.NoError(t, pc.ConfigResetStat(ctx).Err())
	res, err := s.client.FCall(ctx, statusScript.Name(), k.status.keys, s.withTestClock(users)...).Result()
	require.NoError(t, err)
	stats, err := CommandStats(ctx, pc)
	require.NoError(t, err)
	require.Equal(t, int64(2), stats["hmget"].Calls, "the settings, and the units sold")
	require.Equal(t, int64(1), stats["hlen"].Calls, "live tokens")
	require.Equal(t, int64(1), stats["hexists"].Calls, "the token hash's field")
	r, ok := asReply(res)
	require.True(t, ok)
	require.Len(t, r, 3+len(users))
	for i := range users {
		st := s.userStanding(ctx, "status", r[3+i])
		require.NoError(t, st.err)
		require.Equal(t, int64(i+1), st.st.Position)
		// 6 units, 2 reserved by tokens: 4 left, which the 5th to 8th are told.
		if i+1 > 4 {
			require.Equal(t, int64(4), st.st.UnitsLeft, "position %d", i+1)
		}
	}
}

// TestCleanupFollowsEachTokensOwnEntry: when a call's entry comes due,
// cleanup removes the tokens that are past their time (counted as before),
// passes by those that moved to an entry of their own (confirmed) and
// those already gone (spent); spending the last token empties the index.
func TestCleanupFollowsEachTokensOwnEntry(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, room, got := admittedInOneCall(t, waitroom.RoomConfig{TokenTTL: time.Minute, FirstUseWithin: time.Second}, 3, 3)
	confirmed, spent := got[1], got[2] // got[0] never shows up
	k := s.keys(room)

	for range 2 { // the first poll shows the token, the second confirms it
		_, err := s.Status(ctx, room, confirmed.User)
		require.NoError(t, err)
	}
	hold, err := s.Claim(ctx, room, spent.User, spent.Token)
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, hold))
	advance(t, s, 1100*time.Millisecond) // past the first-use deadline

	// Before cleanup the no-show's entry is still stored, but not live.
	require.Len(t, tokenHolders(t, s, k), 2)
	st := testenv.Stats(t, s, room)
	require.Equal(t, int64(1), st.Active, "the confirmed token; the no-show's is past its time")

	_, err = s.Admit(ctx, room)
	require.NoError(t, err)
	st = testenv.Stats(t, s, room)
	require.Equal(t, int64(1), st.Active)
	require.Equal(t, int64(1), st.NoShows)
	require.Equal(t, int64(0), st.Expired)
	require.Equal(t, []string{confirmed.User}, tokenHolders(t, s, k))
	require.Equal(t, []string{confirmed.User}, s.client.ZRange(ctx, k.active, 0, -1).Val(),
		"the call's entry is gone, the confirmed token's own stays")
	status, err := s.Status(ctx, room, confirmed.User)
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, status.State)

	// Spending the last token leaves no index behind, so the room has no
	// work left (Work).
	hold, err = s.Claim(ctx, room, confirmed.User, confirmed.Token)
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, hold))
	require.Zero(t, s.client.Exists(ctx, k.tok, k.active).Val())
}

// TestCleanupKeepsAReissuedToken: a user's own entry left from an earlier
// token (one issued again before cleanup reached the old one) comes due
// while its new token, indexed by its call's entry, still runs: cleanup
// drops the old entry and keeps the token.
func TestCleanupKeepsAReissuedToken(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, room, got := admittedInOneCall(t, waitroom.RoomConfig{}, 2, 2)
	k := s.keys(room)
	now, err := s.client.Time(ctx).Result()
	require.NoError(t, err)
	require.NoError(t, s.client.ZAdd(ctx, k.active, redis.Z{Score: float64(now.UnixMilli() - 1000), Member: got[0].User}).Err())

	_, err = s.Admit(ctx, room)
	require.NoError(t, err)
	require.Len(t, tokenHolders(t, s, k), 2)
	require.Equal(t, []string{" u0000000 u0000001"}, s.client.ZRange(ctx, k.active, 0, -1).Val())
	st := testenv.Stats(t, s, room)
	require.Equal(t, int64(2), st.Active)
	require.Zero(t, st.NoShows+st.Expired)
	status, err := s.Status(ctx, room, got[0].User)
	require.NoError(t, err)
	require.Equal(t, got[0].Token, status.Token)
}

// TestCleanupBudgetCountsUsers: one cleanup removes at most
// max(1000, 2 × quota) tokens however they are grouped, whole calls'
// entries at a time, and the next one goes on where it stopped; a user in
// two due entries is counted once.
func TestCleanupBudgetCountsUsers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	room := newRoom(t, s, waitroom.RoomConfig{})
	k := s.keys(room)
	now, err := s.client.Time(ctx).Result()
	require.NoError(t, err)
	due := float64(now.UnixMilli() - 1000)
	// Three due entries of 400 no-shows each, and one user also in an
	// entry of its own.
	p := s.client.Pipeline()
	for c := range 3 {
		member := ""
		for i := range 400 {
			user := fmt.Sprintf("c%d-%03d", c, i)
			member += " " + user
			p.HSet(ctx, k.tok, user, fmt.Sprintf("%s|new||%d|%d", waitroom.NewToken(), now.UnixMilli()+60_000, now.UnixMilli()-1000))
		}
		p.ZAdd(ctx, k.active, redis.Z{Score: due + float64(c), Member: member})
	}
	p.ZAdd(ctx, k.active, redis.Z{Score: due - 1, Member: "c0-000"})
	_, err = p.Exec(ctx)
	require.NoError(t, err)

	_, err = s.Admit(ctx, room)
	require.NoError(t, err)
	st := testenv.Stats(t, s, room)
	require.Equal(t, int64(800), st.NoShows, "two calls' entries fit in 1000, the third waits")
	require.Len(t, tokenHolders(t, s, k), 400)
	require.Equal(t, int64(0), st.Active, "past their time, though not cleaned up yet")

	_, err = s.Admit(ctx, room)
	require.NoError(t, err)
	st = testenv.Stats(t, s, room)
	require.Equal(t, int64(1200), st.NoShows)
	require.Zero(t, s.client.Exists(ctx, k.tok, k.active).Val())

	// 1500 due entries of one user each (read a page at a time): 1000
	// go, then the other 500.
	p = s.client.Pipeline()
	for i := range 1500 {
		user := fmt.Sprintf("d-%04d", i)
		p.HSet(ctx, k.tok, user, fmt.Sprintf("%s|new||%d|%d", waitroom.NewToken(), now.UnixMilli()+60_000, now.UnixMilli()-1000))
		p.ZAdd(ctx, k.active, redis.Z{Score: due, Member: user})
	}
	_, err = p.Exec(ctx)
	require.NoError(t, err)
	for _, want := range []int64{2200, 2700} {
		_, err = s.Admit(ctx, room)
		require.NoError(t, err)
		st = testenv.Stats(t, s, room)
		require.Equal(t, want, st.NoShows)
	}
	require.Zero(t, s.client.Exists(ctx, k.tok, k.active).Val())
}

// TestAdmitWaitsForTheReplicasItKnows: Admit WAITs for a replica after it
// issued tokens, on a primary with one, reading the replica count (INFO
// replication) at most once a second, not in every call; a WAIT that no
// replica answers has it read again, so a primary that lost its replica
// stops waiting at the next tick. The primary's commandstats count both.
func TestAdmitWaitsForTheReplicasItKnows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	primary, replica := primaryWithReplica(t)
	pc := primary.Client()

	var logged bytes.Buffer
	s := New(openURL(t, primary.URL()), Options{Prefix: randomPrefix(), WaitTimeout: time.Second, // a replica under -race answers in time
		Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	room := twoAtATimeRoom(t, s)
	admit := func() { admitTwo(t, s, room) }
	calls := func() (waits, infos int64) {
		t.Helper()
		stats, err := CommandStats(ctx, pc)
		require.NoError(t, err)
		return stats["wait"].Calls, stats["info"].Calls
	}
	require.NoError(t, pc.ConfigResetStat(ctx).Err())

	for range 5 {
		admit()
	}
	waits, infos := calls()
	require.Equal(t, int64(5), waits, "a WAIT after every call that issued tokens")
	require.Equal(t, int64(1), infos, "one INFO replication (this INFO counts only once it is done)")

	// The replica goes; the next WAIT times out, and the count is read
	// again: no more waiting.
	require.NoError(t, replica.Client().ReplicaOf(ctx, "NO", "ONE").Err())
	for range 3 {
		admit()
	}
	waits, infos = calls()
	require.Equal(t, int64(6), waits, "one WAIT that timed out")
	require.Equal(t, int64(3), infos, "read again after it; and the INFO commandstats above")
	require.Contains(t, logged.String(), "issued tokens are not on a replica yet")
}

// primaryWithReplica starts a Redis and a replica of it, replicating.
func primaryWithReplica(t *testing.T) (primary, replica *redistest.Server) {
	t.Helper()
	primary = redistest.StartServer(t)
	host, port, err := net.SplitHostPort(primary.Addr)
	require.NoError(t, err)
	replica = redistest.StartServer(t, "--replicaof", host, port)
	require.NoError(t, redistest.WaitReplicated(t.Context(), primary.Client(), "probe", 1))
	return primary, replica
}

// TestDrawWaitsForTheReplica: a scheduled room's draw writes its places
// in chunks on one connection to the primary and WAITs once for a
// replica after the last, before it publishes the draw: by the time Admit
// returns the replica holds every place. The room is paused, so the tick
// after the draw issues no token and waits for nothing more.
func TestDrawWaitsForTheReplica(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	primary, replica := primaryWithReplica(t)
	pc := primary.Client()
	s := New(openURL(t, primary.URL()), Options{Prefix: randomPrefix(), WaitTimeout: 5 * time.Second})
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 200, State: waitroom.RoomPaused, OpensAt: clockNow(t, s).Add(time.Hour)})
	const n = drawChunk + 200 // two chunks
	for _, err := range atOnce(n, func(i int) error {
		_, err := s.Enter(ctx, room, fmt.Sprintf("e%04d", i))
		return err
	}) {
		require.NoError(t, err)
	}
	require.NoError(t, pc.ConfigResetStat(ctx).Err())
	advance(t, s, time.Hour+50*time.Millisecond)
	_, err := s.Admit(ctx, room)
	require.NoError(t, err)
	d, err := s.Draw(ctx, room)
	require.NoError(t, err)
	require.Equal(t, waitroom.DrawDone, d.State)

	stats, err := CommandStats(ctx, pc)
	require.NoError(t, err)
	require.Equal(t, int64(1), stats["wait"].Calls, "one WAIT for the draw's places")
	require.Equal(t, int64(n), replica.Client().ZCard(ctx, s.keys(room).drawn).Val(), "every place on the replica")
}

// twoAtATimeRoom is a room of 100 queued users that admits two a call
// (rate unbounded, quota 2), its bucket started by a first Admit, which
// issues nothing and so waits for no replica.
func twoAtATimeRoom(t *testing.T, s *Store) string {
	t.Helper()
	room := newRoom(t, s, waitroom.RoomConfig{MaxQueue: 1000})
	fill(t, s, room, 100)
	require.NoError(t, s.client.HSet(t.Context(), s.keys(room).cfg, "rate", 1e9, "quota", 2).Err())
	_, err := s.Admit(t.Context(), room)
	require.NoError(t, err)
	return room
}

// admitTwo admits the next two users of a twoAtATimeRoom.
func admitTwo(t *testing.T, s *Store, room string) {
	t.Helper()
	advance(t, s, time.Millisecond) // the bucket's next slice
	got, err := s.Admit(t.Context(), room)
	require.NoError(t, err)
	require.Len(t, got, 2)
}

// replicaCountHider leaves connected_slaves out of INFO's reply while hide
// is set, as a proxy or a managed Redis that trims INFO would; it counts
// the INFO and WAIT calls.
type replicaCountHider struct {
	hide         atomic.Bool
	infos, waits atomic.Int64
}

func (h *replicaCountHider) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *replicaCountHider) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *replicaCountHider) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if cmd.Name() == "wait" {
			h.waits.Add(1)
		}
		c, ok := cmd.(*redis.StringCmd)
		if !ok || cmd.Name() != "info" {
			return err
		}
		h.infos.Add(1)
		if err == nil && h.hide.Load() {
			lines := strings.Split(c.Val(), "\n")
			c.SetVal(strings.Join(slices.DeleteFunc(lines, func(l string) bool { return strings.HasPrefix(l, "connected_slaves:") }), "\n"))
		}
		return err
	}
}

// TestAdmitWarnsOnceARunWithoutAReplicaCount: a primary whose INFO
// replication gives no replica count is warned about once while it stays
// so, though Admit reads the count again each second, and again once it
// comes back after a count was read; without a count Admit waits for no
// replica.
func TestAdmitWarnsOnceARunWithoutAReplicaCount(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	hider := &replicaCountHider{}
	hider.hide.Store(true)
	c.AddHook(hider)
	var logged testenv.LogBuffer
	s := New(c, Options{Prefix: testPrefix(t, c), Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	room := twoAtATimeRoom(t, s)
	admit := func() { admitTwo(t, s, room) }
	warnings := func() int {
		return strings.Count(logged.String(), "INFO replication has no replica count")
	}

	admit()
	admit()
	require.Equal(t, 1, warnings())
	require.Equal(t, int64(1), hider.infos.Load(), "a missing count is not read again within the second")
	advance(t, s, replicaCountFresh+100*time.Millisecond)
	admit()
	require.Equal(t, int64(2), hider.infos.Load(), "read again after the second")
	require.Equal(t, 1, warnings(), "still missing: no second warning")

	hider.hide.Store(false)
	advance(t, s, replicaCountFresh+100*time.Millisecond)
	admit()
	require.Equal(t, int64(3), hider.infos.Load())
	hider.hide.Store(true)
	advance(t, s, replicaCountFresh+100*time.Millisecond)
	admit()
	require.Equal(t, int64(4), hider.infos.Load())
	require.Equal(t, 2, warnings(), "missing again after a count was read: warned again")

	require.Zero(t, hider.waits.Load(), "no replica count, no replica waited for")
}

// pacedRoom is a room of rate 1000 with queued users waiting and its
// bucket and the pace's marks started by a first Admit, which admits
// nobody.
func pacedRoom(t *testing.T, queued int) (*Store, string, *roomKeys) {
	t.Helper()
	s := newStore(t)
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 1000, MaxQueue: 10_000})
	if queued > 0 {
		fill(t, s, room, queued)
	}
	_, err := s.Admit(t.Context(), room)
	require.NoError(t, err)
	return s, room, s.keys(room)
}

// TestPaceFoldsOnceASecond: Admit adds each tick to what it measured since
// the pace sums were last folded, and folds them once a second: within the
// second the sums are not written, Stats folds what is pending as it
// reads, and after the second the sums hold it all and the pending starts
// again.
func TestPaceFoldsOnceASecond(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, room, k := pacedRoom(t, 5000)
	started := clockNow(t, s)
	admitted := 0
	for range 3 {
		advance(t, s, 20*time.Millisecond)
		got, err := s.Admit(ctx, room)
		require.NoError(t, err)
		admitted += len(got)
	}
	require.Less(t, clockNow(t, s).Sub(started), 900*time.Millisecond, "the ticks ran within the second")
	require.Positive(t, admitted)
	bucket := func() map[string]string {
		t.Helper()
		v, err := s.client.HGetAll(ctx, k.bucket).Result()
		require.NoError(t, err)
		return v
	}
	b := bucket()
	require.NotContains(t, b, "p_time", "no fold within the second")
	require.Equal(t, strconv.Itoa(admitted), b["a_admitted"])
	pending, err := strconv.ParseFloat(b["a_time"], 64)
	require.NoError(t, err)
	require.Greater(t, pending, 0.05)
	st := testenv.Stats(t, s, room)
	require.InDelta(t, pending, st.Pace.Measured.Seconds(), 1e-6, "Stats folds what is pending")
	// The ticks' admissions within the rate over their time; how close to
	// 1 depends on how evenly this machine ran them, so only its bounds.
	regular, err := strconv.ParseFloat(b["a_regular"], 64)
	require.NoError(t, err)
	require.InDelta(t, regular/pending, st.Pace.Efficiency, 1e-6, "%+v", st.Pace)
	require.Positive(t, st.Pace.Efficiency)
	require.LessOrEqual(t, st.Pace.Efficiency, 1.25, "%+v", st.Pace)

	advance(t, s, time.Second-clockNow(t, s).Sub(started))
	got, err := s.Admit(ctx, room)
	require.NoError(t, err)
	require.NotEmpty(t, got)
	b = bucket()
	require.Equal(t, "0", b["a_admitted"], "folded")
	folded, err := strconv.ParseFloat(b["p_time"], 64)
	require.NoError(t, err)
	require.Greater(t, folded, pending, "the second's ticks, this one's too")
	admittedSum, err := strconv.ParseFloat(b["p_admitted"], 64)
	require.NoError(t, err)
	require.InDelta(t, float64(admitted+len(got)), admittedSum, 1e-9, "a fold decays by the time measured, added at its end")
	after := testenv.Stats(t, s, room)
	require.InDelta(t, folded, after.Pace.Measured.Seconds(), 1e-6)
}

// TestPaceContinuesFromAnOlderBucket: a bucket an earlier version wrote
// (the decayed sums, an arrival mark, none of the other marks or of the
// pending measurement) is read and folded into, not refused: the sums go
// on from its values.
func TestPaceContinuesFromAnOlderBucket(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, room, k := pacedRoom(t, 5000)
	require.NoError(t, s.client.HDel(ctx, k.bucket, "a_time", "a_regular", "a_admitted", "a_abandoned", "f_us", "m_left", "m_left_after", "m_no_shows").Err())
	require.NoError(t, s.client.HSet(ctx, k.bucket, "p_time", 8, "p_regular", 8, "p_admitted", 8000, "p_abandoned", 0, "p_no_shows", 0,
		"p_arrivals", 0, "p_left", 0, "p_left_after", 0).Err())

	advance(t, s, 20*time.Millisecond)
	got, err := s.Admit(ctx, room) // folds at once: the older bucket has no fold time
	require.NoError(t, err)
	require.NotEmpty(t, got)
	advance(t, s, 20*time.Millisecond)
	_, err = s.Admit(ctx, room) // pending
	require.NoError(t, err)
	st := testenv.Stats(t, s, room)
	require.Greater(t, st.Pace.Measured, 7*time.Second, "the older sums, decayed a little: %+v", st.Pace)
	require.Less(t, st.Pace.Measured, 9*time.Second, "%+v", st.Pace)
	require.InDelta(t, 1, st.Pace.Efficiency, 0.1, "%+v", st.Pace)
}

// TestTokenIndexCoversEveryToken: under an admitter, holders who poll,
// claim, complete or give back at once, and no-shows, every stored token
// is named by a cleanup entry that is not due before it is (so cleanup
// never loses one), and once all have run out and one more tick cleaned
// up, nothing is left and every admission is counted exactly once:
// completed, expired or a no-show.
func TestTokenIndexCoversEveryToken(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	// A lease longer than the TTL: a held token's cleanup waits for it.
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 400, MaxQueue: 10_000, TokenTTL: 2 * time.Second,
		FirstUseWithin: time.Second, Lease: 3 * time.Second})
	const users = 600
	fill(t, s, room, users)
	k := s.keys(room)

	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	tokens := make(chan waitroom.Admission, users)
	admittedAll := make(chan struct{})
	wg.Go(func() { // the admitter, until everyone has had a token
		defer close(admittedAll)
		defer close(tokens)
		<-start
		admitted := 0
		for deadline := time.Now().Add(20 * time.Second); admitted < users; {
			if time.Now().After(deadline) {
				fail(fmt.Errorf("admitted %d of %d", admitted, users))
				return
			}
			advance(t, s, 10*time.Millisecond)
			got, err := s.Admit(ctx, room)
			if err != nil {
				fail(err)
			}
			for _, a := range got {
				tokens <- a
			}
			admitted += len(got)
		}
	})
	for w := range 8 { // holders: a fifth never come, a fifth die mid-order, the rest order or give back
		wg.Go(func() {
			<-start
			for a := range tokens {
				n, _ := strconv.Atoi(a.User[1:])
				switch n % 5 {
				case 0: // a no-show
					continue
				case 1: // shown once, then gone
					if _, err := s.Status(ctx, room, a.User); err != nil && !errors.Is(err, waitroom.ErrNotInQueue) {
						fail(err)
					}
					continue
				}
				for range 2 { // confirmed
					if _, err := s.Status(ctx, room, a.User); err != nil && !errors.Is(err, waitroom.ErrNotInQueue) {
						fail(err)
					}
				}
				hold, err := s.Claim(ctx, room, a.User, a.Token)
				if errors.Is(err, waitroom.ErrTokenNotFound) {
					continue // it ran out meanwhile
				}
				if err != nil {
					fail(err)
					continue
				}
				if n%5 == 4 {
					continue // died holding it: the lease and the settle window run out
				}
				if (n+w)%2 == 0 {
					err = s.Complete(ctx, hold)
				} else {
					err = s.Release(ctx, hold) // given back: it runs out later
				}
				if err != nil && !errors.Is(err, waitroom.ErrTokenNotFound) {
					fail(err)
				}
			}
		})
	}
	close(start)
	<-admittedAll // 1.5 s of the room's clock: the first tokens ran out, the last are live

	// Mid-run: every stored token is named by an entry due no earlier
	// (both read at one instant: a transaction).
	tx := s.client.TxPipeline()
	tokCmd := tx.HGetAll(ctx, k.tok)
	entriesCmd := tx.ZRangeWithScores(ctx, k.active, 0, -1)
	_, err := tx.Exec(ctx)
	require.NoError(t, err)
	tok, entries := tokCmd.Val(), entriesCmd.Val()
	delete(tok, tokHashTableField)
	latest := map[string]float64{}
	for _, e := range entries {
		for _, u := range strings.Fields(e.Member.(string)) {
			latest[u] = max(latest[u], e.Score)
		}
	}
	require.NotEmpty(t, tok)
	for user, v := range tok {
		f := strings.Split(v, "|")
		require.Len(t, f, 5, v)
		expires, _ := strconv.ParseFloat(f[4], 64)
		due := expires
		if f[1] == "held" {
			leaseUntil, _ := strconv.ParseFloat(f[3], 64)
			due = max(expires, leaseUntil+float64(waitroom.SettleWindow.Milliseconds()))
		}
		require.GreaterOrEqual(t, latest[user], due, "%s %s has no entry due as late as it", user, v)
	}

	wg.Wait()
	require.Empty(t, errs)
	// Every token and lease has run out, and the holds of the holders that
	// died are abandoned (the settle window after the lease).
	advance(t, s, 3100*time.Millisecond+waitroom.SettleWindow)
	_, err = s.Admit(ctx, room)
	require.NoError(t, err)
	require.Zero(t, s.client.Exists(ctx, k.tok, k.active).Val(), "nothing left behind")
	st := testenv.Stats(t, s, room)
	require.Positive(t, st.Completed)
	require.Positive(t, st.NoShows)
	require.Positive(t, st.Expired)
	require.Equal(t, st.Admitted, st.Completed+st.Expired+st.NoShows, "%+v", st)
}

// TestKeptUpRoomMeasuresNoPace: a room whose ticks admit everyone waiting
// measures nothing: its ticks only move the fold's marks (no pace sums, no
// pending measurement), so arrivals it kept up with do not count once a
// crowd builds up.
func TestKeptUpRoomMeasuresNoPace(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, room, k := pacedRoom(t, 0)
	for i := range 5 {
		advance(t, s, 20*time.Millisecond)
		_, err := s.Enter(ctx, room, fmt.Sprintf("kept%d", i))
		require.NoError(t, err)
		got, err := s.Admit(ctx, room)
		require.NoError(t, err)
		require.Len(t, got, 1, "kept up")
	}
	b, err := s.client.HGetAll(ctx, k.bucket).Result()
	require.NoError(t, err)
	for _, field := range []string{"p_time", "p_arrivals", "a_time", "a_admitted"} {
		require.NotContains(t, b, field)
	}
	require.Equal(t, "5", b["m_seq"], "the marks moved with every arrival")
	require.Equal(t, waitroom.Pace{}, testenv.Stats(t, s, room).Pace)
}
