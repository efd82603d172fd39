package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/server"
	"github.com/waitroom/waitroom/shop"
)

// HTTP server bounds: nothing a client sends is unbounded, and a slow
// client cannot hold a connection forever. The write timeout leaves room
// for a gated order that takes as long as the upstream allows.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 15 * time.Second
	writeTimeout      = 60 * time.Second
	idleTimeout       = 120 * time.Second // pollers keep their connection
	maxHeaderBytes    = 16 << 10
	shutdownTimeout   = 15 * time.Second
	startupTimeout    = 10 * time.Second
)

func runServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, err := parseServe(args, getenv)
	if code, ok := parsed(err, "serve", printServeUsage, stdout, stderr); !ok {
		return code
	}
	m := &Main{Config: cfg, Logger: newLogger(cfg, stderr)}
	if err := m.Run(ctx); err != nil {
		m.Logger.Error("start failed", "err", err)
		_ = m.Close()
		return exitFailure
	}
	code := exitOK
	select {
	case <-ctx.Done():
		m.Logger.Info("shutting down")
	case err := <-m.ServeErr():
		m.Logger.Error("serving failed", "err", err)
		code = exitFailure
	}
	if err := m.Close(); err != nil {
		m.Logger.Error("shutdown failed", "err", err)
		code = exitFailure
	}
	return code
}

