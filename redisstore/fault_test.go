package redisstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redistest"
)

// Fault tests: real redis-server processes from redistest, killed,
// restarted or refusing writes under the store, each asserting what is
// kept, what is lost and that every failure is a clean ErrStoreUnavailable
// within a bound. They log their timings and losses (go test -v -run Fault).

// heavyTests: the conformance suites on a cluster and on Sentinel and the
// failover tests under load do not run in parallel with other top-level
// tests (their own checks do run in parallel). Each starts four to six
// redis-servers and keeps the CPU busy; on two shared cores under -race
// they would starve the real-clock rate checks of the other suites, whose
// bounds assume a tick takes milliseconds, not a hundred.

// recoveryBound is how long a fault may keep the store unavailable before
// the test fails: Sentinel's down-after (1 s) plus its failover, the
// cluster's node timeout (2 s) plus promotion, and the client catching up.
const recoveryBound = 20 * time.Second

// callTimeout bounds one store call in the fault tests: longer than the
// client's 1 s timeouts, so it is the client, not the test, that gives up.
const callTimeout = 5 * time.Second

// lossRecorder sums what a Store reports to OnLostWrites.
type lossRecorder struct {
	mu    sync.Mutex
	total Loss
}

func (r *lossRecorder) record(room string, l Loss) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total.Places += l.Places
	r.total.Tokens += l.Tokens
}

func (r *lossRecorder) get() Loss {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// outcomes records what a load told its users and how its calls failed.
type outcomes struct {
	mu     sync.Mutex
	told   map[string]bool      // users Enter gave a place (or their token)
	tokens []waitroom.Admission // every token Admit issued, in order
	ok     int
	fails  map[string]int // failures by code
	odd    []error        // failures that are not ErrStoreUnavailable
	slow   time.Duration  // the slowest failed call
	// firstFail and lastFail bound the outage as the calls saw it.
	firstFail, lastFail time.Time
	succeeded           chan struct{} // a token each time a call succeeds, for awaitCalls
}

func newOutcomes() *outcomes {
	return &outcomes{told: map[string]bool{}, fails: map[string]int{}, succeeded: make(chan struct{}, 1)}
}

// awaitCalls returns once n more calls of the load have succeeded: the
// load ran for a while, however fast this machine runs it.
func (o *outcomes) awaitCalls(t *testing.T, n int) {
	t.Helper()
	o.mu.Lock()
	target := o.ok + n
	o.mu.Unlock()
	for {
		o.mu.Lock()
		done := o.ok >= target
		o.mu.Unlock()
		if done {
			return
		}
		select {
		case <-o.succeeded:
		case <-t.Context().Done():
			t.Fatalf("the load made fewer than %d calls", n)
		}
	}
}

// call runs f with a bounded context and records how it went.
func (o *outcomes) call(ctx context.Context, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	start := time.Now()
	err := f(ctx)
	end := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if err == nil {
		o.ok++
		select {
		case o.succeeded <- struct{}{}:
		default:
		}
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return err // the load was stopped mid-call
	}
	o.fails[waitroom.ErrorCode(err)]++
	if !errors.Is(err, waitroom.ErrStoreUnavailable) {
		o.odd = append(o.odd, err)
	}
	o.slow = max(o.slow, end.Sub(start))
	if o.firstFail.IsZero() {
		o.firstFail = start
	}
	o.lastFail = end
	return err
}

// runLoad enters new users on enterers goroutines and admits every 20 ms,
// recording everything, until stop is closed.
func runLoad(ctx context.Context, s *Store, room string, enterers int, o *outcomes, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	for g := range enterers {
		wg.Go(func() {
			for i := 0; !stopped(); i++ {
				user := fmt.Sprintf("g%d-u%06d", g, i)
				_ = o.call(ctx, func(ctx context.Context) error {
					_, err := s.Enter(ctx, room, user)
					if err == nil {
						o.mu.Lock()
						o.told[user] = true
						o.mu.Unlock()
					}
					return err
				})
			}
		})
	}
	wg.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for !stopped() {
			_ = o.call(ctx, func(ctx context.Context) error {
				got, err := s.Admit(ctx, room)
				o.mu.Lock()
				o.tokens = append(o.tokens, got...)
				o.mu.Unlock()
				return err
			})
			select {
			case <-stop:
			case <-t.C:
			}
		}
	})
	return &wg
}

