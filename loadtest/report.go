package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Report is what a run measured and checked. It marshals to JSON as is.
type Report struct {
	RunID          string    `json:"run_id"`
	URL            string    `json:"url"`
	Room           string    `json:"room"`
	Users          int       `json:"users"`
	ArrivalSeconds float64   `json:"arrival_seconds"` // 0: all at once
	Seed           uint64    `json:"seed"`
	Started        time.Time `json:"started"`
	ElapsedSeconds float64   `json:"elapsed_seconds"`
	// Complete says every user finished its journey before the run
	// stopped.
	Complete bool `json:"complete"`

	Outcomes  Outcomes  `json:"outcomes"`
	Endpoints Endpoints `json:"endpoints"`
	// ClientWait is how long requests waited for one of the Concurrency
	// slots: when it is high, the client was the bottleneck.
	ClientWait Latency        `json:"client_wait"`
	Queue      QueueStats     `json:"queue"`
	Admissions AdmissionStats `json:"admissions"`
	Orders     OrderStats     `json:"orders"`
	// Draw is the room's opening draw (OpensIn), as GET
	// /rooms/{room}/draw published it after the run; nil without one.
	Draw *DrawFigures `json:"draw,omitempty"`

	// Notes explain what was not measured or how.
	Notes []string `json:"notes"`
	// Violations are broken invariants; any makes Run return an error.
	Violations []string `json:"violations"`

	// charts holds the series only the HTML report draws.
	charts *charts
}

// Outcomes counts how the users' journeys ended; they add up to Users.
type Outcomes struct {
	Ordered     int `json:"ordered"`       // placed an order
	SoldOut     int `json:"sold_out"`      // ordered and were told SOLD_OUT
	NoOrder     int `json:"no_order"`      // admitted, never ordered (NoOrderShare)
	Left        int `json:"left"`          // left the queue (LeaveShare)
	Abandoned   int `json:"abandoned"`     // stopped polling without leaving (VanishShare)
	TurnedAway  int `json:"turned_away"`   // QUEUE_FULL or ROOM_CLOSED at entry
	Failed      int `json:"failed"`        // gave up after unexpected answers
	ToldSoldOut int `json:"told_sold_out"` // told sold_out in the queue or SOLD_OUT at entry, without an order
	Unfinished  int `json:"unfinished"`    // still on their way when the run stopped
}

// Total is the sum of all outcomes.
func (o Outcomes) Total() int {
	return o.Ordered + o.SoldOut + o.NoOrder + o.Left + o.Abandoned + o.TurnedAway + o.Failed + o.Unfinished + o.ToldSoldOut
}

// Endpoints holds the figures of each API call.
type Endpoints struct {
	Enter  EndpointStats `json:"enter"`
	Status EndpointStats `json:"status"`
	Leave  EndpointStats `json:"leave"`
	Order  EndpointStats `json:"order"`
}

func (e *Endpoints) byEndpoint() [numEndpoints]*EndpointStats {
	return [numEndpoints]*EndpointStats{&e.Enter, &e.Status, &e.Leave, &e.Order}
}

// EndpointStats are one endpoint's figures. Latency runs from sending the
// request to reading the whole answer, without the wait for a slot.
type EndpointStats struct {
	Requests  int64   `json:"requests"`
	PerSecond float64 `json:"per_second"` // over the whole run
	Latency   Latency `json:"latency"`
	// Refusals counts the answers other than 2xx by code (transport
	// failures as TRANSPORT_ERROR or TIMEOUT).
	Refusals map[string]int `json:"refusals,omitempty"`
	// Unexpected counts those of Refusals that are errors, by code.
	Unexpected map[string]int `json:"unexpected,omitempty"`
}

// Latency is a distribution in milliseconds, recorded at µs resolution.
type Latency struct {
	P50MS float64 `json:"p50_ms"`
	P90MS float64 `json:"p90_ms"`
	P99MS float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
}

// QueueStats describe the entries.
type QueueStats struct {
	// Entered counts users given a place (or their token) at entry.
	Entered int `json:"entered"`
	// AllEnteredSeconds is when the last user had its entry answer; 0 if
	// some never did.
	AllEnteredSeconds float64 `json:"all_entered_seconds"`
	// Reentries counts users who entered again after a NOT_IN_QUEUE status
	// (the room had dropped them), apart from their first entry.
	Reentries int `json:"reentries"`
	// PeakPosition is the largest position any answer gave: the longest
	// queue seen.
	PeakPosition int64 `json:"peak_position"`
	// PositionsChecked says the entry positions were checked to be
	// exactly 1..Entered (Config.CheckPositions); PositionsOK is the
	// result.
	PositionsChecked bool `json:"positions_checked"`
	PositionsOK      bool `json:"positions_ok"`
}