func newLogger(cfg ServeConfig, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// Main is one running waiting room: the store, the admitter and the HTTP
// server. Run starts it and returns once it listens; Close stops it. Tests
// start it on port 0 and read Addr. serve, loadtest --inproc and bench all
// build their server with it.
type Main struct {
	Config ServeConfig
	Logger *slog.Logger

	limiter waitroom.Limiter // Redis's with --redis-url; nil: in process

	// What a server started in process (loadtest --inproc, bench) sets
	// besides the flags; serve sets none of them.
	//
	// Store is served instead of one opened from Config.RedisURL; Close
	// leaves it open.
	Store waitroom.Store
	// Routes are served beside the API, outside the gate.
	Routes map[string]http.Handler
	// AdmitEvery is the admitter's tick; 0: a quarter of the slice.
	AdmitEvery time.Duration
	// OnAdmit is told each tick's admissions, before the server is.
	OnAdmit func(room string, admitted []waitroom.Admission)
	// Hold keeps the admitter and the room keeper from starting until
	// StartAdmitting.
	Hold bool

	store      waitroom.Store
	closeStore func() error
	lostWrites func() (places, tokens, spent int64) // nil without Redis
	listener   net.Listener
	httpServer *http.Server
	// metricsServer serves /metrics on --metrics-addr; nil without it.
	metricsServer   *http.Server
	metricsListener net.Listener
	serveErr        chan error
	stopAdmit       context.CancelFunc
	admitDone       chan struct{}
	startAdmit      func()
	shop            *builtinShop        // nil with an upstream
	tuner           *waitroom.RateTuner // nil without --auto-rate
	stopTuner       context.CancelFunc
	tunerDone       chan struct{}
	stopRelay       context.CancelFunc
	relayDone       chan struct{}
}

// Run opens the store, declares the rooms, starts the admitter and starts
// serving. ctx bounds the start only.
func (m *Main) Run(ctx context.Context) error {
	if m.Logger == nil {
		m.Logger = slog.New(slog.DiscardHandler)
	}
	log := m.Logger
	startCtx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()

	if err := m.openStore(startCtx); err != nil {
		return err
	}
	for _, room := range m.Config.Rooms {
		if err := m.declareRoom(startCtx, room); err != nil {
			return err
		}
	}
	// A Redis restarted without its data has lost the rooms: the keeper
	// declares them again (as last seen, else as the flags say), within a
	// second or at once when a request finds one missing.
	declared := make(map[string]waitroom.RoomConfig, len(m.Config.Rooms))
	for _, room := range m.Config.Rooms {
		declared[room] = m.Config.Room.WithDefaults()
	}

	var protected http.Handler
	routes := maps.Clone(m.Routes)
	if routes == nil {
		routes = map[string]http.Handler{}
	}
	adminRoutes := map[string]http.Handler{}
	if m.Config.Upstream != nil {
		p, err := server.NewUpstream(m.Config.Upstream, server.UpstreamOptions{
			Logger:          log,
			DialTimeout:     m.Config.UpstreamDialTimeout,
			ResponseTimeout: m.Config.UpstreamTimeout,
			MaxBody:         m.Config.UpstreamMaxBody,
		})
		if err != nil {
			return err
		}
		protected = p
	} else {
		b, err := m.openShop(startCtx)
		if err != nil {
			return err
		}
		m.shop = b
		opts := shop.Options{UserHeader: m.Config.UserHeader, Logger: log}
		protected = shop.NewHandler(b.store, opts)
		// The owner reads an order without spending a token.
		routes["GET /orders/{id}"] = protected
		// Products and coupons are the operator's, behind the admin token.
		shopAdmin := shop.NewAdminHandler(b.store, opts)
		adminRoutes["/admin/products"] = shopAdmin
		adminRoutes["/admin/products/"] = shopAdmin
		adminRoutes["/admin/coupons"] = shopAdmin
		adminRoutes["/admin/coupons/"] = shopAdmin
		if b.relay != nil {
			relayCtx, stopRelay := context.WithCancel(context.WithoutCancel(ctx))
			m.stopRelay, m.relayDone = stopRelay, make(chan struct{})
			go func() {
				defer close(m.relayDone)
				_ = b.relay.Run(relayCtx) // reconnects by itself; returns when stopped
			}()
		}
	}
	handler, err := server.New(server.Config{
		Store:        m.store,
		Logger:       log,
		UserHeader:   m.Config.UserHeader,
		DefaultRoom:  m.Config.Rooms[0],
		Protected:    protected,
		GatedRoutes:  m.Config.GatedRoutes,
		Routes:       routes,
		OnGateServed: m.observeOrders(),
		AdminToken:   m.Config.AdminToken,
		AdminRoutes:  adminRoutes,
		CookieSecret: m.Config.CookieSecret,
		OrderProduct: m.Config.PageProduct,
		// What the gate does while Redis is down or slow.
		FailurePolicy: m.Config.FailurePolicy,
		StoreTimeout:  m.Config.StoreTimeout,
		DeclaredRooms: declared,
		// Who may be believed, and how much one client may ask.
		TrustedProxies:   m.Config.TrustedProxies,
		UserRateLimit:    m.Config.UserRateLimit,
		VisitorRateLimit: m.Config.VisitorRateLimit,
		Limiter:          m.limiter,
		CookieSecure:     m.Config.CookieSecure,
		JoinChallenge:    m.Config.JoinChallenge,
		LostWrites:       m.lostWrites,
	})
	if err != nil {
		return err
	}
	// From here on every part uses the server's guarded store: one set of
	// timeouts, one outage watch, one keeper.
	m.store = handler.Store()
	keeper := handler.Store().Keeper()
	if m.tuner != nil {
		m.tuner.Store = m.store
	}

	if m.tuner != nil {
		tuneCtx, stopTuner := context.WithCancel(context.WithoutCancel(ctx))
		m.stopTuner, m.tunerDone = stopTuner, make(chan struct{})
		go func() {
			defer close(m.tunerDone)
			_ = m.tuner.Run(tuneCtx) // returns when stopped; failures it logs itself
		}()
	}

	admitCtx, stopAdmit := context.WithCancel(context.WithoutCancel(ctx))
	m.stopAdmit, m.admitDone = stopAdmit, make(chan struct{})
	// Four ticks per slice: late ticks are made up, and each slice's quota
	// reaches the order API in smaller batches.
	every := m.AdmitEvery
	if every == 0 {
		every = max(m.Config.Room.Slice/4, waitroom.MinSlice)
	}
	onAdmit := handler.OnAdmit
	if m.OnAdmit != nil {
		onAdmit = func(room string, admitted []waitroom.Admission) {
			m.OnAdmit(room, admitted)
			handler.OnAdmit(room, admitted)
		}
	}
	admitter := &waitroom.Admitter{Store: m.store, Every: every, Logger: log, OnAdmit: onAdmit}
	m.startAdmit = sync.OnceFunc(func() {
		go func() {
			defer close(m.admitDone)
			var keeping sync.WaitGroup
			keeping.Go(func() { _ = keeper.Run(admitCtx) })
			_ = admitter.Run(admitCtx) // returns when stopped; tick failures it logs itself
			keeping.Wait()
		}()
	})
	if !m.Hold {
		m.startAdmit()
	}

	ln, err := net.Listen("tcp", m.Config.Addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", m.Config.Addr, err)
	}
	m.listener = ln
	m.httpServer = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	m.serveErr = make(chan error, 2)
	go func() {
		if err := m.httpServer.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			m.serveErr <- err
		}
	}()
	if m.Config.MetricsAddr != "" {
		// The scraper's own listener: /metrics off the public one.
		mln, err := net.Listen("tcp", m.Config.MetricsAddr)
		if err != nil {
			return fmt.Errorf("listening on --metrics-addr %s: %w", m.Config.MetricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", handler.MetricsHandler())
		m.metricsListener = mln
		m.metricsServer = &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout,
			WriteTimeout: writeTimeout, IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		go func() {
			if err := m.metricsServer.Serve(mln); !errors.Is(err, http.ErrServerClosed) {
				m.serveErr <- err
			}
		}()
	}

	upstream := "built-in shop"
	if m.Config.Upstream != nil {
		upstream = m.Config.Upstream.Redacted()
	}
	log.Info("waiting room listening", "addr", m.Addr(), "rooms", m.Config.Rooms,
		"rate", m.Config.Room.Rate, "rate_derived", m.Config.RateDerived, "slice", m.Config.Room.Slice,
		"upstream", upstream, "gated_routes", m.Config.GatedRoutes, "admin_api", m.Config.AdminToken != "", "failure_policy", m.Config.FailurePolicy.String())
	return nil
}

// StartAdmitting starts the admitter and the room keeper that Hold kept
// back; a second call does nothing.
func (m *Main) StartAdmitting() { m.startAdmit() }

// Addr is the address the server listens on: with port 0, the port picked.
func (m *Main) Addr() string {
	if m.listener == nil {
		return ""
	}
	return m.listener.Addr().String()
}

// MetricsAddr is the address of the --metrics-addr listener, or "".
func (m *Main) MetricsAddr() string {
	if m.metricsListener == nil {
		return ""
	}
	return m.metricsListener.Addr().String()
}

// ServeErr delivers the error that stopped serving before Close.
func (m *Main) ServeErr() <-chan error { return m.serveErr }

// Close stops serving (letting requests in flight finish, within a bound),
// then the admitter, then closes the store. It is safe after a failed Run.
func (m *Main) Close() error {
	var errs []error
	if m.httpServer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if err := m.httpServer.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
			_ = m.httpServer.Close()
		}
	} else if m.listener != nil {
		_ = m.listener.Close()
	}
	if m.metricsServer != nil {
		_ = m.metricsServer.Close() // scrapes are short; nothing to wait for
	}
	if m.stopAdmit != nil {
		m.stopAdmit()
		m.startAdmit() // so that admitDone closes if Hold kept it back
		<-m.admitDone
	}
	if m.stopTuner != nil {
		m.stopTuner()
		<-m.tunerDone
	}
	if m.stopRelay != nil {
		m.stopRelay()
		<-m.relayDone
	}
	if m.shop != nil {
		m.shop.close()
	}
	if m.closeStore != nil {
		if err := m.closeStore(); err != nil {
			errs = append(errs, fmt.Errorf("closing the store: %w", err))
		}
	}
	return errors.Join(errs...)
}

