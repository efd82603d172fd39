package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/lograte"
)

// Metrics come in two kinds. Counters of this instance (waitroom_enters_total,
// waitroom_admitted_total, waitroom_claims_total, the HTTP histogram) count
// what this process did: sum them over instances. Room figures
// (waitroom_room_*) are read from the store at scrape time and are the
// room's own, shared by every instance: do not sum them.
//
// Room labels are bounded: a counter is labelled with a room only when the
// store's answer proves the room exists (or the room comes from the store's
// list), so made-up room names in requests cannot grow the series.

// collectTimeout bounds the store reads of one scrape, so a hung store
// makes a scrape short of room figures, not a scrape that hangs.
const collectTimeout = 2 * time.Second

// metrics are one Server's metrics, in the Server's own registry.
type metrics struct {
	enters   *prometheus.CounterVec
	passes   *prometheus.CounterVec
	admitted *prometheus.CounterVec
	claims   *prometheus.CounterVec
	http     *prometheus.HistogramVec

	// Pre-resolved children, so the hot paths (enter, every request's
	// latency) do no label hashing.
	mu     sync.RWMutex
	rooms  map[string]*roomMetrics
	routes map[string]*routeMetrics // filled by declareRoutes, read-only after New

	handler http.Handler // GET /metrics
}

// roomMetrics are one existing room's pre-resolved children and its
// log limiter.
type roomMetrics struct {
	enters    [len(enterResults)]prometheus.Counter
	admitted  prometheus.Counter
	queueFull lograte.EveryMinute
}

func newMetrics(reg *prometheus.Registry, store *waitroom.GuardedStore, log *slog.Logger, lost func() (places, tokens, spent int64)) (*metrics, error) {
	if reg == nil {
		// A registry per Server, never the global one, so servers (and
		// tests running in parallel) do not share series.
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	counterVec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	m := &metrics{
		passes: counterVec("waitroom_pass_entries_total",
			"Enters with a pass on this instance by result: admitted (a token at once, or the holder's own), or the code of a refusal (pass_invalid, pass_used_up, no_free_slot, sold_out, room_closed, …); a pass refused before the store (forged) or for a room that does not exist with room=\"\".",
			"room", "result"),
		enters: counterVec("waitroom_enters_total",
			"Enters this instance's store answered, by result: queued (a place, new or kept), admitted (holds a live token), queue_full, room_closed; other results (room_not_found, store_unavailable, internal, …) with room=\"\".",
			"room", "result"),
		admitted: counterVec("waitroom_admitted_total",
			"Users this instance's admitter turned into entry-token holders.",
			"room"),
		claims: counterVec("waitroom_claims_total",
			"Gated requests on this instance by result: completed (token spent), released (order failed, token kept), settle_failed, settle_retrying (a settle the store did not answer, retried in the background: completed or released follows when it lands), settle_abandoned (no retry landed within the settle window: the unit may be admitted again), claim_withdrawn (a claim the store did not answer in time, given back), passed_store_down (let through unclaimed by the open failure policy), or the code of a refused claim (token_in_use, entry_token_not_found, entry_token_invalid, bad_request, store_unavailable).",
			"room", "result"),
		http: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "waitroom_http_request_duration_seconds",
			Help: "HTTP request latency by route (the ServeMux pattern, \"unmatched\" for none) and status code.",
			// From a cached status answer (sub-millisecond) to a gated order
			// that runs up to the upstream's timeout.
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route", "code"}),
		rooms:  make(map[string]*roomMetrics),
		routes: make(map[string]*routeMetrics),
	}
	for _, c := range []prometheus.Collector{m.enters, m.passes, m.admitted, m.claims, m.http, newRoomCollector(store, log, lost)} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError, // serve what could be gathered
	})
	return m, nil
}

