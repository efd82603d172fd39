package admin

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/adminapi"
	"github.com/waitroom/waitroom/internal/uplot"
	"github.com/waitroom/waitroom/jsonhttp"
)

// The operator's dashboard. GET /admin/ serves a page that holds nothing
// secret, so it loads without credentials; it asks for the admin token,
// keeps it in the tab's session storage and sends it as the bearer of
// every call: GET /admin/dashboard once a second for the figures, PATCH
// /admin/rooms/{room} for the controls, and the webhook routes (package
// webhook, mounted beside it through Config.Routes) every ten seconds
// for the dead letters, which it redelivers; without those routes (404
// NOT_FOUND) it says webhooks are off.
//
// Every open dashboard reads the same samples: one sampler per Handler takes
// at most one sample a second (the room list, then each room's settings
// and figures), whatever the number of dashboards, and none while nobody
// looks. The chart draws the last ten minutes the store kept
// (waitroom.HistoryStore: the admitters record every room once a second,
// whether or not a dashboard is open), read with the sample: the first
// sample reads each room's whole history, the next ones what was recorded
// since. A quiet room is recorded once a minute; its figures cannot change
// until it wakes (nobody waits, no token is live, the rate is a setting),
// so the chart draws the gap flat. With a store that keeps no history the
// chart holds this instance's own samples, those taken while a dashboard
// polled it.

// The dashboard's page, script and style, served as they are.
//
//go:embed web
var webFiles embed.FS

// Dashboard sampling.
const (
	dashboardEvery = time.Second
	// dashboardKeep samples per room: ten minutes at one a second.
	dashboardKeep = 600
	// dashboardSampleTimeout bounds one sample, so a hung store delays the
	// dashboards by this much, not forever.
	dashboardSampleTimeout = 2 * time.Second
)

// sampler takes the dashboard's samples; see the top of this file.
type sampler struct {
	store   waitroom.Store
	history waitroom.HistoryStore // nil: the chart is the sampler's own samples
	now     func() time.Time

	mu    sync.Mutex // held during a sample: concurrent dashboards share it
	taken time.Time  // when the last sample was taken; zero before the first
	at    time.Time  // when the last sample that worked was taken
	err   error      // of the last sample
	rooms map[string]*roomTrack
}

// roomTrack is what the sampler knows of one room.
type roomTrack struct {
	cfg    waitroom.RoomConfig
	stats  waitroom.Stats
	seen   time.Time
	perSec *float64
	// points are the sampler's own, without a history store: oldest
	// first, at most dashboardKeep.
	points []adminapi.DashboardPoint
	// history is the store's, oldest first, within HistoryWindow of the
	// last sample.
	history []waitroom.Sample
}

func newSampler(store waitroom.Store) *sampler {
	history, _ := waitroom.HistoryOf(store)
	return &sampler{store: store, history: history, now: time.Now, rooms: make(map[string]*roomTrack)}
}

// read returns the figures of a sample at most dashboardEvery old, with the
// samples taken after since (unix milliseconds). A failed sample is not
// retried before dashboardEvery either, so a store outage does not turn the
// dashboards into a flood.
func (d *sampler) read(ctx context.Context, since int64) (adminapi.Dashboard, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	if d.taken.IsZero() || now.Sub(d.taken) >= dashboardEvery {
		d.taken = now
		d.err = d.sample(ctx, now)
		if d.err == nil {
			d.at = now
		}
	}
	ans := adminapi.Dashboard{SampledAt: d.at.UnixMilli(), EveryMS: dashboardEvery.Milliseconds(), Rooms: []adminapi.DashboardRoom{}}
	if d.err != nil {
		ans.Error = &adminapi.DashboardError{Code: waitroom.ErrorCode(d.err), Message: waitroom.ErrorMessage(d.err)}
	}
	names := make([]string, 0, len(d.rooms))
	for name := range d.rooms {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		tr := d.rooms[name]
		room := adminapi.DashboardRoom{Room: adminapi.NewRoom(name, tr.cfg), Series: []adminapi.DashboardPoint{}}
		room.Figures = adminapi.NewFigures(tr.cfg, tr.stats, tr.perSec, dashboardEvery)
		if wait, ok := waitroom.LastPlaceWait(tr.cfg, tr.stats.Waiting); ok {
			eta := wait.Seconds()
			room.ETALastSeconds = &eta
		}
		if d.history != nil {
			room.Series = chartPoints(room.Series, tr.history, tr.stats, d.at, since)
		} else {
			i, _ := slices.BinarySearchFunc(tr.points, since+1, func(p adminapi.DashboardPoint, t int64) int { return int(p.T - t) })
			room.Series = append(room.Series, tr.points[i:]...)
		}
		ans.Rooms = append(ans.Rooms, room)
	}
	return ans, d.err
}