// waitServing polls Enter with a probe user until it succeeds, and
// returns when it did.
func waitServing(ctx context.Context, t *testing.T, s *Store, room string) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, recoveryBound)
	defer cancel()
	var last error
	for i := 0; ; i++ {
		callCtx, cancelCall := context.WithTimeout(ctx, callTimeout)
		_, err := s.Enter(callCtx, room, fmt.Sprintf("probe-%d", i))
		cancelCall()
		if err == nil {
			return time.Now()
		}
		last = err
		select {
		case <-ctx.Done():
			t.Fatalf("room %s not served again within %v: %v", room, recoveryBound, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// retryUnavailable calls f until it returns anything but
// ErrStoreUnavailable, within recoveryBound, and returns its last error.
func retryUnavailable(ctx context.Context, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, recoveryBound)
	defer cancel()
	for {
		err := f()
		if !errors.Is(err, waitroom.ErrStoreUnavailable) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kept compares what the load told users with what Redis now holds and
// returns how many places and tokens users were told about are gone.
func kept(ctx context.Context, t *testing.T, c redis.Cmdable, s *Store, room string, o *outcomes) (lostPlaces, lostTokens int) {
	t.Helper()
	k := s.keys(room)
	queued, err := c.ZRange(ctx, k.q, 0, -1).Result()
	require.NoError(t, err)
	inQueue := map[string]bool{}
	for _, u := range queued {
		inQueue[u] = true
	}
	tok, err := c.HGetAll(ctx, k.tok).Result()
	require.NoError(t, err)
	o.mu.Lock()
	defer o.mu.Unlock()
	for u := range o.told {
		if !inQueue[u] && tok[u] == "" {
			lostPlaces++
		}
	}
	// A token is lost when its user holds no such token any more; a user
	// re-admitted after the loss holds a new one, and the old is lost.
	for _, a := range o.tokens {
		if !strings.HasPrefix(tok[a.User], a.Token+"|") {
			lostTokens++
		}
	}
	return lostPlaces, lostTokens
}

// TestFaultSentinelFailover kills the primary under load (enters on three
// goroutines, an admission every 20 ms) and checks the room goes on after
// Sentinel promotes the replica, that every failure meanwhile was a clean
// ErrStoreUnavailable, and that whatever users were told and the new
// primary lacks was reported as a Loss. "healthy link": the replica is in
// sync when the primary dies. "lagging replica": the replica's link is cut
// for the last moments before the crash, so the writes of those moments
// are certainly lost, and must be reported.
func TestFaultSentinelFailover(t *testing.T) {
	// Not parallel with other top-level tests: see heavyTests.
	for _, lagging := range []bool{false, true} {
		name := "healthy link"
		if lagging {
			name = "lagging replica"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sentinelFailover(t, lagging)
		})
	}
}

func sentinelFailover(t *testing.T, lagging bool) {
	ctx := testCtx(t)
	sn := redistest.StartSentinel(t, redistest.SentinelOptions{})
	var reported lossRecorder
	s := New(openURL(t, sn.URL()), Options{Prefix: randomPrefix(), OnLostWrites: reported.record})
	room := "sale"
	_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Rate: 200})
	require.NoError(t, err)
	wakes := s.Wakes(ctx)
	_, err = s.CreateRoom(ctx, "woken", waitroom.RoomConfig{})
	require.NoError(t, err)
	testenv.AwaitWakes(t, s, "woken", 15*time.Second, wakes)

	o := newOutcomes()
	stop := make(chan struct{})
	wg := runLoad(ctx, s, room, 3, o, stop)
	t.Cleanup(func() { // a failed test still stops its load
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	})
	o.awaitCalls(t, 200) // load before the fault

	old, err := sn.PrimaryAddr(ctx)
	require.NoError(t, err)
	if lagging {
		cutReplicaLink(ctx, t, old)
		o.awaitCalls(t, 50) // writes the replica never gets
	}
	o.mu.Lock()
	toldBefore, tokensBefore := len(o.told), len(o.tokens)
	o.mu.Unlock()
	killed := time.Now()
	require.Equal(t, old, sn.KillPrimary(ctx))
	primary, err := sn.WaitFailover(ctx, old)
	require.NoError(t, err)
	promoted := time.Now()
	served := waitServing(ctx, t, s, room)
	// The wake subscription follows the primary (which, when the replica
	// lagged, may have no "woken" room: Enter then says so until declared).
	// A call on another of the client's connections may still dial the old
	// primary once while the client learns the new one: retried, as the
	// server's callers retry a 503.
	require.NoError(t, retryUnavailable(ctx, func() error {
		_, err := s.CreateRoom(ctx, "woken", waitroom.RoomConfig{})
		return err
	}))
	testenv.AwaitWakes(t, s, "woken", 15*time.Second, wakes)
	o.awaitCalls(t, 200) // load after the fault
	close(stop)
	wg.Wait()

	c := redis.NewClient(&redis.Options{Addr: primary, DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	lostPlaces, lostTokens := kept(ctx, t, c, s, room, o)
	got := reported.get()
	require.Equal(t, got, s.Lost())
	t.Logf("sentinel (%s): %d places and %d tokens told before the kill; promoted %v after the kill, served again after %v; "+
		"calls: %d ok, failures %v from %v to %v after the kill, slowest failure %v; "+
		"lost: %d places and %d tokens users were told about; reported: %d places, %d tokens",
		map[bool]string{false: "healthy link", true: "lagging replica"}[lagging], toldBefore, tokensBefore,
		promoted.Sub(killed).Round(time.Millisecond), served.Sub(killed).Round(time.Millisecond),
		o.ok, o.fails, o.firstFail.Sub(killed).Round(time.Millisecond), o.lastFail.Sub(killed).Round(time.Millisecond),
		o.slow.Round(time.Millisecond), lostPlaces, lostTokens, got.Places, got.Tokens)

	require.Empty(t, o.odd, "every failure is ErrStoreUnavailable")
	require.Less(t, o.slow, 3*time.Second, "no call hangs on the dead primary")
	require.LessOrEqual(t, int64(lostPlaces), got.Places, "every lost place users were told about is reported")
	require.LessOrEqual(t, int64(lostTokens), got.Tokens, "every lost token users were told about is reported")
	if lagging {
		require.Positive(t, lostPlaces, "the writes after the cut are gone")
		require.Positive(t, got.Places, "and reported")
	}

	// The room goes on: users still queued are admitted in order and can
	// claim; a user whose place was lost is told so and may queue again.
	for u := range o.told {
		st, err := s.Status(ctx, room, u)
		if errors.Is(err, waitroom.ErrNotInQueue) {
			st, err = s.Enter(ctx, room, u)
			require.NoError(t, err)
			require.Equal(t, waitroom.StateWaiting, st.State)
			break
		}
		require.NoError(t, err)
	}
}

// cutReplicaLink disconnects the primary's replicas and keeps them from
// coming back (maxclients 1 refuses every new connection; the store's and
// the sentinels' open ones go on), as a broken or lagging link would.
func cutReplicaLink(ctx context.Context, t *testing.T, primary string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: primary, DisableIdentity: true})
	defer c.Close()
	require.NoError(t, c.ConfigSet(ctx, "maxclients", "1").Err())
	require.NoError(t, c.Do(ctx, "CLIENT", "KILL", "TYPE", "replica").Err())
}

// TestFaultRedisRestart: a standalone Redis without persistence stops and
// comes back empty. While it is down every call fails fast with
// ErrStoreUnavailable; after it, the same Store and client serve again
// with no restart of anything, the room is re-created by a RoomKeeper,
// and the places and tokens the restart wiped out are reported.
func TestFaultRedisRestart(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := redistest.StartServer(t)
	var reported lossRecorder
	s := New(openURL(t, srv.URL()), Options{Prefix: randomPrefix(), OnLostWrites: reported.record})
	room := "sale"
	cfg := waitroom.RoomConfig{Rate: 1000, MaxQueue: 5000}.WithDefaults()
	keeper := &waitroom.RoomKeeper{Store: s, Rooms: map[string]waitroom.RoomConfig{room: cfg}}
	recreated, err := keeper.Tick(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{room}, recreated, "the first tick creates the declared room")
	// The operator changes the live settings; the keeper learns them.
	live := cfg
	live.Rate = 500
	require.NoError(t, s.UpdateRoom(ctx, room, testenv.RoomConfig(t, s, room), live))
	recreated, err = keeper.Tick(ctx)
	require.NoError(t, err)
	require.Empty(t, recreated)

	for i := range 10 {
		_, err := s.Enter(ctx, room, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
	}
	admitted := admitN(t, s, room, 10)
	require.Len(t, admitted, 10)

	srv.Kill()
	down := time.Now()
	o := newOutcomes()
	calls := []func(ctx context.Context) error{
		func(ctx context.Context) error { _, err := s.Enter(ctx, room, "late"); return err },
		func(ctx context.Context) error { _, err := s.Status(ctx, room, "u1"); return err },
		func(ctx context.Context) error { _, err := s.Admit(ctx, room); return err },
		func(ctx context.Context) error {
			_, err := s.Claim(ctx, room, admitted[0].User, admitted[0].Token)
			return err
		},
		s.Ping,
		func(ctx context.Context) error { _, err := keeper.Tick(ctx); return err },
	}
	for range 3 {
		for _, call := range calls {
			require.ErrorIs(t, o.call(ctx, call), waitroom.ErrStoreUnavailable)
		}
	}
	require.Empty(t, o.odd)
	t.Logf("restart: while down, %d calls failed with %v; slowest %v", len(calls)*3, o.fails, o.slow.Round(time.Microsecond))
	require.Less(t, o.slow, 2*time.Second, "a dead Redis fails calls fast")

	srv.Restart() // empty: nothing was persisted
	restarted := time.Now()
	// The same client serves again by itself: go-redis's pool, after
	// failed dials, dials again in the background once a second until
	// one succeeds, so it may take about a second to notice.
	pollCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		_, err = s.Enter(pollCtx, room, "u0")
		if !errors.Is(err, waitroom.ErrStoreUnavailable) || pollCtx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.ErrorIs(t, err, waitroom.ErrRoomNotFound, "served again, but the room is gone")
	back := time.Now()
	recreated, err = keeper.Tick(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{room}, recreated)
	got, err := s.RoomConfig(ctx, room)
	require.NoError(t, err)
	require.Equal(t, live, got, "re-created with the settings last seen, not the declared ones")
	rooms, err := s.Rooms(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{room}, rooms, "listed again, so the admitter admits it")

	st, err := s.Enter(ctx, room, "u0")
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Position, "the queue starts over")
	_, err = s.Admit(ctx, room)
	require.NoError(t, err)
	require.Equal(t, Loss{Places: 10, Tokens: 10}, reported.get(), "everything handed out before the restart is reported lost")
	_, err = s.Claim(ctx, room, admitted[1].User, admitted[1].Token)
	require.ErrorIs(t, err, waitroom.ErrTokenNotFound, "tokens issued before the restart are gone")
	t.Logf("restart: down %v; first answer %v after the restart; room re-created by the keeper; reported lost: %+v",
		restarted.Sub(down).Round(time.Millisecond), back.Sub(restarted).Round(time.Millisecond), reported.get())
}

// TestFaultClusterShardDown kills the primary of one of three shards (one
// replica each, cluster-require-full-coverage no). Rooms on the other
// shards keep entering, admitting and claiming throughout; the room on the
// dead shard fails with ErrStoreUnavailable until its replica is promoted,
// then the same client serves it again.
func TestFaultClusterShardDown(t *testing.T) {
	// Not parallel with other top-level tests: see heavyTests.
	ctx := testCtx(t)
	c := redistest.StartCluster(t, redistest.ClusterOptions{
		Primaries: 3, ReplicasPerPrimary: 1,
		Args: []string{"--cluster-require-full-coverage", "no"},
	})
	var reported lossRecorder
	s := New(openURL(t, c.URL()), Options{Prefix: randomPrefix(), OnLostWrites: reported.record})
	byPrimary := roomsOnEveryPrimary(ctx, t, c, s, 3)
	var dead, deadRoom string
	var others []string
	for p, room := range byPrimary {
		_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{Rate: 1000})
		require.NoError(t, err)
		for i := range 5 {
			_, err := s.Enter(ctx, room, fmt.Sprintf("before-%d", i))
			require.NoError(t, err)
		}
		if dead == "" {
			dead, deadRoom = p, room
		} else {
			others = append(others, room)
		}
	}
	roomsShard, err := c.PrimaryFor(ctx, s.roomsKey())
	require.NoError(t, err)
	// What this test checks is that a promoted replica serves the room on
	// with what it had; replication is asynchronous, so first let the dead
	// shard's replica catch up (a probe write in the room's slot, then WAIT
	// on the same connection: the replica then has everything before it).
	node, err := s.client.(*redis.ClusterClient).MasterForKey(ctx, s.keys(deadRoom).cfg)
	require.NoError(t, err)
	require.NoError(t, redistest.WaitReplicated(ctx, node, "{"+deadRoom+"}:replicated", 1))

	c.Kill(dead)
	killed := time.Now()

	// The dead shard's room fails cleanly and fast.
	o := newOutcomes()
	err = o.call(ctx, func(ctx context.Context) error { _, err := s.Enter(ctx, deadRoom, "during"); return err })
	require.ErrorIs(t, err, waitroom.ErrStoreUnavailable)
	err = o.call(ctx, func(ctx context.Context) error { _, err := s.Admit(ctx, deadRoom); return err })
	require.ErrorIs(t, err, waitroom.ErrStoreUnavailable)
	require.Empty(t, o.odd)
	t.Logf("cluster: the dead shard's room failed with %v, slowest call %v", o.fails, o.slow.Round(time.Millisecond))
	require.Less(t, o.slow, 3*time.Second)

	// The other shards' rooms do everything while it is down.
	for _, room := range others {
		for i := range 3 {
			_, err := s.Enter(ctx, room, fmt.Sprintf("during-%d", i))
			require.NoError(t, err, room)
		}
		got := admitN(t, s, room, 8)
		h, err := s.Claim(ctx, room, got[0].User, got[0].Token)
		require.NoError(t, err, room)
		require.NoError(t, s.Complete(ctx, h), room)
	}
	othersDone := time.Now()
	_, roomsErr := s.Rooms(ctx)
	t.Logf("cluster: rooms on the other shards entered, admitted and claimed %v after the kill; Rooms() (set on %s, dead shard %s): %v",
		othersDone.Sub(killed).Round(time.Millisecond), roomsShard, dead, roomsErr)

	served := waitServing(ctx, t, s, deadRoom)
	got := admitN(t, s, deadRoom, 6)
	h, err := s.Claim(ctx, deadRoom, got[0].User, got[0].Token)
	require.NoError(t, err)
	require.NoError(t, s.Complete(ctx, h))
	primary, err := c.PrimaryFor(ctx, s.keys(deadRoom).cfg)
	require.NoError(t, err)
	require.NotEqual(t, dead, primary)
	stats, err := s.Stats(ctx, deadRoom)
	require.NoError(t, err)
	t.Logf("cluster: the dead shard's room served again %v after the kill, by its promoted replica %s; it kept %d of 5 places; reported lost: %+v",
		served.Sub(killed).Round(time.Millisecond), primary, stats.Entered-1, reported.get())
	require.Equal(t, int64(5+1), stats.Entered, "the replica had every place (the probe is the 6th)")
	require.Equal(t, Loss{}, reported.get())
}

