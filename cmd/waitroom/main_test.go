package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/waitroom/waitroom/instance"
	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/server"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
)

func envOf(kv ...string) func(string) string {
	m := make(map[string]string)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestParseServeDefaults(t *testing.T) {
	t.Parallel()
	c, err := parseServe(nil, envOf())
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:8080", c.Addr)
	require.Empty(t, c.RedisURL)
	require.InDelta(t, 140.0, c.Room.Rate, 1e-9)
	require.True(t, c.RateDerived)
	require.Equal(t, 100*time.Millisecond, c.Room.Slice)
	require.Equal(t, 100_000, c.Room.MaxQueue)
	require.Equal(t, 300*time.Second, c.Room.TokenTTL)
	require.Equal(t, 30*time.Second, c.Room.Lease)
	require.Zero(t, c.Room.MaxActive)
	require.Nil(t, c.Upstream)
	require.Equal(t, []string{"POST /orders"}, c.GatedRoutes)
	require.Equal(t, "X-User-Id", c.UserHeader)
	require.Equal(t, []string{"default"}, c.Rooms)
	require.Equal(t, "text", c.LogFormat)
	require.Equal(t, slog.LevelInfo, c.LogLevel)
	require.InDelta(t, server.DefaultVisitorRateLimit, c.VisitorRateLimit, 1e-9, "new visitors are bounded per address out of the box")
}

func TestParseServeSources(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		args  []string
		env   []string
		check func(t *testing.T, c instance.Config)
	}{
		{"env sets", nil, []string{"WAITROOM_RATE", "175", "WAITROOM_ADDR", "0.0.0.0:9000", "REDIS_URL", "redis://127.0.0.1:6379/3"},
			func(t *testing.T, c instance.Config) {
				require.InDelta(t, 175.0, c.Room.Rate, 1e-9)
				require.False(t, c.RateDerived)
				require.Equal(t, "0.0.0.0:9000", c.Addr)
				require.Equal(t, "redis://127.0.0.1:6379/3", c.RedisURL)
			}},
		{"flag wins over env", []string{"--rate", "50", "-addr=:1"}, []string{"WAITROOM_RATE", "175", "WAITROOM_ADDR", "0.0.0.0:9000"},
			func(t *testing.T, c instance.Config) {
				require.InDelta(t, 50.0, c.Room.Rate, 1e-9)
				require.Equal(t, ":1", c.Addr)
			}},
		{"rate derived from capacity", []string{"--pool", "20", "--service-time", "100ms", "--margin", "0.5"}, nil,
			func(t *testing.T, c instance.Config) {
				require.InDelta(t, 100.0, c.Room.Rate, 1e-9)
				require.True(t, c.RateDerived)
			}},
		{"lists", []string{"--rooms", " sale, vip ,sale,default", "--gated-routes", "POST /orders, PUT /carts/{id}"}, nil,
			func(t *testing.T, c instance.Config) {
				require.Equal(t, []string{"default", "sale", "vip"}, c.Rooms)
				require.Equal(t, []string{"POST /orders", "PUT /carts/{id}"}, c.GatedRoutes)
			}},
		{"a short token TTL brings the first-use deadline's default along", []string{"--token-ttl", "3s"}, nil,
			func(t *testing.T, c instance.Config) {
				require.Equal(t, 3*time.Second, c.Room.TokenTTL)
				require.Equal(t, 3*time.Second, c.Room.FirstUseWithin)
			}},
		{"a first-use deadline given within the TTL", []string{"--token-ttl", "3s", "--first-use-within", "2s"}, nil,
			func(t *testing.T, c instance.Config) {
				require.Equal(t, 2*time.Second, c.Room.FirstUseWithin)
			}},
		{"everything else", []string{"--upstream", "http://127.0.0.1:9001/api", "--slice", "50ms", "--max-queue", "10",
			"--token-ttl", "2m", "--lease", "5s", "--max-active", "300", "--units-per-order", "4", "--shards", "2", "--user-header", "X-Customer",
			"--log-format", "json", "--log-level", "debug"}, []string{"WAITROOM_REDIS_PREFIX", "wr-test"},
			func(t *testing.T, c instance.Config) {
				require.Equal(t, "http://127.0.0.1:9001/api", c.Upstream.String())
				require.Equal(t, waitroom.RoomConfig{Rate: 140, Slice: 50 * time.Millisecond, MaxQueue: 10,
					TokenTTL: 2 * time.Minute, Lease: 5 * time.Second, MaxActive: 300, State: waitroom.RoomOpen, UnitsPerOrder: 4,
					AbandonAfter: waitroom.DefaultAbandonAfter, FirstUseWithin: waitroom.DefaultFirstUseWithin, NotifiedFirstUseWithin: 2 * time.Minute,
					Shards: 2}, c.Room)
				require.Equal(t, "X-Customer", c.UserHeader)
				require.Equal(t, "json", c.LogFormat)
				require.Equal(t, slog.LevelDebug, c.LogLevel)
				require.Equal(t, "wr-test", c.RedisPrefix)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := parseServe(tt.args, envOf(tt.env...))
			require.NoError(t, err)
			tt.check(t, c)
		})
	}
}

func TestParseServeRejectsBadValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		env  []string
		want string // the error names what to fix
	}{
		{[]string{"--rate", "abc"}, nil, `--rate="abc": not a number`},
		{[]string{"--rate", "0"}, nil, `--rate="0": must be in [0.000277`},
		{[]string{"--rate", "NaN"}, nil, `--rate="NaN": not a number`},
		{nil, []string{"WAITROOM_RATE", "-3"}, `WAITROOM_RATE="-3": must be in [0.000277`},
		{[]string{"--margin", "1.5"}, nil, `--margin="1.5": must be in (0, 1]`},
		{nil, []string{"WAITROOM_MARGIN", "0"}, `WAITROOM_MARGIN="0"`},
		{[]string{"--rate", "100", "--margin", "2"}, nil, `--margin="2"`},
		{[]string{"--pool", "0"}, nil, `--pool="0": must be in [1,`},
		{[]string{"--pool", "4.5"}, nil, `--pool="4.5": not a whole number`},
		{[]string{"--service-time", "200"}, nil, `--service-time="200": not a duration`},
		{[]string{"--slice", "1ms"}, nil, `--slice="1ms": must be in [10ms, 10s]`},
		{[]string{"--max-queue", "0"}, nil, `--max-queue="0": must be in [1,`},
		{nil, []string{"WAITROOM_MAX_QUEUE", "lots"}, `WAITROOM_MAX_QUEUE="lots": not a whole number`},
		{[]string{"--token-ttl", "300"}, nil, `--token-ttl="300": not a duration`},
		{[]string{"--token-ttl", "100ms"}, nil, `--token-ttl="100ms": must be in [1s,`},
		{[]string{"--lease", "-1s"}, nil, `--lease="-1s"`},
		{[]string{"--token-ttl", "3s", "--first-use-within", "10s"}, nil, `--first-use-within="10s": must be in [1s, token_ttl 3s]`},
		{nil, []string{"WAITROOM_TOKEN_TTL", "3s", "WAITROOM_FIRST_USE_WITHIN", "1m"}, `WAITROOM_FIRST_USE_WITHIN="1m": must be in [1s, token_ttl 3s]`},
		{[]string{"--max-active", "-1"}, nil, `--max-active="-1": must be in [0,`},
		{[]string{"--token-ttl", "3s", "--notified-first-use-within", "1m"}, nil, `--notified-first-use-within="1m": must be in [1s, token_ttl 3s]`},
		{[]string{"--smtp-url", "smtp://127.0.0.1:25", "--mail-from", "q@shop.example"}, nil, `--public-url`},
		{[]string{"--vapid-key-file", "/tmp/k.json"}, nil, `--public-url`},
		{[]string{"--smtp-url", "http://mail.example", "--mail-from", "q@shop.example", "--public-url", "https://q.example"}, nil, `must be smtp://host[:port] or smtps://host[:port]`},
		{[]string{"--smtp-url", "smtp://mail.example", "--mail-from", "Queue <q@shop.example>", "--public-url", "https://q.example"}, nil, `is not a bare address`},
		{[]string{"--mail-from", "q@shop.example"}, nil, `--mail-from`},
		{[]string{"--vapid-key-file", "/tmp/k.json", "--public-url", "http://q.example"}, nil, `--vapid-key-file="/tmp/k.json": needs --mail-from or an https --public-url`},
		{[]string{"--rate", "100000", "--slice", "1s"}, nil, "--rate and --slice"},
		{[]string{"--upstream", "ftp://example.test"}, nil, `--upstream="ftp://example.test": must be an absolute http`},
		{[]string{"--upstream", "localhost:9000"}, nil, `--upstream="localhost:9000"`},
		{[]string{"--gated-routes", "POST"}, nil, `--gated-routes="POST": route "POST"`},
		{[]string{"--gated-routes", " , "}, nil, `--gated-routes=" , ": at least one route`},
		{[]string{"--rooms", "sale,Big Sale"}, nil, `--rooms="sale,Big Sale": room "Big Sale"`},
		{[]string{"--rooms", "-sale"}, nil, `room "-sale": names are 1–64 characters of a–z, 0–9, '-' and '_', starting with a letter or digit`},
		{[]string{"--user-header", "X User"}, nil, `--user-header="X User": not a valid header name`},
		{[]string{"--log-format", "xml"}, nil, `--log-format="xml": must be text or json`},
		{nil, []string{"WAITROOM_LOG_LEVEL", "loud"}, `WAITROOM_LOG_LEVEL="loud"`},
		{nil, []string{"REDIS_URL", "mysql://x"}, `REDIS_URL="mysql://x"`},
		{[]string{"--redis-prefix", "a{b}"}, nil, `--redis-prefix="a{b}"`},
		{[]string{"--addr", ""}, nil, `--addr="": an address to listen on is required`},
		{[]string{"--webhook-url", "ftp://shop.test/h"}, nil, `--webhook-url="ftp://shop.test/h": WEBHOOK_URL_INVALID`},
		{[]string{"--webhook-url", "https://shop.test/h"}, nil, `--webhook-secret: --webhook-url needs --webhook-secret`},
		{[]string{"--webhook-url", "https://shop.test/h", "--webhook-secret", "nope"}, nil, `--webhook-secret: a webhook secret starts with whsec_`},
		{nil, []string{"WAITROOM_WEBHOOK_SECRET", "whsec_abc"}, `signs the messages to --webhook-url`},
		{[]string{"--no-such-flag"}, nil, "flag provided but not defined: -no-such-flag"},
		{[]string{"extra"}, nil, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		_, err := parseServe(tt.args, envOf(tt.env...))
		require.Error(t, err, "%v %v", tt.args, tt.env)
		require.Contains(t, err.Error(), tt.want, "%v %v", tt.args, tt.env)

		var stdout, stderr bytes.Buffer
		code := run(t.Context(), append([]string{"serve"}, tt.args...), envOf(tt.env...), &stdout, &stderr)
		require.Equal(t, exitUsage, code, "%v %v", tt.args, tt.env)
		require.Contains(t, stderr.String(), tt.want)
	}
}