// lostWritesOf reads what rs found Redis had lost, for /metrics.
func lostWritesOf(rs *redisstore.Store) func() (places, tokens, spent int64) {
	return func() (int64, int64, int64) {
		l := rs.Lost()
		return l.Places, l.Tokens, l.Spent
	}
}

func (m *Main) openStore(ctx context.Context) error {
	if m.Store != nil {
		m.store = m.Store
		if rs, ok := m.Store.(*redisstore.Store); ok {
			m.lostWrites = lostWritesOf(rs)
		}
		return nil
	}
	if m.Config.RedisURL == "" {
		m.Logger.Warn("no --redis-url: rooms are kept in this process only; they are lost on restart and not shared with other instances")
		m.store = memstore.New(memstore.Options{})
		return nil
	}
	// go-redis's own lines (failed dials, Sentinel switches) into our log.
	redisstore.LogTo(m.Logger)
	client, err := redisstore.Open(m.Config.RedisURL)
	if err != nil {
		return err
	}
	m.closeStore = client.Close
	rs := redisstore.New(client, redisstore.Options{Prefix: m.Config.RedisPrefix, Logger: m.Logger})
	// The rate limits count in Redis too, so they hold across instances.
	m.store, m.limiter, m.lostWrites = rs, rs, lostWritesOf(rs)
	if err := m.store.Ping(ctx); err != nil {
		return fmt.Errorf("redis at %s: %w", redactURL(m.Config.RedisURL), err)
	}
	return nil
}

// declareRoom creates room with the configured settings unless it exists.
// An existing room keeps its live settings, which belong to the operator
// (they may have been changed on purpose); a difference is worth a warning.
func (m *Main) declareRoom(ctx context.Context, room string) error {
	want := m.Config.Room.WithDefaults()
	created, err := m.store.CreateRoom(ctx, room, want)
	if err != nil {
		return fmt.Errorf("declaring room %s: %w", room, err)
	}
	if created {
		m.Logger.Info("room created", "room", room)
		return nil
	}
	live, err := m.store.RoomConfig(ctx, room)
	if err != nil {
		return fmt.Errorf("reading room %s: %w", room, err)
	}
	if diff := roomDiff(live, want); len(diff) > 0 {
		m.Logger.Warn("room exists with other settings than the flags; keeping the live ones",
			append([]any{"room", room}, diff...)...)
	}
	return nil
}

// roomDiff lists the fields in which live differs from flags, as slog
// attributes.
func roomDiff(live, flags waitroom.RoomConfig) []any {
	var diff []any
	for _, c := range live.Changes(flags) {
		diff = append(diff, slog.Group(c.Field, "live", c.From, "flags", c.To))
	}
	return diff
}

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// observeOrders returns the gate hook that feeds --auto-rate's tuner with
// the time each successful order took, or nil without --auto-rate.
func (m *Main) observeOrders() func(room string, took time.Duration, status int) {
	if !m.Config.AutoRate {
		return nil
	}
	m.tuner = &waitroom.RateTuner{
		// Store: the server's guarded store, set once it is built.
		Room:   m.Config.Rooms[0],
		Pool:   m.Config.Pool,
		Margin: m.Config.Margin,
		Logger: m.Logger,
	}
	return func(_ string, took time.Duration, status int) {
		// Only orders that ran to success measure the service time; a
		// fast refusal would make the API look faster than it is.
		if status >= 200 && status < 300 {
			m.tuner.Observe(took)
		}
	}
}