// runOutOfMemory sets maxmemory below what Redis uses: with noeviction,
// every write is refused with OOM, as on a Redis that filled up.
func runOutOfMemory(ctx context.Context, t *testing.T, rdb *redis.Client) {
	t.Helper()
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err())
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "1").Err())
	err := rdb.Set(ctx, "ballast", "x", 0).Err()
	require.True(t, redis.HasErrorPrefix(err, "OOM"), "a write: %v", err)
}

// breakBGSave makes the next BGSAVE fail (its rename onto a non-empty
// directory) and waits until it has: with stop-writes-on-bgsave-error,
// Redis then answers writes with MISCONF.
func breakBGSave(ctx context.Context, t *testing.T, rdb *redis.Client) {
	t.Helper()
	dir, err := rdb.ConfigGet(ctx, "dir").Result()
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir["dir"], "dump.rdb", "in-the-way"), 0o755))
	require.NoError(t, rdb.BgSave(ctx).Err())
	require.Eventually(t, func() bool {
		info, err := rdb.Info(ctx, "persistence").Result()
		return err == nil && strings.Contains(info, "rdb_bgsave_in_progress:0") &&
			strings.Contains(info, "rdb_last_bgsave_status:err")
	}, 10*time.Second, 10*time.Millisecond)
}

