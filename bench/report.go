package bench

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/waitroom/waitroom"
)

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

// spread is ratios' median, marked with mark, and their range; "n/a" when
// no round had both sides (a slice on a starved machine answered nothing).
func spread(ratios []float64, mark string) string {
	if len(ratios) == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%s%.2f%s (%.2f–%.2f)", mark, median(ratios), mark, slices.Min(ratios), slices.Max(ratios))
}

// roundList is every round's figure, in the order run.
func roundList(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, ", ")
}

// WriteMarkdown prints the run's figures as the tables of BENCHMARKS.md.
func (b *Result) WriteMarkdown(w io.Writer) {
	c := b.cfg
	fmt.Fprintf(w, "### Machine\n\n| | |\n|---|---|\n")
	fmt.Fprintf(w, "| CPUs (nproc) | %d |\n| CPU | %s |\n| Go | %s %s/%s |\n", runtime.NumCPU(), cpuModel(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if c.Redis {
		fmt.Fprintf(w, "| Redis | %s at %s |\n", b.redisVersion, redactURL(c.RedisURL))
	}
	fmt.Fprintf(w, "| load average (1, 5, 15 min) | start %s; end %s |\n", b.loadStart, b.loadEnd)
	fmt.Fprintf(w, "| run | %d rounds × %s per side, %d keep-alive clients, %d waiting |\n\n", c.Rounds, c.Slice, c.Clients, c.Waiting)

	fmt.Fprintf(w, "### HTTP throughput against a trivial handler in the same server\n\n")
	fmt.Fprintf(w, "Requests/s, median over the rounds; a ratio is the median of the rounds' own ratios. The trivial handler writes `{\"ok\":true}` behind the same `server.Server` (routing, metrics, recovery), so the ratio is what the room's handler and its store cost. The clients run in this process, so their own cost falls on both sides and raises the ratio, the more the more clients; `scripts/wrk-rounds.sh` measures the server alone, from outside.\n\n")
	fmt.Fprintf(w, "| store | ENTER/s | STATUS/s (%d waiting) | trivial/s | ENTER ÷ trivial | STATUS ÷ trivial | non-2xx |\n|---|---:|---:|---:|---:|---:|---:|\n", c.Waiting)
	for _, h := range b.http {
		er, sr := ratios(h.enter, h.trivial), ratios(h.status, h.trivial)
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.0f | %s | %s | %d |\n", h.store,
			median(h.enter), median(h.status), median(h.trivial), spread(er, "**"), spread(sr, ""), h.errors)
	}

	for _, h := range b.http {
		if h.store != "redis" {
			continue
		}
		for _, p := range b.http {
			if p.store == "redis, no autopipeline" {
				er, sr := ratios(h.enter, p.enter), ratios(h.status, p.status)
				fmt.Fprintf(w, "\nRedis with automatic pipelining ÷ without, the same rounds: ENTER %s, STATUS %s.\n",
					spread(er, "**"), spread(sr, ""))
			}
		}
	}

	b.writeWebhooks(w)

	fmt.Fprintf(w, "\n### Poll load at %d waiting against STATUS capacity\n\n", c.Waiting)
	load := waitroom.PollLoad(int64(c.Waiting), c.Rate)
	fmt.Fprintf(w, "| store | PollLoad(%d, %g/s) | STATUS capacity | share (≤ 0.5) |\n|---|---:|---:|---:|\n", c.Waiting, c.Rate)
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
			how = "MEMORY USAGE of the room's keys"
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.0f |\n", m.store, m.users, how, float64(m.after-m.before)/float64(m.users))
	}
	b.writeBaseline(w)
	b.writeIdle(w)
}
