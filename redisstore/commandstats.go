package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// CommandStat is one command's counters in INFO commandstats.
type CommandStat struct {
	Calls int64 // calls so far
	Usec  int64 // µs of server time they took
}

// CommandStats reads INFO commandstats of the node client talks to, keyed
// by lower-case command name ("fcall"): the server's own time per
// script, which the benchmark and this package's Benchmark functions
// report. Counters only grow, so a figure is the difference of two reads.
func CommandStats(ctx context.Context, client redis.UniversalClient) (map[string]CommandStat, error) {
	info, err := client.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	stats := make(map[string]CommandStat)
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		cmd, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		var s CommandStat
		for kv := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				s.Calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				s.Usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		stats[cmd] = s
	}
	return stats, nil
}

// ServerCPU reads the CPU redis-server has used so far, system and user
// (INFO cpu), of the node client talks to: what the benchmark and this
// package's Benchmark functions charge a Redis operation with. Like the
// command counters it only grows.
func ServerCPU(ctx context.Context, client redis.UniversalClient) (time.Duration, error) {
	info, err := client.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	var seconds float64
	for _, field := range []string{"used_cpu_sys", "used_cpu_user"} {
		f, err := strconv.ParseFloat(InfoField(info, field), 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu %s: %w", field, err)
		}
		seconds += f
	}
	return time.Duration(seconds * float64(time.Second)), nil
}

// InfoField is the value of field in an INFO reply; "" when it has none.
func InfoField(info, field string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}
