package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redistest"
	"github.com/waitroom/waitroom/storetest"
)

// newClient opens a client on the test Redis and fails the test when it is
// not reachable: a missing service is a failure, never a skip.
func newClient(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	c, err := Open(testenv.RedisURL())
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = c.Close() })
	require.NoError(tb, c.Ping(context.Background()).Err(), "Redis at %s (set REDIS_URL)", testenv.RedisURL())
	return c
}

// randomPrefix is a key prefix no other test uses. Topologies started by
// a test die with it, so nothing needs deleting.
func randomPrefix() string { return testenv.Unique("wrtest:") }

// testPrefix is a key prefix no other test uses; its keys are deleted when
// tb ends, so parallel tests and runs share the Redis without meeting.
func testPrefix(tb testing.TB, c redis.UniversalClient) string {
	prefix := randomPrefix()
	tb.Cleanup(func() {
		_ = DeletePrefix(context.Background(), c, prefix) // the test's context is done by now
	})
	return prefix
}

// newStore returns a Store with its own prefix on a fresh client, with
// the conformance suite's loosened timeouts: on the shared machine under
// -race a script of a thousand users can wait for the CPU longer than the
// 1 s default (TestAdmitBigTick's did, in CI).
func newStore(tb testing.TB) *Store {
	c := openURL(tb, withQuery(testenv.RedisURL(), suiteTimeouts))
	return New(c, Options{Prefix: testPrefix(tb, c)})
}

func newRoom(t *testing.T, s *Store, cfg waitroom.RoomConfig) string {
	t.Helper()
	room := testenv.Unique("r-")
	created, err := s.CreateRoom(t.Context(), room, cfg)
	require.NoError(t, err)
	require.True(t, created)
	return room
}

// TestStore: the conformance suite on the test Redis, with the hot path
// autopipelined (Open's default) and on the plain client.
func TestStore(t *testing.T) {
	t.Parallel()
	for _, autoPipeline := range []bool{true, false} {
		url := withQuery(testenv.RedisURL(), "autopipeline="+strconv.FormatBool(autoPipeline)+"&"+suiteTimeouts)
		t.Run(fmt.Sprintf("autopipeline=%t", autoPipeline), func(t *testing.T) {
			t.Parallel()
			storetest.Run(t, func(t *testing.T) storetest.Harness {
				c := openURL(t, url)
				s := New(c, Options{Prefix: testPrefix(t, c)})
				require.Equal(t, autoPipeline, s.AutoPipelined())
				return storetest.Harness{
					Store: s,
					// A second instance: its own client (own connections,
					// own quota cache) on the same Redis and prefix.
					Peer: func(t *testing.T) waitroom.Store {
						return New(openURL(t, url), Options{Prefix: s.prefix})
					},
					// The clock is Redis's, moved by the test clock:
					// instant, but real time passes too.
					Advance:     func(t *testing.T, d time.Duration) { advance(t, s, d) },
					Now:         func() time.Time { return clockNow(t, s) },
					FakeClock:   false,
					AdmitAfter:  admitAfter(s),
					ReplaceSeed: replaceSeed(s),
				}
			})
		})
	}
}

// TestNotices: the notices' conformance suite (storetest.RunNotices) on
// the test Redis, on the harness of the other suites.
func TestNotices(t *testing.T) {
	t.Parallel()
	storetest.RunNotices(t, storeHarness(testenv.RedisURL()))
}

// TestOutbox: the outbox's conformance suite (storetest.RunOutbox) on
// the test Redis.
func TestOutbox(t *testing.T) {
	t.Parallel()
	storetest.RunOutbox(t, storeHarness(testenv.RedisURL()))
}

// TestHistory: the history's conformance suite (storetest.RunHistory) on
// the test Redis.
func TestHistory(t *testing.T) {
	t.Parallel()
	storetest.RunHistory(t, storeHarness(testenv.RedisURL()))
}

