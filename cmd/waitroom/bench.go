package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/server"
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
}

const benchUsage = `Usage: waitroom bench [flags]

Measures, in one run and in alternating short slices, the HTTP throughput of
ENTER and STATUS against a trivial handler in the same server (real TCP on
loopback, keep-alive clients in this process), for memstore and Redis; the
Redis time per call of each script (INFO commandstats); the memory per
waiting user; and the poll load PollLoad asks of the server against the
measured STATUS capacity. It prints Markdown tables for BENCHMARKS.md.
Every flag may instead be set by its environment variable; a flag wins.`

type benchConfig struct {
	redisURL string
	memstore bool
	redis    bool
	// autoPipeline and plain: the Redis stores to measure, together.
	autoPipeline, plain bool
	rounds              int
	slice               time.Duration
	clients             int
	waiting             int
	rate                float64
	cpuprofile          string
}

func parseBench(args []string, getenv func(string) string) (benchConfig, error) {
	raw, err := readSettings("bench", benchSettings, args, getenv)
	if err != nil {
		return benchConfig{}, err
	}
	var errs []error
	check := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	c := benchConfig{redisURL: raw["redis-url"].text, cpuprofile: raw["cpuprofile"].text}
	for _, s := range splitList(raw["stores"].text) {
		switch s {
		case "memstore":
			c.memstore = true
		case "redis":
			c.redis = true
		default:
			check(raw["stores"].fail(fmt.Sprintf("unknown store %q; memstore or redis", s)))
		}
	}
	if !c.memstore && !c.redis {
		check(raw["stores"].fail("name at least one store"))
	}
	switch a := raw["autopipeline"].text; a {
	case "on", "off", "both":
		c.autoPipeline, c.plain = a != "off", a != "on"
	default:
		check(raw["autopipeline"].fail("on, off or both"))
	}
	if c.redis {
		opts, err := redis.ParseURL(withoutAutoPipeline(c.redisURL))
		switch {
		case err != nil:
			check(raw["redis-url"].fail(err.Error()))
		case opts.Network == "tcp" && !loopbackAddr(opts.Addr):
			check(raw["redis-url"].fail("the benchmark measures a Redis on loopback only"))
		}
	}
	c.rounds, err = parseInt(raw["rounds"], 1, 1000)
	check(err)
	c.slice, err = parseDuration(raw["slice"], 10*time.Millisecond, time.Minute)
	check(err)
	c.clients, err = parseInt(raw["clients"], 1, 10_000)
	check(err)
	c.waiting, err = parseInt(raw["waiting"], 1, 10_000_000)
	check(err)
	c.rate, err = parseFloat(raw["rate"])
	check(err)
	if err == nil && (c.rate <= 0 || c.rate > waitroom.MaxRate) {
		check(raw["rate"].fail(fmt.Sprintf("must be in (0, %g] users/s", waitroom.MaxRate)))
	}
	if len(errs) > 0 {
		return benchConfig{}, usageError{errors.Join(errs...)}
	}
	return c, nil
}

// withoutAutoPipeline removes redisstore's own autopipeline query option,
// which go-redis does not know; the bench sets it itself.
func withoutAutoPipeline(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || !u.Query().Has("autopipeline") {
		return rawURL
	}
	q := u.Query()
	q.Del("autopipeline")
	u.RawQuery = q.Encode()
	return u.String()
}

// withAutoPipeline is rawURL with autopipeline=on.
func withAutoPipeline(rawURL string, on bool) string {
	rawURL = withoutAutoPipeline(rawURL)
	sep := "?"
	if strings.Contains(rawURL, "?") {
		sep = "&"
	}
	return rawURL + sep + "autopipeline=" + strconv.FormatBool(on)
}

func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func runBench(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	c, err := parseBench(args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		printSettingsUsage(stdout, benchUsage, benchSettings)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "waitroom bench: %v\n\nRun 'waitroom bench --help' for the flags.\n", err)
		return exitUsage
	}
	b := &bench{cfg: c, log: stderr}
	if err := b.run(ctx); err != nil {
		fmt.Fprintf(stderr, "waitroom bench: %v\n", err)
		return exitFailure
	}
	b.writeMarkdown(stdout)
	return exitOK
}

// bench is one run of the benchmark and what it measured.
type bench struct {
	cfg benchConfig
	log io.Writer

	loadStart, loadEnd string
	redisVersion       string
	http               []httpFigures
	scripts            []scriptFigure
	memory             []memoryFigure
	scriptsShared      bool // other clients ran scripts during the slices
}

