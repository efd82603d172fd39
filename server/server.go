// Package server is waitroom's HTTP API: entering and polling a room's
// queue, leaving it, the waiting page, the gate in front of the protected
// routes, and health checks; New mounts the operator API (package admin)
// under /admin/ on the same mux or, apart, on AdminHandler's. Every error answer is {"error":{"code","message"}} with the status
// its code declares (waitroom.Classify, errors.go of the root package).
package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/admin"
	"github.com/waitroom/waitroom/internal/httperr"
	"github.com/waitroom/waitroom/notify"
)

// Defaults of the fields of Config left zero.
const (
	DefaultRoom          = "default"
	DefaultGatedRoute    = "POST /orders"
	DefaultConfigRefresh = time.Second
)

// maxRateLimit bounds the per-second limits: beyond it a limit limits
// nothing a server could serve.
const maxRateLimit = 1_000_000

// readyTimeout bounds the store ping of /readyz, so a hung store reads as
// not ready instead of hanging the probe.
const readyTimeout = 2 * time.Second

// Config configures a Server. Only Store is required.
type Config struct {
	// Store holds the rooms. A *waitroom.GuardedStore is used as it is (give
	// the same one to the admitter, its keeper and the rate tuner, so every
	// part sees one store); any other Store is guarded here, by
	// StoreTimeout and DeclaredRooms.
	Store waitroom.Store
	// Logger; default discards. Requests are logged at debug level only.
	Logger *slog.Logger
	// UserHeader names the header that carries the user id, set by the
	// shop's auth layer; default waitroom.DefaultUserHeader (X-User-Id).
	UserHeader string
	// DefaultRoom is served by /queue/enter and /queue/position, and its
	// tokens open the gated routes; default "default".
	DefaultRoom string
	// Protected is what the gate guards: a reverse proxy to the order API
	// (upstream.New) or the order handler itself. Nil: the gated routes
	// answer 404 NOT_CONFIGURED.
	Protected http.Handler
	// GatedRoutes are the ServeMux patterns that reach Protected through
	// the gate; default ["POST /orders"].
	GatedRoutes []string
	// Routes are extra ServeMux patterns served without the gate, such as
	// "GET /orders/{id}" of the shop or an admin handler wrapped in its
	// own authentication.
	Routes map[string]http.Handler
	// AdminToken is the bearer token of the operator API under /admin/
	// (package admin). Empty: the admin API is off and answers 404.
	AdminToken string
	// AdminRoutes are extra ServeMux patterns under /admin/, such as the
	// shop's "/admin/products", served behind the same bearer token.
	AdminRoutes map[string]http.Handler
	// AdminApart serves the operator API and the dashboard (and /metrics
	// behind the admin token) only through AdminHandler, for a listener of
	// their own (waitroom serve --admin-addr); the Server itself answers
	// 404 for them.
	AdminApart bool
	// AdminAuthLimit bounds the failed bearer attempts per client address
	// (admin.Config.AuthLimit); zero: admin.DefaultAuthLimit.
	AdminAuthLimit waitroom.Limit
	// Now is the clock of the operator API: what counts as an opens_at in
	// the past, and the failed attempts' limit. Nil: time.Now; a test whose
	// store keeps a clock of its own gives that one.
	Now func() time.Time
	// Registry receives the server's metrics, served by MetricsHandler
	// and at /metrics (PublicMetrics); default a new one per Server (with
	// Go and process metrics), never the global one.
	Registry *prometheus.Registry
	// PublicMetrics serves /metrics to anyone. Without it /metrics needs
	// the admin bearer token (AdminToken), and is not served without one:
	// serve MetricsHandler on a listener of its own instead.
	PublicMetrics bool
	// LostWrites, if set, tells what the store's backend lost (redisstore's
	// Store.Lost): queue places, entry tokens, and lost issues of tokens
	// already spent; /metrics serves them. Nil: nothing is lost (an
	// in-process store loses only with its process).
	LostWrites func() (places, tokens, spent int64)
	// ConfigRefresh is how long a room's settings (its rate, for ETAs and
	// poll hints) are used before they are read again; default 1 s.
	ConfigRefresh time.Duration
	// OnGateOutcome, if set, is told each gated request's outcome (see
	// waitroom.Gate.OnOutcome); the hook for metrics.
	OnGateOutcome func(room, outcome string)
	// OnGateServed, if set, is told how long each order the gate let
	// through took and what it answered (see waitroom.Gate.OnServed).
	OnGateServed func(room string, took time.Duration, status int)
	// OnGateSettled, if set, is told each hold the gate or POST
	// /gate/settle settled (see waitroom.Gate.OnSettled); the webhooks'
	// hook.
	OnGateSettled func(hold waitroom.Hold, outcome string)
	// OnRoomChange, if set, is told each room the operator API created
	// (from is the zero RoomConfig, created true) or changed, with the
	// settings before and after; the webhooks' hook.
	OnRoomChange func(room string, from, to waitroom.RoomConfig, created bool)
	// CookieSecret signs the waiting page's visitor cookies (HMAC-SHA256),
	// which identify browsers that come without the user header; at least
	// MinCookieSecret bytes. Empty: a random secret, so visitor cookies do
	// not survive a restart and are not shared between instances.
	CookieSecret []byte
	// OrderProduct is the product id the waiting page orders when the
	// visitor's turn comes (POST to the first plain POST gated route).
	// Empty: the page shows the entry's time left without an order button.
	OrderProduct string
	// PageDir brands the waiting page: logo.svg or logo.png, theme.css,
	// messages/LANG.json and page.html, read and checked once by New
	// (brand.go; OPERATIONS.md, "Branding the page"). Empty: the built-in
	// page.
	PageDir string
	// FailurePolicy says what each room does while the store is down
	// (policy.go); the zero value fails closed everywhere.
	FailurePolicy FailurePolicy
	// StoreTimeout bounds each store call; default DefaultStoreTimeout
	// (1 s). Not with a *waitroom.GuardedStore: it has its own.
	StoreTimeout time.Duration
	// DeclaredRooms are the rooms this server declared at start: the
	// store's keeper brings them back if the store loses them. Not with a
	// *waitroom.GuardedStore: give them to waitroom.Guard.
	DeclaredRooms map[string]waitroom.RoomConfig

	// TrustedProxies are the peers whose user header and X-Forwarded-For
	// hops are believed; from anyone else the user header is removed and
	// the visitor cookie decides. Nil: DefaultTrustedProxies (loopback);
	// empty and not nil: nobody.
	TrustedProxies []netip.Prefix
	// UserRateLimit is requests per second per user on the queue
	// endpoints (enter, status, leave, the page), with a burst of two
	// seconds' worth; beyond it 429 RATE_LIMITED, and the place is kept.
	// 0: off.
	UserRateLimit float64
	// VisitorRateLimit is new visitors per second per client address, an
	// IPv4 address or an IPv6 /64 (TrustedProxies decide which
	// X-Forwarded-For hop that is); 0: off. The serve command's default is
	// DefaultVisitorRateLimit.
	VisitorRateLimit float64
	// Limiter keeps the counts of both limits; nil: in this process only
	// (waitroom.LocalLimiter). A waitroom.SharedLimiter (redisstore.Store)
	// shares them between instances: this one answers its share of each
	// limit itself (1/FailurePolicy.Instances) and asks the shared one,
	// bounded by StoreTimeout, only beyond it (waitroom.LocalShare). Any
	// other Limiter is called as is, so it must be in process.
	Limiter waitroom.Limiter
	// CookieSecure marks visitor cookies Secure even on plain HTTP, for
	// TLS that ends at a proxy in front.
	CookieSecure bool
	// CookieMaxAge is how long a visitor cookie is accepted after it was
	// issued; default DefaultCookieMaxAge (24 h).
	CookieMaxAge time.Duration
	// SettleSecret is the bearer secret of POST /gate/settle, at least
	// MinCookieSecret bytes; with it the forward-auth gate (GET
	// /gate/auth, fwdauth.go) is on. Empty: both answer 404
	// NOT_CONFIGURED. Hold ids are sealed with CookieSecret, so every
	// instance needs the same one.
	SettleSecret string
	// TokenCookieDomain, if set, is the shop's domain: an admitted
	// visitor's page and status answers set the entry token there as
	// the waitroom_token cookie, which /gate/auth reads without
	// X-Entry-Token.
	TokenCookieDomain string
	// JoinChallenge is the proof of work asked before a new place, in
	// leading zero bits of SHA-256 (DefaultJoinDifficulty is a good
	// start); 0: none.
	JoinChallenge int
	// Notifier, if set, tells waiting buyers who ask for it that it is
	// their turn (notify.go): its OnAdmit must get the admitter's
	// admissions. Nil: the notify routes answer 404 NOT_CONFIGURED.
	Notifier *notify.Notifier
}

