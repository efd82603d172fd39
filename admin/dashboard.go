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
// /admin/rooms/{room} for the controls.
//
// Every open dashboard reads the same samples: one sampler per Handler takes
// at most one sample a second (the room list, then each room's settings
// and figures), whatever the number of dashboards, and none while nobody
// looks. The chart's history is this instance's: it holds the samples
// taken while a dashboard polled it.

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
	store waitroom.Store
	now   func() time.Time

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
	points []adminapi.DashboardPoint // oldest first, at most dashboardKeep
}

func newSampler(store waitroom.Store) *sampler {
	return &sampler{store: store, now: time.Now, rooms: make(map[string]*roomTrack)}
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
		i, _ := slices.BinarySearchFunc(tr.points, since+1, func(p adminapi.DashboardPoint, t int64) int { return int(p.T - t) })
		room.Series = append(room.Series, tr.points[i:]...)
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
		p := adminapi.DashboardPoint{T: now.UnixMilli(), Rate: cfg.Rate, Waiting: st.Waiting, LiveTokens: st.Active}
		tr.perSec = nil
		// Only a recent previous sample measures a rate; after a gap (no
		// dashboard open) the growth spans minutes nobody saw.
		if gap := now.Sub(tr.seen); !tr.seen.IsZero() && gap > 0 && gap <= 3*dashboardEvery && st.Admitted >= tr.stats.Admitted {
			v := float64(st.Admitted-tr.stats.Admitted) / gap.Seconds()
			p.AdmittedPerSecond, tr.perSec = &v, &v
		}
		tr.cfg, tr.stats, tr.seen = cfg, st, now
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