// httpFigures are one store's HTTP slices: requests per second of each
// side, one value per round.
type httpFigures struct {
	store                  string
	enter, status, trivial []float64
	errors                 int64
}

type scriptFigure struct {
	op, command  string
	calls        int64 // calls this run made
	seen         int64 // calls Redis counted
	usecPerCall  float64
	usersPerCall float64 // admit only
}

type memoryFigure struct {
	store         string
	users         int
	before, after int64
}

func (b *bench) progress(format string, args ...any) {
	fmt.Fprintf(b.log, "bench: "+format+"\n", args...)
}

func (b *bench) run(ctx context.Context) error {
	b.loadStart = loadAverage()
	if b.cfg.cpuprofile != "" {
		f, err := os.Create(b.cfg.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if b.cfg.memstore {
		store := memstore.New(memstore.Options{})
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		if err := b.measureStores(ctx, []namedStore{{"memstore", store}}, func() int64 {
			var m runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m)
			return int64(m.HeapAlloc - before.HeapAlloc)
		}); err != nil {
			return err
		}
		runtime.KeepAlive(store)
	}
	if b.cfg.redis {
		if err := b.measureRedis(ctx); err != nil {
			return err
		}
	}
	b.loadEnd = loadAverage()
	return nil
}

func (b *bench) measureRedis(ctx context.Context) error {
	prefix := "wrbench-" + strings.ToLower(rand.Text()[:10])
	// One Store per kind of client asked for, on one prefix: they share
	// the rooms, and their slices alternate in one run.
	var stores []namedStore
	var plain *redisstore.Store
	var client redis.UniversalClient
	for _, on := range []bool{true, false} {
		if (on && !b.cfg.autoPipeline) || (!on && !b.cfg.plain) {
			continue
		}
		c, err := redisstore.Open(withAutoPipeline(b.cfg.redisURL, on))
		if err != nil {
			return err
		}
		defer c.Close()
		store := redisstore.New(c, redisstore.Options{Prefix: prefix})
		name := "redis"
		if !on {
			name, plain = "redis, no autopipeline", store
		}
		stores = append(stores, namedStore{name, store})
		client = c
	}
	defer func() {
		cleanCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := redisstore.DeletePrefix(cleanCtx, client, prefix); err != nil {
			b.progress("deleting %s:* failed: %v", prefix, err)
		}
	}()
	info, err := client.Info(ctx, "server").Result()
	if err != nil {
		return fmt.Errorf("redis at %s: %w", redactURL(b.cfg.redisURL), err)
	}
	b.redisVersion = infoField(info, "redis_version")
	usedMemory := func() int64 {
		info, err := client.Info(ctx, "memory").Result()
		if err != nil {
			return -1
		}
		n, _ := strconv.ParseInt(infoField(info, "used_memory"), 10, 64)
		return n
	}
	if err := b.measureStores(ctx, stores, usedMemory); err != nil {
		return err
	}
	// Script times are Redis's own, the same through either client; the
	// plain one keeps them comparable with earlier runs.
	scripts := stores[0].store.(*redisstore.Store)
	if plain != nil {
		scripts = plain
	}
	return b.measureScripts(ctx, client, scripts)
}

// namedStore is a store and the name its figures carry.
type namedStore struct {
	name  string
	store waitroom.Store
}

func infoField(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// Rooms of the benchmark.
const (
	benchEnterRoom  = "bench-enter"
	benchStatusRoom = "bench-status"
	benchAdmitRoom  = "bench-admit"
	benchTrivial    = "POST /bench/trivial"
)

// measureStores fills the STATUS room (measuring memory around it), then
// runs the rounds of HTTP slices against a real server on each store. The
// stores share their rooms (Redis stores on one prefix); the trivial
// handler runs on the first store's server, and every side of every store
// alternates with it in the same rounds.
func (b *bench) measureStores(ctx context.Context, stores []namedStore, memory func() int64) error {
	name := stores[0].name
	big := waitroom.RoomConfig{Rate: b.cfg.rate, MaxQueue: waitroom.MaxMaxQueue}
	for _, room := range []string{benchEnterRoom, benchStatusRoom} {
		if _, err := stores[0].store.CreateRoom(ctx, room, big); err != nil {
			return fmt.Errorf("%s: creating room %s: %w", name, room, err)
		}
	}
	b.progress("%s: filling %s with %d waiting users", name, benchStatusRoom, b.cfg.waiting)
	before := memory()
	if err := fill(ctx, stores[0].store, benchStatusRoom, "w", b.cfg.waiting, b.cfg.clients); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	b.memory = append(b.memory, memoryFigure{store: name, users: b.cfg.waiting, before: before, after: memory()})

	transport := &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        b.cfg.clients * len(stores),
		MaxIdleConnsPerHost: b.cfg.clients,
		MaxConnsPerHost:     b.cfg.clients,
		DisableCompression:  true,
	}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 10 * time.Second}
	var entered atomic.Int64
	figs := make([]httpFigures, len(stores))
	var trivial []float64
	var sides []benchSide
	for i, st := range stores {
		srv, err := server.New(server.Config{Store: st.store, DefaultRoom: benchEnterRoom, Routes: map[string]http.Handler{
			benchTrivial: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"ok":true}`)
			}),
		}})
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		hs := &http.Server{Handler: srv, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout}
		go func() { _ = hs.Serve(ln) }()
		defer hs.Close()

		base := "http://" + ln.Addr().String()
		post := func(path, user string) (*http.Request, error) {
			req, err := http.NewRequest(http.MethodPost, base+path, nil)
			if err == nil {
				req.Header.Set(waitroom.DefaultUserHeader, user)
			}
			return req, err
		}
		f := &figs[i]
		f.store = st.name
		if i == 0 {
			sides = append(sides, benchSide{"trivial", &trivial, &f.errors, func() (*http.Request, error) { return post("/bench/trivial", "trivial") }})
		}
		sides = append(sides,
			benchSide{st.name + " enter", &f.enter, &f.errors, func() (*http.Request, error) {
				return post("/rooms/"+benchEnterRoom+"/enter", "e"+strconv.FormatInt(entered.Add(1), 10))
			}},
			benchSide{st.name + " status", &f.status, &f.errors, func() (*http.Request, error) {
				req, err := http.NewRequest(http.MethodGet, base+"/rooms/"+benchStatusRoom+"/status", nil)
				if err == nil {
					req.Header.Set(waitroom.DefaultUserHeader, waitingUser("w", mrand.IntN(b.cfg.waiting)))
				}
				return req, err
			}})
	}
	// A short warm-up opens the connections and fills the caches.
	for _, s := range sides {
		if _, _, err := b.slice(ctx, client, s.req, b.cfg.slice/4); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	for round := range b.cfg.rounds {
		// Rotate the order each round, so that no side always follows
		// the same one.
		for i := range sides {
			s := sides[(i+round)%len(sides)]
			n, errs, err := b.slice(ctx, client, s.req, b.cfg.slice)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			*s.errors += errs
			*s.into = append(*s.into, n/b.cfg.slice.Seconds())
		}
		for _, f := range figs {
			b.progress("%s round %d/%d: enter %.0f/s, status %.0f/s, trivial %.0f/s", f.store, round+1, b.cfg.rounds,
				f.enter[round], f.status[round], trivial[round])
		}
	}
	for i := range figs {
		figs[i].trivial = trivial
	}
	b.http = append(b.http, figs...)
	return nil
}

// benchSide is one kind of request the HTTP slices send.
type benchSide struct {
	name   string
	into   *[]float64 // requests/s, one per round
	errors *int64     // non-2xx answers
	req    func() (*http.Request, error)
}

// slice runs cfg.clients workers for d and counts the requests answered
// 2xx within it; others are errors.
func (b *bench) slice(ctx context.Context, client *http.Client, newReq func() (*http.Request, error), d time.Duration) (ok float64, errs int64, err error) {
	var (
		done, failed atomic.Int64
		wg           sync.WaitGroup
		firstErr     error
		once         sync.Once
	)
	deadline := time.Now().Add(d)
	for range b.cfg.clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, err := newReq()
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				resp, err := client.Do(req.WithContext(ctx))
				if err != nil {
					if ctx.Err() == nil {
						once.Do(func() { firstErr = err })
					}
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if time.Now().After(deadline) {
					return
				}
				if resp.StatusCode/100 == 2 {
					done.Add(1)
				} else {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return float64(done.Load()), failed.Load(), firstErr
}

func waitingUser(prefix string, i int) string { return prefix + strconv.Itoa(i) }

// fill queues users prefix0..prefix(n-1) in room with the given number of
// goroutines.
func fill(ctx context.Context, store waitroom.Store, room, prefix string, n, workers int) error {
	var next atomic.Int64
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if _, err := store.Enter(ctx, room, waitingUser(prefix, i)); err != nil {
					errs <- fmt.Errorf("filling %s: %w", room, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// commandStats reads INFO commandstats: calls and µs per command.
func commandStats(ctx context.Context, client redis.UniversalClient) (map[string][2]int64, error) {
	info, err := client.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	stats := make(map[string][2]int64)
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		cmd, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		var calls, usec int64
		for kv := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		stats[cmd] = [2]int64{calls, usec}
	}
	return stats, nil
}

// measureScripts runs each operation alone for a slice and reads its
// server time from INFO commandstats. It reads the counters before and
// after each slice rather than CONFIG RESETSTAT: on a Redis others use,
// resetting their counters would break their figures; the calls Redis
// counted against the calls made show whether anyone else ran scripts.
func (b *bench) measureScripts(ctx context.Context, client redis.UniversalClient, store *redisstore.Store) error {
	b.progress("redis: time per script call")
	measure := func(op, command string, calls func() (n int64, users int64, err error)) error {
		before, err := commandStats(ctx, client)
		if err != nil {
			return err
		}
		n, users, err := calls()
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		after, err := commandStats(ctx, client)
		if err != nil {
			return err
		}
		seen := after[command][0] - before[command][0]
		usec := after[command][1] - before[command][1]
		f := scriptFigure{op: op, command: command, calls: n, seen: seen}
		if seen > 0 {
			f.usecPerCall = float64(usec) / float64(seen)
		}
		if n > 0 && users > 0 {
			f.usersPerCall = float64(users) / float64(n)
		}
		if seen != n {
			b.scriptsShared = true
		}
		b.scripts = append(b.scripts, f)
		return nil
	}
	// concurrently calls op with cfg.clients goroutines for one slice.
	concurrently := func(op func(i int64) error) (int64, int64, error) {
		var next, n atomic.Int64
		var wg sync.WaitGroup
		var firstErr error
		var once sync.Once
		deadline := time.Now().Add(b.cfg.slice)
		for range b.cfg.clients {
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

	// Warm the script cache, so that every measured call is an EVALSHA.
	if _, err := store.Status(ctx, benchStatusRoom, "w0"); err != nil {
		return err
	}
	if err := measure("enter (new place)", "evalsha", func() (int64, int64, error) {
		return concurrently(func(i int64) error {
			_, err := store.Enter(ctx, benchEnterRoom, "s"+strconv.FormatInt(i, 10))
			return err
		})
	}); err != nil {
		return err
	}
	if err := measure(fmt.Sprintf("status (%d waiting)", b.cfg.waiting), "evalsha", func() (int64, int64, error) {
		return concurrently(func(int64) error {
			_, err := store.Status(ctx, benchStatusRoom, waitingUser("w", mrand.IntN(b.cfg.waiting)))
			return err
		})
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
		ticks := int(b.cfg.slice / cfg.Slice)
		if err := fill(ctx, store, room, "a", (ticks+2)*quota, b.cfg.clients); err != nil {
			return err
		}
		if _, err := store.Admit(ctx, room); err != nil { // learns the quota
			return err
		}
		if err := measure(fmt.Sprintf("admit (quota %d)", quota), "evalsha", func() (int64, int64, error) {
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
	if err := measure("claim", "evalsha", func() (int64, int64, error) { return concurrently(claim) }); err != nil {
		return err
	}
	if err := measure("release", "evalsha", func() (int64, int64, error) { return concurrently(settle(store.Release)) }); err != nil {
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
	if err := measure("complete", "evalsha", func() (int64, int64, error) { return concurrently(settle(store.Complete)) }); err != nil {
		return err
	}
	return measure("leave (ZREM, no script)", "zrem", func() (int64, int64, error) {
		return concurrently(func(i int64) error {
			if i >= int64(b.cfg.waiting) {
				return errExhausted
			}
			return store.Leave(ctx, benchStatusRoom, waitingUser("w", int(i)))
		})
	})
}

// errExhausted ends a slice early: its operation ran out of inputs.
var errExhausted = errors.New("inputs exhausted")

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// ratios are the per-round ratios a/b: each within one round, so a slow
// round slows both sides.
func ratios(a, b []float64) []float64 {
	out := make([]float64, 0, len(a))
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			out = append(out, a[i]/b[i])
		}
	}
	return out
}

func (b *bench) writeMarkdown(w io.Writer) {
	c := b.cfg
	fmt.Fprintf(w, "### Machine\n\n| | |\n|---|---|\n")
	fmt.Fprintf(w, "| CPUs (nproc) | %d |\n| CPU | %s |\n| Go | %s %s/%s |\n", runtime.NumCPU(), cpuModel(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if c.redis {
		fmt.Fprintf(w, "| Redis | %s at %s |\n", b.redisVersion, redactURL(c.redisURL))
	}
	fmt.Fprintf(w, "| load average (1, 5, 15 min) | start %s; end %s |\n", b.loadStart, b.loadEnd)
	fmt.Fprintf(w, "| run | %d rounds × %s per side, %d keep-alive clients, %d waiting |\n\n", c.rounds, c.slice, c.clients, c.waiting)

	fmt.Fprintf(w, "### HTTP throughput against a trivial handler in the same server\n\n")
	fmt.Fprintf(w, "Requests/s, median over the rounds; a ratio is the median of the rounds' own ratios. The trivial handler writes `{\"ok\":true}` behind the same `server.Server` (routing, metrics, recovery), so the ratio is what the room's handler and its store cost.\n\n")
	fmt.Fprintf(w, "| store | ENTER/s | STATUS/s (%d waiting) | trivial/s | ENTER ÷ trivial | STATUS ÷ trivial | non-2xx |\n|---|---:|---:|---:|---:|---:|---:|\n", c.waiting)
	for _, h := range b.http {
		er, sr := ratios(h.enter, h.trivial), ratios(h.status, h.trivial)
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.0f | **%.2f** (%.2f–%.2f) | %.2f (%.2f–%.2f) | %d |\n", h.store,
			median(h.enter), median(h.status), median(h.trivial),
			median(er), slices.Min(er), slices.Max(er), median(sr), slices.Min(sr), slices.Max(sr), h.errors)
	}

	for _, h := range b.http {
		if h.store != "redis" {
			continue
		}
		for _, p := range b.http {
			if p.store == "redis, no autopipeline" {
				er, sr := ratios(h.enter, p.enter), ratios(h.status, p.status)
				fmt.Fprintf(w, "\nRedis with automatic pipelining ÷ without, the same rounds: ENTER **%.2f** (%.2f–%.2f), STATUS %.2f (%.2f–%.2f).\n",
					median(er), slices.Min(er), slices.Max(er), median(sr), slices.Min(sr), slices.Max(sr))
			}
		}
	}

	fmt.Fprintf(w, "\n### Poll load at %d waiting against STATUS capacity\n\n", c.waiting)
	load := waitroom.PollLoad(int64(c.waiting), c.rate)
	fmt.Fprintf(w, "| store | PollLoad(%d, %g/s) | STATUS capacity | share (≤ 0.5) |\n|---|---:|---:|---:|\n", c.waiting, c.rate)
	for _, h := range b.http {
		capacity := median(h.status)
		share := load / capacity
		verdict := "ok"
		if share > 0.5 {
			verdict = "TOO HIGH"
		}
		fmt.Fprintf(w, "| %s | %.0f/s | %.0f/s | %.3f %s |\n", h.store, load, capacity, share, verdict)
	}

	if len(b.scripts) > 0 {
		fmt.Fprintf(w, "\n### Redis time per call (INFO commandstats)\n\n")
		fmt.Fprintf(w, "Each operation ran alone for one slice; µs/call is the growth of its command's `usec` over the growth of its `calls`.\n\n")
		fmt.Fprintf(w, "| operation | command | calls | µs/call | users/call |\n|---|---|---:|---:|---:|\n")
		for _, s := range b.scripts {
			users := ""
			if s.usersPerCall > 0 {
				users = fmt.Sprintf("%.1f", s.usersPerCall)
			}
			calls := strconv.FormatInt(s.calls, 10)
			if s.seen != s.calls {
				calls += fmt.Sprintf(" (Redis counted %d)", s.seen)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %.2f | %s |\n", s.op, strings.ToUpper(s.command), calls, s.usecPerCall, users)
		}
		if b.scriptsShared {
			fmt.Fprintf(w, "\nRedis counted other calls than this run made: another client used this Redis during the slices, so these figures include its calls.\n")
		}
	}

	fmt.Fprintf(w, "\n### Memory per waiting user\n\n| store | waiting | measured | bytes per waiting user |\n|---|---:|---|---:|\n")
	for _, m := range b.memory {
		how := "Go heap (HeapAlloc after GC)"
		if strings.HasPrefix(m.store, "redis") {
			how = "INFO memory used_memory"
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.0f |\n", m.store, m.users, how, float64(m.after-m.before)/float64(m.users))
	}
}
