package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/redisstore"
)

// idleFigure is one window of a phase of the idle-rooms measurement.
type idleFigure struct {
	phase       string
	alone       bool // Redis with no instance
	rooms, busy int
	seconds     float64
	redisCPU    float64 // redis-server CPU seconds per second (INFO cpu)
	ownCPU      float64 // this process's CPU seconds per second
	calls       float64 // commands per second Redis ran (INFO commandstats)
	// commands: per command, calls per second and µs per call; a
	// command a function runs counts as its own call, as in INFO.
	commands map[string]commandRate
	// busyRatio: per busy room, (admitted + carry) ÷ (rate × bucket time)
	// over the phase; 1 is the exact rate.
	busyRatio []float64
}

// commandRate is one command's share of a window.
type commandRate struct{ perSecond, usecPerCall float64 }

// Idle-rooms measurement defaults the command exposes as flags.
const (
	DefaultIdleRooms     = 500
	DefaultIdleBusy      = 10
	DefaultIdleInstances = 2
	DefaultIdleFor       = 10 * time.Second
)

// DefaultIdleMarks are when the every-room-idle phase is read, from the
// instances' start: a cost that builds up (or a start-up burst that
// lingers) shows in the later windows.
var DefaultIdleMarks = []time.Duration{5 * time.Second, 20 * time.Second, 40 * time.Second}

// IdleSettle is how long each idle-cost phase runs before its first
// reading: ownership and parking settle, and each keeper reads the rooms'
// settings once.
const IdleSettle = 2 * time.Second

// CheckIdleMarks reports whether marks can be the readings of the idle
// phase: each after IdleSettle and after the one before.
func CheckIdleMarks(marks []time.Duration) error {
	if len(marks) == 0 {
		return errors.New("name at least one time")
	}
	prev := IdleSettle
	for _, m := range marks {
		if m <= prev {
			return fmt.Errorf("%s: each must come after %s and after the one before", m, prev)
		}
		prev = m
	}
	return nil
}

// measureIdle measures what rooms nobody is in cost Redis: IdleInstances
// instances over IdleRooms declared rooms, each as a server runs it (its
// own client and Store, guarded, with an admitter and a room keeper),
// first with no instance at all (Redis's own background), then with
// every room idle, read at IdleMarks, then with IdleBusy of them busy for
// IdleFor. INFO cpu is the whole redis-server, so only a Redis serving
// nobody else gives a clean figure.
func (b *Result) measureIdle(ctx context.Context, client redis.UniversalClient, prefix string) error {
	c := b.cfg
	b.progress("redis: %d rooms, %d instances: idle cost", c.IdleRooms, c.IdleInstances)
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

	// phase runs run (nil: nothing), reads the counters once settled and at each of
	// marks (from run's start), and records the window between each two
	// readings.
	phase := func(name string, busy int, marks []time.Duration, run func(ctx context.Context) error) error {
		pctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			if run == nil {
				<-pctx.Done()
				done <- nil
				return
			}
			done <- run(pctx)
		}()
		stop := func() error {
			cancel()
			if err := <-done; err != nil && pctx.Err() == nil {
				return err
			}
			return nil
		}
		wait := func(until time.Duration) error {
			t := time.NewTimer(time.Until(start.Add(until)))
			defer t.Stop()
			select {
			case <-t.C:
				return nil
			case err := <-done:
				cancel()
				if err == nil {
					err = errors.New("the instances stopped")
				}
				return err
			case <-ctx.Done():
				_ = stop()
				return ctx.Err()
			}
		}
		if err := wait(IdleSettle); err != nil {
			return err
		}
		before, err := b.idleReading(ctx, client, store, rooms[:busy])
		if err != nil {
			_ = stop()
			return err
		}
		from := IdleSettle
		for _, mark := range marks {
			if err := wait(mark); err != nil {
				return err
			}
			after, err := b.idleReading(ctx, client, store, rooms[:busy])
			if err != nil {
				_ = stop()
				return err
			}
			f := idleFigure{phase: name, alone: run == nil, rooms: c.IdleRooms, busy: busy}
			if len(marks) > 1 {
				f.phase = fmt.Sprintf("%s, %s–%s", name, seconds(from), seconds(mark))
			}
			f.seconds = after.at.Sub(before.at).Seconds()
			f.redisCPU = (after.redisCPU - before.redisCPU) / f.seconds
			f.ownCPU = (after.ownCPU - before.ownCPU) / f.seconds
			f.commands = map[string]commandRate{}
			for cmd, v := range after.commands {
				n := v.Calls - before.commands[cmd].Calls
				if n <= 0 {
					continue
				}
				f.calls += float64(n) / f.seconds
				f.commands[cmd] = commandRate{float64(n) / f.seconds, float64(v.Usec-before.commands[cmd].Usec) / float64(n)}
			}
			for i := range busy {
				x, y := before.buckets[i], after.buckets[i]
				allowed := c.Rate * float64(y.LastUS-x.LastUS) / 1e6
				f.busyRatio = append(f.busyRatio, (float64(y.Admitted-x.Admitted)+y.Carry-x.Carry)/allowed)
			}
			b.idle = append(b.idle, f)
			b.progress("redis: %s: redis-server %.4f of a core, %.0f commands/s", f.phase, f.redisCPU, f.calls)
			before, from = after, mark
		}
		return stop()
	}
	declared := make(map[string]waitroom.RoomConfig, len(rooms))
	for _, room := range rooms {
		declared[room] = waitroom.RoomConfig{Rate: c.Rate}.WithDefaults()
	}
	// instances runs what a server runs beside its HTTP API, on one
	// guarded store per instance: the admitter and the room keeper.
	instances := func(ctx context.Context) error {
		errs := make(chan error, 2*c.IdleInstances)
		for i := range c.IdleInstances {
			cl, err := redisstore.Open(b.cfg.RedisURL)
			if err != nil {
				return err
			}
			defer cl.Close()
			guarded := waitroom.Guard(redisstore.New(cl, redisstore.Options{Prefix: prefix}), waitroom.GuardOptions{Rooms: declared})
			a := &waitroom.Admitter{
				ID:     fmt.Sprintf("bench-%d", i),
				Store:  guarded,
				Logger: slog.New(slog.DiscardHandler),
			}
			go func() { errs <- a.Run(ctx) }()
			go func() { errs <- guarded.Keeper().Run(ctx) }()
		}
		for range 2 * c.IdleInstances {
			<-errs
		}
		return nil
	}

	once := []time.Duration{IdleSettle + c.IdleFor}
	if err := phase("no instance (Redis alone)", 0, once, nil); err != nil {
		return err
	}
	if err := phase("every room idle", 0, c.IdleMarks, instances); err != nil {
		return err
	}
	// Enough users that the busy rooms stay busy through the phase.
	users := int(c.Rate*(c.IdleFor+5*time.Second).Seconds()) + 100
	for _, room := range rooms[:c.IdleBusy] {
		if err := fill(ctx, store, room, "b", users, 8); err != nil {
			return err
		}
	}
	return phase(fmt.Sprintf("%d rooms busy", c.IdleBusy), c.IdleBusy, once, instances)
}