// Server is the waiting room's http.Handler.
type Server struct {
	store         *waitroom.GuardedStore
	gate          *waitroom.Gate // nil without a protected handler
	log           *slog.Logger
	userHeader    string
	defaultRoom   string
	configRefresh time.Duration
	mux           *http.ServeMux
	adminMux      *http.ServeMux // the operator's routes with Config.AdminApart; else nil
	admin         *admin.Handler // the operator API, nil when off
	adminIn       *http.ServeMux // the mux admin is mounted in
	metrics       *metrics
	rooms         sync.Map // room name → *cachedRoom
	missing       missingRooms
	draws         drawCache
	paces         sync.Map // room name → *cachedPace
	visitors      visitors
	orderPath     string // where the waiting page posts an order; "" for none
	orderProduct  string
	brand         *brand             // the page's template, policy, files and messages
	pages         waitroom.PageStore // rooms' own pages (roompage.go); nil when the store keeps none
	roomBrands    roomBrands
	policy        *policyEnforcer

	userHeaderKey  string // s.userHeader in canonical form
	trusted        trustedProxies
	limiter        waitroom.Limiter
	userLimit      waitroom.Limit
	visitorLimit   waitroom.Limit
	joinDifficulty int
	storeTimeout   time.Duration
	hotRoutes      bool // hotRoute may route ENTER and STATUS (hotpath.go)

	// The forward-auth gate (fwdauth.go); tokenCookieDomain is
	// Config.TokenCookieDomain.
	fwdGate           *waitroom.Gate
	holds             holdSealer
	settleSecret      [sha256.Size]byte
	tokenCookieDomain string

	notifier *notify.Notifier
}

