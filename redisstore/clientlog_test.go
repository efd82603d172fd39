package redisstore

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/internal/testenv"
)

// TestClientLogThroughSlog: go-redis's own lines (here, failed dials to a
// port nobody listens on) reach the slog logger, each kind once a minute
// with the count of repeats, not once per dial on stderr.
func TestClientLogThroughSlog(t *testing.T) {
	t.Parallel()
	var logs testenv.LogBuffer
	cl := &clientLog{log: slog.New(slog.NewTextHandler(&logs, nil)), last: map[string]clientLine{}}
	const dialFailed = "redis: connection pool: failed to dial after %d attempts: %v"
	ctx := context.Background()
	for range 20 {
		cl.Printf(ctx, dialFailed, 1, "dial tcp 127.0.0.1:1: connect: connection refused")
	}
	cl.Printf(ctx, "redis: sentinel: new master=%q addr=%q", "mymaster", "127.0.0.1:6380")
	out := logs.String()
	require.Equal(t, 1, strings.Count(out, "failed to dial"), out)
	require.Contains(t, out, `level=WARN msg="redis client" detail="connection pool: failed to dial after 1 attempts: dial tcp 127.0.0.1:1: connect: connection refused"`)
	require.Contains(t, out, `detail="sentinel: new master=\"mymaster\" addr=\"127.0.0.1:6380\""`, "another kind of line is its own")

	// A minute on, the next one is logged with the count held back.
	cl.mu.Lock()
	line := cl.last[dialFailed]
	line.at = line.at.Add(-clientLogEvery)
	cl.last[dialFailed] = line
	cl.mu.Unlock()
	cl.Printf(ctx, dialFailed, 1, "refused")
	require.Contains(t, logs.String(), `detail="connection pool: failed to dial after 1 attempts: refused" repeated=19`)
}

// TestLogToReceivesRealDials: installed with LogTo, a client's failed dial
// to a real closed port arrives in slog. Not parallel: go-redis's logger is
// the process's.
func TestLogToReceivesRealDials(t *testing.T) {
	var logs testenv.LogBuffer
	LogTo(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { LogTo(slog.Default()) })
	addr := strings.TrimPrefix(testenv.UnreachableURL(t), "http://")
	c, err := Open("redis://" + addr + "/0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for range 5 {
		require.Error(t, c.Ping(ctx).Err())
	}
	require.Contains(t, logs.String(), `msg="redis client" detail="connection pool: failed to dial`)
	require.Equal(t, 1, strings.Count(logs.String(), "failed to dial"), logs.String())
}