// withQuery adds query options to url.
func withQuery(url, options string) string {
	if strings.Contains(url, "?") {
		return url + "&" + options
	}
	return url + "?" + options
}

// TestKeysShareOneHashTag: every key of a room carries exactly one hash
// tag, the room, so all of a room's scripts touch one Cluster slot.
func TestKeysShareOneHashTag(t *testing.T) {
	t.Parallel()
	s := New(nil, Options{})
	k := s.keys("flash-sale_1")
	for _, key := range []string{k.cfg, k.q, k.seq, k.tok, k.active, k.bucket, k.stats, k.notice} {
		require.True(t, strings.HasPrefix(key, "wr:{flash-sale_1}:"), key)
		require.Equal(t, "flash-sale_1", hashTag(key), key)
		require.Equal(t, 1, strings.Count(key, "{"), key)
	}
	// Names that would move the tag are refused before any key is built.
	for _, bad := range []string{"", "a}b", "{x}", "A"} {
		_, err := s.Enter(t.Context(), bad, "u")
		require.ErrorIs(t, err, waitroom.ErrBadRequest, "%q", bad)
	}
}

// hashTag is what Redis Cluster hashes: the text between the first '{' and
// the next '}', when not empty; otherwise the whole key.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// scriptRecorder records the KEYS of every FCALL, and the other commands
// of the library's life.
type scriptRecorder struct {
	mu    sync.Mutex
	names map[string]bool // functions called
	keys  map[string]bool
	calls []string // "fcall" or "function load", in order
	tags  map[string]bool
}

func (r *scriptRecorder) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *scriptRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (r *scriptRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		name := strings.ToLower(cmd.Name())
		if name == "function" {
			r.mu.Lock()
			r.calls = append(r.calls, "function "+strings.ToLower(args[1].(string)))
			r.mu.Unlock()
		}
		if name == "fcall" {
			r.mu.Lock()
			r.calls = append(r.calls, name)
			r.names[args[1].(string)] = true
			n := int(args[2].(int))
			for _, k := range args[3 : 3+n] {
				r.keys[k.(string)] = true
				r.tags[hashTag(k.(string))] = true
			}
			r.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

// TestScriptsPassEveryKeyInKEYS runs every script and checks that each
// passed only keys of the room's hash tag, and that every key that exists
// afterwards was passed in KEYS by some script (or is the rooms set, which
// is written outside scripts): no script built a key name itself.
func TestScriptsPassEveryKeyInKEYS(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newClient(t)
	rec := &scriptRecorder{names: map[string]bool{}, keys: map[string]bool{}, tags: map[string]bool{}}
	c.AddHook(rec)
	s := New(c, Options{Prefix: testPrefix(t, c)})

	room := newRoom(t, s, waitroom.RoomConfig{Rate: 1000, TokenTTL: time.Second, Lease: 100 * time.Millisecond})
	require.NoError(t, s.UpdateRoom(ctx, room, testenv.RoomConfig(t, s, room), waitroom.RoomConfig{Rate: 1000, TokenTTL: time.Second, Lease: 100 * time.Millisecond}))
	for _, u := range []string{"a", "b", "c"} {
		_, err := s.Enter(ctx, room, u)
		require.NoError(t, err)
	}
	_, err := s.Status(ctx, room, "c")
	require.NoError(t, err)
	require.NoError(t, s.SetNotice(ctx, room, "b", []byte(`{"channels":[]}`)))
	_, err = s.Notice(ctx, room, "b")
	require.NoError(t, err)
	require.NoError(t, s.SetOutbox(ctx, room, true))
	got := admitN(t, s, room, 3)
	_, err = s.ReadOutbox(ctx, room, 10)
	require.NoError(t, err)
	_, err = s.Notified(ctx, room, "b", "nonce")
	require.NoError(t, err)
	require.NoError(t, s.UseReturnLink(ctx, room, "b", "nonce"))
	h, err := s.Claim(ctx, room, got[0].User, got[0].Token)
	require.NoError(t, err)
	require.NoError(t, s.Release(ctx, h))
	h, err = s.Claim(ctx, room, got[0].User, got[0].Token)
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, h))
	_, err = s.Claim(ctx, room, got[1].User, got[1].Token)
	require.NoError(t, err)
	advance(t, s, 1100*time.Millisecond) // let b's and c's tokens expire
	_, err = s.Admit(ctx, room)          // cleans them up
	require.NoError(t, err)
	testenv.Stats(t, s, room)

	all := []*function{createRoomScript, updateRoomScript, statsScript, enterScript, statusScript, admitScript, claimScript, completeScript, releaseScript,
		setNoticeScript, noticeScript, notifiedScript, useReturnLinkScript, setOutboxScript, readOutboxScript}
	for _, f := range all {
		require.True(t, rec.names[f.Name()], "function %s not exercised", f.Name())
	}
	require.Equal(t, map[string]bool{room: true}, rec.tags, "one hash tag per room")

	iter := c.Scan(ctx, 0, s.prefix+":*", 1000).Iterator()
	n := 0
	for iter.Next(ctx) {
		key := iter.Val()
		n++
		if key == s.roomsKey() {
			continue
		}
		require.True(t, rec.keys[key], "key %s written but never passed in KEYS", key)
	}
	require.NoError(t, iter.Err())
	require.GreaterOrEqual(t, n, 4, "cfg, seq, bucket, stats at least")
}