// AdmissionStats describe the admissions: their pacing, the wait for them
// and how well the ETA at entry foretold it.
type AdmissionStats struct {
	// Source of the admission times: "server" (the admitter's hook, via
	// Config.Admissions), "client" (each user's first "admitted" answer,
	// late by up to one poll interval), or "admin counter" (RunWatched:
	// the pacing figures from the store's counter, read every 10 ms; the
	// waits still from the users' answers).
	Source string `json:"source"`
	// Admitted counts the run's users that saw their admission.
	Admitted int `json:"admitted"`
	// Per 100 ms slice and per whole second from the first admission:
	// the most in one and the mean. The per-second mean is the sustained
	// rate from the first admission to the last.
	PerSliceMax    int     `json:"per_100ms_max"`
	PerSliceMean   float64 `json:"per_100ms_mean"`
	PerSecondMax   int     `json:"per_second_max"`
	PerSecondMean  float64 `json:"per_second_mean"`
	Rate           float64 `json:"rate"`             // configured; 0: unknown
	PerSecondRatio float64 `json:"per_second_ratio"` // PerSecondMean / Rate; 0: unknown
	// Wait from the entry answer to the admission, of users who queued.
	WaitP50S float64 `json:"wait_p50_s"`
	WaitP99S float64 `json:"wait_p99_s"`
	WaitMaxS float64 `json:"wait_max_s"`
	// ETA error: the ETA given at entry minus the real wait, in seconds;
	// positive means the ETA promised a longer wait than it was.
	ETAUsers        int     `json:"eta_users"`
	ETAErrorMeanS   float64 `json:"eta_error_mean_s"`
	ETAAbsErrorMean float64 `json:"eta_abs_error_mean_s"`
	ETAAbsErrorP90  float64 `json:"eta_abs_error_p90_s"`
	// Relative error |ETA − wait| ÷ wait of the ETA in each user's first
	// answer, and the share of waits inside that answer's
	// [eta_low_seconds, eta_high_seconds].
	ETARelErrorP50  float64 `json:"eta_rel_error_p50"`
	ETARelErrorP90  float64 `json:"eta_rel_error_p90"`
	ETAInRangeShare float64 `json:"eta_in_range_share"`
	// The same by wait: a relative error on a wait of a few seconds says
	// little, so users who waited LongWait or more are judged by the
	// relative error, and those who waited less by the absolute one.
	ETAUsers30s         int     `json:"eta_users_30s"`
	ETARelErrorP50Long  float64 `json:"eta_rel_error_p50_30s"`
	ETARelErrorP90Long  float64 `json:"eta_rel_error_p90_30s"`
	ETAAbsErrorP90Short float64 `json:"eta_abs_error_p90_short_s"`
}

// LongWait splits the ETA figures by wait: eta_rel_error_p50_30s and
// eta_rel_error_p90_30s are of waits this long or longer,
// eta_abs_error_p90_short_s of the shorter ones.
const LongWait = 30 * time.Second

// DrawFigures are a scheduled opening's: how many early arrivals were
// placed, and how long the placing took in the store.
type DrawFigures struct {
	State    string `json:"state"`
	Order    string `json:"prequeue_order"`
	Entrants int64  `json:"entrants"`
	DrawMS   int64  `json:"draw_ms"`
}

// OrderStats compare the orders with the stock.
type OrderStats struct {
	Created int `json:"created"` // users whose order was placed
	// PerSecond is the orders placed per second from the first admission
	// to the last order.
	PerSecond float64 `json:"per_second"`
	SoldOut   int     `json:"sold_out"`
	// AdmittedWithoutStock are the users admitted who then found nothing
	// to buy (SOLD_OUT at the order): 0 when the room tracks the stock
	// (one unit per buyer).
	AdmittedWithoutStock int `json:"admitted_without_stock"`
	Stock                int `json:"stock"` // 0: unknown
	// Oversold says more orders were placed than there was stock.
	Oversold bool `json:"oversold"`
}