func TestHelpListsEveryFlag(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"serve", "--help"}, {"serve", "-h"}, {"help", "serve"}} {
		var stdout, stderr bytes.Buffer
		require.Equal(t, exitOK, run(t.Context(), args, envOf(), &stdout, &stderr), args)
		for _, s := range serveSettings(new(serveFlags)) {
			require.Contains(t, stdout.String(), "--"+s.Name+" ", args)
			require.Contains(t, stdout.String(), "env "+s.Env, args)
		}
		for _, def := range []string{"127.0.0.1:8080", "40", "200ms", "0.7", "100ms", "100000", "300s", "30s", "POST /orders", "X-User-Id"} {
			require.Contains(t, stdout.String(), "(default "+def+";", args)
		}
	}
}

func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	require.Equal(t, exitUsage, run(t.Context(), []string{"frobnicate"}, envOf(), &stdout, &stderr))
	require.Contains(t, stderr.String(), `unknown command "frobnicate"`)
	require.Equal(t, exitUsage, run(t.Context(), nil, envOf(), &stdout, &stderr))
	require.Equal(t, exitOK, run(t.Context(), []string{"help"}, envOf(), &stdout, &stderr))
	require.Contains(t, stdout.String(), "waitroom serve")
}

// TestRunServeStopsOnSignal runs the whole command and stops it the way
// SIGTERM does: by cancelling its context.
func TestRunServeStopsOnSignal(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	stderr := &testenv.LogBuffer{}
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0"}, envOf(), io.Discard, stderr)
	}()
	eventually(t, 10*time.Second, "serve listening", func() bool { return strings.Contains(stderr.String(), "waiting room listening") })
	cancel()
	require.Equal(t, exitOK, <-done)
	require.Contains(t, stderr.String(), "not shared with other instances", "memstore's lack of durability is logged")
	require.Regexp(t, ` gomaxprocs=`+strconv.Itoa(runtime.GOMAXPROCS(0))+`\b`, stderr.String(), "the cores it schedules on are logged")
}