// TestLibraryReload: a Redis without the library (a restart without
// persistence, FUNCTION FLUSH) answers FCALL with "Function not found";
// the Store loads the library and calls again, and the callers that find
// it missing at once load it once between them. On a Redis of its own, so
// that no other test's calls load it meanwhile.
func TestLibraryReload(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := redistest.StartServer(t)
	for _, pipelined := range []bool{true, false} {
		t.Run(fmt.Sprintf("autopipeline=%t", pipelined), func(t *testing.T) {
			c := openURL(t, srv.URL()+fmt.Sprintf("?autopipeline=%t", pipelined))
			rec := &scriptRecorder{names: map[string]bool{}, keys: map[string]bool{}, tags: map[string]bool{}}
			c.AddHook(rec)
			s := New(c, Options{Prefix: randomPrefix()})
			room := newRoom(t, s, waitroom.RoomConfig{})
			require.NoError(t, srv.Client().FunctionFlush(ctx).Err())
			rec.mu.Lock()
			rec.calls = nil
			rec.mu.Unlock()

			const callers = 32
			positions, errs := testenv.EntersAtOnce(ctx, s, room, callers)
			seen := map[int64]bool{}
			for i, err := range errs {
				require.NoError(t, err)
				seen[positions[i]] = true
			}
			require.Len(t, seen, callers, "every caller queued, each in its own place")
			for p := range int64(callers) {
				require.True(t, seen[p+1], "position %d", p+1)
			}

			rec.mu.Lock()
			defer rec.mu.Unlock()
			loads := 0
			for _, call := range rec.calls {
				if call == "function load" {
					loads++
				}
			}
			require.Equal(t, 1, loads, "one load for all the callers: %v", rec.calls)
			libs, err := srv.Client().FunctionList(ctx, redis.FunctionListQuery{}).Result()
			require.NoError(t, err)
			require.Len(t, libs, 1)
			require.Equal(t, LibraryName(), libs[0].Name)
		})
	}
}

// TestNeedsFunctions: a Redis before 7.0 does not know FCALL or FUNCTION;
// the error says what is needed.
func TestNeedsFunctions(t *testing.T) {
	t.Parallel()
	old := fakeRedisError("ERR unknown command 'FCALL', with args beginning with: 'waitroom_x_enter' '10' ")
	err := needsFunctions(old)
	require.ErrorIs(t, err, old)
	require.Contains(t, err.Error(), "Redis 7.0 or later")
	require.NoError(t, needsFunctions(nil))
	other := fakeRedisError("ERR user_script:3: attempt to compare nil with number")
	require.Equal(t, error(other), needsFunctions(other))
}