// Admission slices of the report, as the design's admission tick.
const (
	admissionSlice = 100 * time.Millisecond
	maxNamedUsers  = 5 // users named in one violation
	// slotWaitWorthNoting is the p99 wait for an in-flight slot beyond
	// which the report says the client limited the load.
	slotWaitWorthNoting = 100 * time.Millisecond
)

func (r *runner) report(end time.Time) *Report {
	elapsed := end.Sub(r.start)
	rep := &Report{
		RunID:          r.cfg.RunID,
		URL:            r.cfg.URL,
		Room:           r.cfg.Room,
		Users:          len(r.users),
		ArrivalSeconds: r.cfg.Arrival.Seconds(),
		Seed:           r.cfg.Seed,
		Started:        r.start,
		ElapsedSeconds: elapsed.Seconds(),
		Notes:          []string{},
		Violations:     []string{},
	}
	for i := range r.users {
		u := &r.users[i]
		switch u.outcome {
		case outcomeOrdered:
			rep.Outcomes.Ordered++
		case outcomeSoldOut:
			rep.Outcomes.SoldOut++
		case outcomeNoOrder:
			rep.Outcomes.NoOrder++
		case outcomeLeft:
			rep.Outcomes.Left++
		case outcomeAbandoned:
			rep.Outcomes.Abandoned++
		case outcomeTurnedAway:
			rep.Outcomes.TurnedAway++
		case outcomeFailed:
			rep.Outcomes.Failed++
		case outcomeToldSold:
			rep.Outcomes.ToldSoldOut++
		default:
			rep.Outcomes.Unfinished++
		}
	}
	rep.Complete = rep.Outcomes.Unfinished == 0

	r.reportEndpoints(rep, elapsed)
	r.reportQueue(rep)
	r.reportAdmissions(rep, end)
	r.reportOrders(rep)
	if r.cfg.OpensIn > 0 {
		r.reportDraw(rep)
	}
	return rep
}

func (r *runner) reportEndpoints(rep *Report, elapsed time.Duration) {
	for ep, stats := range rep.Endpoints.byEndpoint() {
		rec := r.endpoints[ep]
		rec.mu.Lock()
		stats.Requests = rec.hist.TotalCount()
		stats.PerSecond = float64(stats.Requests) / max(elapsed.Seconds(), 1e-9)
		stats.Latency = latencyOf(rec.hist)
		if len(rec.codes) > 0 {
			stats.Refusals = maps.Clone(rec.codes)
		}
		if len(rec.unexpected) > 0 {
			stats.Unexpected = maps.Clone(rec.unexpected)
		}
		rec.mu.Unlock()
		for _, code := range slices.Sorted(maps.Keys(stats.Unexpected)) {
			rep.Violations = append(rep.Violations,
				fmt.Sprintf("unexpected answer: %s %s ×%d", endpointNames[ep], code, stats.Unexpected[code]))
		}
	}
	r.clientWait.mu.Lock()
	rep.ClientWait = latencyOf(r.clientWait.hist)
	r.clientWait.mu.Unlock()

	// A long wait for a slot means requests went out later than the users
	// meant to send them: the server was offered less load than the crowd
	// makes.
	if w := rep.ClientWait.P99MS; w >= slotWaitWorthNoting.Seconds()*1000 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("requests waited for one of the %d in-flight slots (p99 %s): the client held the load back; a higher Concurrency offers the server more", r.cfg.Concurrency, millis(w)))
	}
}

func latencyOf(h *hdrhistogram.Histogram) Latency {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Latency{
		P50MS: ms(h.ValueAtQuantile(50)),
		P90MS: ms(h.ValueAtQuantile(90)),
		P99MS: ms(h.ValueAtQuantile(99)),
		MaxMS: ms(h.Max()),
	}
}

func (r *runner) reportQueue(rep *Report) {
	q := &rep.Queue
	q.AllEnteredSeconds = time.Duration(r.allEnteredAt.Load()).Seconds()
	for i := range r.users {
		u := &r.users[i]
		if u.entered {
			q.Entered++
		}
		q.Reentries += u.reentries
		q.PeakPosition = max(q.PeakPosition, u.maxPos)
	}
}

