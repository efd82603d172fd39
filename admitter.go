package waitroom

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Admitter runs the admission tick: every Slice it asks the store to admit
// what each room's token bucket allows. The bucket lives in the store, so
// any number of instances may run an Admitter at once: together they admit
// each room's rate once, and a late or skipped tick is made up by the next.
type Admitter struct {
	Store Store
	// Slice is the tick; default DefaultSlice. Ticking faster than a
	// room's slice only splits its quota finer.
	Slice time.Duration
	// Logger; default slog.Default().
	Logger *slog.Logger
	// OnAdmit, if set, is told every non-empty admission.
	OnAdmit func(room string, admitted []Admission)
}

// Run ticks until ctx is done; it returns ctx's error. A failing tick is
// logged and retried on the next one.
func (a *Admitter) Run(ctx context.Context) error {
	slice := a.Slice
	if slice <= 0 {
		slice = DefaultSlice
	}
	ticker := time.NewTicker(slice)
	defer ticker.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
		_, err := a.Tick(ctx)
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			// Log the first failure of a run of failures, not one per tick.
			a.logger().ErrorContext(ctx, "admission tick failed", "err", err)
			failing = true
		case err == nil && failing:
			a.logger().InfoContext(ctx, "admission tick recovered")
			failing = false
		}
	}
}

// Tick admits once in every room and returns how many users it admitted.
// The rooms are read from the store each tick, so a room another instance
// created is admitted too.
func (a *Admitter) Tick(ctx context.Context) (int, error) {
	rooms, err := a.Store.Rooms(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	var errs []error
	for _, room := range rooms {
		admitted, err := a.Store.Admit(ctx, room)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		total += len(admitted)
		if len(admitted) > 0 && a.OnAdmit != nil {
			a.OnAdmit(room, admitted)
		}
	}
	return total, errors.Join(errs...)
}

func (a *Admitter) logger() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}
