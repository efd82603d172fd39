package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/bench"
	"github.com/waitroom/waitroom/instance"
	"github.com/waitroom/waitroom/internal/flagenv"
	"github.com/waitroom/waitroom/webhook"
)

// benchSettings are bench's settings, read into c.
func benchSettings(c *bench.Config) []flagenv.Setting {
	return []flagenv.Setting{
		flagenv.Var("redis-url", "REDIS_URL", "redis://127.0.0.1:6379/0", "url", "Redis to measure (loopback only); its keys go under a fresh prefix, deleted afterwards. A Redis serving nobody else gives clean per-script and memory figures", flagenv.Text(&c.RedisURL)),
		flagenv.Var("stores", "WAITROOM_BENCH_STORES", "memstore,redis", "list", "stores to measure: memstore, redis or both", nil),
		flagenv.Var("autopipeline", "WAITROOM_BENCH_AUTOPIPELINE", "both", "on|off|both", "Redis hot path through go-redis's automatic pipelining (on), on the plain client (off), or both in alternating slices of one run", flagenv.Func(func(t string) error { return benchAutopipeline(c, t) })),
		flagenv.Var("webhooks", "WAITROOM_BENCH_WEBHOOKS", "off", "off|on|both", "also measure ENTER and STATUS on each store's server and rooms of their own, admitter running, with webhooks telling every event to a dead receiver that never answers (on), or with them on and off in alternating slices of one run and the ratio on ÷ off (both); off: not measured, so a run takes what it took before the flag", flagenv.Func(func(t string) error { return benchWebhooks(c, t) })),
		flagenv.Var("webhooks-receiver", "WAITROOM_BENCH_WEBHOOKS_RECEIVER", "dead", "dead|duration", "the receiver of --webhooks: dead (reads each request and never answers, so every delivery waits out the dispatcher's 10 s timeout), or a slow one that takes every message, answering after this long (1ms to 9s)", flagenv.Func(func(t string) error { return benchReceiver(c, t) })),
		flagenv.Var("rounds", "WAITROOM_BENCH_ROUNDS", "10", "n", "rounds; each measures every side once, in a rotating order, so machine noise falls on all sides alike", flagenv.IntIn(&c.Rounds, 1, 1000)),
		flagenv.Var("slice", "WAITROOM_BENCH_SLICE", "1s", "duration", "length of one measured slice", flagenv.DurationIn(&c.Slice, 10*time.Millisecond, time.Minute)),
		flagenv.Var("clients", "WAITROOM_BENCH_CLIENTS", "32", "n", "concurrent keep-alive HTTP clients of the load generator", flagenv.IntIn(&c.Clients, 1, 10_000)),
		flagenv.Var("waiting", "WAITROOM_BENCH_WAITING", "100000", "n", "users waiting in the room that STATUS and the memory figure use", flagenv.IntIn(&c.Waiting, 1, 10_000_000)),
		flagenv.Var("rate", "WAITROOM_BENCH_RATE", "140", "users/s", "room rate for the poll load that PollLoad(waiting, rate) asks of the server", flagenv.FloatIn(&c.Rate, 0, waitroom.MaxRate, true, " users/s")),
		flagenv.Var("cpuprofile", "WAITROOM_BENCH_CPUPROFILE", "", "file", "write a CPU profile (pprof) of the HTTP slices to this file", flagenv.Text(&c.CPUProfile)),
		flagenv.Var("idle-rooms", "WAITROOM_BENCH_IDLE_ROOMS", strconv.Itoa(bench.DefaultIdleRooms), "n", "rooms of the idle-cost measurement on Redis (0: skip it): admitters over rooms nobody is in, then with some busy, against redis-server's INFO cpu", flagenv.IntIn(&c.IdleRooms, 0, 100_000)),
		flagenv.Var("idle-busy", "WAITROOM_BENCH_IDLE_BUSY", strconv.Itoa(bench.DefaultIdleBusy), "n", "of the idle-cost rooms, how many are busy in its last phase (their rate is checked exact)", flagenv.IntIn(&c.IdleBusy, 0, 1000)),
		flagenv.Var("idle-instances", "WAITROOM_BENCH_IDLE_INSTANCES", strconv.Itoa(bench.DefaultIdleInstances), "n", "admitters of the idle-cost measurement, each with its own Redis client, as separate servers", flagenv.IntIn(&c.IdleInstances, 1, 100)),
		flagenv.Var("idle-for", "WAITROOM_BENCH_IDLE_FOR", bench.DefaultIdleFor.String(), "duration", "length of the idle-cost phases of Redis alone and of the busy rooms", flagenv.DurationIn(&c.IdleFor, time.Second, time.Hour)),
		flagenv.Var("idle-marks", "WAITROOM_BENCH_IDLE_MARKS", joinDurations(bench.DefaultIdleMarks), "list", "when the idle-cost phase with every room idle is read, from the instances' start: a row per window between two readings", flagenv.Func(func(t string) error { return benchIdleMarks(c, t) })),
	}
}

