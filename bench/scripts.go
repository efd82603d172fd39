package bench

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/redisstore"
)

// measureScripts runs each operation alone for a slice and reads its
// server time from INFO commandstats. It reads the counters before and
// after each slice rather than CONFIG RESETSTAT: on a Redis others use,
// resetting their counters would break their figures; the calls Redis
// counted against the calls made show whether anyone else ran scripts.
func (b *Result) measureScripts(ctx context.Context, client redis.UniversalClient, store *redisstore.Store) error {
	b.progress("redis: time per script call")
	// batched: the Store gathers concurrent operations into fewer calls
	// (Enter, Status); users then counts the operations, and a call's µs
	// is a batch's.
	measureOp := func(op, command string, batched bool, calls func() (n int64, users int64, err error)) error {
		before, err := redisstore.CommandStats(ctx, client)
		if err != nil {
			return err
		}
		n, users, err := calls()
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		after, err := redisstore.CommandStats(ctx, client)
		if err != nil {
			return err
		}
		seen := after[command].Calls - before[command].Calls
		usec := after[command].Usec - before[command].Usec
		f := scriptFigure{op: op, command: command, calls: n, seen: seen}
		if seen > 0 {
			f.usecPerCall = float64(usec) / float64(seen)
		}
		switch {
		case batched && seen > 0:
			f.usersPerCall = float64(users) / float64(seen)
		case n > 0 && users > 0:
			f.usersPerCall = float64(users) / float64(n)
		}
		if seen != n && !(batched && seen < n) {
			b.scriptsShared = true
		}
		b.scripts = append(b.scripts, f)
		return nil
	}
	measure := func(op, command string, calls func() (n int64, users int64, err error)) error {
		return measureOp(op, command, false, calls)
	}
	// concurrently calls op with cfg.clients goroutines for one slice.
	concurrently := func(op func(i int64) error) (int64, int64, error) {
		var next, n atomic.Int64
		var wg sync.WaitGroup
		var firstErr error
		var once sync.Once
		deadline := time.Now().Add(b.cfg.Slice)
		for range b.cfg.Clients {
			wg.Go(func() {
				for time.Now().Before(deadline) {
					if err := op(next.Add(1) - 1); err != nil {
						if !errors.Is(err, errExhausted) {
							once.Do(func() { firstErr = err })
						}
						return
					}
					n.Add(1)
				}
			})
		}
		wg.Wait()
		return n.Load(), 0, firstErr
	}

	// Load the library first, so that every measured call is one FCALL.
	if _, err := store.Status(ctx, benchStatusRoom, "w0"); err != nil {
		return err
	}
	if err := measureOp("enter (new place)", "fcall", true, func() (int64, int64, error) {
		n, _, err := concurrently(func(i int64) error {
			_, err := store.Enter(ctx, benchEnterRoom, "s"+strconv.FormatInt(i, 10))
			return err
		})
		return n, n, err
	}); err != nil {
		return err
	}
	if err := measureOp(fmt.Sprintf("status (%d waiting)", b.cfg.Waiting), "fcall", true, func() (int64, int64, error) {
		n, _, err := concurrently(func(int64) error {
			_, err := store.Status(ctx, benchStatusRoom, waitingUser("w", mrand.IntN(b.cfg.Waiting)))
			return err
		})
		return n, n, err
	}); err != nil {
		return err
	}

	// Admit: rooms whose quota per 10 ms tick is what the design's
	// rates give per 100 ms slice (14 at 140/s, 100 at 1,000/s), ticked
	// every 10 ms so each call finds a full bucket.
	var admitted []waitroom.Admission
	for _, quota := range []int{14, 100} {
		room := fmt.Sprintf("%s-%d", benchAdmitRoom, quota)
		cfg := waitroom.RoomConfig{Rate: float64(quota) * 100, Slice: 10 * time.Millisecond, MaxQueue: waitroom.MaxMaxQueue}
		if _, err := store.CreateRoom(ctx, room, cfg); err != nil {
			return err
		}
		ticks := int(b.cfg.Slice / cfg.Slice)
		if err := fill(ctx, store, room, "a", (ticks+2)*quota, b.cfg.Clients); err != nil {
			return err
		}
		if _, err := store.Admit(ctx, room); err != nil { // learns the quota
			return err
		}
		if err := measure(fmt.Sprintf("admit (quota %d)", quota), "fcall", func() (int64, int64, error) {
			ticker := time.NewTicker(cfg.Slice)
			defer ticker.Stop()
			var n, users int64
			for range ticks {
				<-ticker.C
				got, err := store.Admit(ctx, room)
				if err != nil {
					return n, users, err
				}
				n++
				users += int64(len(got))
				if quota == 100 {
					admitted = append(admitted, got...)
				}
			}
			return n, users, nil
		}); err != nil {
			return err
		}
	}

	// Claim, release and complete, each over the tokens just issued; what
	// a slice did not reach is settled untimed, so the next starts clean.
	room := fmt.Sprintf("%s-%d", benchAdmitRoom, 100)
	var holds []waitroom.Hold
	var mu sync.Mutex
	claim := func(i int64) error {
		if i >= int64(len(admitted)) {
			return errExhausted
		}
		h, err := store.Claim(ctx, room, admitted[i].User, admitted[i].Token)
		if err == nil {
			mu.Lock()
			holds = append(holds, h)
			mu.Unlock()
		}
		return err
	}
	settle := func(op func(context.Context, waitroom.Hold) error) func(i int64) error {
		return func(i int64) error {
			if i >= int64(len(holds)) {
				return errExhausted
			}
			return op(ctx, holds[i])
		}
	}
	if err := measure("claim", "fcall", func() (int64, int64, error) { return concurrently(claim) }); err != nil {
		return err
	}
	if err := measure("release", "fcall", func() (int64, int64, error) { return concurrently(settle(store.Release)) }); err != nil {
		return err
	}
	// Release what the slice did not reach (a second release of a hold is
	// a no-op), then claim every token again.
	for i := range len(holds) {
		if err := store.Release(ctx, holds[i]); err != nil {
			return err
		}
	}
	holds = holds[:0]
	for i := range admitted {
		if err := claim(int64(i)); err != nil {
			return err
		}
	}
	if err := measure("complete", "fcall", func() (int64, int64, error) { return concurrently(settle(store.Complete)) }); err != nil {
		return err
	}
	return measure("leave", "fcall", func() (int64, int64, error) {
		return concurrently(func(i int64) error {
			if i >= int64(b.cfg.Waiting) {
				return errExhausted
			}
			return store.Leave(ctx, benchStatusRoom, waitingUser("w", int(i)))
		})
	})
}

// errExhausted ends a slice early: its operation ran out of inputs.
var errExhausted = errors.New("inputs exhausted")
