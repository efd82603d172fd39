package waitroom_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/memstore"
)

// hang blocks until the call's deadline, as a Redis that stopped answering.
func hang(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// refused fails at once, as a Redis that refuses connections.
func refused(context.Context) error {
	return fmt.Errorf("dial tcp 127.0.0.1:6379: connection refused: %w", waitroom.ErrStoreUnavailable)
}

// everyCall calls each Store method once.
func everyCall(s waitroom.Store) map[string]func(ctx context.Context) error {
	h := waitroom.Hold{Room: "sale", User: "u1", Token: waitroom.NewToken(), Lease: "l"}
	cfg := waitroom.RoomConfig{}.WithDefaults()
	return map[string]func(ctx context.Context) error{
		"CreateRoom": func(ctx context.Context) error { _, err := s.CreateRoom(ctx, "other", cfg); return err },
		"UpdateRoom": func(ctx context.Context) error { return s.UpdateRoom(ctx, "sale", cfg, cfg) },
		"RoomConfig": func(ctx context.Context) error { _, err := s.RoomConfig(ctx, "sale"); return err },
		"Rooms":      func(ctx context.Context) error { _, err := s.Rooms(ctx); return err },
		"Enter":      func(ctx context.Context) error { _, err := s.Enter(ctx, "sale", "u1"); return err },
		"Status":     func(ctx context.Context) error { _, err := s.Status(ctx, "sale", "u1"); return err },
		"Leave":      func(ctx context.Context) error { return s.Leave(ctx, "sale", "u1") },
		"Admit":      func(ctx context.Context) error { _, err := s.Admit(ctx, "sale"); return err },
		"Claim":      func(ctx context.Context) error { _, err := s.Claim(ctx, "sale", "u1", h.Token); return err },
		"Complete":   func(ctx context.Context) error { return s.Complete(ctx, h) },
		"Release":    func(ctx context.Context) error { return s.Release(ctx, h) },
		"Renew":      func(ctx context.Context) error { return s.Renew(ctx, h) },
		"Work":       func(ctx context.Context) error { _, err := s.Work(ctx, []string{"sale"}); return err },
		"Admitters":  func(ctx context.Context) error { _, err := s.Admitters(ctx, "a1", time.Second); return err },
		"Stats":      func(ctx context.Context) error { _, err := s.Stats(ctx, "sale"); return err },
		"Ping":       func(ctx context.Context) error { return s.Ping(ctx) },
	}
}

// TestGuardedStoreTimeoutIsUnavailable: every call of a store that does not
// answer is ErrStoreUnavailable after exactly the guard's timeout; a caller
// that gives up first gets its own error, which says nothing about the
// store.
func TestGuardedStoreTimeoutIsUnavailable(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		inner := &testenv.FaultStore{Store: memstore.New(memstore.Options{})}
		_, err := inner.CreateRoom(t.Context(), "sale", waitroom.RoomConfig{})
		require.NoError(t, err)
		var logs bytes.Buffer
		g := waitroom.Guard(inner, waitroom.GuardOptions{Timeout: 300 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		inner.SetFault(onEvery(hang))
		calls := everyCall(g)
		require.Len(t, calls, 16, "one per Store method")
		for name, call := range calls {
			start := time.Now()
			err := call(t.Context())
			require.ErrorIs(t, err, waitroom.ErrStoreUnavailable, name)
			require.ErrorIs(t, err, context.DeadlineExceeded, "%s: the cause stays in the chain", name)
			require.Equal(t, 300*time.Millisecond, time.Since(start), name)
		}
		require.True(t, g.Down())

		for name, call := range calls {
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			err := call(ctx)
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded, name)
			require.NotErrorIs(t, err, waitroom.ErrStoreUnavailable, "%s: the caller's deadline, not the store's fault", name)
		}
		// A caller's deadline later than the guard's does not lift the
		// guard's: the call still ends at the timeout, the store's fault.
		for name, call := range calls {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			start := time.Now()
			err := call(ctx)
			cancel()
			require.ErrorIs(t, err, waitroom.ErrStoreUnavailable, name)
			require.Equal(t, 300*time.Millisecond, time.Since(start), name)
		}
		require.Equal(t, 1, strings.Count(logs.String(), "store unavailable"), logs.String())
	})
}