// sample reads every room once. A room that went away is dropped; a store
// error ends the sample and keeps the previous figures.
func (d *sampler) sample(ctx context.Context, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, dashboardSampleTimeout)
	defer cancel()
	names, err := d.store.Rooms(ctx)
	if err != nil {
		return err
	}
	seen := make(map[string]bool, len(names))
	for _, name := range names {
		cfg, err := d.store.RoomConfig(ctx, name)
		if errors.Is(err, waitroom.ErrRoomNotFound) {
			continue // listed but not (or no longer) set up
		}
		if err != nil {
			return err
		}
		st, err := d.store.Stats(ctx, name)
		if errors.Is(err, waitroom.ErrRoomNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		seen[name] = true
		tr := d.rooms[name]
		if tr == nil {
			tr = &roomTrack{}
			d.rooms[name] = tr
		}
		if d.history != nil {
			if err := d.readHistory(ctx, name, tr, now); err != nil {
				return err
			}
		}
		p := adminapi.DashboardPoint{T: now.UnixMilli(), Rate: cfg.Rate, Waiting: st.Waiting, LiveTokens: st.Active}
		tr.perSec = nil
		// Only a recent previous sample measures a rate; after a gap (no
		// dashboard open) the growth spans minutes nobody saw.
		prev := waitroom.Sample{At: tr.seen, Admitted: tr.stats.Admitted}
		if v, ok := (waitroom.Sample{At: now, Admitted: st.Admitted}).PerSecond(prev); ok {
			p.AdmittedPerSecond, tr.perSec = &v, &v
		}
		tr.cfg, tr.stats, tr.seen = cfg, st, now
		if d.history != nil {
			continue // the chart is the store's
		}
		if len(tr.points) == dashboardKeep {
			tr.points = append(tr.points[:0], tr.points[1:]...)
		}
		tr.points = append(tr.points, p)
	}
	for name := range d.rooms {
		if !seen[name] {
			delete(d.rooms, name)
		}
	}
	return nil
}

// readHistory adds what the store recorded of room since tr's last
// sample, and forgets what is older than the window.
func (d *sampler) readHistory(ctx context.Context, room string, tr *roomTrack, now time.Time) error {
	var after time.Time
	if n := len(tr.history); n > 0 {
		after = tr.history[n-1].At
	}
	got, err := d.history.History(ctx, room, after)
	if err != nil {
		return err
	}
	tr.history = append(tr.history, got...)
	from := now.Add(-waitroom.HistoryWindow)
	i := 0
	for i < len(tr.history) && !tr.history[i].At.After(from) {
		i++
	}
	tr.history = append(tr.history[:0], tr.history[i:]...)
	return nil
}

