package loadtest

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// ServerFigures are what a load test learns from the server side, next
// to the Report: the queue's length once everyone had entered, and
// each admission tick's size against its quota.
type ServerFigures struct {
	// Source: "admitter" (in process: the admitter's hook, exact) or
	// "admin counter" (--url: the store's admitted counter read every
	// 10 ms through the admin API); "" when not known.
	Source string `json:"source"`
	// QueueAtAllEntered is the store's queue length when every user had
	// its entry answer and before any admission (--check-positions); -1
	// when not measured.
	QueueAtAllEntered int64   `json:"queue_at_all_entered"`
	Rate              float64 `json:"rate"`
	Quota             int     `json:"tick_quota"`
	// MakesUpNoShows says the run has users who never confirm (no-shows
	// or vanished): the room then admits one more for each, so a tick may
	// hold up to twice the quota.
	MakesUpNoShows bool  `json:"makes_up_no_shows"`
	Ticks          int   `json:"ticks"` // resolved ones
	Admitted       int64 `json:"admitted"`
	TickMax        int   `json:"tick_max"`
	OverQuota      int   `json:"ticks_over_quota"`
	// Exact says each tick was seen alone (the admitter's hook). Readings
	// of the admin counter are not exact: one may hold a late tick and the
	// next, so a reading above the quota is no proof of a burst and is
	// not reported as a violation.
	Exact bool `json:"exact"`
	// PerSecond is the sustained rate from the first admission to the
	// last, without the first tick (it holds what the bucket saved up).
	PerSecond float64 `json:"per_second"`
	Ratio     float64 `json:"per_second_ratio"`
	// LateTicks counts gaps of more than 1.5 slices between admissions
	// while users waited, and MaxGapMS is the longest: a gap beyond two
	// slices loses rate by design (a tick admits at most its quota and
	// carries at most one slice), so these explain a rate that falls short.
	LateTicks  int      `json:"late_ticks"`
	MaxGapMS   float64  `json:"max_gap_ms"`
	Violations []string `json:"violations"`

	// Slice is the room's admission slice, which late ticks are measured
	// against.
	Slice time.Duration `json:"-"`
	// CheckQueue compares QueueAtAllEntered with the users given a place.
	CheckQueue bool `json:"-"`
}

// Check lists the server-side invariants rep and f break in f.Violations.
func (f *ServerFigures) Check(rep *Report) {
	f.Violations = []string{}
	if f.Exact && f.OverQuota > 0 {
		f.Violations = append(f.Violations, fmt.Sprintf("%d admission ticks above the limit of %d (max %d)", f.OverQuota, f.tickLimit(), f.TickMax))
	}
	if f.CheckQueue && f.QueueAtAllEntered >= 0 && f.QueueAtAllEntered != int64(rep.Queue.Entered) {
		f.Violations = append(f.Violations, fmt.Sprintf("the store's queue held %d users once all had entered, not the %d given a place", f.QueueAtAllEntered, rep.Queue.Entered))
	}
}

// tickLimit is the most one tick may admit: the quota, twice it while
// no-shows are made up.
func (f *ServerFigures) tickLimit() int {
	if f.MakesUpNoShows {
		return 2 * f.Quota
	}
	return f.Quota
}

// WriteText prints the figures after Report.WriteText's.
func (f *ServerFigures) WriteText(w io.Writer) {
	if f.Source == "" {
		return
	}
	if f.Exact {
		fmt.Fprintf(w, "\nserver     admissions from %s: %d in %d ticks; per tick max %d, quota %d", f.Source, f.Admitted, f.Ticks, f.TickMax, f.Quota)
	} else {
		fmt.Fprintf(w, "\nserver     admissions from %s: %d in %d readings; per reading max %d, quota %d per tick; %d readings above it (a reading may hold two ticks)",
			f.Source, f.Admitted, f.Ticks, f.TickMax, f.Quota, f.OverQuota)
	}
	fmt.Fprintf(w, "\n           per second %.1f", f.PerSecond)
	if f.Ratio > 0 {
		fmt.Fprintf(w, " = %.4f × the rate %g/s", f.Ratio, f.Rate)
	}
	fmt.Fprintf(w, "\n           gaps between admissions over 1.5 slices: %d, longest %.0fms\n", f.LateTicks, f.MaxGapMS)
	if f.QueueAtAllEntered >= 0 {
		fmt.Fprintf(w, "           queue length once all had entered: %d\n", f.QueueAtAllEntered)
	}
	if len(f.Violations) == 0 {
		fmt.Fprintln(w, "           server-side violations: none")
		return
	}
	for _, v := range f.Violations {
		fmt.Fprintf(w, "           VIOLATION: %s\n", v)
	}
}

// TickLog keeps every admission tick's (or counter reading's) time and
// size. The zero value is ready; it is safe for concurrent use.
type TickLog struct {
	mu    sync.Mutex
	at    []time.Time
	sizes []int
}

// Add logs n users admitted at at.
func (t *TickLog) Add(at time.Time, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.at = append(t.at, at)
	t.sizes = append(t.sizes, n)
}

// Summarize adds the log's figures to f.
func (t *TickLog) Summarize(f *ServerFigures) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range t.sizes {
		f.Admitted += int64(n)
		f.Ticks++
		f.TickMax = max(f.TickMax, n)
		if f.Quota > 0 && n > f.tickLimit() {
			f.OverQuota++
		}
	}
	for i := 1; i < len(t.at); i++ {
		gap := t.at[i].Sub(t.at[i-1])
		f.MaxGapMS = max(f.MaxGapMS, float64(gap.Microseconds())/1000)
		if f.Slice > 0 && gap > f.Slice*3/2 {
			f.LateTicks++
		}
	}
	if len(t.at) >= 2 {
		span := t.at[len(t.at)-1].Sub(t.at[0]).Seconds()
		if span >= 1 {
			f.PerSecond = float64(f.Admitted-int64(t.sizes[0])) / span
			if f.Rate > 0 {
				f.Ratio = f.PerSecond / f.Rate
			}
		}
	}
}
