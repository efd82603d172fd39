package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/bench"
	"github.com/waitroom/waitroom/instance"
)

var benchSettings = []setting{
	{"redis-url", "REDIS_URL", "redis://127.0.0.1:6379/0", "url", "Redis to measure (loopback only); its keys go under a fresh prefix, deleted afterwards. A Redis serving nobody else gives clean per-script and memory figures"},
	{"stores", "WAITROOM_BENCH_STORES", "memstore,redis", "list", "stores to measure: memstore, redis or both"},
	{"autopipeline", "WAITROOM_BENCH_AUTOPIPELINE", "both", "on|off|both", "Redis hot path through go-redis's automatic pipelining (on), on the plain client (off), or both in alternating slices of one run"},
	{"rounds", "WAITROOM_BENCH_ROUNDS", "10", "n", "rounds; each measures every side once, in a rotating order, so machine noise falls on all sides alike"},
	{"slice", "WAITROOM_BENCH_SLICE", "1s", "duration", "length of one measured slice"},
	{"clients", "WAITROOM_BENCH_CLIENTS", "32", "n", "concurrent keep-alive HTTP clients of the load generator"},
	{"waiting", "WAITROOM_BENCH_WAITING", "100000", "n", "users waiting in the room that STATUS and the memory figure use"},
	{"rate", "WAITROOM_BENCH_RATE", "140", "users/s", "room rate for the poll load that PollLoad(waiting, rate) asks of the server"},
	{"cpuprofile", "WAITROOM_BENCH_CPUPROFILE", "", "file", "write a CPU profile (pprof) of the HTTP slices to this file"},
	{"idle-rooms", "WAITROOM_BENCH_IDLE_ROOMS", strconv.Itoa(bench.DefaultIdleRooms), "n", "rooms of the idle-cost measurement on Redis (0: skip it): admitters over rooms nobody is in, then with some busy, against redis-server's INFO cpu"},
	{"idle-busy", "WAITROOM_BENCH_IDLE_BUSY", strconv.Itoa(bench.DefaultIdleBusy), "n", "of the idle-cost rooms, how many are busy in its last phase (their rate is checked exact)"},
	{"idle-instances", "WAITROOM_BENCH_IDLE_INSTANCES", strconv.Itoa(bench.DefaultIdleInstances), "n", "admitters of the idle-cost measurement, each with its own Redis client, as separate servers"},
	{"idle-for", "WAITROOM_BENCH_IDLE_FOR", bench.DefaultIdleFor.String(), "duration", "length of each idle-cost phase"},
}

const benchUsage = `Usage: waitroom bench [flags]

Measures, in one run and in alternating short slices, the HTTP throughput of
ENTER and STATUS against a trivial handler in the same server (real TCP on
loopback, keep-alive clients in this process), for memstore and Redis; the
Redis time per call of each script (INFO commandstats); the memory per
waiting user; and the poll load PollLoad asks of the server against the
measured STATUS capacity. It prints Markdown tables for BENCHMARKS.md.
Every flag may instead be set by its environment variable; a flag wins.`

func parseBench(args []string, getenv func(string) string) (bench.Config, error) {
	raw, err := readSettings("bench", benchSettings, args, getenv)
	if err != nil {
		return bench.Config{}, err
	}
	var errs []error
	check := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	c := bench.Config{RedisURL: raw["redis-url"].text, CPUProfile: raw["cpuprofile"].text}
	for _, s := range splitList(raw["stores"].text) {
		switch s {
		case "memstore":
			c.Memstore = true
		case "redis":
			c.Redis = true
		default:
			check(raw["stores"].fail(fmt.Sprintf("unknown store %q; memstore or redis", s)))
		}
	}
	if !c.Memstore && !c.Redis {
		check(raw["stores"].fail("name at least one store"))
	}
	switch a := raw["autopipeline"].text; a {
	case "on", "off", "both":
		c.AutoPipeline, c.Plain = a != "off", a != "on"
	default:
		check(raw["autopipeline"].fail("on, off or both"))
	}
	if c.Redis {
		if err := bench.CheckRedisURL(c.RedisURL); err != nil {
			check(raw["redis-url"].fail(err.Error()))
		}
	}
	c.Rounds, err = parseInt(raw["rounds"], 1, 1000)
	check(err)
	c.Slice, err = parseDuration(raw["slice"], 10*time.Millisecond, time.Minute)
	check(err)
	c.Clients, err = parseInt(raw["clients"], 1, 10_000)
	check(err)
	c.Waiting, err = parseInt(raw["waiting"], 1, 10_000_000)
	check(err)
	c.Rate, err = parseFloat(raw["rate"])
	check(err)
	if err == nil && (c.Rate <= 0 || c.Rate > waitroom.MaxRate) {
		check(raw["rate"].fail(fmt.Sprintf("must be in (0, %g] users/s", waitroom.MaxRate)))
	}
	c.IdleRooms, err = parseInt(raw["idle-rooms"], 0, 100_000)
	check(err)
	c.IdleBusy, err = parseInt(raw["idle-busy"], 0, 1000)
	check(err)
	if err == nil && c.IdleRooms > 0 && c.IdleBusy > c.IdleRooms {
		check(raw["idle-busy"].fail(fmt.Sprintf("at most --idle-rooms (%d)", c.IdleRooms)))
	}
	c.IdleInstances, err = parseInt(raw["idle-instances"], 1, 100)
	check(err)
	c.IdleFor, err = parseDuration(raw["idle-for"], time.Second, time.Hour)
	check(err)
	if len(errs) > 0 {
		return bench.Config{}, usageError{errors.Join(errs...)}
	}
	return c, nil
}

func runBench(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	c, err := parseBench(args, getenv)
	if code, ok := parsed(err, "bench", func(w io.Writer) { printSettingsUsage(w, benchUsage, benchSettings) }, stdout, stderr); !ok {
		return code
	}
	c.Progress, c.Serve = stderr, serveBench
	res, err := bench.Run(ctx, c)
	if err != nil {
		fmt.Fprintf(stderr, "waitroom bench: %v\n", err)
		return exitFailure
	}
	res.WriteMarkdown(stdout)
	return exitOK
}

// serveBench serves a benchmark's store on a loopback port, with neither
// admitter nor room keeper: the benchmark's rooms stay as it fills them.
func serveBench(ctx context.Context, store waitroom.Store, routes map[string]http.Handler) (string, func(), error) {
	cfg, err := inprocConfig()
	if err != nil {
		return "", nil, err
	}
	m := &instance.Instance{Config: cfg, Store: store, Routes: routes, Hold: true}
	if err := m.Run(ctx); err != nil {
		_ = m.Close()
		return "", nil, err
	}
	return "http://" + m.Addr(), func() { _ = m.Close() }, nil
}