// seconds prints a mark as the table does: "5 s".
func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s" }

// idleSnapshot is one reading of the counters an idle phase compares.
type idleSnapshot struct {
	at               time.Time
	redisCPU, ownCPU float64
	commands         map[string]redisstore.CommandStat
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
	delete(stats, "info") // this reading's own
	s.commands = stats
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
	fmt.Fprintf(w, "\n### What rooms nobody is in cost (%d instances, %d declared rooms)\n\n", c.IdleInstances, c.IdleRooms)
	fmt.Fprintf(w, "Each instance as a server runs it beside its HTTP API: its own client and Store, guarded, with an admitter and a room keeper. Every room idle is read %s after the instances started (from %s on); Redis alone and the busy rooms over %s after %s. redis-server's CPU from INFO cpu over the window (the whole server: clean only on a Redis serving nobody else); commands/s from INFO commandstats (a command a function runs counts as one); exact rate: per busy room, (admitted + bucket carry) ÷ (rate × bucket time), min–max.\n\n",
		joinSeconds(c.IdleMarks), seconds(IdleSettle), seconds(c.IdleFor), seconds(IdleSettle))
	fmt.Fprintf(w, "| phase | rooms | busy | redis-server, share of a core | commands/s | this process, share of a core | busy rooms' rate ÷ exact |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, f := range b.idle {
		exact := ""
		if len(f.busyRatio) > 0 {
			exact = fmt.Sprintf("%.4f–%.4f", slices.Min(f.busyRatio), slices.Max(f.busyRatio))
		}
		fmt.Fprintf(w, "| %s | %d | %d | %.4f | %.0f | %.4f | %s |\n", f.phase, f.rooms, f.busy, f.redisCPU, f.calls, f.ownCPU, exact)
	}

	// The commands of every window with instances, the busiest first.
	var windows []idleFigure
	for _, f := range b.idle {
		if !f.alone {
			windows = append(windows, f)
		}
	}
	if len(windows) == 0 {
		return
	}
	total := map[string]float64{}
	for _, f := range windows {
		for cmd, r := range f.commands {
			total[cmd] += r.perSecond
		}
	}
	cmds := slices.SortedFunc(maps.Keys(total), func(a, b string) int {
		return cmp.Or(cmp.Compare(total[b], total[a]), strings.Compare(a, b))
	})
	fmt.Fprintf(w, "\nCommands per second (µs per call) in each window, from INFO commandstats:\n\n| command |")
	for _, f := range windows {
		fmt.Fprintf(w, " %s |", f.phase)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---:|", len(windows)))
	for _, cmd := range cmds {
		fmt.Fprintf(w, "| %s |", cmd)
		for _, f := range windows {
			if r, ok := f.commands[cmd]; ok {
				fmt.Fprintf(w, " %.1f (%.2f) |", r.perSecond, r.usecPerCall)
			} else {
				fmt.Fprintf(w, " |")
			}
		}
		fmt.Fprintln(w)
	}
}

// joinSeconds prints marks as "5, 20 and 40 s".
func joinSeconds(marks []time.Duration) string {
	parts := make([]string, len(marks))
	for i, m := range marks {
		parts[i] = strconv.FormatFloat(m.Seconds(), 'f', -1, 64)
	}
	if len(parts) == 1 {
		return parts[0] + " s"
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1] + " s"
}
