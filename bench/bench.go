// Package bench measures a waiting room on this machine, in one run and
// in alternating short slices so that machine noise falls on every side
// alike: the HTTP throughput of ENTER and STATUS against a trivial handler
// in the same server, for memstore and Redis; the Redis time per call of
// each script (INFO commandstats); the memory per waiting user; the poll
// load PollLoad asks of the server against the measured STATUS capacity;
// and, asked for, ENTER and STATUS with webhooks on (a dead receiver) and
// off. Result.WriteMarkdown prints the tables of BENCHMARKS.md.
package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/redisstore"
)

// Config is what one run measures. Run checks nothing that the command's
// flag parsing checks (CheckRedisURL is its check of RedisURL).
type Config struct {
	// RedisURL is the Redis to measure (loopback only); its keys go under a
	// fresh prefix, deleted afterwards.
	RedisURL string
	// Memstore and Redis are the stores to measure.
	Memstore, Redis bool
	// AutoPipeline and Plain: the Redis clients to measure, with go-redis's
	// automatic pipelining and without, in alternating slices of one run.
	AutoPipeline, Plain bool
	Rounds              int
	Slice               time.Duration // one measured slice
	Clients             int           // concurrent keep-alive HTTP clients
	Waiting             int           // users waiting in the STATUS room
	Rate                float64       // room rate for the poll load figure
	CPUProfile          string        // file for a CPU profile; empty: none
	// IdleRooms, when > 0, measures what rooms nobody is in cost Redis:
	// IdleInstances instances over IdleRooms declared rooms, all idle and
	// read at IdleMarks from the instances' start (CheckIdleMarks), then
	// with IdleBusy of them busy; Redis alone and the busy phase IdleFor
	// long.
	IdleRooms, IdleBusy, IdleInstances int
	IdleFor                            time.Duration
	IdleMarks                          []time.Duration
	// Serve starts a waiting-room server on store, with routes added to
	// its own, listening on loopback; it returns the base URL
	// (http://host:port) and a function that stops the server.
	Serve func(ctx context.Context, store waitroom.Store, routes map[string]http.Handler) (baseURL string, stop func(), err error)
	// WebhooksOn measures, on each store, ENTER and STATUS on a server
	// of their own (ServeWebhooks) whose admitter runs and whose
	// webhooks tell every event of every room to a receiver that never
	// answers (or a slow one, SlowReceiver);
	// WebhooksOff adds the same server with its webhooks stopped, in
	// alternating slices of the same rounds. Neither: not measured.
	WebhooksOn, WebhooksOff bool
	// SlowReceiver, when > 0, makes the receiver a slow one that takes
	// every message, answering after SlowReceiver; 0: a dead one that
	// never answers.
	SlowReceiver time.Duration
	// ServeWebhooks, needed by WebhooksOn, starts a server as Serve does
	// but with its admitter running and with webhooks telling
	// receiverURL every event of every room. setWebhooks(ctx, false)
	// stops its webhooks (emitter, dispatcher, watcher) and turns the
	// rooms' outboxes off, so that admissions write none; true starts
	// them again.
	ServeWebhooks func(ctx context.Context, store waitroom.Store, receiverURL string) (baseURL string, setWebhooks func(ctx context.Context, on bool) error, stop func(), err error)
	// Progress receives a line per step; nil discards them.
	Progress io.Writer
}