// New returns a Server for cfg, or an error naming the bad field. Its
// steps, in order: the settings with their defaults, checked; the store
// and what stands on it (the failure policy, the limiter); the metrics;
// the operator API; the crowd's routes with the gates; the routes on
// their muxes.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("server: Config.Store is required")
	}
	s := withDefaults(cfg)
	if err := s.checkSettings(cfg); err != nil {
		return nil, err
	}
	var err error
	if s.brand, err = loadBrand(cfg.PageDir); err != nil {
		return nil, fmt.Errorf("server: Config.PageDir: %w", err)
	}
	if err := s.useStore(cfg); err != nil {
		return nil, err
	}
	s.pages, _ = s.store.Pages()
	m, err := newMetrics(cfg.Registry, s.store, s.log, cfg.LostWrites)
	if err != nil {
		return nil, fmt.Errorf("server: registering metrics: %w", err)
	}
	s.metrics = m
	adm, err := admin.New(s.adminConfig(cfg))
	if err != nil {
		return nil, err
	}
	routes, err := s.crowdRoutes(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.registerRoutes(cfg, routes, adm); err != nil {
		return nil, err
	}
	return s, nil
}

// withDefaults is the Server cfg describes, each setting left zero given
// its default.
func withDefaults(cfg Config) *Server {
	s := &Server{
		log:            cfg.Logger,
		userHeader:     cfg.UserHeader,
		defaultRoom:    cfg.DefaultRoom,
		configRefresh:  cfg.ConfigRefresh,
		mux:            http.NewServeMux(),
		visitors:       visitors{secret: cfg.CookieSecret, maxAge: cfg.CookieMaxAge, secure: cfg.CookieSecure, now: time.Now},
		trusted:        trustedProxies(cfg.TrustedProxies),
		joinDifficulty: cfg.JoinChallenge,
		orderProduct:   cfg.OrderProduct,
		userLimit:      waitroom.Limit{Rate: cfg.UserRateLimit, Burst: limitBurst(cfg.UserRateLimit)},
		visitorLimit:   waitroom.Limit{Rate: cfg.VisitorRateLimit, Burst: limitBurst(cfg.VisitorRateLimit)},
		notifier:       cfg.Notifier,
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.userHeader == "" {
		s.userHeader = waitroom.DefaultUserHeader
	}
	s.userHeaderKey = http.CanonicalHeaderKey(s.userHeader)
	if s.defaultRoom == "" {
		s.defaultRoom = DefaultRoom
	}
	if s.configRefresh <= 0 {
		s.configRefresh = DefaultConfigRefresh
	}
	if cfg.TrustedProxies == nil {
		s.trusted = DefaultTrustedProxies
	}
	if s.visitors.maxAge <= 0 {
		s.visitors.maxAge = DefaultCookieMaxAge
	}
	if len(s.visitors.secret) == 0 {
		s.visitors.secret = newVisitorSecret()
	}
	s.tokenCookieDomain = cfg.TokenCookieDomain
	return s
}

// checkSettings refuses what the server cannot run with, naming the field.
func (s *Server) checkSettings(cfg Config) error {
	if !waitroom.ValidRoomName(s.defaultRoom) {
		return fmt.Errorf("server: Config.DefaultRoom %q is not a valid room name", s.defaultRoom)
	}
	for name, rate := range map[string]float64{"UserRateLimit": cfg.UserRateLimit, "VisitorRateLimit": cfg.VisitorRateLimit} {
		if math.IsNaN(rate) || rate < 0 || rate > maxRateLimit {
			return fmt.Errorf("server: Config.%s must be in [0, %d] per second, got %g", name, maxRateLimit, rate)
		}
	}
	if cfg.JoinChallenge < 0 || cfg.JoinChallenge > MaxJoinDifficulty {
		return fmt.Errorf("server: Config.JoinChallenge must be in [0, %d] bits, got %d", MaxJoinDifficulty, cfg.JoinChallenge)
	}
	if n := len(cfg.CookieSecret); n > 0 && n < MinCookieSecret {
		return fmt.Errorf("server: Config.CookieSecret has %d bytes; at least %d are needed", n, MinCookieSecret)
	}
	if d := cfg.TokenCookieDomain; d != "" && !validCookieDomain(d) {
		return fmt.Errorf("server: Config.TokenCookieDomain %q is not a domain", d)
	}
	return cfg.FailurePolicy.validate()
}

// useStore takes the guarded store and what answers from it: the failure
// policy (each room's last rate) and the limiter (its shared counts
// bounded by the store's timeout).
func (s *Server) useStore(cfg Config) error {
	store, err := guardStore(cfg, s.log)
	if err != nil {
		return err
	}
	s.store, s.storeTimeout = store, store.Timeout()
	s.policy = newPolicyEnforcer(cfg.FailurePolicy, store.LastRate, s.log.WarnContext)
	switch lim := cfg.Limiter.(type) {
	case nil:
		s.limiter = waitroom.NewLocalLimiter(nil)
	case waitroom.SharedLimiter:
		s.limiter = &waitroom.LocalShare{Shared: lim, Instances: cfg.FailurePolicy.Instances, Timeout: s.storeTimeout}
	default:
		s.limiter = lim
	}
	return nil
}

// adminConfig is the operator API's part of cfg, with what it needs of
// this server.
func (s *Server) adminConfig(cfg Config) admin.Config {
	return admin.Config{Store: s.store, Pages: s.pages, CheckPage: CheckPageArchive, Token: cfg.AdminToken, Routes: cfg.AdminRoutes,
		AuthLimit: cfg.AdminAuthLimit, Now: cfg.Now, Logger: s.log,
		Client: s.clientAndKey, PassCode: s.passCodeAndLink, Changed: s.forgetRoom, OnRoomChange: cfg.OnRoomChange}
}

// crowdRoutes are the routes the crowd reaches: the queue API and the
// page, the gated routes through the gate, forward auth, and cfg.Routes.
func (s *Server) crowdRoutes(cfg Config) (map[string]http.Handler, error) {
	routes := s.queueRoutes()
	gated := cfg.GatedRoutes
	if len(gated) == 0 {
		gated = []string{DefaultGatedRoute}
	}
	protected := s.guard(cfg, gated)
	s.fwdGate = &waitroom.Gate{
		Store:      s.store,
		Room:       s.defaultRoom,
		UserHeader: s.userHeader,
		Logger:     s.log,
		OnOutcome:  s.onGateOutcome(cfg.OnGateOutcome),
		OnSettled:  cfg.OnGateSettled,
	}
	if err := s.forwardAuthRoutes(routes, cfg.SettleSecret); err != nil {
		return nil, err
	}
	for _, p := range gated {
		if _, dup := routes[p]; dup {
			return nil, fmt.Errorf("server: gated route %q is registered twice", p)
		}
		routes[p] = protected
	}
	for p, h := range cfg.Routes {
		if _, dup := routes[p]; dup {
			return nil, fmt.Errorf("server: route %q is registered twice", p)
		}
		routes[p] = h
	}
	return routes, nil
}

// queueRoutes are the queue API's, the page's and the health checks'.
func (s *Server) queueRoutes() map[string]http.Handler {
	return map[string]http.Handler{
		"POST /rooms/{room}/enter":    s.serve(s.inRoom(s.enter)),
		"GET /rooms/{room}/status":    s.serve(s.inRoom(s.status)),
		"DELETE /rooms/{room}/queue":  s.serve(s.leave),
		"POST /queue/enter":           s.serve(s.inRoom(s.enter)),
		"GET /queue/position":         s.serve(s.inRoom(s.status)),
		"DELETE /queue":               s.serve(s.leave),
		"GET /rooms/{room}/draw":      s.serve(s.draw),
		"GET /{$}":                    s.serve(s.page),
		"POST /{$}":                   s.serve(s.join),
		"POST /rooms/{room}":          s.serve(s.join),
		"GET /rooms/{room}":           s.serve(s.page),
		"GET /healthz":                http.HandlerFunc(s.healthz),
		"GET " + themePath:            http.HandlerFunc(s.theme),
		"GET " + logoPath:             http.HandlerFunc(s.logo),
		"GET /pages/{room}/theme.css": http.HandlerFunc(s.roomTheme),
		"GET /pages/{room}/logo":      http.HandlerFunc(s.roomLogo),
		"GET /readyz":                 s.serve(s.readyz),
		// Outside /rooms/{room}/: more routes there would cost every
		// enter and status poll allocations in the mux (allocs_test.go).
		"POST /notify/{room}": s.serve(s.subscribe),
		"GET /return/{room}":  s.serve(s.returnPage),
		"POST /return/{room}": s.serve(s.spendReturn),
		"GET /notify-sw.js":   s.serve(s.serviceWorker),
	}
}

// guard is what the gated routes serve: cfg.Protected behind the gate, or
// 404 NOT_CONFIGURED without one.
func (s *Server) guard(cfg Config, gated []string) http.Handler {
	if cfg.Protected == nil {
		return s.serve(func(http.ResponseWriter, *http.Request) error { return errNotConfigured })
	}
	s.orderPath = orderPathOf(gated)
	s.gate = &waitroom.Gate{
		Store:      s.store,
		Room:       s.defaultRoom,
		UserHeader: s.userHeader,
		Logger:     s.log,
		OnOutcome:  s.onGateOutcome(cfg.OnGateOutcome),
		OnServed:   cfg.OnGateServed,
		OnSettled:  cfg.OnGateSettled,
		Reject:     s.writeError,
		StoreDown:  s.policy.storeDown(s.defaultRoom),
		// Only while the store is down: the settings last read, never
		// a store call that would wait out another timeout.
		LastConfig: func(context.Context) (waitroom.RoomConfig, bool) {
			return s.lastRoomConfig(s.defaultRoom)
		},
	}
	return s.gate.Wrap(cfg.Protected)
}

// registerRoutes puts routes on the Server's mux, and the operator's
// (adm, nil when off, and /metrics behind its token) beside them or, with
// cfg.AdminApart, on a mux of their own for AdminHandler.
func (s *Server) registerRoutes(cfg Config, routes map[string]http.Handler, adm *admin.Handler) error {
	adminRoutes := routes
	if cfg.AdminApart {
		adminRoutes = map[string]http.Handler{}
	}
	// /metrics tells the sale's figures to whoever asks: public only when
	// the operator says so, else behind the admin token, else not here at
	// all (a listener of its own serves MetricsHandler).
	if _, dup := routes["GET /metrics"]; !dup {
		switch {
		case cfg.PublicMetrics:
			routes["GET /metrics"] = s.metrics.handler
		case adm != nil:
			adminRoutes["GET /metrics"] = adm.Protect(s.metrics.handler)
		}
	}
	if err := mountAdmin(adminRoutes, adm); err != nil {
		return err
	}
	s.admin, s.adminIn = adm, s.mux
	if cfg.AdminApart {
		s.adminMux = http.NewServeMux()
		s.adminIn = s.adminMux
		if err := register(s.adminMux, s.metrics, adminRoutes); err != nil {
			return err
		}
	}
	if err := register(s.mux, s.metrics, routes); err != nil {
		return err
	}
	s.hotRoutes = hotRoutesSafe(routes, s.queueRoutes())
	return nil
}

// guardStore is the guarded store every handler and the gate use:
// Config.Store itself when the caller guarded it (the instance, which
// gives the same one to the admitter, the keeper and the tuner), else
// Config.Store guarded by StoreTimeout and DeclaredRooms.
func guardStore(cfg Config, log *slog.Logger) (*waitroom.GuardedStore, error) {
	g, ok := cfg.Store.(*waitroom.GuardedStore)
	if !ok {
		return waitroom.Guard(cfg.Store, waitroom.GuardOptions{Timeout: cfg.StoreTimeout, Logger: log, Rooms: cfg.DeclaredRooms}), nil
	}
	if cfg.StoreTimeout != 0 || cfg.DeclaredRooms != nil {
		return nil, errors.New("server: Config.StoreTimeout and Config.DeclaredRooms belong to waitroom.Guard when Config.Store is a *waitroom.GuardedStore")
	}
	return g, nil
}

// mountAdmin mounts the operator API (nil: off) under /admin/ of routes,
// refusing a pattern of its own that routes already has.
func mountAdmin(routes map[string]http.Handler, adm *admin.Handler) error {
	if adm == nil {
		return nil
	}
	for _, p := range adm.Patterns() {
		if _, dup := routes[p]; dup {
			return fmt.Errorf("server: route %q is registered twice", p)
		}
	}
	routes[adminMount] = adm
	return nil
}

// adminMount is where the operator API is mounted: every path under
// /admin/ goes to it, which routes them by patterns of its own.
const adminMount = "/admin/"

// clientAndKey is the client a request is for and its key for the
// per-address limits, for the operator API's limit of wrong tokens.
func (s *Server) clientAndKey(r *http.Request) (netip.Addr, string) {
	ip := s.trusted.clientIP(r)
	return ip, addressKey(ip)
}

// forgetRoom drops what this server cached of room's settings and draw:
// the operator changed them, and this instance's answers follow at once
// (the others' within ConfigRefresh).
func (s *Server) forgetRoom(room string) {
	s.rooms.Delete(room)
	s.missing.forget(room)
	s.draws.forget(room)
}

// maxMissingRooms bounds the names missingRooms keeps: a script of made-up
// names fills it and then costs what it costs without it.
const maxMissingRooms = 4096

// missingRooms remembers, briefly, room names the store said it does not
// know. It is read on every ENTER and STATUS: a lock-free map, empty (one
// atomic load) when no made-up name was asked for lately.
type missingRooms struct {
	n  atomic.Int64
	at sync.Map // name → time.Time when the store said so
}

func (m *missingRooms) has(room string, ttl time.Duration) bool {
	if m.n.Load() == 0 {
		return false
	}
	v, ok := m.at.Load(room)
	if !ok {
		return false
	}
	if time.Since(v.(time.Time)) < ttl {
		return true
	}
	m.forget(room)
	return false
}

func (m *missingRooms) add(room string, now time.Time, ttl time.Duration) {
	if m.n.Load() >= maxMissingRooms {
		m.at.Range(func(name, at any) bool {
			if now.Sub(at.(time.Time)) >= ttl {
				m.forget(name.(string))
			}
			return true
		})
		if m.n.Load() >= maxMissingRooms {
			return
		}
	}
	if _, loaded := m.at.Swap(room, now); !loaded {
		m.n.Add(1)
	}
}

func (m *missingRooms) forget(room string) {
	if _, loaded := m.at.LoadAndDelete(room); loaded {
		m.n.Add(-1)
	}
}

// register adds routes to mux and declares them to the metrics.
func register(mux *http.ServeMux, m *metrics, routes map[string]http.Handler) error {
	m.declareRoutes(routes)
	for p, h := range routes {
		if err := httperr.Handle(mux, p, h); err != nil {
			return fmt.Errorf("server: %w", err)
		}
	}
	return nil
}

// DrainSettles ends the settles the gate still retries after a store
// stall, each with one last attempt (waitroom.Gate.Drain): on shutdown,
// after the HTTP server stopped and before the store is closed.
func (s *Server) DrainSettles() {
	if s.gate != nil {
		s.gate.Drain()
	}
	s.fwdGate.Drain()
}

// MetricsHandler serves the Prometheus metrics, for a listener of their own
// (waitroom serve --metrics-addr) that only the scraper reaches.
func (s *Server) MetricsHandler() http.Handler { return s.metrics.handler }

// AdminHandler serves the operator API and the dashboard on a listener of
// their own (waitroom serve --admin-addr), with Config.AdminApart: the
// same bearer token, limits, recovery and metrics as the Server's. Without
// AdminApart it answers 404 for everything: the Server serves them.
func (s *Server) AdminHandler() http.Handler {
	mux := s.adminMux
	if mux == nil {
		mux = http.NewServeMux()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serveOn(mux, w, r) })
}

