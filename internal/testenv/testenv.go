// Package testenv is what the tests of several packages share: the URLs of
// the real services they run against, a fresh PostgreSQL schema per test, a
// log sink that the server's goroutines may write to at once, and a
// loopback address nobody listens on.
//
// A service's URL comes from its environment variable, else the loopback
// default that scripts/test brings up; a service that does not answer
// fails the test, it never skips it.
package testenv

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"github.com/waitroom/waitroom"
)

// RedisURL is the tests' Redis: REDIS_URL, default the loopback one.
func RedisURL() string {
	return cmp.Or(os.Getenv("REDIS_URL"), "redis://127.0.0.1:6379/0")
}

// DatabaseURL is the tests' PostgreSQL: DATABASE_URL, default the
// loopback one with the database test.
func DatabaseURL() string {
	return cmp.Or(os.Getenv("DATABASE_URL"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
}

// AMQPURL is the tests' RabbitMQ: AMQP_URL, default the loopback one.
func AMQPURL() string {
	return cmp.Or(os.Getenv("AMQP_URL"), "amqp://guest:guest@127.0.0.1:5672/")
}

// Schema creates a PostgreSQL schema named prefix_RANDOM for one test and
// drops it, with everything in it, when the test ends: tests isolated by
// schema run in parallel on one database.
func Schema(tb testing.TB, prefix string) string {
	tb.Helper()
	schema := prefix + "_" + strings.ToLower(rand.Text())
	exec := func(sql string) {
		// The test's context is done by cleanup time.
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, DatabaseURL())
		require.NoError(tb, err, "PostgreSQL at DATABASE_URL must be running")
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		require.NoError(tb, err)
	}
	exec("CREATE SCHEMA " + schema)
	tb.Cleanup(func() { exec("DROP SCHEMA " + schema + " CASCADE") })
	return schema
}

// LogBuffer collects what the server's goroutines log, safe for concurrent
// writes.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// UnreachableURL is an http:// URL on a loopback port nobody listens on.
func UnreachableURL(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	addr := ln.Addr().String()
	require.NoError(tb, ln.Close())
	return "http://" + addr
}

// Request sends method url as user (X-User-Id), with token as the entry
// token (X-Entry-Token) unless empty and body unless empty, and returns the
// status and the decoded JSON answer.
func Request(tb testing.TB, method, url, user, token, body string) (int, map[string]any) {
	tb.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(tb.Context(), method, url, rd)
	require.NoError(tb, err)
	req.Header.Set("X-User-Id", user)
	if token != "" {
		req.Header.Set("X-Entry-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(tb, err)
	defer resp.Body.Close()
	var answer map[string]any
	require.NoError(tb, json.NewDecoder(resp.Body).Decode(&answer))
	return resp.StatusCode, answer
}

// Do sends req with client and returns the answer, its body read whole
// (and closed).
func Do(tb testing.TB, client *http.Client, req *http.Request) (*http.Response, string) {
	tb.Helper()
	resp, err := client.Do(req)
	require.NoError(tb, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(tb, err)
	return resp, string(body)
}

// Get is Do of a plain GET of url.
func Get(tb testing.TB, client *http.Client, url string) (*http.Response, string) {
	tb.Helper()
	req, err := http.NewRequestWithContext(tb.Context(), "GET", url, nil)
	require.NoError(tb, err)
	return Do(tb, client, req)
}

// RoomConfig reads room's live settings, the "from" of an UpdateRoom.
func RoomConfig(tb testing.TB, s waitroom.Store, room string) waitroom.RoomConfig {
	tb.Helper()
	cfg, err := s.RoomConfig(tb.Context(), room)
	require.NoError(tb, err)
	return cfg
}

// Stats reads room's counters.
func Stats(tb testing.TB, s waitroom.Store, room string) waitroom.Stats {
	tb.Helper()
	stats, err := s.Stats(tb.Context(), room)
	require.NoError(tb, err)
	return stats
}

// Unique is prefix and 12 random hex digits: a room, key or key prefix
// that no other test, nor another run, uses.
func Unique(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// AtOnce runs fn(0) … fn(n-1) on n goroutines released at one signal, so
// that they race for real, and returns when all have: a race test then
// reads every outcome fn recorded.
func AtOnce(n int, fn func(i int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			fn(i)
		})
	}
	close(start)
	wg.Wait()
}

// EntersAtOnce has users u0 … u(n-1) enter room at once (AtOnce) and
// returns the place each one got and each one's error.
func EntersAtOnce(ctx context.Context, s waitroom.Store, room string, n int) (positions []int64, errs []error) {
	positions, errs = make([]int64, n), make([]error, n)
	AtOnce(n, func(i int) {
		var st waitroom.Status
		st, errs[i] = s.Enter(ctx, room, fmt.Sprintf("u%d", i))
		positions[i] = st.Position
	})
	return positions, errs
}

// Dir is a new temporary directory holding files (path under it →
// content), its folders made as needed.
func Dir(tb testing.TB, files map[string]string) string {
	tb.Helper()
	dir := tb.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}