// Run measures what cfg asks for.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if cfg.Serve == nil {
		return nil, errors.New("bench: Config.Serve is required")
	}
	if cfg.WebhooksOn && cfg.ServeWebhooks == nil {
		return nil, errors.New("bench: Config.ServeWebhooks is required with WebhooksOn")
	}
	b := &Result{cfg: cfg}
	if err := b.run(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

// CheckRedisURL reports whether rawURL names a Redis the benchmark may
// measure: a URL go-redis parses, on loopback.
func CheckRedisURL(rawURL string) error {
	opts, err := redis.ParseURL(withoutAutoPipeline(rawURL))
	switch {
	case err != nil:
		return err
	case opts.Network == "tcp" && !loopbackAddr(opts.Addr):
		return errors.New("the benchmark measures a Redis on loopback only")
	}
	return nil
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

// Result is one run of the benchmark and what it measured.
type Result struct {
	cfg Config

	loadStart, loadEnd string
	redisVersion       string
	http               []httpFigures
	scripts            []scriptFigure
	memory             []memoryFigure
	scriptsShared      bool // other clients ran scripts during the slices
	idle               []idleFigure
	baseline           []baselineFigure
	webhooks           []webhookFigures
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
	usersPerCall float64 // users per call: admit, and enter (concurrent Enters share a call)
}

type memoryFigure struct {
	store         string
	users         int
	before, after int64
}

func (b *Result) progress(format string, args ...any) {
	fmt.Fprintf(b.cfg.Progress, "bench: "+format+"\n", args...)
}

func (b *Result) run(ctx context.Context) error {
	b.loadStart = loadAverage()
	if b.cfg.CPUProfile != "" {
		f, err := os.Create(b.cfg.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if b.cfg.Memstore {
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
		if b.cfg.WebhooksOn {
			if err := b.measureWebhooks(ctx, "memstore", memstore.New(memstore.Options{})); err != nil {
				return err
			}
		}
	}
	if b.cfg.Redis {
		if err := b.measureRedis(ctx); err != nil {
			return err
		}
	}
	b.loadEnd = loadAverage()
	return nil
}

func (b *Result) measureRedis(ctx context.Context) error {
	prefix := benchPrefix()
	// One Store per kind of client asked for, on one prefix: they share
	// the rooms, and their slices alternate in one run.
	var stores []namedStore
	var plain *redisstore.Store
	var client redis.UniversalClient
	for _, on := range []bool{true, false} {
		if (on && !b.cfg.AutoPipeline) || (!on && !b.cfg.Plain) {
			continue
		}
		c, err := redisstore.Open(withAutoPipeline(b.cfg.RedisURL, on))
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
	defer func() { b.deletePrefix(ctx, client, prefix) }()
	info, err := client.Info(ctx, "server").Result()
	if err != nil {
		return fmt.Errorf("redis at %s: %w", redactURL(b.cfg.RedisURL), err)
	}
	b.redisVersion = redisstore.InfoField(info, "redis_version")
	if err := b.measureStores(ctx, stores, func() int64 { return roomMemory(ctx, client, prefix, benchStatusRoom) }); err != nil {
		return err
	}
	// Script times are Redis's own, the same through either client; the
	// plain one keeps them comparable with earlier runs.
	scripts := stores[0].store.(*redisstore.Store)
	if plain != nil {
		scripts = plain
	}
	// Before the script figures, whose leave slice empties the STATUS room.
	if err := b.measureBaseline(ctx, client, stores[0].store, prefix); err != nil {
		return err
	}
	if err := b.measureScripts(ctx, client, scripts); err != nil {
		return err
	}
	// After the figures that poll the STATUS room: a user who has not
	// polled for the room's abandon_after (5 min) is dropped at its next
	// poll, and this takes a while.
	if b.cfg.WebhooksOn {
		if err := b.measureRedisWebhooks(ctx, stores[0]); err != nil {
			return err
		}
	}
	if b.cfg.IdleRooms > 0 {
		return b.measureIdle(ctx, client, prefix+"-idle")
	}
	return nil
}

// measureRedisWebhooks is measureWebhooks on rooms and a webhook log of
// their own, under a prefix of their own on st's client: so that st's
// servers, which run webhooks with no endpoint, share none of their
// dispatchers' leases.
func (b *Result) measureRedisWebhooks(ctx context.Context, st namedStore) error {
	client := st.store.(*redisstore.Store).Client()
	prefix := benchPrefix()
	defer b.deletePrefix(ctx, client, prefix)
	return b.measureWebhooks(ctx, st.name, redisstore.New(client, redisstore.Options{Prefix: prefix}))
}

// benchPrefix is a fresh key prefix, short as a deployment's "wr" is:
// every script declares its keys, and Redis's cost per declared key
// grows with the key's length.
func benchPrefix() string { return "wrb" + strings.ToLower(rand.Text()[:7]) }

// deletePrefix deletes the keys under prefix, even when ctx is done.
func (b *Result) deletePrefix(ctx context.Context, client redis.UniversalClient, prefix string) {
	cleanCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := redisstore.DeletePrefix(cleanCtx, client, prefix); err != nil {
		b.progress("deleting %s:* failed: %v", prefix, err)
	}
}

// roomMemory is what room's keys take in Redis (MEMORY USAGE of each,
// every element counted), -1 when Redis does not say. Not INFO's
// used_memory around the fill: that moves with whatever else Redis does
// meanwhile, such as freeing an earlier run's keys in the background
// (UNLINK), which once made the figure negative.
func roomMemory(ctx context.Context, client redis.UniversalClient, prefix, room string) int64 {
	keys := prefix + ":{" + room + "}:"
	var node redis.Cmdable = client
	if cluster, ok := client.(*redis.ClusterClient); ok {
		// One hash tag: every key of the room is on this shard.
		primary, err := cluster.MasterForKey(ctx, keys+"cfg")
		if err != nil {
			return -1
		}
		node = primary
	}
	var total int64
	iter := node.Scan(ctx, 0, keys+"*", 1000).Iterator()
	for iter.Next(ctx) {
		n, err := node.MemoryUsage(ctx, iter.Val(), 0).Result()
		if err != nil {
			return -1
		}
		total += n
	}
	if iter.Err() != nil {
		return -1
	}
	return total
}

// namedStore is a store and the name its figures carry.
type namedStore struct {
	name  string
	store waitroom.Store
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
func (b *Result) measureStores(ctx context.Context, stores []namedStore, memory func() int64) error {
	name := stores[0].name
	if err := b.createRooms(ctx, name, stores[0].store); err != nil {
		return err
	}
	b.progress("%s: filling %s with %d waiting users", name, benchStatusRoom, b.cfg.Waiting)
	before := memory()
	if err := fill(ctx, stores[0].store, benchStatusRoom, "w", b.cfg.Waiting, b.cfg.Clients); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	b.memory = append(b.memory, memoryFigure{store: name, users: b.cfg.Waiting, before: before, after: memory()})

	client := b.loadClient(len(stores))
	defer client.CloseIdleConnections()
	var entered atomic.Int64
	figs := make([]httpFigures, len(stores))
	var trivial []float64
	var sides []benchSide
	for i, st := range stores {
		base, stop, err := b.cfg.Serve(ctx, st.store, map[string]http.Handler{
			benchTrivial: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"ok":true}`)
			}),
		})
		if err != nil {
			return err
		}
		defer stop()

		f := &figs[i]
		f.store = st.name
		if i == 0 {
			sides = append(sides, benchSide{"trivial", &trivial, &f.errors, func() (*http.Request, error) {
				return userRequest(http.MethodPost, base+"/bench/trivial", "trivial")
			}})
		}
		sides = append(sides,
			benchSide{st.name + " enter", &f.enter, &f.errors, b.enterRequests(base, &entered)},
			benchSide{st.name + " status", &f.status, &f.errors, b.statusRequests(base)})
	}
	// A short warm-up opens the connections and fills the caches.
	for _, s := range sides {
		if _, _, err := b.slice(ctx, client, s.req, b.cfg.Slice/4); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	for round := range b.cfg.Rounds {
		// Rotate the order each round, so that no side always follows
		// the same one.
		for i := range sides {
			s := sides[(i+round)%len(sides)]
			n, errs, err := b.slice(ctx, client, s.req, b.cfg.Slice)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			*s.errors += errs
			*s.into = append(*s.into, n/b.cfg.Slice.Seconds())
		}
		for _, f := range figs {
			b.progress("%s round %d/%d: enter %.0f/s, status %.0f/s, trivial %.0f/s", f.store, round+1, b.cfg.Rounds,
				f.enter[round], f.status[round], trivial[round])
		}
	}
	for i := range figs {
		figs[i].trivial = trivial
	}
	b.http = append(b.http, figs...)
	return nil
}

// createRooms creates the ENTER and STATUS rooms on store, at cfg.Rate
// and with the largest queue.
func (b *Result) createRooms(ctx context.Context, name string, store waitroom.Store) error {
	big := waitroom.RoomConfig{Rate: b.cfg.Rate, MaxQueue: waitroom.MaxMaxQueue}
	for _, room := range []string{benchEnterRoom, benchStatusRoom} {
		if _, err := store.CreateRoom(ctx, room, big); err != nil {
			return fmt.Errorf("%s: creating room %s: %w", name, room, err)
		}
	}
	return nil
}

// loadClient is the load generator's HTTP client: cfg.Clients keep-alive
// connections to each of hosts servers.
func (b *Result) loadClient(hosts int) *http.Client {
	transport := &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        b.cfg.Clients * hosts,
		MaxIdleConnsPerHost: b.cfg.Clients,
		MaxConnsPerHost:     b.cfg.Clients,
		DisableCompression:  true,
	}
	return &http.Client{Transport: transport, Timeout: 10 * time.Second}
}

// userRequest is a request to url as user.
func userRequest(method, url, user string) (*http.Request, error) {
	req, err := http.NewRequest(method, url, nil)
	if err == nil {
		req.Header.Set(waitroom.DefaultUserHeader, user)
	}
	return req, err
}

// enterRequests are the ENTER slices' requests to the server at base: a
// new user each, numbered by entered.
func (b *Result) enterRequests(base string, entered *atomic.Int64) func() (*http.Request, error) {
	return func() (*http.Request, error) {
		return userRequest(http.MethodPost, base+"/rooms/"+benchEnterRoom+"/enter", "e"+strconv.FormatInt(entered.Add(1), 10))
	}
}

// statusRequests are the STATUS slices' requests to the server at base:
// a poll by one of the STATUS room's waiting users, at random.
func (b *Result) statusRequests(base string) func() (*http.Request, error) {
	return func() (*http.Request, error) {
		return userRequest(http.MethodGet, base+"/rooms/"+benchStatusRoom+"/status", waitingUser("w", mrand.IntN(b.cfg.Waiting)))
	}
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
func (b *Result) slice(ctx context.Context, client *http.Client, newReq func() (*http.Request, error), d time.Duration) (ok float64, errs int64, err error) {
	var (
		done, failed atomic.Int64
		wg           sync.WaitGroup
		firstErr     error
		once         sync.Once
	)
	deadline := time.Now().Add(d)
	for range b.cfg.Clients {
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

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
