// Package lograte keeps warnings that would come once per request to one
// a minute, with the count of those held back.
package lograte

import (
	"sync/atomic"
	"time"
)

// EveryMinute lets one event a minute through and counts the ones it held
// back, for warnings that would otherwise come once per request.
type EveryMinute struct {
	last    atomic.Int64 // unix nanoseconds of the last one let through
	skipped atomic.Int64
}

// Allow reports whether to log now, and how many were held back since the
// last time.
func (e *EveryMinute) Allow(now time.Time) (skipped int64, ok bool) {
	last := e.last.Load()
	if last != 0 && now.UnixNano()-last < int64(time.Minute) || !e.last.CompareAndSwap(last, now.UnixNano()) {
		e.skipped.Add(1)
		return 0, false
	}
	return e.skipped.Swap(0), true
}