// ServeHTTP serves r.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.serveOn(s.mux, w, r) }

// serveOn serves r by mux's routes.
func (s *Server) serveOn(mux *http.ServeMux, w http.ResponseWriter, r *http.Request) {
	rw := waitroom.NewStatusRecorder(w)
	start := time.Now()
	route := unmatchedRoute
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.ErrorContext(r.Context(), "handler panicked", "method", r.Method, "path", r.URL.Path,
				"panic", p, "stack", string(debug.Stack()))
			if rw.Answered() {
				// Half an answer is out; cut the connection so the client
				// cannot take it for a whole one.
				panic(http.ErrAbortHandler)
			}
			s.writeError(rw, r, fmt.Errorf("panic: %v", p))
		}
		s.metrics.observeHTTP(route, rw.Status(), time.Since(start))
		if s.log.Enabled(r.Context(), slog.LevelDebug) {
			s.log.DebugContext(r.Context(), "request", "method", r.Method, "path", r.URL.Path,
				"status", rw.Status(), "duration", time.Since(start))
		}
	}()
	s.identify(r)
	if mux == s.mux {
		if h, pattern, room := s.hotRoute(r); h != nil {
			route, r.Pattern = pattern, pattern
			if err := s.forRoom(rw, r, room, h); err != nil {
				s.writeError(rw, r, err)
			}
			return
		}
	}
	_, pattern := mux.Handler(r)
	if pattern == "" {
		s.unmatched(mux, rw, r)
		return
	}
	route = pattern
	if pattern == adminMount && mux == s.adminIn && s.admin != nil {
		// Counted under the operator API's own pattern (a redirect's
		// too: the one it leads to), as if the route were the Server's.
		route = s.admin.Pattern(r)
	}
	mux.ServeHTTP(rw, r)
}