// TestUnreachableRedis: a Redis that is not there gives
// ErrStoreUnavailable, with the cause, within a second or so.
func TestUnreachableRedis(t *testing.T) {
	t.Parallel()
	c, err := Open("redis://127.0.0.1:1/0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	s := New(c, Options{})

	start := time.Now()
	_, err = s.Enter(t.Context(), "room", "u")
	require.ErrorIs(t, err, waitroom.ErrStoreUnavailable)
	require.Equal(t, "STORE_UNAVAILABLE", waitroom.ErrorCode(err))
	var opErr *net.OpError
	require.ErrorAs(t, err, &opErr, "the cause stays in the chain: %v", err)
	require.ErrorIs(t, s.Ping(t.Context()), waitroom.ErrStoreUnavailable)
	_, err = s.Admit(t.Context(), "room")
	require.ErrorIs(t, err, waitroom.ErrStoreUnavailable)
	require.Less(t, time.Since(start), 3*time.Second)
}

type fakeRedisError string

func (e fakeRedisError) Error() string { return string(e) }
func (fakeRedisError) RedisError()     {}

func TestUnavailableClassifies(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{context.DeadlineExceeded, true},
		{fmt.Errorf("dial: %w", &net.OpError{Op: "dial", Err: errors.New("refused")}), true},
		{redis.ErrClosed, true},
		{fakeRedisError("LOADING Redis is loading the dataset in memory"), true},
		{fakeRedisError("READONLY You can't write against a read only replica."), true},
		{fakeRedisError("OOM command not allowed when used memory > 'maxmemory'."), true},
		{fakeRedisError("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk."), true},
		{context.Canceled, false},
		{fakeRedisError("ERR user_script:3: attempt to compare nil with number"), false},
		{fakeRedisError("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
	} {
		require.Equal(t, tt.want, unavailable(tt.err), "%v", tt.err)
	}
}

// rewindBucket sets a room's last admission one slice before the Redis
// clock's now, and returns that now in µs. Test-only; the key comes in KEYS
// like any script's, the test clock's offset in ARGV[2].
var rewindBucket = redis.NewScript(movedLua + `
local bucket_key = KEYS[1]
local slice_us   = tonumber(ARGV[1])
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2]) + moved()
redis.call('HSET', bucket_key, 'last_us', now_us - slice_us)
return now_us
`)

// moveBucket sets a room's last admission ARGV[1] µs before the Redis
// clock's now and returns that moment, or -1 when the bucket has not
// started. Test-only; the key comes in KEYS like any script's, the test
// clock's offset in ARGV[2].
var moveBucket = redis.NewScript(movedLua + `
local bucket_key = KEYS[1]
local back_us    = tonumber(ARGV[1])
if not redis.call('HGET', bucket_key, 'last_us') then
  return -1 -- not started: the first Admit starts it
end
local t = redis.call('TIME')
local from_us = tonumber(t[1]) * 1000000 + tonumber(t[2]) + moved() - back_us
redis.call('HSET', bucket_key, 'last_us', from_us)
return from_us
`)

// admitAfter is storetest's Harness.AdmitAfter on s: the room's bucket is
// moved so that its last admission was d before Redis's now, then Admit
// runs; the span the bucket counted is read back, d plus the µs until the
// script ran.
func admitAfter(s *Store) func(t *testing.T, room string, d time.Duration) (int, time.Duration) {
	return func(t *testing.T, room string, d time.Duration) (int, time.Duration) {
		ctx := t.Context()
		k := s.keys(room)
		from, err := moveBucket.Run(ctx, s.client, []string{k.bucket}, d.Microseconds(), s.testClockOffset().Microseconds()).Int64()
		require.NoError(t, err)
		got, err := s.Admit(ctx, room)
		require.NoError(t, err)
		if from < 0 {
			return len(got), 0
		}
		to, err := s.client.HGet(ctx, k.bucket, "last_us").Int64()
		require.NoError(t, err)
		return len(got), time.Duration(to-from) * time.Microsecond
	}
}

// TestAdmitFractionalRate: at 175/s in 100 ms slices, ticks admit 17 and 18
// in turn, exactly 175 a second, never 18 × 10 = 180. The Redis clock is
// real, so each tick runs in one transaction with a rewind of the bucket to
// one slice before it: Admit sees 100 ms pass, plus the µs between the two
// scripts. Each rewind takes back the µs the tick before it gained, so the
// error never adds up over the run: it stays one tick's gap, which must stay
// under half a user (2.8 ms at 175/s) to shift the 17/18 pattern. A run in
// which one gap came near that (a preempted Redis) is measured again rather
// than judged.
func TestAdmitFractionalRate(t *testing.T) {
	t.Parallel()
	for attempt := range 5 {
		counts, gap := fractionalTicks(t)
		if float64(gap)*175/1e6 >= 0.4 {
			t.Logf("attempt %d: %d µs between a rewind and its admit; measuring again", attempt, gap)
			continue
		}
		for second := range 3 {
			total := 0
			for _, n := range counts[second*10 : second*10+10] {
				total += n
			}
			require.Equal(t, 175, total, "second %d: ticks %v", second, counts)
		}
		for i, n := range counts {
			require.Equal(t, 17+i%2, n, "17 and 18 in turn: %v", counts)
		}
		return
	}
	t.Fatal("every attempt was slowed by more than the test can tell from a wrong count")
}

// fractionalTicks runs 30 rewound ticks at 175/s in a fresh room and returns
// their counts and the longest gap in µs between a rewind and its admit.
func fractionalTicks(t *testing.T) (counts []int, maxGapUS int64) {
	ctx := t.Context()
	s := newStore(t)
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 175})
	fill(t, s, room, 1000)
	k := s.keys(room)
	got, err := s.Admit(ctx, room)
	require.NoError(t, err)
	require.Empty(t, got, "the first call starts the bucket")
	require.NoError(t, rewindBucket.Load(ctx, s.client).Err())
	var gapUS int64
	for range 30 {
		keys, tokens := s.admitArgs(room, 18)
		tx := s.client.TxPipeline()
		rewound := tx.EvalSha(ctx, rewindBucket.Hash(), []string{k.bucket}, max(100_000-gapUS, 0), s.testClockOffset().Microseconds())
		admit := tx.FCall(ctx, admitScript.Name(), keys, s.withTestClock(tokens)...)
		last := tx.HGet(ctx, k.bucket, "last_us")
		_, err := tx.Exec(ctx)
		require.NoError(t, err)
		got, err := s.admitted(ctx, room, admit.Val(), tokens)
		require.NoError(t, err)
		counts = append(counts, len(got))
		from, err := rewound.Int64()
		require.NoError(t, err)
		to, err := last.Int64()
		require.NoError(t, err)
		gapUS = to - from
		maxGapUS = max(maxGapUS, gapUS)
	}
	return counts, maxGapUS
}