// room returns the pre-resolved children of a room known to exist.
func (m *metrics) room(room string) *roomMetrics {
	m.mu.RLock()
	rm := m.rooms[room]
	m.mu.RUnlock()
	if rm != nil {
		return rm
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if rm = m.rooms[room]; rm == nil {
		rm = &roomMetrics{admitted: m.admitted.WithLabelValues(room)}
		for i, result := range enterResults {
			rm.enters[i] = m.enters.WithLabelValues(room, result)
		}
		m.rooms[room] = rm
	}
	return rm
}

// Results of an enter that prove the room exists; their index is their
// place in roomMetrics.enters.
var enterResults = [...]string{"queued", "admitted", "queue_full", "room_closed"}

const (
	enterQueued = iota
	enterAdmitted
	enterQueueFull
	enterRoomClosed
)

// observeEnter counts one enter the store answered and warns, once a minute
// per room, that the queue is full: the signal that the room turns people
// away, without a line per refused request.
func (s *Server) observeEnter(ctx context.Context, room string, st waitroom.Status, err error) {
	result := -1
	switch {
	case err == nil && st.State == waitroom.StateAdmitted:
		result = enterAdmitted
	case err == nil:
		result = enterQueued
	case errors.Is(err, waitroom.ErrQueueFull):
		result = enterQueueFull
	case errors.Is(err, waitroom.ErrRoomClosed):
		result = enterRoomClosed
	}
	if result < 0 {
		// The room may not exist: count without its name.
		s.metrics.enters.WithLabelValues("", resultLabel(err)).Inc()
		return
	}
	rm := s.metrics.room(room)
	rm.enters[result].Inc()
	if result == enterQueueFull {
		if refused, ok := rm.queueFull.Allow(time.Now()); ok {
			s.log.WarnContext(ctx, "queue full: refusing new entries", "room", room, "refused_since_last_warning", refused)
		}
	}
}

// OnAdmit counts and logs one admission; pass it as the Admitter's OnAdmit.
func (s *Server) OnAdmit(room string, admitted []waitroom.Admission) {
	s.metrics.room(room).admitted.Add(float64(len(admitted)))
	s.log.Debug("admitted", "room", room, "n", len(admitted))
}

// onGateOutcome returns the gate's OnOutcome: it counts one gated
// request's outcome, then tells next (Config.OnGateOutcome) if set. The
// gate's room is the server's default room, so the labels are bounded.
func (s *Server) onGateOutcome(next func(room, outcome string)) func(room, outcome string) {
	return func(room, outcome string) {
		s.metrics.claims.WithLabelValues(room, strings.ToLower(outcome)).Inc()
		switch outcome {
		case "completed", "released":
			s.log.Debug("entry token settled", "room", room, "outcome", outcome)
		}
		if next != nil {
			next(room, outcome)
		}
	}
}

// resultLabel turns an error into a bounded label value: the lower-case
// code of a waitroom.Error (a fixed set), or "internal".
func resultLabel(err error) string {
	return strings.ToLower(waitroom.ErrorCode(err))
}

// routeMetrics are one route's latency children by status code.
type routeMetrics struct {
	byCode [600]atomic.Pointer[observer]
}

type observer struct{ prometheus.Observer }

// unmatchedRoute labels requests no route matched, so probes of random
// paths stay one series.
const unmatchedRoute = "unmatched"

// mountedRoutes is a handler mounted under one pattern that routes by
// patterns of its own (the operator API, admin.Handler): its requests are
// counted under those, as if they were the Server's.
type mountedRoutes interface {
	http.Handler
	Patterns() []string
}

// declareRoutes prepares the latency children of every route; called once
// in New, before serving.
func (m *metrics) declareRoutes(patterns map[string]http.Handler) {
	for p, h := range patterns {
		m.routes[p] = &routeMetrics{}
		if sub, ok := h.(mountedRoutes); ok {
			for _, p := range sub.Patterns() {
				m.routes[p] = &routeMetrics{}
			}
		}
	}
	m.routes[unmatchedRoute] = &routeMetrics{}
}

// observeHTTP records one request's latency under its route pattern, never
// its raw path: a route that is not a declared pattern (ServeMux answers
// some redirects with a path) counts as unmatched.
func (m *metrics) observeHTTP(route string, code int, d time.Duration) {
	rm := m.routes[route]
	if rm == nil {
		route, rm = unmatchedRoute, m.routes[unmatchedRoute]
	}
	if code < 0 || code >= len(rm.byCode) {
		m.http.WithLabelValues(route, strconv.Itoa(code)).Observe(d.Seconds())
		return
	}
	o := rm.byCode[code].Load()
	if o == nil {
		o = &observer{m.http.WithLabelValues(route, strconv.Itoa(code))}
		rm.byCode[code].Store(o) // a racing store keeps an equal child
	}
	o.Observe(d.Seconds())
}

// roomCollector reads every room's figures and settings from the store at
// scrape time: they are the room's own, kept by the store for all
// instances, so a counter of this process could not know them.
type roomCollector struct {
	store                                                      *waitroom.GuardedStore
	log                                                        *slog.Logger
	lost                                                       func() (places, tokens, spent int64)
	waiting, live, rate, state, entries, tokens, abandoned, up *prometheus.Desc
	stock, unitsLeft, soldOut, lastWait                        *prometheus.Desc
	lostPlaces, lostTokens, lostSpent                          *prometheus.Desc
	seedMismatches                                             *prometheus.Desc
}

func newRoomCollector(store *waitroom.GuardedStore, log *slog.Logger, lost func() (places, tokens, spent int64)) *roomCollector {
	room := []string{"room"}
	if lost == nil {
		lost = func() (int64, int64, int64) { return 0, 0, 0 } // an in-process store loses nothing but with its process
	}
	return &roomCollector{
		store:     store,
		log:       log,
		lost:      lost,
		stock:     prometheus.NewDesc("waitroom_room_stock", "The room's stock setting: units it sells in all, sold ones included; 0: not tracked. A completed order sells the room's units_per_order (waitroom admin shows units sold).", room, nil),
		unitsLeft: prometheus.NewDesc("waitroom_room_units_left", "Units neither sold nor reserved by a live token (rooms that track stock only).", room, nil),
		soldOut:   prometheus.NewDesc("waitroom_room_sold_out", "1 when every unit is sold (rooms that track stock only).", room, nil),
		lastWait:  prometheus.NewDesc("waitroom_room_last_place_wait_seconds", "How long the last user in the queue waits at the room's rate (absent while the room is paused).", room, nil),
		lostPlaces: prometheus.NewDesc("waitroom_store_lost_places_total",
			"Queue places this instance found the store had lost (a failover to a replica that lacked them, or a restart without persistence); those users must enter again.", nil, nil),
		lostTokens: prometheus.NewDesc("waitroom_store_lost_tokens_total",
			"Entry tokens this instance found the store had lost, leaving out those it saw spent (waitroom_store_lost_spent_tokens_total): their holders must queue again.", nil, nil),
		lostSpent: prometheus.NewDesc("waitroom_store_lost_spent_tokens_total",
			"Issued tokens the store lost whose orders had completed through this instance: used, not lost.", nil, nil),
		seedMismatches: prometheus.NewDesc("waitroom_draw_seed_mismatches_total",
			"Store calls this instance saw refused because a draw's seed no longer matches its published commitment (the seed was replaced): the draw and its record are refused; any value above 0 is an incident.", nil, nil),
		waiting:   prometheus.NewDesc("waitroom_room_waiting", "Users in the room's queue now.", room, nil),
		live:      prometheus.NewDesc("waitroom_room_live_tokens", "Live entry tokens of the room now.", room, nil),
		rate:      prometheus.NewDesc("waitroom_room_admission_rate", "The room's admission rate setting, users per second.", room, nil),
		state:     prometheus.NewDesc("waitroom_room_state", "1 for the room's state (open, paused, closed), 0 for the others.", []string{"room", "state"}, nil),
		entries:   prometheus.NewDesc("waitroom_room_entries_total", "Enters of the room over all instances: queued (took a new place) or queue_full (refused).", []string{"room", "result"}, nil),
		tokens:    prometheus.NewDesc("waitroom_room_tokens_total", "Entry tokens of the room over all instances by outcome: issued, completed, released, expired, no_show (never confirmed nor claimed by first_use_within).", []string{"room", "outcome"}, nil),
		abandoned: prometheus.NewDesc("waitroom_room_abandoned_total", "Waiting users of the room over all instances found gone: silent (no enter, no status) for longer than abandon_after, skipped at the head or dropped at their next call.", room, nil),
		up:        prometheus.NewDesc("waitroom_store_up", "1 if the store answered this instance's last call, 0 if it was unavailable.", nil, nil),
	}
}

func (c *roomCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.waiting, c.live, c.rate, c.state, c.entries, c.tokens, c.abandoned, c.up,
		c.stock, c.unitsLeft, c.soldOut, c.lastWait, c.lostPlaces, c.lostTokens, c.lostSpent, c.seedMismatches} {
		ch <- d
	}
}