const benchUsage = `Usage: waitroom bench [flags]

Measures, in one run and in alternating short slices, the HTTP throughput of
ENTER and STATUS against a trivial handler in the same server (real TCP on
loopback, keep-alive clients in this process), for memstore and Redis; the
Redis time per call of each script (INFO commandstats); the memory per
waiting user; and the poll load PollLoad asks of the server against the
measured STATUS capacity; with --webhooks, ENTER and STATUS with webhooks
on (a dead receiver) and off. It prints Markdown tables for BENCHMARKS.md.
Every flag may instead be set by its environment variable; a flag wins.`

func printBenchUsage(w io.Writer) {
	flagenv.PrintUsage(w, benchUsage, benchSettings(new(bench.Config)))
}

func parseBench(args []string, getenv func(string) string) (bench.Config, error) {
	var c bench.Config
	v, err := flagenv.Read("bench", benchSettings(&c), args, getenv)
	if err != nil {
		return bench.Config{}, err
	}
	for _, s := range flagenv.SplitList(v.Raw["stores"].Text) {
		switch s {
		case "memstore":
			c.Memstore = true
		case "redis":
			c.Redis = true
		default:
			v.Fail("stores", fmt.Sprintf("unknown store %q; memstore or redis", s))
		}
	}
	if !c.Memstore && !c.Redis {
		v.Fail("stores", "name at least one store")
	}
	if c.Redis {
		if err := bench.CheckRedisURL(c.RedisURL); err != nil {
			v.Fail("redis-url", err.Error())
		}
	}
	if !v.Failed("idle-busy") && c.IdleRooms > 0 && c.IdleBusy > c.IdleRooms {
		v.Fail("idle-busy", fmt.Sprintf("at most --idle-rooms (%d)", c.IdleRooms))
	}
	if err := v.Err(); err != nil {
		return bench.Config{}, err
	}
	return c, nil
}

// benchIdleMarks reads --idle-marks: durations, each later than the one
// before.
func benchIdleMarks(c *bench.Config, text string) error {
	c.IdleMarks = nil
	for _, t := range flagenv.SplitList(text) {
		d, err := time.ParseDuration(t)
		if err != nil || d > time.Hour {
			return fmt.Errorf("%q is no duration up to 1h", t)
		}
		c.IdleMarks = append(c.IdleMarks, d)
	}
	return bench.CheckIdleMarks(c.IdleMarks)
}

func joinDurations(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}

// benchAutopipeline reads --autopipeline: on, off or both.
func benchAutopipeline(c *bench.Config, text string) error {
	switch text {
	case "on", "off", "both":
		c.AutoPipeline, c.Plain = text != "off", text != "on"
		return nil
	}
	return errors.New("on, off or both")
}

// benchWebhooks reads --webhooks: off, on or both.
func benchWebhooks(c *bench.Config, text string) error {
	switch text {
	case "off", "on", "both":
		c.WebhooksOn, c.WebhooksOff = text != "off", text == "both"
		return nil
	}
	return errors.New("off, on or both")
}

// benchReceiver reads --webhooks-receiver: dead, or a slow receiver's
// delay, below the dispatcher's attempt timeout so that it is taken.
func benchReceiver(c *bench.Config, text string) error {
	if text == "dead" {
		c.SlowReceiver = 0
		return nil
	}
	d, err := time.ParseDuration(text)
	if err != nil || d < time.Millisecond || d > 9*time.Second {
		return errors.New("dead, or how long the receiver takes to answer, 1ms to 9s")
	}
	c.SlowReceiver = d
	return nil
}

func runBench(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	c, err := parseBench(args, getenv)
	if err != nil {
		return finish("bench", err, printBenchUsage, flagsHint, stdout, stderr)
	}
	c.Progress, c.Serve, c.ServeWebhooks = stderr, serveBench, serveBenchWebhooks
	res, err := bench.Run(ctx, c)
	if err != nil {
		fmt.Fprintf(stderr, "waitroom bench: %v\n", err)
		return exitFailure
	}
	res.WriteMarkdown(stdout)
	return exitOK
}

// serveBench serves a benchmark's store with serve's defaults on a
// loopback port.
func serveBench(ctx context.Context, store waitroom.Store, routes map[string]http.Handler) (string, func(), error) {
	cfg, err := inprocConfig()
	if err != nil {
		return "", nil, err
	}
	return instance.ServeStore(ctx, cfg, store, routes)
}

// serveBenchWebhooks serves a benchmark's store as serve does, admitter
// and all, with webhooks telling receiverURL every event of every room;
// its setWebhooks stops and starts them.
func serveBenchWebhooks(ctx context.Context, store waitroom.Store, receiverURL string) (string, func(context.Context, bool) error, func(), error) {
	cfg, err := inprocConfig()
	if err != nil {
		return "", nil, nil, err
	}
	cfg.WebhookURL, cfg.WebhookSecrets = receiverURL, []string{webhook.NewSecret()}
	in := &instance.Instance{Config: cfg, Store: store}
	if err := in.Run(ctx); err != nil {
		_ = in.Close()
		return "", nil, nil, err
	}
	return "http://" + in.Addr(), in.SetWebhooks, func() { _ = in.Close() }, nil
}