// admitN ticks Admit every 10 ms until n users are admitted.
func admitN(t *testing.T, s *Store, room string, n int) []waitroom.Admission {
	t.Helper()
	var out []waitroom.Admission
	for range 100 {
		got, err := s.Admit(t.Context(), room)
		require.NoError(t, err)
		out = append(out, got...)
		if len(out) >= n {
			require.Len(t, out, n)
			return out
		}
		advance(t, s, 10*time.Millisecond)
	}
	t.Fatalf("admitted %d of %d", len(out), n)
	return nil
}

// fill queues n users straight into the queue, faster than n Enters.
func fill(tb testing.TB, s *Store, room string, n int) {
	tb.Helper()
	fillNamed(tb, s, room, "u", n)
}

// tokenHolders returns the users with an entry in the room's token hash,
// its hash-table field left out.
func tokenHolders(tb testing.TB, s *Store, k *roomKeys) []string {
	tb.Helper()
	fields, err := s.client.HKeys(context.Background(), k.tok).Result()
	require.NoError(tb, err)
	return slices.DeleteFunc(fields, func(f string) bool { return f == tokHashTableField })
}

// fillNamed is fill with the users' names prefix0000000, prefix0000001, …
func fillNamed(tb testing.TB, s *Store, room, prefix string, n int) {
	tb.Helper()
	ctx := context.Background()
	k := s.keys(room)
	// Seen now, on the Redis clock, as Enter would score them.
	now, err := s.client.Time(ctx).Result()
	require.NoError(tb, err)
	seen := float64(now.Unix()%(1<<20)) / (1 << 20)
	for from := 0; from < n; from += 10_000 {
		p := s.client.Pipeline()
		for i := from; i < min(from+10_000, n); i++ {
			p.ZAdd(ctx, k.q, redis.Z{Score: float64(i+1) + seen, Member: fmt.Sprintf("%s%07d", prefix, i)})
		}
		_, err := p.Exec(ctx)
		require.NoError(tb, err)
	}
	require.NoError(tb, s.client.Set(ctx, k.seq, n, 0).Err()) // later Enters queue behind them
}

