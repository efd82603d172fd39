// Package instance builds one running waiting room from a plain Config:
// the store (Redis, or in process), the rooms it declares, the protected
// order API (a reverse proxy, or the built-in shop with its outbox relay),
// the HTTP server, and the background services (admitter, room keeper,
// rate tuner) with their lifecycle. 'waitroom serve' fills the Config from
// flags and the environment; loadtest --inproc and bench start the same
// server in their process.
package instance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/notify"
	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/server"
	"github.com/waitroom/waitroom/shop"
	"github.com/waitroom/waitroom/upstream"
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

// MaxUpstreamTimeout bounds Config.UpstreamTimeout: it stays below the
// server's write timeout, so the gate, not the connection, decides an
// upstream that is too slow.
const MaxUpstreamTimeout = writeTimeout - 5*time.Second

// Config is what an Instance runs with; 'waitroom serve' reads it from flags
// and the environment.
type Config struct {
	Addr        string
	RedisURL    string // empty: in-process memstore
	RedisPrefix string
	// Room holds the settings every declared room is created with.
	Room waitroom.RoomConfig
	// RateDerived says Room.Rate came from pool, service time and margin.
	RateDerived bool
	// AutoRate keeps the default room's rate at Pool ÷ the measured
	// service time of orders × Margin (waitroom.RateTuner).
	AutoRate bool
	Pool     int
	Margin   float64
	// Rooms to declare at start; the first is the default room.
	Rooms    []string
	Upstream *url.URL // nil: the built-in reference shop is the protected service
	// The proxy to the upstream: its timeouts and the largest answer body.
	UpstreamDialTimeout time.Duration
	UpstreamTimeout     time.Duration
	UpstreamMaxBody     int64
	// The built-in shop, used when there is no upstream.
	DatabaseURL string         // empty: in-process shop store, not durable
	DBPool      int            // the shop's connection pool maximum
	AMQPURL     string         // empty: order events stay in the outbox
	Products    []shop.Product // created at start unless they exist
	// AdminToken is the operator API's bearer token; empty: no admin API.
	AdminToken  string
	GatedRoutes []string
	UserHeader  string
	// CookieSecret signs the waiting page's visitor cookies; empty: the
	// server makes a random one per start.
	CookieSecret []byte
	// SettleSecret is the bearer secret of POST /gate/settle; empty:
	// the forward-auth gate is off.
	SettleSecret string
	// TokenCookieDomain is the shop's domain the waiting page sets the
	// waitroom_token cookie for; empty: none.
	TokenCookieDomain string
	// PageProduct is what the waiting page's order button orders.
	PageProduct string
	// PageDir brands the waiting page (server.Config.PageDir).
	PageDir   string
	LogFormat string
	LogLevel  slog.Level

	// FailurePolicy and StoreTimeout: what the server does while the
	// store is down or slow (server/policy.go).
	FailurePolicy server.FailurePolicy
	StoreTimeout  time.Duration

	// The door: whose user header counts, how much one client may ask,
	// the visitor cookie and the join challenge (server.Config).
	TrustedProxies   []netip.Prefix
	UserRateLimit    float64
	VisitorRateLimit float64
	CookieSecure     bool
	JoinChallenge    int
	// MetricsAddr is the listener of /metrics alone; empty: /metrics is
	// on Addr behind the admin token, or not served without one.
	MetricsAddr string
	// AdminAddr is the listener of the operator API and the dashboard
	// (and /metrics behind the admin token), which Addr then answers 404
	// for; empty: they are on Addr. Needs AdminToken.
	AdminAddr string
	// ShopAddr is a listener of its own for the built-in shop's POST
	// /orders, for a proxy with forward auth in front (deploy/nginx,
	// deploy/caddy, deploy/traefik): it takes orders that carry a
	// /gate/auth answer's headers and settles each hold through POST
	// /gate/settle. Empty: none. Needs SettleSecret and no Upstream.
	ShopAddr string
	// TLSCert and TLSKey are the PEM files of the certificate (with its
	// chain) and its key that every listener serves TLS and HTTP/2 with,
	// taken again when they change; empty: plain HTTP, TLS ends at a
	// proxy in front.
	TLSCert, TLSKey string
	// WebhookURL, if set, is an endpoint for every room's events, signed
	// with WebhookSecrets (whsec_…; several during a rotation, the new one
	// first). The admin API adds more (webhook package).
	WebhookURL     string
	WebhookSecrets []string
	// Telling waiting buyers it is their turn (package notify): the Web
	// Push key pair's file (created if absent), the SMTP server and the
	// From address, and PublicURL, where the return links lead. Empty
	// VAPIDKeyFile and SMTPURL: off.
	VAPIDKeyFile string
	SMTPURL      string
	MailFrom     string
	PublicURL    *url.URL
}

