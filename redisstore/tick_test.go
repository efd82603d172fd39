package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"math"
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

// TestAdmitSuppliesTokensForWhatItAdmits: after a reply that left nobody
// waiting the next Admit generates no tokens, and when users came
// meanwhile it still admits them in the same call (a second run, MORE),
// so saving tokens never costs a tick.
func TestAdmitSuppliesTokensForWhatItAdmits(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 100})
	got, err := s.Admit(ctx, room)
	require.NoError(t, err)
	require.Empty(t, got, "the first call starts the bucket")
	require.Zero(t, s.tokensWanted(room), "nobody waits: no tokens")

	for _, u := range []string{"u1", "u2", "u3"} {
		_, err := s.Enter(ctx, room, u)
		require.NoError(t, err)
	}
	advance(t, s, 50*time.Millisecond) // 5 users' worth at 100/s
	require.Zero(t, s.tokensWanted(room), "the Store has not seen them yet")
	got, err = s.Admit(ctx, room)
	require.NoError(t, err)
	require.Equal(t, []string{"u1", "u2", "u3"}, users(got))
	require.Zero(t, s.tokensWanted(room))

	// A queue longer than the bucket: about what the bucket will allow.
	fill(t, s, room, 100)
	got, err = s.Admit(ctx, room)
	require.NoError(t, err)
	require.LessOrEqual(t, len(got), 10)
	advance(t, s, 100*time.Millisecond)
	want := s.tokensWanted(room)
	require.GreaterOrEqual(t, want, 9, "a slice at 100/s")
	require.LessOrEqual(t, want, 10, "never beyond the quota")
}

func users(as []waitroom.Admission) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.User)
	}
	return out
}

// TestAdmitterHandoverOnRedis: two instances, each its own Store and
// client, tick a room once between them; when the owner stops, the other
// takes over, and the room's admissions stay exactly what its bucket
// allowed from its first tick to its last (Redis time), through the
// handover. The slice is long (1 s), so that a loaded machine's pauses
// stay within what the bucket makes up and the count is exact.
func TestAdmitterHandoverOnRedis(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	const rate = 175.0
	room := newRoom(t, s, waitroom.RoomConfig{Rate: rate, Slice: time.Second, TokenTTL: time.Hour})
	fill(t, s, room, 2000)
	_, err := s.Admit(ctx, room) // starts the bucket
	require.NoError(t, err)
	k := s.keys(room)
	start, err := s.client.HGet(ctx, k.bucket, "last_us").Int64()
	require.NoError(t, err)

	var mu sync.Mutex
	ticks := map[string]int{}
	run := func(id string) (stop func()) {
		peer := New(newClient(t), Options{Prefix: s.prefix})
		c, cancel := context.WithCancel(ctx)
		done := make(chan error)
		adm := &waitroom.Admitter{ID: id, Store: &countingStore{Store: peer, id: id, mu: &mu, ticks: ticks}}
		go func() { done <- adm.Run(c) }()
		return func() {
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
		}
	}
	stopA, stopB := run("a"), run("b")
	owner := waitroom.Owner(room, []string{"a", "b"})
	other := map[string]string{"a": "b", "b": "a"}[owner]
	// Waits are conditions with a generous bound, not fixed sleeps: on a
	// loaded machine (this package runs the whole conformance suite
	// beside it) a second may hold only a few ticks.
	ticked := func(id string, n int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return ticks[id] > n
		}
	}
	require.Eventually(t, ticked(owner, 20), 30*time.Second, 10*time.Millisecond, "the owner ticked")
	if owner == "a" {
		stopA()
	} else {
		stopB()
	}
	mu.Lock()
	before, otherBefore := ticks[owner], ticks[other]
	mu.Unlock()
	atHandover, err := s.Stats(ctx, room)
	require.NoError(t, err)
	require.Eventually(t, ticked(other, otherBefore+20), 30*time.Second, 10*time.Millisecond, "the other took over")
	if owner == "a" {
		stopB()
	} else {
		stopA()
	}

	mu.Lock()
	defer mu.Unlock()
	// The other ticks only until it sees the owner, or while a loaded
	// machine lets the owner's lease lapse; either way far less.
	require.Less(t, otherBefore, before, "the owner did the ticking")
	require.Equal(t, before, ticks[owner], "the stopped owner ticks no more")

	b, err := s.client.HMGet(ctx, k.bucket, "last_us", "carry").Result()
	require.NoError(t, err)
	last, carry := toFloat(t, b[0]), toFloat(t, b[1])
	st, err := s.Stats(ctx, room)
	require.NoError(t, err)
	allowed := rate * (last - float64(start)) / 1e6
	require.InDelta(t, allowed, float64(st.Admitted)+carry, 1e-6,
		"admitted %d + carry %.3f = rate × %.3f s", st.Admitted, carry, (last-float64(start))/1e6)
	require.Positive(t, atHandover.Admitted, "the owner admitted")
	require.Greater(t, st.Admitted, atHandover.Admitted, "the other admitted after the handover")
}