// TestRedisCannotServeNowIsUnavailable: a Redis out of memory (OOM) or
// refusing writes after a failed save (MISCONF) cannot serve now; every
// write is ErrStoreUnavailable with the reply as its cause, so the server
// answers 503 with Retry-After and applies its failure policy, not 500.
func TestRedisCannotServeNowIsUnavailable(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		args  []string
		spoil func(ctx context.Context, t *testing.T, rdb *redis.Client)
		reply string
	}{
		{"OOM", nil, runOutOfMemory, "OOM"},
		{"MISCONF", []string{"--save", "3600 1", "--stop-writes-on-bgsave-error", "yes", "--dbfilename", "dump.rdb"},
			breakBGSave, "MISCONF"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			srv := redistest.StartServer(t, tt.args...)
			open := func(pipelined bool) *Store {
				c := openURL(t, srv.URL()+fmt.Sprintf("?autopipeline=%t", pipelined))
				return New(c, Options{Prefix: fmt.Sprintf("p%t", pipelined)})
			}
			for _, pipelined := range []bool{true, false} {
				s := open(pipelined)
				_, err := s.CreateRoom(ctx, "sale", waitroom.RoomConfig{Rate: 1000})
				require.NoError(t, err)
				_, err = s.Enter(ctx, "sale", "early")
				require.NoError(t, err)
			}
			tt.spoil(ctx, t, srv.Client())

			for _, pipelined := range []bool{true, false} {
				s := open(pipelined)
				calls := map[string]func() error{
					"Enter":      func() error { _, err := s.Enter(ctx, "sale", "late"); return err },
					"Admit":      func() error { _, err := s.Admit(ctx, "sale"); return err },
					"CreateRoom": func() error { _, err := s.CreateRoom(ctx, "other", waitroom.RoomConfig{}); return err },
				}
				for name, call := range calls {
					err := call()
					require.ErrorIs(t, err, waitroom.ErrStoreUnavailable, "%s, autopipeline=%t", name, pipelined)
					var reply redis.Error
					require.ErrorAs(t, err, &reply, "%s, autopipeline=%t: the reply stays the cause", name, pipelined)
					require.True(t, strings.HasPrefix(reply.Error(), tt.reply), "%s, autopipeline=%t: %v", name, pipelined, err)
				}
			}
		})
	}
}