// Instance is one running waiting room: the store, the admitter and the HTTP
// server. Run starts it and returns once it listens; Close stops it. Tests
// start it on port 0 and read Addr. serve, loadtest --inproc and bench all
// build their server with it.
type Instance struct {
	Config Config
	Logger *slog.Logger

	limiter waitroom.Limiter // Redis's on a Redis store; nil: in process

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

	// drainSettles ends the gate's settles still being retried.
	drainSettles func()

	// The listeners of their own: /metrics on --metrics-addr, the
	// operator API on --admin-addr; nil without them.
	metricsServer   *http.Server
	metricsListener net.Listener
	adminServer     *http.Server
	adminListener   net.Listener
	shopServer      *http.Server // nil without --shop-addr
	shopListener    net.Listener
	certs           *certHolder // nil without TLS
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
	hooks           *webhooks
	// Notices of a buyer's turn (notify.go), and the cookie secret they
	// share the key of; nil notices: off.
	notices      *notify.Notifier
	cookieSecret []byte
	registry     *prometheus.Registry // the server's, with the webhooks' metrics
}

// Run opens the store, declares the rooms, starts the admitter and starts
// serving. ctx bounds the start only. Its steps, in order: the settings
// checked, the certificate, the store and its rooms, the one guarded
// store, the protected order API, the HTTP server, the rate tuner and the
// admitter, the listeners, and the line that says so.
func (in *Instance) Run(ctx context.Context) error {
	if in.Logger == nil {
		in.Logger = slog.New(slog.DiscardHandler)
	}
	if err := in.Config.Validate(); err != nil {
		return err
	}
	startCtx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	if err := in.loadCertificate(); err != nil {
		return err
	}
	if err := in.openStore(startCtx); err != nil {
		return err
	}
	live, err := in.declareRooms(startCtx)
	if err != nil {
		return err
	}
	raw := in.store
	guarded := in.guardStore()
	hooks, err := in.newWebhooks(raw)
	if err != nil {
		return err
	}
	in.hooks = hooks
	if in.notices, in.cookieSecret, err = in.newNotifier(guarded, in.Logger); err != nil {
		return err
	}
	orders, err := in.orderAPI(ctx, startCtx)
	if err != nil {
		return err
	}
	hooks.routes(orders.adminRoutes)
	handler, err := server.New(in.serverConfig(orders))
	if err != nil {
		return err
	}
	in.drainSettles = handler.DrainSettles
	in.startTuner(ctx)
	hooks.start(ctx, in.store)
	in.prepareAdmitter(ctx, handler, guarded.Keeper())
	if !in.Hold {
		in.startAdmit()
	}
	if err := in.listen(handler, orders.protected); err != nil {
		return err
	}
	in.logListening(live)
	return nil
}

// loadCertificate reads the TLS pair, if any, before anything else
// starts: a bad pair refuses the start.
func (in *Instance) loadCertificate() error {
	if in.Config.TLSCert == "" {
		return nil
	}
	certs, err := newCertHolder(in.Config.TLSCert, in.Config.TLSKey, in.Logger)
	if err != nil {
		return err
	}
	in.certs = certs
	return nil
}

