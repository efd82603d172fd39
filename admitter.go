package waitroom

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Admitter runs the admission tick: every tick it asks the store to admit
// what each room's token bucket allows. The bucket lives in the store, so
// any number of instances may run an Admitter at once: together they admit
// each room's rate once, and a late or skipped tick is made up by the next.
type Admitter struct {
	Store Store
	// Every is the tick; default DefaultTick, a quarter of the default
	// slice. A tick never admits more than its room's slice quota, and a
	// tick that runs late (a busy machine, a GC pause) is made up only up
	// to one quota; ticking several times per slice therefore keeps the
	// rate exact under scheduling jitter, and splits each slice's quota
	// into smaller, smoother batches for the protected API.
	Every time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
	// OnAdmit, if set, is told every non-empty admission. Rooms tick on
	// goroutines of their own, so it must be safe for concurrent use.
	OnAdmit func(room string, admitted []Admission)
}

// Bounds of Run. Each room ticks on its own, so a room whose store shard
// hangs delays only itself; one tick waits at most admitTimeout for its
// store (generous next to a slice: a timed-out Admit may still have run,
// and its users would then be admitted unannounced to OnAdmit).
const (
	roomsRefresh = time.Second
	admitTimeout = time.Second
)

// Run ticks every room until ctx is done; it returns ctx's error. The rooms
// are read from the store every second, so a room another instance created
// is admitted too; while the list cannot be read (its key lives on one
// cluster shard) the rooms already known go on. Failures are logged when
// they start and when they end, not once per tick.
func (a *Admitter) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	running := map[string]bool{}
	loops := 0
	defer func() {
		cancel()
		for range loops {
			<-done
		}
	}()
	refresh := time.NewTicker(roomsRefresh)
	defer refresh.Stop()
	listFailing := false
	for {
		rooms, err := a.Store.Rooms(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !listFailing:
			a.logger().ErrorContext(ctx, "listing rooms failed; admitting the rooms already known", "err", err)
			listFailing = true
		case err == nil && listFailing:
			a.logger().InfoContext(ctx, "listing rooms recovered")
			listFailing = false
		}
		for _, room := range rooms {
			if !running[room] {
				running[room] = true
				loops++
				go func() {
					defer func() { done <- struct{}{} }()
					a.runRoom(ctx, room)
				}()
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-refresh.C:
		}
	}
}

// runRoom ticks one room until ctx is done.
func (a *Admitter) runRoom(ctx context.Context, room string) {
	ticker := time.NewTicker(a.every())
	defer ticker.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		_, err := a.admit(ctx, room)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			a.logger().ErrorContext(ctx, "admission tick failed", "room", room, "err", err)
			failing = true
		case err == nil && failing:
			a.logger().InfoContext(ctx, "admission tick recovered", "room", room)
			failing = false
		}
	}
}

// Tick admits once in every room, one after the other, and returns how
// many users it admitted: a whole tick in one call, for tests and tools
// that drive admission step by step.
func (a *Admitter) Tick(ctx context.Context) (int, error) {
	rooms, err := a.Store.Rooms(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	var errs []error
	for _, room := range rooms {
		n, err := a.admit(ctx, room)
		total += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
}

// admit runs one bounded admission in room and reports it to OnAdmit.
func (a *Admitter) admit(ctx context.Context, room string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, admitTimeout)
	defer cancel()
	admitted, err := a.Store.Admit(ctx, room)
	if err != nil {
		return 0, err
	}
	if len(admitted) > 0 && a.OnAdmit != nil {
		a.OnAdmit(room, admitted)
	}
	return len(admitted), nil
}

// DefaultTick is Admitter.Every's default.
const DefaultTick = DefaultSlice / 4

func (a *Admitter) every() time.Duration {
	if a.Every > 0 {
		return a.Every
	}
	return DefaultTick
}

func (a *Admitter) logger() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}