// TestGuardedStoreBringsLostRoomsBack: a call that finds a declared room
// missing (Redis restarted empty) has it re-created and succeeds; a room
// nobody declared stays not found.
func TestGuardedStoreBringsLostRoomsBack(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store := &restartable{Store: memstore.New(memstore.Options{})}
	var logs bytes.Buffer
	g := waitroom.Guard(store, waitroom.GuardOptions{
		Rooms:  map[string]waitroom.RoomConfig{"sale": waitroom.RoomConfig{Rate: 50}.WithDefaults()},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	_, err := store.CreateRoom(ctx, "sale", waitroom.RoomConfig{Rate: 50})
	require.NoError(t, err)
	_, err = g.Enter(ctx, "sale", "u1")
	require.NoError(t, err)
	cfg, err := g.RoomConfig(ctx, "sale")
	require.NoError(t, err)
	require.Equal(t, 50.0, cfg.Rate)

	store.Store = memstore.New(memstore.Options{}) // the restart
	_, err = g.Status(ctx, "sale", "u1")
	require.ErrorIs(t, err, waitroom.ErrNotInQueue, "the room is back; the place is gone with the data")
	st, err := g.Enter(ctx, "sale", "u1")
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Position)

	_, err = g.Enter(ctx, "never-declared", "u1")
	require.ErrorIs(t, err, waitroom.ErrRoomNotFound)
	require.Equal(t, 1, strings.Count(logs.String(), "room re-created"), logs.String())
}

// TestGuardedStoreOutageLoggedOnce: calls that waited on the store through
// an outage and fail after it ended do not start a new one, a late answer
// to a call begun before the outage does not end it, and a failure right
// after the end is its tail: one line when it starts, one when it ends.
func TestGuardedStoreOutageLoggedOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testGuardedStoreOutageLoggedOnce)
}

func testGuardedStoreOutageLoggedOnce(t *testing.T) {
	inner := &testenv.FaultStore{Store: memstore.New(memstore.Options{})}
	ctx := t.Context()
	_, err := inner.CreateRoom(ctx, "sale", waitroom.RoomConfig{})
	require.NoError(t, err)
	logs := newLogCounter()
	g := waitroom.Guard(inner, waitroom.GuardOptions{Logger: slog.New(logs)})

	// Calls in flight across the outage: they settle on cue.
	settle := map[string]chan error{"early-success": make(chan error), "late-failure": make(chan error)}
	started := make(chan string)
	named := func(ctx context.Context) error {
		name, _ := ctx.Value(callName{}).(string)
		if ch := settle[name]; ch != nil {
			started <- name
			return <-ch
		}
		return nil
	}
	inner.SetFault(onEvery(named))
	results := make(chan error, 2)
	inFlight := func(name string) {
		go func() {
			_, err := g.Status(context.WithValue(ctx, callName{}, name), "sale", "u1")
			results <- err
		}()
		require.Equal(t, name, <-started)
	}

	inFlight("early-success") // begun while the store is up
	inner.SetFault(onEvery(refused))
	for range 5 {
		_, err := g.Enter(ctx, "sale", "u1")
		require.ErrorIs(t, err, waitroom.ErrStoreUnavailable)
	}
	require.True(t, g.Down())
	settle["early-success"] <- nil // answered late, from before the outage
	require.ErrorIs(t, <-results, waitroom.ErrNotInQueue, "an answer")
	require.True(t, g.Down(), "an answer to a call begun before the outage does not end it")

	inner.SetFault(onEvery(named))
	inFlight("late-failure") // begun during the outage
	_, err = g.Enter(ctx, "sale", "u2")
	require.NoError(t, err)
	require.False(t, g.Down())
	settle["late-failure"] <- refused(ctx) // its failure is from before the recovery
	require.ErrorIs(t, <-results, waitroom.ErrStoreUnavailable)
	require.False(t, g.Down(), "a failure of a call begun before the recovery does not start an outage")

	require.Equal(t, 1, logs.count("store unavailable"))
	require.Equal(t, 1, logs.count("store reachable again"))

	// A failure soon after the end is the outage's tail (a resumed store
	// working off its backlog): counted, not logged as a new outage.
	inner.SetFault(onEvery(refused))
	require.ErrorIs(t, g.Ping(ctx), waitroom.ErrStoreUnavailable)
	require.True(t, g.Down())
	inner.SetFault(nil)
	require.NoError(t, g.Ping(ctx))
	require.False(t, g.Down())
	require.Equal(t, 1, logs.count("store unavailable"))
	require.Equal(t, 1, logs.count("store reachable again"))

	// Four store timeouts on, a failure is a new outage, logged again.
	time.Sleep(4 * waitroom.DefaultStoreTimeout)
	inner.SetFault(onEvery(refused))
	require.ErrorIs(t, g.Ping(ctx), waitroom.ErrStoreUnavailable)
	require.Equal(t, 2, logs.count("store unavailable"))
	inner.SetFault(nil)
	require.NoError(t, g.Ping(ctx))
	require.Equal(t, 2, logs.count("store reachable again"))
}