// declareRooms declares every room and returns the default room's
// settings as the store keeps them: an existing room's live ones, not
// the flags'.
func (in *Instance) declareRooms(ctx context.Context) (waitroom.RoomConfig, error) {
	var live waitroom.RoomConfig
	for i, room := range in.Config.Rooms {
		cfg, err := in.declareRoom(ctx, room)
		if err != nil {
			return live, err
		}
		if i == 0 {
			live = cfg
		}
	}
	return live, nil
}

// guardStore wraps the store once: from here on every part uses it, one
// set of timeouts, one outage watch, one keeper. A Redis restarted
// without its data has lost the rooms: the keeper declares them again (as
// last seen, else as the flags say), within a second or at once when a
// request finds one missing.
func (in *Instance) guardStore() *waitroom.GuardedStore {
	declared := make(map[string]waitroom.RoomConfig, len(in.Config.Rooms))
	for _, room := range in.Config.Rooms {
		declared[room] = in.Config.Room.WithDefaults()
	}
	guarded := waitroom.Guard(in.store, waitroom.GuardOptions{Timeout: in.Config.StoreTimeout, Logger: in.Logger, Rooms: declared})
	in.store = guarded
	return guarded
}

// orderRoutes is the order API the gate guards and the routes that come
// with it.
type orderRoutes struct {
	protected   http.Handler
	routes      map[string]http.Handler // Instance.Routes and the shop's own
	adminRoutes map[string]http.Handler // the shop's, behind the admin token
}

// orderAPI is the protected order API: the reverse proxy to
// Config.Upstream, or else the built-in shop.
func (in *Instance) orderAPI(ctx, startCtx context.Context) (orderRoutes, error) {
	o := orderRoutes{routes: maps.Clone(in.Routes), adminRoutes: map[string]http.Handler{}}
	if o.routes == nil {
		o.routes = map[string]http.Handler{}
	}
	if in.Config.Upstream == nil {
		return o, in.builtInShop(ctx, startCtx, &o)
	}
	p, err := upstream.New(in.Config.Upstream, upstream.Options{
		Logger:          in.Logger,
		DialTimeout:     in.Config.UpstreamDialTimeout,
		ResponseTimeout: in.Config.UpstreamTimeout,
		MaxBody:         in.Config.UpstreamMaxBody,
	})
	o.protected = p
	return o, err
}

// builtInShop opens the built-in shop, adds its routes to o, and starts
// its outbox relay, if any, which runs until Close.
func (in *Instance) builtInShop(ctx, startCtx context.Context, o *orderRoutes) error {
	b, err := in.openShop(startCtx)
	if err != nil {
		return err
	}
	in.shop = b
	opts := shop.Options{UserHeader: in.Config.UserHeader, Logger: in.Logger}
	o.protected = shop.NewHandler(b.store, opts)
	// The owner reads an order without spending a token.
	o.routes["GET /orders/{id}"] = o.protected
	// Products and coupons are the operator's, behind the admin token.
	shopAdmin := shop.NewAdminHandler(b.store, opts)
	o.adminRoutes["/admin/products"] = shopAdmin
	o.adminRoutes["/admin/products/"] = shopAdmin
	o.adminRoutes["/admin/coupons"] = shopAdmin
	o.adminRoutes["/admin/coupons/"] = shopAdmin
	if b.relay != nil {
		relayCtx, stopRelay := context.WithCancel(context.WithoutCancel(ctx))
		in.stopRelay, in.relayDone = stopRelay, make(chan struct{})
		go func() {
			defer close(in.relayDone)
			_ = b.relay.Run(relayCtx) // reconnects by itself; returns when stopped
		}()
	}
	return nil
}

