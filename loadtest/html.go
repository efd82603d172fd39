package loadtest

import (
	"bytes"
	_ "embed" // the report's page
	"html/template"
	"io"
	"math"
	"slices"
	"time"

	"github.com/waitroom/waitroom/internal/uplot"
)

// charts are the series the HTML report draws; the JSON report leaves
// them out (its figures summarise them).
type charts struct {
	// Per step of the run (StepSeconds from its start): admissions per
	// second in that step and users in the queue at its end.
	StepSeconds float64   `json:"step_seconds"`
	Seconds     []float64 `json:"seconds"`
	Admitted    []float64 `json:"admitted"`
	Queue       []int     `json:"queue"`
	Rate        float64   `json:"rate"` // 0: unknown
	// The wait from entry to admission of the users who queued, in bins
	// of WaitBinSeconds from 0.
	WaitBinSeconds float64 `json:"wait_bin_seconds"`
	WaitCounts     []int   `json:"wait_counts"`
	// A sample of those users, by ETA at entry: the ETA and the real wait.
	// ETALow and ETAHigh are the range the answer gave around the ETA.
	ETA        []float64 `json:"eta"`
	ETALow     []float64 `json:"eta_low"`
	ETAHigh    []float64 `json:"eta_high"`
	Wait       []float64 `json:"wait"`
	ETASampled int       `json:"eta_sampled"` // out of Admissions.ETAUsers
	Outcomes   Outcomes  `json:"outcomes"`
}

// Bounds of what the HTML report carries, so that a 100,000-user run
// makes a page a browser opens at once.
const (
	maxETAPoints = 2000
	waitBins     = 40
	// Runs up to shortRun are drawn in steps of one admission slice, so
	// a short run shows its shape; longer ones in seconds.
	shortRun = time.Minute
)

// chartsOf builds the series: pacing holds the admission times (sorted),
// admittedAt each user's (-1: none), waits the sorted waits.
func (r *runner) chartsOf(rep *Report, end time.Time, pacing, admittedAt []time.Duration, waits []float64) *charts {
	c := &charts{Rate: r.cfg.Rate, Outcomes: rep.Outcomes}
	step := time.Second
	if end.Sub(r.start) <= shortRun {
		step = admissionSlice
	}
	c.StepSeconds = step.Seconds()
	n := int(end.Sub(r.start)/step) + 1
	bucket := func(d time.Duration) int { return min(max(int(d/step), 0), n-1) }
	c.Seconds = make([]float64, n)
	c.Admitted = make([]float64, n)
	c.Queue = make([]int, n)
	for i := range c.Seconds {
		c.Seconds[i] = float64(i) * step.Seconds()
	}
	for _, at := range pacing {
		c.Admitted[bucket(at)] += 1 / step.Seconds()
	}
	// The queue: a user is in it from its entry answer to its admission or
	// its leaving.
	moves := make([]int, n+1)
	type pair struct{ eta, low, high, wait float64 }
	var pairs []pair
	for i := range r.users {
		u := &r.users[i]
		if u.entryPos == 0 {
			continue
		}
		moves[bucket(u.enteredAt)]++
		switch {
		case admittedAt[i] >= 0:
			moves[bucket(admittedAt[i])]--
			pairs = append(pairs, pair{u.entryETA.Seconds(), u.entryLow.Seconds(), u.entryHigh.Seconds(), (admittedAt[i] - u.enteredAt).Seconds()})
		case u.leftAt > 0:
			moves[bucket(u.leftAt)]--
		}
	}
	queue := 0
	for i := range n {
		queue += moves[i]
		c.Queue[i] = queue
	}

	if len(waits) > 0 {
		c.WaitBinSeconds = max(waits[len(waits)-1], 0.001) / waitBins // the longest wait closes the last bin
		c.WaitCounts = make([]int, waitBins)
		for _, w := range waits {
			// A wait can be a hair below 0: the admitter's clock saw the
			// admission before the entry answer reached the user.
			c.WaitCounts[min(max(int(w/c.WaitBinSeconds), 0), waitBins-1)]++
		}
	}

	// An even sample in entry order, then sorted by ETA for the chart.
	every := max(1, int(math.Ceil(float64(len(pairs))/maxETAPoints)))
	var sample []pair
	for i := 0; i < len(pairs); i += every {
		sample = append(sample, pairs[i])
	}
	slices.SortFunc(sample, func(a, b pair) int {
		switch {
		case a.eta < b.eta:
			return -1
		case a.eta > b.eta:
			return 1
		}
		return 0
	})
	for _, p := range sample {
		c.ETA = append(c.ETA, p.eta)
		c.ETALow = append(c.ETALow, p.low)
		c.ETAHigh = append(c.ETAHigh, p.high)
		c.Wait = append(c.Wait, p.wait)
	}
	c.ETASampled = len(sample)
	return c
}

var (
	//go:embed report.html
	reportPage     string
	reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
		"mul100": func(f float64) float64 { return 100 * f },
	}).Parse(reportPage))
)

// WriteHTML writes the report as one self-contained HTML page (the chart
// library inline, nothing fetched): admissions per second against the rate,
// the queue over time, the wait distribution, ETA against the real wait,
// the outcomes, and the text report. Only a report made by Run has the
// series; one decoded from JSON has not.
func (rep *Report) WriteHTML(w io.Writer) error {
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		return err
	}
	c := rep.charts
	if c == nil {
		c = &charts{Outcomes: rep.Outcomes}
	}
	type outcomeRow struct {
		Name    string
		Count   int
		Percent float64
	}
	o := rep.Outcomes
	var rows []outcomeRow
	for _, row := range []outcomeRow{
		{"ordered", o.Ordered, 0}, {"sold out", o.SoldOut, 0}, {"admitted, no order", o.NoOrder, 0},
		{"left the queue", o.Left, 0}, {"turned away", o.TurnedAway, 0}, {"failed", o.Failed, 0}, {"unfinished", o.Unfinished, 0},
	} {
		if total := o.Total(); total > 0 {
			row.Percent = math.Round(1000*float64(row.Count)/float64(total)) / 10
		}
		rows = append(rows, row)
	}
	var page bytes.Buffer
	err := reportTemplate.Execute(&page, struct {
		R            *Report
		Text         string
		Charts       *charts
		Outcomes     []outcomeRow
		UPlotJS      template.JS
		UPlotCSS     template.CSS
		UPlotVersion string
	}{rep, text.String(), c, rows, template.JS(uplot.JS), template.CSS(uplot.CSS), uplot.Version})
	if err != nil {
		return err
	}
	_, err = w.Write(page.Bytes())
	return err
}
