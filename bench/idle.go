package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/redisstore"
)

// idleFigure is one phase of the idle-rooms measurement.
type idleFigure struct {
	phase       string
	rooms, busy int
	seconds     float64
	redisCPU    float64 // redis-server CPU seconds per second (INFO cpu)
	ownCPU      float64 // this process's CPU seconds per second
	calls       float64 // commands per second Redis ran (INFO commandstats)
	// busyRatio: per busy room, (admitted + carry) ÷ (rate × bucket time)
	// over the phase; 1 is the exact rate.
	busyRatio []float64
}

// Idle-rooms measurement defaults the command exposes as flags.
const (
	DefaultIdleRooms     = 500
	DefaultIdleBusy      = 10
	DefaultIdleInstances = 2
	DefaultIdleFor       = 10 * time.Second
)

// measureIdle measures what rooms nobody is in cost Redis: Instances
// admitters (each its own Store and client, as separate servers would
// have) over IdleRooms rooms, first with no admitter at all (Redis's own
// background), then with every room idle, then with IdleBusy of them
// busy; each phase IdleFor long after the admitters settled. INFO cpu is
// the whole redis-server, so only a Redis serving nobody else gives a
// clean figure.
func (b *Result) measureIdle(ctx context.Context, client redis.UniversalClient, prefix string) error {
	c := b.cfg
	b.progress("redis: %d rooms, %d admitters: idle cost", c.IdleRooms, c.IdleInstances)
	setup, err := redisstore.Open(b.cfg.RedisURL)
	if err != nil {
		return err
	}
	defer setup.Close()
	defer func() {
		cleanCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := redisstore.DeletePrefix(cleanCtx, setup, prefix); err != nil {
			b.progress("deleting %s:* failed: %v", prefix, err)
		}
	}()
	store := redisstore.New(setup, redisstore.Options{Prefix: prefix})
	rooms := make([]string, c.IdleRooms)
	for i := range rooms {
		rooms[i] = fmt.Sprintf("idle-%04d", i)
		if _, err := store.CreateRoom(ctx, rooms[i], waitroom.RoomConfig{Rate: c.Rate}); err != nil {
			return err
		}
	}

	phase := func(name string, busy int, run func(ctx context.Context) error) error {
		pctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- run(pctx) }()
		stop := func() error {
			cancel()
			if err := <-done; err != nil && pctx.Err() == nil {
				return err
			}
			return nil
		}
		settle := time.NewTimer(2 * time.Second) // ownership and parking settle
		select {
		case <-settle.C:
		case err := <-done:
			cancel()
			return err
		}
		f := idleFigure{phase: name, rooms: c.IdleRooms, busy: busy}
		before, err := b.idleReading(ctx, client, store, rooms[:busy])
		if err != nil {
			_ = stop()
			return err
		}
		select {
		case <-time.After(c.IdleFor):
		case <-ctx.Done():
		}
		after, err := b.idleReading(ctx, client, store, rooms[:busy])
		if serr := stop(); err == nil {
			err = serr
		}
		if err != nil {
			return err
		}
		f.seconds = after.at.Sub(before.at).Seconds()
		f.redisCPU = (after.redisCPU - before.redisCPU) / f.seconds
		f.ownCPU = (after.ownCPU - before.ownCPU) / f.seconds
		f.calls = float64(after.calls-before.calls) / f.seconds
		for i := range busy {
			x, y := before.buckets[i], after.buckets[i]
			allowed := c.Rate * float64(y.LastUS-x.LastUS) / 1e6
			f.busyRatio = append(f.busyRatio, (float64(y.Admitted-x.Admitted)+y.Carry-x.Carry)/allowed)
		}
		b.idle = append(b.idle, f)
		b.progress("redis: %s: redis-server %.4f of a core, %.0f commands/s", name, f.redisCPU, f.calls)
		return nil
	}
	admitters := func(ctx context.Context) error {
		errs := make(chan error, c.IdleInstances)
		for i := range c.IdleInstances {
			cl, err := redisstore.Open(b.cfg.RedisURL)
			if err != nil {
				return err
			}
			defer cl.Close()
			a := &waitroom.Admitter{
				ID:     fmt.Sprintf("bench-%d", i),
				Store:  redisstore.New(cl, redisstore.Options{Prefix: prefix}),
				Logger: slog.New(slog.DiscardHandler),
			}
			go func() { errs <- a.Run(ctx) }()
		}
		for range c.IdleInstances {
			<-errs
		}
		return nil
	}

	if err := phase("no admitter (Redis alone)", 0, func(ctx context.Context) error { <-ctx.Done(); return nil }); err != nil {
		return err
	}
	if err := phase("every room idle", 0, admitters); err != nil {
		return err
	}
	// Enough users that the busy rooms stay busy through the phase.
	users := int(c.Rate*(c.IdleFor+5*time.Second).Seconds()) + 100
	for _, room := range rooms[:c.IdleBusy] {
		if err := fill(ctx, store, room, "b", users, 8); err != nil {
			return err
		}
	}
	return phase(fmt.Sprintf("%d rooms busy", c.IdleBusy), c.IdleBusy, admitters)
}

// idleSnapshot is one reading of the counters an idle phase compares.
type idleSnapshot struct {
	at               time.Time
	redisCPU, ownCPU float64
	calls            int64
	buckets          []redisstore.Bucket
}

func (b *Result) idleReading(ctx context.Context, client redis.UniversalClient, store *redisstore.Store, busy []string) (idleSnapshot, error) {
	s := idleSnapshot{at: time.Now()}
	cpu, err := redisstore.ServerCPU(ctx, client)
	if err != nil {
		return s, err
	}
	s.redisCPU = cpu.Seconds()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		s.ownCPU = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	stats, err := redisstore.CommandStats(ctx, client)
	if err != nil {
		return s, err
	}
	for cmd, v := range stats {
		if cmd != "info" { // this reading's own
			s.calls += v.Calls
		}
	}
	for _, room := range busy {
		bk, err := store.Bucket(ctx, room)
		if err != nil {
			return s, err
		}
		s.buckets = append(s.buckets, bk)
	}
	return s, nil
}

// writeIdle prints the idle-rooms tables.
func (b *Result) writeIdle(w io.Writer) {
	if len(b.idle) == 0 {
		return
	}
	c := b.cfg
	fmt.Fprintf(w, "\n### What rooms nobody is in cost (%d admitters, %d rooms, %s per phase)\n\n", c.IdleInstances, c.IdleRooms, c.IdleFor)
	fmt.Fprintf(w, "redis-server's CPU from INFO cpu over the phase (the whole server: clean only on a Redis serving nobody else); commands/s from INFO commandstats; exact rate: per busy room, (admitted + bucket carry) ÷ (rate × bucket time), min–max.\n\n")
	fmt.Fprintf(w, "| phase | rooms | busy | redis-server, share of a core | commands/s | this process, share of a core | busy rooms' rate ÷ exact |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, f := range b.idle {
		exact := ""
		if len(f.busyRatio) > 0 {
			exact = fmt.Sprintf("%.4f–%.4f", slices.Min(f.busyRatio), slices.Max(f.busyRatio))
		}
		fmt.Fprintf(w, "| %s | %d | %d | %.4f | %.0f | %.4f | %s |\n", f.phase, f.rooms, f.busy, f.redisCPU, f.calls, f.ownCPU, exact)
	}
}