// checkPositions reports whether the positions given at entry are exactly
// 1..K for the K users who got one, with a bitset of K bits.
func (r *runner) checkPositions() (ok bool, problem string) {
	k := 0
	for i := range r.users {
		if r.users[i].entryPos > 0 {
			k++
		}
	}
	seen := make([]uint64, k/64+1)
	for i := range r.users {
		u := &r.users[i]
		p := u.entryPos
		switch {
		case p == 0:
			continue
		case p > int64(k):
			return false, fmt.Sprintf("%s was given position %d, beyond the %d users who queued", u.id, p, k)
		case seen[p/64]&(1<<(p%64)) != 0:
			return false, fmt.Sprintf("position %d was given twice (%s is one of them)", p, u.id)
		}
		seen[p/64] |= 1 << (p % 64)
	}
	// k distinct positions in 1..k: all of them.
	return true, ""
}

func (r *runner) reportAdmissions(rep *Report, end time.Time) {
	a := &rep.Admissions
	a.Rate = r.cfg.Rate
	index := make(map[string]int, len(r.users))
	for i := range r.users {
		index[r.users[i].id] = i
		if r.users[i].admitted {
			a.Admitted++
		}
	}

	// When each user was admitted, and the room's admissions for pacing.
	admittedAt := make([]time.Duration, len(r.users))
	for i := range r.users {
		admittedAt[i] = -1
	}
	var pacing []time.Duration
	serverCounts := make(map[int]int)
	if r.cfg.Admissions != nil {
		events := r.cfg.Admissions.between(r.cfg.Room, r.start, end)
		for _, ev := range events {
			at := ev.At.Sub(r.start)
			pacing = append(pacing, at)
			if i, ok := index[ev.User]; ok {
				serverCounts[i]++
				if admittedAt[i] < 0 {
					admittedAt[i] = at
				}
			}
		}
		if len(serverCounts) == 0 && a.Admitted > 0 {
			rep.Notes = append(rep.Notes, "the admission recorder saw none of this run's admissions (is it fed by the admitter of this room?); using the times users saw")
			pacing = nil
		}
	}
	if len(serverCounts) > 0 {
		a.Source = "server"
	} else {
		a.Source = "client"
		rep.Notes = append(rep.Notes, "admission times are when users first saw \"admitted\", late by up to one poll interval: the pacing figures are rougher than the server's")
		for i := range r.users {
			if r.users[i].admitted {
				admittedAt[i] = r.users[i].admittedAt
				pacing = append(pacing, admittedAt[i])
			}
		}
	}
	slices.Sort(pacing)
	a.PerSliceMax, a.PerSliceMean = perBucket(pacing, admissionSlice)
	a.PerSecondMax, _ = perBucket(pacing, time.Second)
	sustained, ok := sustainedRate(pacing)
	a.PerSecondMean = sustained
	switch {
	case r.cfg.Rate == 0:
		rep.Notes = append(rep.Notes, "the room's rate is unknown (Config.Rate 0): admissions per second are not compared with it")
	case !ok:
		rep.Notes = append(rep.Notes, "admissions spanned less than a second: the per-second rate is not compared with the room's")
	default:
		a.PerSecondRatio = sustained / r.cfg.Rate
	}

	// Violations: a user admitted twice, by the server's record or by
	// two different tokens it was shown. A user the room dropped and who
	// entered again may rightly be admitted again: its first token
	// expired unconfirmed (a no-show), which is what NOT_IN_QUEUE said.
	var twice []string
	for i := range r.users {
		if r.users[i].reentries == 0 && (serverCounts[i] > 1 || r.users[i].otherToken != "") {
			twice = append(twice, r.users[i].id)
		}
	}
	if len(twice) > 0 {
		rep.Violations = append(rep.Violations, fmt.Sprintf("%d users admitted twice (two different tokens): %s", len(twice), names(twice)))
	}

	// Waits and ETA errors of the users who queued and were admitted.
	var samples []etaSample
	for i := range r.users {
		u := &r.users[i]
		if u.entryPos == 0 || admittedAt[i] < 0 {
			continue
		}
		samples = append(samples, etaSample{ETA: u.entryETA, Low: u.entryLow, High: u.entryHigh, Wait: admittedAt[i] - u.enteredAt})
	}
	waits := a.judgeETA(samples)
	var firstAdmission time.Duration = -1
	for _, at := range pacing {
		if firstAdmission < 0 || at < firstAdmission {
			firstAdmission = at
		}
	}
	r.firstAdmission = firstAdmission

	r.reportPositions(rep, pacing)
	rep.charts = r.chartsOf(rep, end, pacing, admittedAt, waits)
}