// unmatched answers a request no route of mux matches with the JSON error
// body, keeping ServeMux's choice between 404 and 405 (and its Allow
// header).
func (s *Server) unmatched(mux *http.ServeMux, w http.ResponseWriter, r *http.Request) {
	h, _ := mux.Handler(r)
	probe := &statusProbe{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if probe.status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", probe.header.Get("Allow"))
		s.writeError(w, r, errMethodNotAllowed)
		return
	}
	s.writeError(w, r, errNotFound)
}

// serve adapts a handler that returns an error: the error is answered by
// writeError.
func (s *Server) serve(fn func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return httperr.Serve(s.writeError, fn)
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	writeError(s.log, w, r, err)
}

// room returns the room a request names: its {room} path value, or the
// default room on the seed's /queue paths.
func (s *Server) room(r *http.Request) (string, error) {
	if !strings.HasPrefix(r.URL.Path, "/rooms/") {
		return s.defaultRoom, nil
	}
	room := r.PathValue("room")
	if !waitroom.ValidRoomName(room) {
		return "", waitroom.BadRequest("room names are " + waitroom.RoomNameRule)
	}
	return room, nil
}

// user is the user a queue request is for, counted against the per-user
// limit.
func (s *Server) user(r *http.Request) (string, error) {
	users := r.Header.Values(s.userHeader)
	switch {
	case len(users) > 1:
		return "", waitroom.BadRequest("several " + s.userHeader + " headers")
	case len(users) == 0 || !waitroom.ValidUserID(users[0]):
		return "", waitroom.BadRequest("missing or malformed " + s.userHeader + " header")
	}
	return users[0], s.allow(r.Context(), "user:"+users[0], s.userLimit)
}

