package redisstore

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// LogTo sends go-redis's own log lines (a failed dial, a Sentinel's switch
// of primary, a connection dropped with unread data) to log as warnings
// instead of bare stderr. A line that comes again (every dial while Redis
// is down) is logged once a minute, with how often it came meanwhile: the
// outage itself is logged where it is noticed (waitroom.GuardedStore).
// go-redis has one logger per process; the last call wins.
func LogTo(log *slog.Logger) {
	redis.SetLogger(&clientLog{log: log, last: map[string]clientLine{}})
}

// clientLogEvery is how often one kind of go-redis line is logged.
const clientLogEvery = time.Minute

// clientLog is go-redis's logger on top of slog. Lines are told apart by
// their format, a fixed set in go-redis's code, so the map stays small.
type clientLog struct {
	log  *slog.Logger
	mu   sync.Mutex
	last map[string]clientLine
}

type clientLine struct {
	at      time.Time
	repeats int
}

func (c *clientLog) Printf(ctx context.Context, format string, v ...any) {
	now := time.Now()
	c.mu.Lock()
	prev := c.last[format]
	if !prev.at.IsZero() && now.Sub(prev.at) < clientLogEvery {
		prev.repeats++
		c.last[format] = prev
		c.mu.Unlock()
		return
	}
	c.last[format] = clientLine{at: now}
	c.mu.Unlock()
	attrs := []any{"detail", strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")}
	if prev.repeats > 0 {
		attrs = append(attrs, "repeated", prev.repeats)
	}
	c.log.WarnContext(ctx, "redis client", attrs...)
}