type callName struct{}

// logCounter is a slog.Handler that counts each message logged.
type logCounter struct {
	mu   sync.Mutex
	msgs map[string]int
}

func newLogCounter() *logCounter { return &logCounter{msgs: map[string]int{}} }

func (c *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCounter) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *logCounter) WithGroup(string) slog.Handler            { return c }
func (c *logCounter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs[r.Message]++
	return nil
}

// count is how often a message starting with prefix was logged.
func (c *logCounter) count(prefix string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for msg, k := range c.msgs {
		if strings.HasPrefix(msg, prefix) {
			n += k
		}
	}
	return n
}

// onEvery is a fault that fails every method alike.
func onEvery(fault func(ctx context.Context) error) func(context.Context, string) error {
	return func(ctx context.Context, _ string) error { return fault(ctx) }
}

// BenchmarkGuardedStoreCall: what the guard adds to a store call: a context
// and timer of its own unless the caller's deadline comes first.
func BenchmarkGuardedStoreCall(b *testing.B) {
	inner := memstore.New(memstore.Options{})
	if _, err := inner.CreateRoom(b.Context(), "sale", waitroom.RoomConfig{}); err != nil {
		b.Fatal(err)
	}
	if _, err := inner.Enter(b.Context(), "sale", "u1"); err != nil {
		b.Fatal(err)
	}
	g := waitroom.Guard(inner, waitroom.GuardOptions{})
	run := func(b *testing.B, ctx context.Context) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := g.Status(ctx, "sale", "u1"); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("unguarded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := inner.Status(b.Context(), "sale", "u1"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("caller without deadline", func(b *testing.B) { run(b, b.Context()) })
	b.Run("caller deadline first", func(b *testing.B) {
		ctx, cancel := context.WithTimeout(b.Context(), waitroom.DefaultStoreTimeout/2)
		defer cancel()
		run(b, ctx)
	})
}

// TestGuardedStorePassesWakes: the guard hands the store's wakes through,
// and the subscription outlives the guard's per-call timeout: the admitter
// reads it for as long as it runs.
func TestGuardedStorePassesWakes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g := waitroom.Guard(memstore.New(memstore.Options{}), waitroom.GuardOptions{Timeout: 300 * time.Millisecond})
		_, err := g.CreateRoom(t.Context(), "sale", waitroom.RoomConfig{})
		require.NoError(t, err)
		wakes := g.Wakes(t.Context())
		time.Sleep(time.Second) // past the guard's timeout
		_, err = g.Enter(t.Context(), "sale", "u1")
		require.NoError(t, err)
		select {
		case room := <-wakes:
			require.Equal(t, "sale", room)
		default:
			t.Fatal("no wake through the guard")
		}
	})
}