// serverConfig is the HTTP server's configuration: the guarded store, the
// order API and the settings.
func (in *Instance) serverConfig(o orderRoutes) server.Config {
	return server.Config{
		Store:        in.store,
		Logger:       in.Logger,
		UserHeader:   in.Config.UserHeader,
		DefaultRoom:  in.Config.Rooms[0],
		Protected:    o.protected,
		GatedRoutes:  in.Config.GatedRoutes,
		Routes:       o.routes,
		OnGateServed: in.observeOrders(),
		// The webhooks' events: orders settled, rooms the operator changed.
		OnGateSettled: in.hooks.emitter.Settled,
		OnRoomChange:  in.hooks.roomChanged,
		AdminToken:    in.Config.AdminToken,
		AdminRoutes:   o.adminRoutes,
		AdminApart:    in.Config.AdminAddr != "",
		CookieSecret:  in.cookieSecret,
		SettleSecret:  in.Config.SettleSecret,
		Notifier:      in.notices,
		OrderProduct:  in.Config.PageProduct,
		PageDir:       in.Config.PageDir,
		// Forward auth from the shop's own pages.
		TokenCookieDomain: in.Config.TokenCookieDomain,
		// What the gate does while Redis is down or slow.
		FailurePolicy: in.Config.FailurePolicy,
		// Who may be believed, and how much one client may ask.
		TrustedProxies:   in.Config.TrustedProxies,
		UserRateLimit:    in.Config.UserRateLimit,
		VisitorRateLimit: in.Config.VisitorRateLimit,
		Limiter:          in.limiter,
		CookieSecure:     in.Config.CookieSecure,
		JoinChallenge:    in.Config.JoinChallenge,
		LostWrites:       in.lostWrites,
		Registry:         in.registry,
	}
}

// startTuner starts the rate tuner, if any, on the guarded store; it runs
// until Close.
func (in *Instance) startTuner(ctx context.Context) {
	if in.tuner == nil {
		return
	}
	in.tuner.Store = in.store
	tuneCtx, stopTuner := context.WithCancel(context.WithoutCancel(ctx))
	in.stopTuner, in.tunerDone = stopTuner, make(chan struct{})
	go func() {
		defer close(in.tunerDone)
		_ = in.tuner.Run(tuneCtx) // returns when stopped; failures it logs itself
	}()
}

// prepareAdmitter makes the admitter and the room keeper, started
// together by in.startAdmit (at once, or by StartAdmitting with Hold);
// they run until Close.
func (in *Instance) prepareAdmitter(ctx context.Context, handler *server.Server, keeper *waitroom.RoomKeeper) {
	admitCtx, stopAdmit := context.WithCancel(context.WithoutCancel(ctx))
	in.stopAdmit, in.admitDone = stopAdmit, make(chan struct{})
	// Four ticks per slice: late ticks are made up, and each slice's quota
	// reaches the order API in smaller batches.
	every := in.AdmitEvery
	if every == 0 {
		every = max(in.Config.Room.Slice/4, waitroom.MinSlice)
	}
	onAdmit := func(room string, admitted []waitroom.Admission) {
		if in.OnAdmit != nil {
			in.OnAdmit(room, admitted)
		}
		handler.OnAdmit(room, admitted)
		if in.notices != nil {
			in.notices.OnAdmit(room, admitted) // sends in the background
		}
	}
	admitter := &waitroom.Admitter{Store: in.store, Every: every, Logger: in.Logger, OnAdmit: onAdmit}
	in.startAdmit = sync.OnceFunc(func() {
		go func() {
			defer close(in.admitDone)
			var keeping sync.WaitGroup
			keeping.Go(func() { _ = keeper.Run(admitCtx) })
			_ = admitter.Run(admitCtx) // returns when stopped; tick failures it logs itself
			keeping.Wait()
		}()
	})
}