// TestAdmitLearnsQuota: an instance new to a room brings the default number
// of tokens; the reply tells it the room's quota, and the bucket carries
// what that call could not admit.
func TestAdmitLearnsQuota(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 1000}) // quota 100
	fill(t, s, room, 300)
	got, err := s.Admit(ctx, room) // starts the bucket
	require.NoError(t, err)
	require.Empty(t, got)
	advance(t, s, 100*time.Millisecond)

	// The peer brings the default quota (14) to its first call, learns
	// the room's (100) from the reply, which says it was short, and runs
	// again for the rest of the quota in the same Admit.
	peer := New(newClient(t), Options{Prefix: s.prefix})
	got, err = peer.Admit(ctx, room)
	require.NoError(t, err)
	require.Len(t, got, 100, "the whole quota, in two calls")
}

// TestAdmitCleansUpExpired: Admit deletes tokens whose expiry passed and
// counts them; a held one waits for its lease.
func TestAdmitCleansUpExpired(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 1000, TokenTTL: time.Second, Lease: 3 * time.Second})
	fill(t, s, room, 4)
	got := admitN(t, s, room, 4)
	hold, err := s.Claim(ctx, room, got[0].User, got[0].Token)
	require.NoError(t, err)

	advance(t, s, 1100*time.Millisecond)
	// An expired token is no standing: the user is not admitted any more.
	_, err = s.Status(ctx, room, got[1].User)
	require.ErrorIs(t, err, waitroom.ErrNotInQueue)
	_, err = s.Admit(ctx, room)
	require.NoError(t, err)

	k := s.keys(room)
	require.Equal(t, []string{got[0].User}, tokenHolders(t, s, k), "only the held token survives")
	stats := testenv.Stats(t, s, room)
	require.Equal(t, int64(3), stats.NoShows, "never confirmed nor claimed")
	require.Equal(t, int64(0), stats.Expired)
	require.Equal(t, int64(1), stats.Active)

	// The order fails after the expiry: released, the token is gone.
	require.NoError(t, s.Release(ctx, hold))
	_, err = s.Claim(ctx, room, got[0].User, got[0].Token)
	require.ErrorIs(t, err, waitroom.ErrTokenNotFound)
	stats = testenv.Stats(t, s, room)
	require.Equal(t, int64(1), stats.Expired, "claimed, so not a no-show")
	require.Equal(t, int64(0), stats.Active)
	require.Equal(t, int64(0), stats.Released)
}

