package redisstore

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The counters the benchmarks charge Redis work with: a script's calls
// and time show in CommandStats, and redis-server's CPU only grows.
func TestServerCountersGrow(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newClient(t)
	cpu0, err := ServerCPU(ctx, c)
	require.NoError(t, err)
	require.Positive(t, cpu0)
	stats0, err := CommandStats(ctx, c)
	require.NoError(t, err)
	for range 200 {
		require.NoError(t, c.Eval(ctx, "return 1", nil).Err())
	}
	stats1, err := CommandStats(ctx, c)
	require.NoError(t, err)
	require.GreaterOrEqual(t, stats1["eval"].Calls-stats0["eval"].Calls, int64(200))
	cpu1, err := ServerCPU(ctx, c)
	require.NoError(t, err)
	require.GreaterOrEqual(t, cpu1, cpu0)

	require.Equal(t, "7", InfoField("# Server\r\nredis_version:7\r\nused_memory:12\r\n", "redis_version"))
	require.Empty(t, InfoField("used_memory:12\r\n", "used_cpu_sys"))
}