// listen serves handler on Config.Addr, and /metrics, the operator API
// and the shop's orders (protected, settling its holds) on listeners of
// their own when Config.MetricsAddr, AdminAddr and ShopAddr say so.
func (in *Instance) listen(handler *server.Server, protected http.Handler) error {
	ln, err := net.Listen("tcp", in.Config.Addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", in.Config.Addr, err)
	}
	in.listener = ln
	in.serveErr = make(chan error, 3)
	in.httpServer = in.serve(ln, handler)
	if in.Config.MetricsAddr != "" {
		// The scraper's own listener: /metrics off the public one.
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", handler.MetricsHandler())
		if in.metricsServer, in.metricsListener, err = in.serveAside("--metrics-addr", in.Config.MetricsAddr, mux); err != nil {
			return err
		}
	}
	if in.Config.AdminAddr != "" {
		// The operator's own listener: the admin API off the public one.
		if in.adminServer, in.adminListener, err = in.serveAside("--admin-addr", in.Config.AdminAddr, handler.AdminHandler()); err != nil {
			return err
		}
	}
	if in.Config.ShopAddr != "" {
		// The shop's own listener, behind the operator's proxy.
		if in.shopServer, in.shopListener, err = in.serveAside("--shop-addr", in.Config.ShopAddr, in.settlingShop(protected, handler)); err != nil {
			return err
		}
	}
	return nil
}

// logListening says the instance serves, with what: live is the default
// room's settings as the store keeps them.
func (in *Instance) logListening(live waitroom.RoomConfig) {
	orders := "built-in shop"
	if in.Config.Upstream != nil {
		orders = in.Config.Upstream.Redacted()
	}
	// Where the operator API is served, or off.
	adminAPI := "off"
	switch {
	case in.Config.AdminAddr != "":
		adminAPI = in.AdminAddr()
	case in.Config.AdminToken != "":
		adminAPI = in.Addr()
	}
	in.Logger.Info("waiting room listening", "addr", in.Addr(), "tls", in.certs != nil, "rooms", in.Config.Rooms,
		"rate", live.Rate, "rate_derived", in.Config.RateDerived && live.Rate == in.Config.Room.Rate, "slice", live.Slice,
		"upstream", orders, "gated_routes", in.Config.GatedRoutes, "admin_api", adminAPI, "failure_policy", in.Config.FailurePolicy.String(),
		"gomaxprocs", runtime.GOMAXPROCS(0)) // the cores this process schedules on (OPERATIONS.md)
}

// serveAside serves h on a listener of its own at addr (named by its flag
// in the error), as the public server serves.
func (in *Instance) serveAside(flag, addr string, h http.Handler) (*http.Server, net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listening on %s %s: %w", flag, addr, err)
	}
	return in.serve(ln, h), ln, nil
}

// serve serves h on ln with the server's bounds, over TLS with HTTP/2 and
// HTTP/1.1 when the instance has a certificate (the same on every
// listener: one name's certificate, one renewal), in plain HTTP/1.1
// otherwise. An end other than Close goes to ServeErr.
func (in *Instance) serve(ln net.Listener, h http.Handler) *http.Server {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout,
		WriteTimeout: writeTimeout, IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes,
		ErrorLog: slog.NewLogLogger(in.Logger.Handler(), slog.LevelWarn)}
	run := func() error { return srv.Serve(ln) }
	if in.certs != nil {
		srv.TLSConfig = in.certs.tlsConfig()
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetHTTP2(true)
		run = func() error { return srv.ServeTLS(ln, "", "") }
	}
	go func() {
		if err := run(); !errors.Is(err, http.ErrServerClosed) {
			in.serveErr <- err
		}
	}()
	return srv
}

// ServeStore serves store with cfg's server (on cfg.Addr, routes beside
// its own) and neither admitter nor room keeper, so a benchmark's rooms
// stay as it fills them. It returns the base URL and what stops it.
func ServeStore(ctx context.Context, cfg Config, store waitroom.Store, routes map[string]http.Handler) (baseURL string, stop func(), err error) {
	in := &Instance{Config: cfg, Store: store, Routes: routes, Hold: true}
	if err := in.Run(ctx); err != nil {
		_ = in.Close()
		return "", nil, err
	}
	return "http://" + in.Addr(), func() { _ = in.Close() }, nil
}

// StartAdmitting starts the admitter and the room keeper that Hold kept
// back; a second call does nothing.
func (in *Instance) StartAdmitting() { in.startAdmit() }