func toFloat(t *testing.T, v any) float64 {
	t.Helper()
	s, ok := v.(string)
	require.True(t, ok, "%v", v)
	var f float64
	_, err := fmt.Sscan(s, &f)
	require.NoError(t, err)
	require.False(t, math.IsNaN(f))
	return f
}

// countingStore counts one instance's Admit calls per room.
type countingStore struct {
	waitroom.Store
	id    string
	mu    *sync.Mutex
	ticks map[string]int
}

func (c *countingStore) Admit(ctx context.Context, room string) ([]waitroom.Admission, error) {
	got, err := c.Store.Admit(ctx, room)
	if err == nil {
		c.mu.Lock()
		c.ticks[c.id]++
		c.mu.Unlock()
	}
	return got, err
}

// TestWakesOnlyForItsPrefix: the wake subscription is a pattern over the
// store's prefix, so a prefix holding the pattern's wildcards must not
// hear another prefix's rooms: "w*" unescaped would match "wX" too.
func TestWakesOnlyForItsPrefix(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newClient(t)
	base := randomPrefix()
	mine := New(c, Options{Prefix: base + "-w*?[x]"})
	other := New(c, Options{Prefix: base + "-wX?[x]"})
	for _, s := range []*Store{mine, other} {
		t.Cleanup(func() { _ = DeletePrefix(context.Background(), c, s.prefix) })
	}
	room := testenv.Unique("r-")
	for _, s := range []*Store{mine, other} {
		_, err := s.CreateRoom(ctx, room, waitroom.RoomConfig{})
		require.NoError(t, err)
	}
	wakes := mine.Wakes(ctx)
	testenv.AwaitWakes(t, mine, room, 10*time.Second, wakes)

	// The other prefix's room first: a reader sees wakes in order, so if
	// it heard that one, it would come first.
	_, err := other.Enter(ctx, room, "u1")
	require.NoError(t, err)
	_, err = mine.Enter(ctx, room, "u2")
	require.NoError(t, err)
	select {
	case got := <-wakes:
		require.Equal(t, room, got)
	case <-time.After(10 * time.Second):
		t.Fatal("no wake within 10s")
	}
	select {
	case got := <-wakes:
		t.Fatalf("a second wake, %q: the other prefix's", got)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestWakesRefusedIsLogged: a Redis user whose ACL lacks the wakes'
// channel pattern gets no wakes, and the store says so once, with what
// it costs; the admitter still has its once-a-second probe.
func TestWakesRefusedIsLogged(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := redistest.StartServer(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr, DisableIdentity: true})
	t.Cleanup(func() { admin.Close() })
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "nowakes", "on", ">pw", "~*", "+@all", "resetchannels").Err())
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "nowakes", Password: "pw", DisableIdentity: true})
	t.Cleanup(func() { c.Close() })
	logs := &testenv.LogBuffer{}
	s := New(c, Options{Prefix: "p", Logger: slog.New(slog.NewTextHandler(logs, nil))})
	wakes := s.Wakes(ctx)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "no wakes") }, 10*time.Second, 10*time.Millisecond)
	require.Contains(t, logs.String(), "NOPERM")
	select {
	case room := <-wakes:
		t.Fatalf("a wake, %q, without the channel's permission", room)
	default:
	}
}

// TestAdmittersKeyLivesAsLongAsItsLongestLease: the admitters' set expires
// with its longest lease (a short renewal never cuts a long one), and an
// entry whose lease ran out over a second ago is dropped from the set (the
// listing leaves it out at once; this bounds the set).
func TestAdmittersKeyLivesAsLongAsItsLongestLease(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newStore(t)
	key := s.prefix + ":admitters"
	// Leases of seconds for what is read right after: in CI a 300 ms
	// lease had lapsed before the next command read its expiry.
	_, err := s.Admitters(ctx, "long", 10*time.Second)
	require.NoError(t, err)
	ttl := s.client.PTTL(ctx, key).Val()
	require.Positive(t, ttl, "a new set expires")
	require.LessOrEqual(t, ttl, 10*time.Second, "with its lease")
	_, err = s.Admitters(ctx, "short", 300*time.Millisecond)
	require.NoError(t, err)
	require.Greater(t, s.client.PTTL(ctx, key).Val(), 8*time.Second, "the short renewal kept the long lease's expiry")

	// "short" stops, its lease runs out over a second ago; "long" renews
	// past the next clock reading.
	advance(t, s, 1400*time.Millisecond)
	require.Eventually(t, func() bool {
		ids, err := s.Admitters(ctx, "long", 10*time.Second)
		require.NoError(t, err)
		require.Equal(t, []string{"long"}, ids, "the lapsed lease is not listed")
		return s.client.ZScore(ctx, key, "short").Err() == redis.Nil
	}, 10*time.Second, 50*time.Millisecond, "the lapsed entry is dropped from the set")
}