func (c *roomCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	defer func() {
		up := 1.0
		if c.store.Down() {
			up = 0
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
		places, tokens, spent := c.lost()
		ch <- prometheus.MustNewConstMetric(c.lostPlaces, prometheus.CounterValue, float64(places))
		ch <- prometheus.MustNewConstMetric(c.lostTokens, prometheus.CounterValue, float64(tokens))
		ch <- prometheus.MustNewConstMetric(c.lostSpent, prometheus.CounterValue, float64(spent))
		ch <- prometheus.MustNewConstMetric(c.seedMismatches, prometheus.CounterValue, float64(c.store.DrawSeedMismatches()))
	}()
	rooms, err := c.store.Rooms(ctx)
	if err != nil {
		c.log.Debug("metrics: listing rooms failed", "err", err)
		return
	}
	for _, room := range rooms {
		st, err := c.store.Stats(ctx, room)
		if err != nil {
			c.log.Debug("metrics: reading room figures failed", "room", room, "err", err)
			continue
		}
		cfg, err := c.store.RoomConfig(ctx, room)
		if err != nil {
			c.log.Debug("metrics: reading room settings failed", "room", room, "err", err)
			continue
		}
		gauge := func(d *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{room}, labels...)...)
		}
		counter := func(d *prometheus.Desc, v int64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{room}, labels...)...)
		}
		gauge(c.waiting, float64(st.Waiting))
		gauge(c.live, float64(st.Active))
		gauge(c.rate, cfg.Rate)
		for _, state := range []waitroom.RoomState{waitroom.RoomOpen, waitroom.RoomPaused, waitroom.RoomClosed} {
			gauge(c.state, boolGauge(cfg.State == state), string(state))
		}
		counter(c.entries, st.Entered, "queued")
		counter(c.entries, st.Full, "queue_full")
		counter(c.tokens, st.Admitted, "issued")
		counter(c.tokens, st.Completed, "completed")
		counter(c.tokens, st.Released, "released")
		counter(c.tokens, st.Expired, "expired")
		counter(c.tokens, st.NoShows, "no_show")
		counter(c.abandoned, st.Abandoned)
		gauge(c.stock, float64(cfg.Stock))
		if soldOut, left, _ := cfg.Units(0, st.Sold, st.Active); cfg.Stock > 0 {
			gauge(c.unitsLeft, float64(left))
			gauge(c.soldOut, boolGauge(soldOut))
		}
		if wait, ok := waitroom.LastPlaceWait(cfg, st.Waiting); ok {
			gauge(c.lastWait, wait.Seconds())
		}
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
