package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/waitroom/waitroom/internal/testenv"
)

// A miniature run of every part of the benchmark; the figures themselves
// are not asserted (no test asserts a time), only that each table is there.
func TestBenchSmall(t *testing.T) {
	t.Parallel()
	redisURL := testenv.RedisURL()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"bench", "--rounds", "1", "--slice", "50ms", "--clients", "4", "--waiting", "500",
		"--idle-rooms", "20", "--idle-busy", "2", "--idle-for", "1s", "--idle-marks", "3s,4s"},
		envOf("REDIS_URL", redisURL), &stdout, &stderr)
	require.Equal(t, exitOK, code, "stderr:\n%s", stderr.String())
	out := stdout.String()
	for _, want := range []string{"### Machine", "| memstore |", "| redis |", "| redis, no autopipeline |", "ENTER ÷ trivial",
		"Redis with automatic pipelining ÷ without",
		"| every room idle, 2 s–3 s | 20 | 0 |", "| every room idle, 3 s–4 s | 20 | 0 |", "| 2 rooms busy | 20 | 2 |",
		"| command | every room idle, 2 s–3 s | every room idle, 3 s–4 s | 2 rooms busy |", "| fcall |",
		"against baseline ones", "| enter (new place) | ", "| admit, per admitted user", ": hot) |", "Users per admit call, hot: room 14.0",
		"PollLoad(500, 140/s)", "| enter (new place) | FCALL |", "| admit (quota 100) | FCALL |",
		"| complete | FCALL |", "| leave | FCALL |", "bytes per waiting user"} {
		require.Contains(t, out, want)
	}
}

func TestBenchUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--stores", "mongo"}, `unknown store "mongo"`},
		{[]string{"--redis-url", "redis://10.1.2.3:6379"}, "loopback only"},
		{[]string{"--rounds", "0"}, `--rounds="0": must be in [1, 1000]`},
		{[]string{"--autopipeline", "sometimes"}, "on, off or both"},
		{[]string{"--idle-rooms", "5", "--idle-busy", "6"}, "at most --idle-rooms (5)"},
		{[]string{"--idle-instances", "0"}, `--idle-instances="0": must be in [1, 100]`},
		{[]string{"--idle-for", "10ms"}, "--idle-for"},
		{[]string{"--idle-marks", "5s,5s"}, "5s: each must come after 5s"},
		{[]string{"--idle-marks", "2s"}, "each must come after 2s"},
		{[]string{"--idle-marks", "soon"}, `"soon" is no duration`},
	} {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), append([]string{"bench"}, tt.args...), envOf(), &stdout, &stderr)
		require.Equal(t, exitUsage, code, tt.want)
		require.Contains(t, stderr.String(), tt.want)
	}
}