// SetWebhooks stops the webhooks (on false): their emitter, dispatcher
// and watcher end as at Close, and every room's outbox is turned off, so
// that admissions write none; on true starts them again as Run did,
// marking the outboxes first. A benchmark measures one server with and
// without them in turns; serve never calls it.
func (in *Instance) SetWebhooks(ctx context.Context, on bool) error {
	if in.hooks == nil {
		return errors.New("instance: SetWebhooks before Run")
	}
	if on {
		return in.hooks.run(ctx, in.store)
	}
	return in.hooks.pause(ctx, in.store)
}

// Addr is the address the server listens on: with port 0, the port picked.
func (in *Instance) Addr() string {
	if in.listener == nil {
		return ""
	}
	return in.listener.Addr().String()
}

// MetricsAddr is the address of the --metrics-addr listener, or "".
func (in *Instance) MetricsAddr() string {
	if in.metricsListener == nil {
		return ""
	}
	return in.metricsListener.Addr().String()
}

// AdminAddr is the address of the --admin-addr listener, or "".
func (in *Instance) AdminAddr() string {
	if in.adminListener == nil {
		return ""
	}
	return in.adminListener.Addr().String()
}

// ShopAddr is the address of the --shop-addr listener, or "".
func (in *Instance) ShopAddr() string {
	if in.shopListener == nil {
		return ""
	}
	return in.shopListener.Addr().String()
}

// ServeErr delivers the error that stopped serving before Close.
func (in *Instance) ServeErr() <-chan error { return in.serveErr }

// Close stops serving (letting requests in flight finish, within a bound),
// then the admitter, then closes the store. It is safe after a failed Run.
func (in *Instance) Close() error {
	var errs []error
	if in.httpServer != nil {
		errs = append(errs, shutdown("http", in.httpServer))
	} else if in.listener != nil {
		_ = in.listener.Close()
	}
	if in.shopServer != nil {
		// Orders in flight finish and settle, in process, before the
		// store closes.
		errs = append(errs, shutdown("shop", in.shopServer))
	}
	if in.metricsServer != nil {
		_ = in.metricsServer.Close() // scrapes are short; nothing to wait for
	}
	if in.adminServer != nil {
		_ = in.adminServer.Close() // an operator's call is retried by hand
	}
	if in.drainSettles != nil {
		// Orders that succeeded while the store stalled: a last attempt to
		// settle each before the store is closed.
		in.drainSettles()
	}
	if in.stopAdmit != nil {
		in.stopAdmit()
		in.startAdmit() // so that admitDone closes if Hold kept it back
		<-in.admitDone
	}
	if in.hooks != nil {
		// After the admitter: its last admissions are appended too.
		in.hooks.close()
	}
	if in.notices != nil {
		// The notices of the last admissions go out before the store
		// (which they read) is closed; each is bounded by its timeout.
		in.notices.Wait()
	}
	if in.stopTuner != nil {
		in.stopTuner()
		<-in.tunerDone
	}
	if in.stopRelay != nil {
		in.stopRelay()
		<-in.relayDone
	}
	if in.shop != nil {
		in.shop.close()
	}
	if in.closeStore != nil {
		if err := in.closeStore(); err != nil {
			errs = append(errs, fmt.Errorf("closing the store: %w", err))
		}
	}
	return errors.Join(errs...)
}

// shutdown lets srv's requests in flight finish, within a bound, then
// closes it; name says which listener failed to.
func shutdown(name string, srv *http.Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("%s shutdown: %w", name, err)
	}
	return nil
}

// lostWritesOf reads what rs found Redis had lost, for /metrics.
func lostWritesOf(rs *redisstore.Store) func() (places, tokens, spent int64) {
	return func() (int64, int64, int64) {
		l := rs.Lost()
		return l.Places, l.Tokens, l.Spent
	}
}