// TestReenterAfterExpiry: a user whose token expired queues again and is
// issued a new token.
func TestReenterAfterExpiry(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 1000, TokenTTL: time.Second})
	_, err := s.Enter(ctx, room, "u")
	require.NoError(t, err)
	first := admitN(t, s, room, 1)
	advance(t, s, 1100*time.Millisecond)

	st, err := s.Enter(ctx, room, "u")
	require.NoError(t, err)
	require.Equal(t, waitroom.Status{State: waitroom.StateWaiting, Position: 1}, st)
	again := admitN(t, s, room, 1)
	require.NotEqual(t, first[0].Token, again[0].Token)
	_, err = s.Claim(ctx, room, "u", first[0].Token)
	require.ErrorIs(t, err, waitroom.ErrTokenInvalid)
	_, err = s.Claim(ctx, room, "u", again[0].Token)
	require.NoError(t, err)
}

// TestRoomConfigKeepsSubMillisecond: durations are stored in fractional
// milliseconds and come back exactly.
func TestRoomConfigKeepsSubMillisecond(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	cfg := waitroom.RoomConfig{Rate: 123.456, Slice: 150500 * time.Microsecond, TokenTTL: 90*time.Second + time.Nanosecond, Lease: 1500 * time.Millisecond, MaxActive: 7}.WithDefaults()
	room := newRoom(t, s, cfg)
	got, err := s.RoomConfig(t.Context(), room)
	require.NoError(t, err)
	require.Equal(t, cfg, got)
}

func TestOpen(t *testing.T) {
	t.Parallel()
	_, err := Open("http://127.0.0.1:6379")
	require.Error(t, err)
	c, err := Open(testenv.RedisURL())
	require.NoError(t, err)
	require.NoError(t, c.Close())
}

// TestAdmitBigTick: a tick of more than one batch (500 users) of writes
// admits in order, and a cleanup of more than one batch removes them all.
func TestAdmitBigTick(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 10_000, TokenTTL: time.Second}) // quota 1000
	fill(t, s, room, 1200)
	got, err := s.Admit(ctx, room) // starts the bucket, learns the quota
	require.NoError(t, err)
	require.Empty(t, got)
	advance(t, s, 110*time.Millisecond)
	got, err = s.Admit(ctx, room)
	require.NoError(t, err)
	require.Len(t, got, 1000)
	for i, a := range got {
		require.Equal(t, fmt.Sprintf("u%07d", i), a.User)
	}
	k := s.keys(room)
	require.Len(t, tokenHolders(t, s, k), 1000)

	advance(t, s, 1100*time.Millisecond)
	got, err = s.Admit(ctx, room)
	require.NoError(t, err)
	require.Len(t, got, 200, "the rest of the queue")
	stats := testenv.Stats(t, s, room)
	stats.Pace = waitroom.Pace{} // measured while 200 still waited: PaceIsMeasured
	// fill gave 1,200 places straight into the queue and set the
	// sequence to match, which is what Entered counts.
	require.Equal(t, waitroom.Stats{Waiting: 0, Active: 200, Entered: 1200, Admitted: 1200, NoShows: 1000}, stats, "never confirmed: no-shows")
	require.Len(t, tokenHolders(t, s, k), 200)
}

// TestClaimRetryIsIdempotent: when a claim's reply is lost and the client
// sends the same script again (same lease id), the retry answers OK; only
// another claim is refused.
func TestClaimRetryIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 1000})
	fill(t, s, room, 1)
	var admitted []waitroom.Admission
	for len(admitted) == 0 {
		got, err := s.Admit(ctx, room)
		require.NoError(t, err)
		admitted = got
		advance(t, s, 5*time.Millisecond)
	}
	a := admitted[0]
	k := s.keys(room)
	// claim returns the reply's code: "OK" heads an array reply.
	claim := func(lease string) any {
		res, err := s.call(ctx, s.client, claimScript, []string{k.cfg, k.tok, k.active, k.stats}, a.User, a.Token, lease).Result()
		require.NoError(t, err)
		if held, ok := res.([]any); ok && len(held) > 0 {
			return held[0]
		}
		return res
	}
	lease := waitroom.NewToken()
	require.Equal(t, "OK", claim(lease))
	require.Equal(t, "OK", claim(lease), "the retry of the same claim")
	require.Equal(t, "TOKEN_IN_USE", claim(waitroom.NewToken()), "another claim")
}