// chartPoints appends to out the chart's points of samples after since
// (unix milliseconds): a point a sample, and, after a quiet sample (nobody
// waiting, no token live), a flat point each second until the next one,
// or until at when the figures sampled then (live) are still the quiet
// sample's; the sample after a flat stretch measures its rate from the
// stretch's last second. A gap after any other sample, or longer than a
// quiet room's (QuietHistoryEvery), is left a gap: nobody recorded the
// room.
func chartPoints(out []adminapi.DashboardPoint, samples []waitroom.Sample, live waitroom.Stats, at time.Time, since int64) []adminapi.DashboardPoint {
	add := func(p adminapi.DashboardPoint) {
		if p.T > since {
			out = append(out, p)
		}
	}
	zero := 0.0
	// flat draws s's figures each second up to until, and returns the
	// last point drawn as a sample (s itself when none): the next sample's
	// rate is measured from it.
	flat := func(s waitroom.Sample, until time.Time) waitroom.Sample {
		if gap := until.Sub(s.At); !s.Quiet() || gap <= waitroom.PerSecondGap || gap > waitroom.QuietHistoryEvery+waitroom.PerSecondGap {
			return s
		}
		last := s
		for t := s.At.Add(waitroom.HistoryEvery); t.Before(until); t = t.Add(waitroom.HistoryEvery) {
			add(adminapi.DashboardPoint{T: t.UnixMilli(), AdmittedPerSecond: &zero, Rate: s.Rate})
			last.At = t
		}
		return last
	}
	for i, s := range samples {
		p := adminapi.DashboardPoint{T: s.At.UnixMilli(), Rate: s.Rate, Waiting: s.Waiting, LiveTokens: s.LiveTokens}
		if i > 0 {
			if v, ok := s.PerSecond(flat(samples[i-1], s.At)); ok {
				p.AdmittedPerSecond = &v
			}
		}
		add(p)
	}
	// Up to the second before the live sample's: the admitter records a
	// second only once it has begun.
	if n := len(samples); n > 0 && live.Waiting == 0 && live.Active == 0 && live.Admitted == samples[n-1].Admitted {
		flat(samples[n-1], at.Truncate(waitroom.HistoryEvery))
	}
	return out
}

// adminDashboard: GET /admin/dashboard?since=T, the figures for the
// dashboard page.
func (s *Handler) adminDashboard(w http.ResponseWriter, r *http.Request) error {
	var since int64
	if v := r.URL.Query().Get("since"); v != "" {
		var err error
		if since, err = strconv.ParseInt(v, 10, 64); err != nil || since < 0 {
			return waitroom.BadRequest(fmt.Sprintf("since: %q must be a time in unix milliseconds", v))
		}
	}
	// A dashboard closed mid-sample must not cut the sample others wait for.
	ans, err := s.dashboard.read(context.WithoutCancel(r.Context()), since)
	if err != nil && len(ans.Rooms) == 0 {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	jsonhttp.Write(w, http.StatusOK, ans)
	return nil
}

// dashboardFiles returns the handlers of the dashboard's page and its
// files. The page allows scripts and styles from this origin only, so
// nothing injected into it runs.
func dashboardFiles() map[string]http.Handler {
	mustRead := func(name string) string {
		b, err := webFiles.ReadFile(name)
		if err != nil {
			panic(err)
		}
		return string(b)
	}
	files := map[string]struct{ body, contentType string }{
		"GET /admin/{$}":                      {mustRead("web/admin.html"), "text/html; charset=utf-8"},
		"GET /admin/assets/admin.js":          {mustRead("web/admin.js"), "text/javascript; charset=utf-8"},
		"GET /admin/assets/admin.css":         {mustRead("web/admin.css"), "text/css; charset=utf-8"},
		"GET /admin/assets/uPlot.iife.min.js": {uplot.JS, "text/javascript; charset=utf-8"},
		"GET /admin/assets/uPlot.min.css":     {uplot.CSS, "text/css; charset=utf-8"},
		"GET /admin/assets/uPlot.LICENSE.txt": {uplot.License, "text/plain; charset=utf-8"},
	}
	handlers := make(map[string]http.Handler, len(files))
	for pattern, f := range files {
		handlers[pattern] = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h.Set("Content-Type", f.contentType)
			h.Set("Content-Length", strconv.Itoa(len(f.body)))
			// Revalidate on every load: a new binary's page never runs
			// with an old script.
			h.Set("Cache-Control", "no-cache")
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("Referrer-Policy", "no-referrer")
			h.Set("Content-Security-Policy", dashboardPolicy)
			_, _ = io.WriteString(w, f.body)
		})
	}
	return handlers
}

const dashboardPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