func (r *runner) reportPositions(rep *Report, admissions []time.Duration) {
	if !r.cfg.CheckPositions {
		return
	}
	allEntered := time.Duration(r.allEnteredAt.Load())
	switch {
	case allEntered == 0:
		rep.Notes = append(rep.Notes, "positions not checked: not every user had its entry answer")
		return
	case len(admissions) > 0 && admissions[0] < allEntered:
		rep.Notes = append(rep.Notes, fmt.Sprintf("positions not checked: admissions began %.2fs into the run, before every user had entered (%.2fs); start admitting from OnAllEntered", admissions[0].Seconds(), allEntered.Seconds()))
		return
	}
	ok, problem := r.checkPositions()
	rep.Queue.PositionsChecked, rep.Queue.PositionsOK = true, ok
	if !ok {
		rep.Violations = append(rep.Violations, "positions at entry are not a permutation of 1.."+fmt.Sprint(rep.Queue.Entered)+": "+problem)
	}
}

func (r *runner) reportOrders(rep *Report) {
	o := &rep.Orders
	o.Stock = r.cfg.Stock
	o.SoldOut = rep.Outcomes.SoldOut
	o.AdmittedWithoutStock = rep.Outcomes.SoldOut
	var lastOrder time.Duration
	for i := range r.users {
		if r.users[i].created {
			o.Created++
			lastOrder = max(lastOrder, r.users[i].orderedAt)
		}
	}
	if span := lastOrder - r.firstAdmission; r.firstAdmission >= 0 && span > 0 {
		o.PerSecond = float64(o.Created) / span.Seconds()
	}
	if r.cfg.Stock == 0 {
		rep.Notes = append(rep.Notes, "the stock is unknown (Config.Stock 0): the oversell check is skipped")
		return
	}
	if o.Created > o.Stock {
		o.Oversold = true
		rep.Violations = append(rep.Violations, fmt.Sprintf("oversold: %d orders placed for a stock of %d", o.Created, o.Stock))
	}
}

// etaSample is one queued user's first answer (its ETA and range) and the
// wait it then had until its admission.
type etaSample struct {
	ETA, Low, High, Wait time.Duration
}

// judgeETA sets the wait and ETA figures from the samples and returns
// the waits in seconds, sorted.
func (a *AdmissionStats) judgeETA(samples []etaSample) (waits []float64) {
	var absErrs, relErrs, relErrsLong, absErrsShort []float64
	var errSum, absSum float64
	inRange := 0
	for _, s := range samples {
		wait := s.Wait.Seconds()
		waits = append(waits, wait)
		e := s.ETA.Seconds() - wait
		errSum += e
		absSum += math.Abs(e)
		absErrs = append(absErrs, math.Abs(e))
		if wait > 0 {
			relErrs = append(relErrs, math.Abs(e)/wait)
		}
		if s.Wait >= LongWait {
			relErrsLong = append(relErrsLong, math.Abs(e)/wait)
		} else {
			absErrsShort = append(absErrsShort, math.Abs(e))
		}
		if s.Wait >= s.Low && s.Wait <= s.High {
			inRange++
		}
	}
	for _, v := range [][]float64{waits, absErrs, relErrs, relErrsLong, absErrsShort} {
		slices.Sort(v)
	}
	a.WaitP50S, a.WaitP99S, a.WaitMaxS = quantile(waits, 0.5), quantile(waits, 0.99), quantile(waits, 1)
	a.ETARelErrorP50, a.ETARelErrorP90 = quantile(relErrs, 0.5), quantile(relErrs, 0.9)
	a.ETAUsers30s = len(relErrsLong)
	a.ETARelErrorP50Long, a.ETARelErrorP90Long = quantile(relErrsLong, 0.5), quantile(relErrsLong, 0.9)
	a.ETAAbsErrorP90Short = quantile(absErrsShort, 0.9)
	if n := len(samples); n > 0 {
		a.ETAUsers = n
		a.ETAErrorMeanS = errSum / float64(n)
		a.ETAAbsErrorMean = absSum / float64(n)
		a.ETAAbsErrorP90 = quantile(absErrs, 0.9)
		a.ETAInRangeShare = float64(inRange) / float64(n)
	}
	return waits
}