// cachedRoom keeps a room's settings between refreshes, so the hot paths
// (enter, status) do not read them from the store on every request.
type cachedRoom struct {
	current    atomic.Pointer[roomSnapshot]
	refreshing atomic.Bool
}

type roomSnapshot struct {
	cfg     waitroom.RoomConfig
	fetched time.Time
}

// lastRoomConfig returns the settings roomConfig last read, without
// reading the store.
func (s *Server) lastRoomConfig(room string) (waitroom.RoomConfig, bool) {
	v, ok := s.rooms.Load(room)
	if !ok {
		return waitroom.RoomConfig{}, false
	}
	return v.(*cachedRoom).current.Load().cfg, true
}

// roomConfig returns room's settings, at most ConfigRefresh old. One request
// per room refreshes a stale entry while the others use the stale one; a
// failed refresh keeps the stale entry. Only rooms the store knows are
// cached, so made-up names cannot grow the cache; a name the store does not
// know is answered ROOM_NOT_FOUND from memory for ConfigRefresh (missingRooms),
// so a crowd following a link to a deleted or mistyped room costs the
// store one read a second, not one a request.
func (s *Server) roomConfig(ctx context.Context, room string) (waitroom.RoomConfig, error) {
	v, ok := s.rooms.Load(room)
	if !ok {
		if s.missing.has(room, s.configRefresh) {
			return waitroom.RoomConfig{}, waitroom.ErrRoomNotFound
		}
		cfg, err := s.store.RoomConfig(ctx, room)
		if errors.Is(err, waitroom.ErrRoomNotFound) {
			s.missing.add(room, time.Now(), s.configRefresh)
		}
		if err != nil {
			return waitroom.RoomConfig{}, err
		}
		c := &cachedRoom{}
		c.current.Store(&roomSnapshot{cfg: cfg, fetched: time.Now()})
		v, _ = s.rooms.LoadOrStore(room, c)
	}
	c := v.(*cachedRoom)
	snap := c.current.Load()
	if time.Since(snap.fetched) < s.configRefresh || !c.refreshing.CompareAndSwap(false, true) {
		return snap.cfg, nil
	}
	defer c.refreshing.Store(false)
	cfg, err := s.store.RoomConfig(ctx, room)
	if err != nil {
		s.log.WarnContext(ctx, "refreshing room settings failed; using the previous ones", "room", room, "err", err)
		return snap.cfg, nil
	}
	c.current.Store(&roomSnapshot{cfg: cfg, fetched: time.Now()})
	return cfg, nil
}

// statusProbe captures what ServeMux's own 404/405 handler would answer.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header         { return p.header }
func (p *statusProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *statusProbe) WriteHeader(code int)        { p.status = code }