func TestRunServeAddressTaken(t *testing.T) {
	t.Parallel()
	m := startMain(t, nil, envOf())
	var stderr bytes.Buffer
	code := run(t.Context(), []string{"serve", "--addr", m.Addr()}, envOf(), io.Discard, &stderr)
	require.Equal(t, exitFailure, code)
	require.Contains(t, stderr.String(), "listening on")
}

// startMain starts a Main on port 0 with the given flags and environment.
func startMain(t *testing.T, args []string, getenv func(string) string) *instance.Instance {
	t.Helper()
	return startMainLogging(t, args, getenv, io.Discard)
}

func startMainLogging(t *testing.T, args []string, getenv func(string) string, logs io.Writer) *instance.Instance {
	t.Helper()
	cfg, err := parseServe(append([]string{"--addr", "127.0.0.1:0"}, args...), getenv)
	require.NoError(t, err)
	m := &instance.Instance{Config: cfg, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	if err := m.Run(t.Context()); err != nil {
		_ = m.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	return m
}

func TestServeAnswersHealth(t *testing.T) {
	t.Parallel()
	m := startMain(t, nil, envOf())
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get("http://" + m.Addr() + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
}

func TestServeEndToEndMemstore(t *testing.T) {
	t.Parallel()
	testEndToEnd(t, nil, envOf())
}

// TestServeEndToEndRedis runs the same journey on real Redis (REDIS_URL,
// default the loopback one). A missing Redis fails the test.
func TestServeEndToEndRedis(t *testing.T) {
	t.Parallel()
	env := redisEnv(t, "wrtest-cmd")
	testEndToEnd(t, []string{"--rooms", "sale"}, env)

	// A second instance on the same Redis with other settings keeps the
	// live ones and says so.
	logs := &testenv.LogBuffer{}
	startMainLogging(t, []string{"--rooms", "sale", "--max-queue", "7"}, env, logs)
	require.Contains(t, logs.String(), "room exists with other settings")
	require.Contains(t, logs.String(), "max_queue.live=100000 max_queue.flags=7")
	require.Contains(t, logs.String(), "no --cookie-secret on a Redis store")

	// With one, nothing to warn of.
	logs = &testenv.LogBuffer{}
	startMainLogging(t, []string{"--rooms", "sale", "--cookie-secret", strings.Repeat("k", 32)}, env, logs)
	require.NotContains(t, logs.String(), "cookie-secret")
}

// testEndToEnd walks one user through the running command: enter, wait for
// the real admitter, order through the gate to an upstream, and find the
// token spent.
func testEndToEnd(t *testing.T, args []string, getenv func(string) string) {
	var orders atomic.Int64
	var idemKey atomic.Value
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		orders.Add(1)
		idemKey.Store(r.Header.Get("Idempotency-Key"))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"order_id":"o1"}`)
	}))
	t.Cleanup(up.Close)
	m := startMain(t, append([]string{"--upstream", up.URL}, args...), getenv)
	base := "http://" + m.Addr()
	user := fmt.Sprintf("user-%d", time.Now().UnixNano())

	body := call(t, "POST", base+"/queue/enter", user, "")
	require.Equal(t, "waiting", body["state"], body)
	require.EqualValues(t, 1, body["position"])

	// The admitter runs on the real clock: ask until admitted, within a bound.
	var token string
	eventually(t, 10*time.Second, user+" admitted", func() bool {
		body = call(t, "GET", base+"/queue/position", user, "")
		token, _ = body["token"].(string)
		return body["state"] == "admitted"
	})
	require.True(t, waitroom.ValidToken(token))

	body = call(t, "POST", base+"/orders", user, token)
	require.Equal(t, "o1", body["order_id"], body)
	require.EqualValues(t, 1, orders.Load())
	require.Equal(t, waitroom.IdempotencyKey("default", token), idemKey.Load())

	body = call(t, "POST", base+"/orders", user, token)
	require.Equal(t, map[string]any{"code": "ENTRY_TOKEN_NOT_FOUND", "message": "no live entry token"}, body["error"])
	require.EqualValues(t, 1, orders.Load())
}

func call(t *testing.T, method, url, user, token string) map[string]any {
	t.Helper()
	_, body := testenv.Request(t, method, url, user, token, "")
	return body
}

// redisEnv is the environment of a serve on the test Redis under a key
// prefix of its own, starting with name, removed after the test.
func redisEnv(t *testing.T, name string) func(string) string {
	redisURL := testenv.RedisURL()
	prefix := fmt.Sprintf("%s-%d", name, time.Now().UnixNano())
	t.Cleanup(func() { deleteKeys(t, redisURL, prefix) })
	return envOf("REDIS_URL", redisURL, "WAITROOM_REDIS_PREFIX", prefix)
}

// deleteKeys removes what a test left under prefix in the shared Redis.
func deleteKeys(t *testing.T, redisURL, prefix string) {
	client, err := redisstore.Open(redisURL)
	require.NoError(t, err)
	defer client.Close()
	// t.Context is done during cleanup.
	require.NoError(t, redisstore.DeletePrefix(context.Background(), client, prefix))
}

// TestGivenRedisStoreCountsLimitsInRedis: a server handed a Redis store
// (bench, loadtest --inproc) counts the per-user limit in Redis as serve
// does, so two instances share it. At 0.1/s a user's burst is one request
// and a share of half of it answers nothing locally: the first instance
// lets one through, and the second refuses the next; two in-process
// counts would let one through on each.
func TestGivenRedisStoreCountsLimitsInRedis(t *testing.T) {
	t.Parallel()
	redisURL := testenv.RedisURL()
	prefix := fmt.Sprintf("wrtest-cmd-limit-%d", time.Now().UnixNano())
	t.Cleanup(func() { deleteKeys(t, redisURL, prefix) })
	client, err := redisstore.Open(redisURL)
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	store := redisstore.New(client, redisstore.Options{Prefix: prefix})

	var bases []string
	for range 2 {
		cfg, err := parseServe([]string{"--addr", "127.0.0.1:0", "--instances", "2", "--user-rate-limit", "0.1", "--store-timeout", "30s"}, envOf())
		require.NoError(t, err)
		m := &instance.Instance{Config: cfg, Store: store, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		require.NoError(t, m.Run(t.Context()))
		t.Cleanup(func() { require.NoError(t, m.Close()) })
		bases = append(bases, "http://"+m.Addr())
	}
	first := mustDo(t, "POST", bases[0]+"/queue/enter", "limited", "", "")
	require.Equal(t, http.StatusOK, first.status, first.body)
	for _, base := range bases {
		r := mustDo(t, "POST", base+"/queue/enter", "limited", "", "")
		require.Equal(t, "RATE_LIMITED", r.code(), "%s: %v", base, r.body)
	}
}

// TestServeRefusesShardsWithoutCluster: --shards above 1 on the in-process
// store (or any store but a Redis Cluster) stops serve at start, with the
// code that says why, rather than running the room on one shard.
func TestServeRefusesShardsWithoutCluster(t *testing.T) {
	t.Parallel()
	var stderr testenv.LogBuffer
	code := run(t.Context(), []string{"serve", "--addr", "127.0.0.1:0", "--shards", "3"}, envOf(), io.Discard, &stderr)
	require.NotEqual(t, exitOK, code)
	require.Contains(t, stderr.String(), "SHARDS_NEED_CLUSTER")
	require.NotContains(t, stderr.String(), "waiting room listening")
	_, err := parseServe([]string{"--shards", "17"}, envOf())
	require.ErrorContains(t, err, `--shards="17": must be in [1, 16], got 17`)
	_, err = parseServe(nil, envOf("WAITROOM_SHARDS", "0"))
	require.ErrorContains(t, err, "must be in [1, 16], got 0")
}