// perBucket counts sorted times in buckets of width from the first one:
// the largest count and the mean count.
func perBucket(sorted []time.Duration, width time.Duration) (maxCount int, mean float64) {
	if len(sorted) == 0 {
		return 0, 0
	}
	first, last := sorted[0], sorted[len(sorted)-1]
	counts := make([]int, int((last-first)/width)+1)
	for _, t := range sorted {
		counts[int((t-first)/width)]++
	}
	return slices.Max(counts), float64(len(sorted)) / float64(len(counts))
}

// sustainedRate is the admissions per second from the first admission to
// the last, leaving out the first batch: it holds what the bucket saved up
// before the first admission, and counting it would overstate the pace by
// up to a slice. ok is false when the span is under a second.
func sustainedRate(sorted []time.Duration) (perSecond float64, ok bool) {
	if len(sorted) < 2 {
		return 0, false
	}
	first, last := sorted[0], sorted[len(sorted)-1]
	span := last - first
	if span < time.Second {
		return 0, false
	}
	firstBatch, _ := slices.BinarySearch(sorted, first+1)
	return float64(len(sorted)-firstBatch) / span.Seconds(), true
}

// quantile of sorted values, nearest rank; 0 when empty.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func names(ids []string) string {
	if len(ids) <= maxNamedUsers {
		return strings.Join(ids, ", ")
	}
	return strings.Join(ids[:maxNamedUsers], ", ") + fmt.Sprintf(" and %d more", len(ids)-maxNamedUsers)
}