// TestHungRedisCallerDeadline: a Redis that accepts connections and never
// answers holds a call only until the caller's deadline, with or without
// automatic pipelining (whose batches run on their own context): the error
// is the deadline, not the client's longer read timeout, and it reads as
// the store being unavailable.
func TestHungRedisCallerDeadline(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // never read, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			_ = c.Close()
		}
	})
	for _, autoPipeline := range []bool{true, false} {
		c := openURL(t, fmt.Sprintf("redis://%s/0?autopipeline=%t", ln.Addr(), autoPipeline))
		s := New(c, Options{})
		require.Equal(t, autoPipeline, s.AutoPipelined())
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		_, err := s.Enter(ctx, "room", "u")
		cancel()
		require.ErrorIs(t, err, waitroom.ErrStoreUnavailable, "autopipeline=%t", autoPipeline)
		require.ErrorIs(t, err, context.DeadlineExceeded, "autopipeline=%t: %v", autoPipeline, err)
	}
}

// TestDeletePrefix: every key of a prefix goes, another prefix's stay,
// also when the prefixes hold what SCAN MATCH reads as a pattern: "w*"
// unescaped would take "wX" along, "w?[x]" would match nothing and leave
// every key behind.
func TestDeletePrefix(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newClient(t)
	base := randomPrefix()
	for _, pair := range [][2]string{{"-a", "-b"}, {"-w*", "-wX"}, {"-w?[x]", "-w?[x]y"}, {`-w\`, `-w\\`}} {
		gone, kept := New(c, Options{Prefix: base + pair[0]}), New(c, Options{Prefix: base + pair[1]})
		for _, s := range []*Store{gone, kept} {
			t.Cleanup(func() { _ = DeletePrefix(context.Background(), c, s.prefix) })
			room := newRoom(t, s, waitroom.RoomConfig{})
			fill(t, s, room, 3)
		}
		// Counted without a pattern of the prefix, so not by the escaping
		// under test: base holds no wildcard.
		count := func(prefix string) int {
			n := 0
			iter := c.Scan(ctx, 0, base+"*", 1000).Iterator()
			for iter.Next(ctx) {
				if strings.HasPrefix(iter.Val(), prefix+":") {
					n++
				}
			}
			require.NoError(t, iter.Err())
			return n
		}
		require.Positive(t, count(gone.prefix), "%q", gone.prefix)
		keptBefore := count(kept.prefix)
		require.NoError(t, DeletePrefix(ctx, c, gone.prefix))
		require.Zero(t, count(gone.prefix), "%q", gone.prefix)
		require.Equal(t, keptBefore, count(kept.prefix), "%q is another prefix", kept.prefix)
	}
}

// TestLimiter: the GCRA script on the test Redis; two clients on one prefix
// are two instances sharing each count.
func TestLimiter(t *testing.T) {
	t.Parallel()
	c := openURL(t, testenv.RedisURL())
	s := New(c, Options{Prefix: testPrefix(t, c)})
	peer := New(openURL(t, testenv.RedisURL()), Options{Prefix: s.prefix})
	storetest.RunLimiter(t, s, peer, func(t *testing.T, d time.Duration) { advance(t, s, d) })
}

// replaceSeed writes a room's draw seed directly, as an insider with
// access to Redis could: storetest's DrawSeedReplaced.
func replaceSeed(s *Store) func(t *testing.T, room, seed string) {
	return func(t *testing.T, room, seed string) {
		require.NoError(t, s.client.HSet(t.Context(), s.keys(room).draw, "seed", seed).Err())
	}
}