func (in *Instance) openStore(ctx context.Context) error {
	if in.Store != nil {
		in.store = in.Store
		if rs, ok := in.Store.(*redisstore.Store); ok {
			// Counted where serve counts them, so that bench and
			// loadtest --inproc measure the server serve runs.
			in.limiter, in.lostWrites = rs, lostWritesOf(rs)
		}
		return nil
	}
	if in.Config.RedisURL == "" {
		in.Logger.Warn("no --redis-url: rooms are kept in this process only; they are lost on restart and not shared with other instances")
		in.store = memstore.New(memstore.Options{})
		return nil
	}
	// go-redis's own lines (failed dials, Sentinel switches) into our log.
	redisstore.LogTo(in.Logger)
	client, err := redisstore.Open(in.Config.RedisURL)
	if err != nil {
		return err
	}
	in.closeStore = client.Close
	rs := redisstore.New(client, redisstore.Options{Prefix: in.Config.RedisPrefix, Logger: in.Logger})
	// The rate limits count in Redis too, so they hold across instances.
	in.store, in.limiter, in.lostWrites = rs, rs, lostWritesOf(rs)
	if err := in.store.Ping(ctx); err != nil {
		return fmt.Errorf("redis at %s: %w", RedactURL(in.Config.RedisURL), err)
	}
	if len(in.Config.CookieSecret) == 0 {
		// Redis is shared and outlives the process; a random key is not.
		in.Logger.Warn("no --cookie-secret on a Redis store: visitor cookies, return links and forward-auth holds signed here verify on this instance only, until it restarts; give every instance the same --cookie-secret")
	}
	return nil
}

// declareRoom creates room with the configured settings unless it exists,
// and returns the settings the room has. An existing room keeps its live
// settings, which belong to the operator (they may have been changed on
// purpose); a difference is worth a warning.
func (in *Instance) declareRoom(ctx context.Context, room string) (waitroom.RoomConfig, error) {
	want := in.Config.Room.WithDefaults()
	created, err := in.store.CreateRoom(ctx, room, want)
	if err != nil {
		return want, fmt.Errorf("declaring room %s: %w", room, err)
	}
	if created {
		in.Logger.Info("room created", "room", room)
		// A start after the opening with the same flags must still start
		// (the room may have opened on time before a restart), so a
		// passed opening is told, not refused; a new room opens at once.
		if opens := want.OpensAt; !opens.IsZero() && !opens.After(time.Now()) {
			in.Logger.Warn("--opens-at is in the past: the room opens at once, without the scheduled wait and draw; check the date",
				"room", room, "opens_at", opens.Format(time.RFC3339), "ago", time.Since(opens).Round(time.Second))
		}
		return want, nil
	}
	live, err := in.store.RoomConfig(ctx, room)
	if err != nil {
		return want, fmt.Errorf("reading room %s: %w", room, err)
	}
	if diff := roomDiff(live, want); len(diff) > 0 {
		in.Logger.Warn("room exists with other settings than the flags; keeping the live ones",
			append([]any{"room", room}, diff...)...)
	}
	return live, nil
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

// RedactURL is raw without its password, for logs and errors.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// observeOrders returns the gate hook that feeds --auto-rate's tuner with
// the time each successful order took, or nil without --auto-rate.
func (in *Instance) observeOrders() func(room string, took time.Duration, status int) {
	if !in.Config.AutoRate {
		return nil
	}
	in.tuner = &waitroom.RateTuner{
		// Store: the instance's guarded store, set once it is built.
		Room:   in.Config.Rooms[0],
		Pool:   in.Config.Pool,
		Margin: in.Config.Margin,
		// Without orders to measure, the rate returns to the one from
		// --service-time, not to what a restart finds live.
		StartRate: in.Config.Room.Rate,
		Logger:    in.Logger,
	}
	return func(_ string, took time.Duration, status int) {
		// Only orders that ran to success measure the service time; a
		// fast refusal would make the API look faster than it is.
		if status >= 200 && status < 300 {
			in.tuner.Observe(took)
		}
	}
}

// Guarded is the store every part of the running instance uses: the
// guarded one, with its timeouts, outage watch and room keeper. Nil before Run.
func (in *Instance) Guarded() waitroom.Store { return in.store }

// Tuner is the --auto-rate tuner steering the default room's rate; nil
// without Config.AutoRate.
func (in *Instance) Tuner() *waitroom.RateTuner { return in.tuner }