// WriteText writes the report as a table for people.
func (rep *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	arrival := "all at once"
	if rep.ArrivalSeconds > 0 {
		arrival = fmt.Sprintf("over %s", seconds(rep.ArrivalSeconds))
	}
	state := "complete"
	if !rep.Complete {
		state = fmt.Sprintf("INCOMPLETE (%d unfinished)", rep.Outcomes.Unfinished)
	}
	fmt.Fprintf(&b, "waitroom load test %s: %s room %q\n", rep.RunID, rep.URL, rep.Room)
	fmt.Fprintf(&b, "%d users arriving %s, seed %d; ran %s, %s\n\n", rep.Users, arrival, rep.Seed, seconds(rep.ElapsedSeconds), state)

	o := rep.Outcomes
	fmt.Fprintf(&b, "outcomes   ordered %d, sold out %d, no order %d, left %d, abandoned %d, turned away %d, failed %d, unfinished %d\n\n",
		o.Ordered, o.SoldOut, o.NoOrder, o.Left, o.Abandoned, o.TurnedAway, o.Failed, o.Unfinished)

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "endpoint\trequests\treq/s\tp50\tp90\tp99\tmax\t")
	for ep, s := range rep.Endpoints.byEndpoint() {
		l := s.Latency
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%s\t%s\t%s\t%s\t\n", endpointNames[ep], s.Requests, s.PerSecond,
			millis(l.P50MS), millis(l.P90MS), millis(l.P99MS), millis(l.MaxMS))
	}
	l := rep.ClientWait
	fmt.Fprintf(tw, "slot wait\t\t\t%s\t%s\t%s\t%s\t\n", millis(l.P50MS), millis(l.P90MS), millis(l.P99MS), millis(l.MaxMS))
	tw.Flush()
	for ep, s := range rep.Endpoints.byEndpoint() {
		if len(s.Refusals) > 0 {
			fmt.Fprintf(&b, "  %s answers other than 2xx: %s\n", endpointNames[ep], codeList(s.Refusals))
		}
	}

	q := rep.Queue
	entered := "not every user had an entry answer"
	if q.AllEnteredSeconds > 0 {
		entered = "all entry answers after " + seconds(q.AllEnteredSeconds)
	}
	fmt.Fprintf(&b, "\nqueue      %d entered (and %d entered again after NOT_IN_QUEUE); %s; peak position %d\n", q.Entered, q.Reentries, entered, q.PeakPosition)
	if q.PositionsChecked {
		verdict := "a permutation of 1..N"
		if !q.PositionsOK {
			verdict = "NOT a permutation of 1..N"
		}
		fmt.Fprintf(&b, "           positions at entry: %s\n", verdict)
	}

	a := rep.Admissions
	source := "the admitter"
	switch a.Source {
	case "client":
		source = "users' polls"
	case "admin counter":
		source = "the store's counter via the admin API; waits from users' polls"
	}
	fmt.Fprintf(&b, "admission  %d users admitted (times from %s)\n", a.Admitted, source)
	fmt.Fprintf(&b, "           per 100 ms: max %d, mean %.1f; per second: max %d, mean %.1f", a.PerSliceMax, a.PerSliceMean, a.PerSecondMax, a.PerSecondMean)
	if a.PerSecondRatio > 0 {
		fmt.Fprintf(&b, " = %.3f × the rate %g/s", a.PerSecondRatio, a.Rate)
	}
	fmt.Fprintf(&b, "\n           wait from entry: p50 %s, p99 %s, max %s\n", seconds(a.WaitP50S), seconds(a.WaitP99S), seconds(a.WaitMaxS))
	if a.ETAUsers > 0 {
		fmt.Fprintf(&b, "           ETA error (ETA − wait, %d users): mean %+.2fs, mean |error| %.2fs, p90 |error| %.2fs\n",
			a.ETAUsers, a.ETAErrorMeanS, a.ETAAbsErrorMean, a.ETAAbsErrorP90)
		fmt.Fprintf(&b, "           ETA relative error |ETA − wait| ÷ wait: p50 %.3f, p90 %.3f; waits within the range given: %.1f%%\n",
			a.ETARelErrorP50, a.ETARelErrorP90, 100*a.ETAInRangeShare)
		fmt.Fprintf(&b, "           by wait: %d waited %s or more, relative error p50 %.3f, p90 %.3f; %d waited less, p90 |error| %.2fs\n",
			a.ETAUsers30s, LongWait, a.ETARelErrorP50Long, a.ETARelErrorP90Long, a.ETAUsers-a.ETAUsers30s, a.ETAAbsErrorP90Short)
	}

	or := rep.Orders
	stock := "stock unknown"
	if or.Stock > 0 {
		stock = fmt.Sprintf("stock %d", or.Stock)
		if or.Oversold {
			stock += ": OVERSOLD"
		}
	}
	fmt.Fprintf(&b, "orders     %d placed (%.1f/s from the first admission to the last order), %d sold out; %s\n", or.Created, or.PerSecond, or.SoldOut, stock)
	fmt.Fprintf(&b, "stock      %d admitted to find nothing (admitted_without_stock); %d told sold_out without ordering\n",
		or.AdmittedWithoutStock, rep.Outcomes.ToldSoldOut)
	if d := rep.Draw; d != nil {
		fmt.Fprintf(&b, "draw       %s (%s): %d early arrivals placed in %d ms\n", d.State, d.Order, d.Entrants, d.DrawMS)
	}

	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "\nnote: %s", n)
	}
	if len(rep.Notes) > 0 {
		b.WriteString("\n")
	}
	if len(rep.Violations) == 0 {
		b.WriteString("\nviolations: none\n")
	} else {
		fmt.Fprintf(&b, "\nVIOLATIONS (%d):\n", len(rep.Violations))
		for _, v := range rep.Violations {
			fmt.Fprintf(&b, "  - %s\n", v)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func codeList(codes map[string]int) string {
	var parts []string
	for _, code := range slices.Sorted(maps.Keys(codes)) {
		parts = append(parts, fmt.Sprintf("%s ×%d", code, codes[code]))
	}
	return strings.Join(parts, ", ")
}

func seconds(s float64) string { return fmt.Sprintf("%.2fs", s) }

func millis(ms float64) string {
	switch {
	case ms < 1:
		return fmt.Sprintf("%.0fµs", ms*1000)
	case ms < 1000:
		return fmt.Sprintf("%.1fms", ms)
	default:
		return fmt.Sprintf("%.2fs", ms/1000)
	}
}

// reportDraw reads the room's published draw (GET /rooms/{room}/draw).
func (r *runner) reportDraw(rep *Report) {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.RequestTimeout)
	defer cancel()
	res := r.do(ctx, endpointStatus, http.MethodGet, "/rooms/"+r.cfg.Room+"/draw", "", "", nil)
	var d struct {
		State    string `json:"state"`
		Order    string `json:"prequeue_order"`
		Entrants int64  `json:"entrants"`
		DrawMS   int64  `json:"draw_ms"`
	}
	if res.code != "" || json.Unmarshal(res.body, &d) != nil {
		rep.Notes = append(rep.Notes, fmt.Sprintf("the room's draw could not be read (%s)", res.code))
		return
	}
	rep.Draw = &DrawFigures{State: d.State, Order: d.Order, Entrants: d.Entrants, DrawMS: d.DrawMS}
	if d.State != "done" {
		rep.Violations = append(rep.Violations, "the opening's draw was not done by the end of the run")
	}
}