// boundedHang is a WaitBounder whose Enter and Status hang until the
// bound they are given, as redisstore's do on a Redis that stopped
// answering, and record each bound; its first call, with lostFirst, finds
// the room gone after lostAfter instead.
type boundedHang struct {
	waitroom.Store
	lostFirst bool
	lostAfter time.Duration
	mu        sync.Mutex
	bounds    []time.Duration
}

func (b *boundedHang) EnterWithin(ctx context.Context, _, _ string, d time.Duration) (waitroom.Status, error) {
	return b.wait(ctx, d)
}

func (b *boundedHang) StatusWithin(ctx context.Context, _, _ string, d time.Duration) (waitroom.Status, error) {
	return b.wait(ctx, d)
}

func (b *boundedHang) wait(ctx context.Context, d time.Duration) (waitroom.Status, error) {
	b.mu.Lock()
	b.bounds = append(b.bounds, d)
	lost := b.lostFirst && len(b.bounds) == 1
	b.mu.Unlock()
	if lost {
		time.Sleep(b.lostAfter)
		return waitroom.Status{}, waitroom.ErrRoomNotFound
	}
	select {
	case <-ctx.Done():
		return waitroom.Status{}, ctx.Err()
	case <-time.After(d):
		return waitroom.Status{}, fmt.Errorf("no answer: %w", context.DeadlineExceeded)
	}
}

func (b *boundedHang) given() []time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Duration(nil), b.bounds...)
}

// TestGuardedStoreGivesAWaitBounderItsTimeout: Enter and Status of a store
// that bounds its own waits get the guard's timeout instead of a context
// bounded by it, and running out of it is ErrStoreUnavailable, as in
// guarded calls; the caller's own earlier deadline is the caller's; a lost
// room's restore and second call get only what is left of the one bound.
func TestGuardedStoreGivesAWaitBounderItsTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	calls := map[string]func(s waitroom.Store, ctx context.Context) error{
		"Enter":  func(s waitroom.Store, ctx context.Context) error { _, err := s.Enter(ctx, "sale", "u1"); return err },
		"Status": func(s waitroom.Store, ctx context.Context) error { _, err := s.Status(ctx, "sale", "u1"); return err },
	}
	for name, call := range calls {
		synctest.Test(t, func(t *testing.T) {
			inner := &boundedHang{Store: memstore.New(memstore.Options{})}
			g := waitroom.Guard(inner, waitroom.GuardOptions{Timeout: timeout})
			start := time.Now()
			err := call(g, t.Context())
			require.ErrorIs(t, err, waitroom.ErrStoreUnavailable, name)
			require.ErrorIs(t, err, context.DeadlineExceeded, name)
			require.Equal(t, timeout, time.Since(start), name)
			require.Equal(t, []time.Duration{timeout}, inner.given(), name)
			require.True(t, g.Down(), name)

			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			err = call(g, ctx)
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded, name)
			require.NotErrorIs(t, err, waitroom.ErrStoreUnavailable, "%s: the caller's deadline, not the store's fault", name)
		})
		synctest.Test(t, func(t *testing.T) {
			inner := &boundedHang{Store: memstore.New(memstore.Options{}), lostFirst: true, lostAfter: 100 * time.Millisecond}
			g := waitroom.Guard(inner, waitroom.GuardOptions{Timeout: timeout,
				Rooms: map[string]waitroom.RoomConfig{"sale": waitroom.RoomConfig{Rate: 50}.WithDefaults()}})
			start := time.Now()
			err := call(g, t.Context())
			require.ErrorIs(t, err, waitroom.ErrStoreUnavailable, name)
			require.Equal(t, timeout, time.Since(start), "%s: one bound over both calls", name)
			require.Equal(t, []time.Duration{timeout, timeout - 100*time.Millisecond}, inner.given(), name)
			_, err = inner.RoomConfig(t.Context(), "sale")
			require.NoError(t, err, "%s: the keeper re-created the room", name)
		})
	}
}
