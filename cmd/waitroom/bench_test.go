package main

import (
	"bytes"
	"regexp"
	"strconv"
	"testing"
	"time"

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

// --webhooks both measures ENTER and STATUS with webhooks on and off on
// each store, every round in the report, with a ratio; the dead receiver
// was sent the rooms' user.admitted, so the side "on" really had them on
// and the outboxes written. Figures are not asserted; the slices are
// long enough for the dispatcher's first step after each start.
func TestBenchWebhooks(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"bench", "--webhooks", "both", "--autopipeline", "on", "--rounds", "2", "--slice", "200ms",
		"--clients", "4", "--waiting", "500", "--idle-rooms", "0"},
		envOf("REDIS_URL", testenv.RedisURL()), &stdout, &stderr)
	require.Equal(t, exitOK, code, "stderr:\n%s", stderr.String())
	out := stdout.String()
	require.Contains(t, out, "### ENTER and STATUS with webhooks on and off")
	require.Contains(t, out, "| store | ENTER/s off | ENTER/s on | ENTER on ÷ off | STATUS/s off | STATUS/s on | STATUS on ÷ off |")
	for _, store := range []string{"memstore", "redis"} {
		// Both sides of both operations, both ratios, and what the
		// receiver got: some request in the slices, user.admitted among all.
		summary := regexp.MustCompile(`(?m)^\| ` + store + ` \| \d+ \| \d+ \| \*\*\d+\.\d\d\*\* \(\S+\) \| \d+ \| \d+ \| \*\*\d+\.\d\d\*\* \(\S+\) \| \d+, \d+ \| [1-9]\d* in the slices; [1-9]\d* ` + "`user.admitted`" + ` in all;`)
		require.Regexp(t, summary, out, store)
		for round := 1; round <= 2; round++ {
			row := regexp.MustCompile(`(?m)^\| ` + store + ` \| ` + strconv.Itoa(round) + ` \| \d+ \| \d+ \| \d+\.\d\d \| \d+ \| \d+ \| \d+\.\d\d \| \d+ \|$`)
			require.Regexp(t, row, out, "%s round %d", store, round)
		}
	}
}

// Without --webhooks the run measures no webhooks, as before the flag;
// the environment variable sets it too, and is named when it is wrong.
func TestBenchWebhooksSetting(t *testing.T) {
	t.Parallel()
	c, err := parseBench(nil, envOf())
	require.NoError(t, err)
	require.False(t, c.WebhooksOn)
	require.False(t, c.WebhooksOff)
	c, err = parseBench(nil, envOf("WAITROOM_BENCH_WEBHOOKS", "on"))
	require.NoError(t, err)
	require.True(t, c.WebhooksOn)
	require.False(t, c.WebhooksOff)
	require.Zero(t, c.SlowReceiver, "dead by default")
	c, err = parseBench([]string{"--webhooks-receiver", "20ms"}, envOf())
	require.NoError(t, err)
	require.Equal(t, 20*time.Millisecond, c.SlowReceiver)
	_, err = parseBench(nil, envOf("WAITROOM_BENCH_WEBHOOKS", "always"))
	require.ErrorContains(t, err, `WAITROOM_BENCH_WEBHOOKS="always": off, on or both`)
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
		{[]string{"--webhooks", "sometimes"}, `--webhooks="sometimes": off, on or both`},
		{[]string{"--webhooks", ""}, `--webhooks="": off, on or both`},
		{[]string{"--webhooks", "ON"}, `--webhooks="ON": off, on or both`},
		{[]string{"--webhooks-receiver", "slow"}, `--webhooks-receiver="slow": dead, or how long the receiver takes to answer, 1ms to 9s`},
		{[]string{"--webhooks-receiver", "10s"}, `--webhooks-receiver="10s": dead, or how long`},
		{[]string{"--webhooks-receiver", "0s"}, `--webhooks-receiver="0s": dead, or how long`},
		{[]string{"--webhooks-receiver", "-5ms"}, `--webhooks-receiver="-5ms": dead, or how long`},
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
