// Package admin is waitroom's operator API under /admin/, behind a bearer
// token, and the dashboard that calls it: the rooms' settings and figures,
// passes, a scheduled room's entrants, and the limit of wrong tokens per
// client address (auth.go). Its Handler is mounted under /admin/ by
// whoever assembles the HTTP mux (server.New, on the crowd's listener or
// on one of its own); what it needs of the crowd's server, it is given as
// functions in Config, so it imports no part of that server.
package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/adminapi"
	"github.com/waitroom/waitroom/internal/httperr"
	"github.com/waitroom/waitroom/internal/lograte"
	"github.com/waitroom/waitroom/jsonhttp"
)

// The operator API, under /admin/, behind a bearer token. Without a token
// configured none of it is served (404), so a forgotten setting cannot leave
// it open.
//
// Durations in its bodies are Go duration strings ("300ms", "30s", "5m");
// rates are users per second.
//
//	GET   /admin/rooms            {"rooms":[room…]}
//	POST  /admin/rooms            {"name", settings…} → 201 room; 409 ROOM_EXISTS
//	GET   /admin/rooms/{room}     room with "figures"; ?window=1s measures admitted/s (0 skips)
//	PATCH /admin/rooms/{room}     any of rate, slice, max_queue, token_ttl, lease, max_active, state, stock,
//	                              units_per_order, one_order_per_user, abandon_after, first_use_within,
//	                              notified_first_use_within, opens_at, prequeue_order, closes_at, shop_url, shop_name,
//	                              product_name → 200 room
//	GET   /admin/rooms/{room}/entrants  the draw's record and its entrants with their places, for
//	                              'waitroom draw verify'; 409 DRAW_PENDING before the draw
//	PUT   /admin/rooms/{room}/page  a zip of a page directory (Content-Type: application/zip) → 200 room;
//	                              400 PAGE_INVALID naming the file, 413 PAGE_TOO_LARGE (page.go)
//	GET   /admin/rooms/{room}/page  the room's page archive; 404 PAGE_NOT_FOUND without one
//	DELETE /admin/rooms/{room}/page the room shows the instance's page again → 200 room
//	GET   /admin/dashboard        every room with figures and samples, for the dashboard (dashboard.go)
//	GET   /admin/                 the dashboard's page, without the token (it asks for it)

// Bounds of ?window= on GET /admin/rooms/{room}.
const (
	defaultFiguresWindow = time.Second
	maxFiguresWindow     = 10 * time.Second
)

// maxAuthRate bounds Config.AuthLimit's rate: beyond it a limit limits
// nothing a server could serve.
const maxAuthRate = 1_000_000

// Config configures the operator API. Store, Token, Client, PassCode and
// Changed are required.
type Config struct {
	// Store holds the rooms: the crowd's server's guarded store, so both
	// see one store.
	Store waitroom.Store
	// Token is the bearer token every call but the dashboard's page must
	// carry. Empty: the operator API is off, and New returns nil.
	Token string
	// Routes are extra ServeMux patterns under /admin/, such as the shop's
	// "/admin/products", served behind the same token.
	Routes map[string]http.Handler
	// AuthLimit bounds the failed bearer attempts per client address
	// (auth.go); zero: DefaultAuthLimit.
	AuthLimit waitroom.Limit
	// Now is the clock of what counts as an opens_at in the past, and of
	// the failed attempts' limit. Nil: time.Now.
	Now func() time.Time
	// Logger; default discards.
	Logger *slog.Logger
	// Client is the client a request is for (the crowd's server decides
	// whose X-Forwarded-For to believe) and the key the per-address limit
	// counts it under.
	Client func(*http.Request) (addr netip.Addr, key string)
	// PassCode is the code of pass id to room and the link its holder
	// follows; the crowd's server signs and checks them.
	PassCode func(room, id string) (code, link string)
	// Changed is told of each room whose settings a call changed, so the
	// crowd's server drops what it cached of them at once.
	Changed func(room string)
	// OnRoomChange, if set, is told of each room a call created (from is
	// zero) or changed: the webhooks' room events.
	OnRoomChange func(room string, from, to waitroom.RoomConfig, created bool)
	// Pages keeps rooms' own pages (page.go); nil: the page routes answer
	// 501 PAGES_UNSUPPORTED.
	Pages waitroom.PageStore
	// CheckPage says why an archive cannot be room's page, naming the file
	// (package server's rules); required with Pages.
	CheckPage func(room string, archive []byte) error
}

// Handler serves the operator API and the dashboard under /admin/.
type Handler struct {
	store     waitroom.Store
	log       *slog.Logger
	now       func() time.Time
	mux       *http.ServeMux
	patterns  []string
	want      [sha256.Size]byte // the token's digest
	auth      *authFailures
	refusals  lograte.EveryMinute
	dashboard *sampler
	client    func(*http.Request) (netip.Addr, string)
	passCode  func(room, id string) (string, string)
	changed   func(room string)
	pages     waitroom.PageStore
	checkPage func(room string, archive []byte) error

	onRoomChange func(room string, from, to waitroom.RoomConfig, created bool)
}

// New returns the operator API for cfg, nil when cfg.Token is empty, or
// an error naming the bad field.
func New(cfg Config) (*Handler, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	authLimit := cfg.AuthLimit
	switch {
	case authLimit == waitroom.Limit{}:
		authLimit = DefaultAuthLimit
	case math.IsNaN(authLimit.Rate) || authLimit.Rate <= 0 || authLimit.Rate > maxAuthRate || authLimit.Burst < 1:
		return nil, fmt.Errorf("admin: Config.AuthLimit needs a rate in (0, %d] per second and a burst of at least 1, got %g and %d",
			maxAuthRate, authLimit.Rate, authLimit.Burst)
	}
	if cfg.Token == "" {
		if len(cfg.Routes) > 0 {
			log.Warn("admin routes are configured but no admin token: the admin API is off")
		}
		return nil, nil
	}
	if cfg.Store == nil || cfg.Client == nil || cfg.PassCode == nil || cfg.Changed == nil {
		return nil, errors.New("admin: Config.Store, Client, PassCode and Changed are required")
	}
	if cfg.Pages != nil && cfg.CheckPage == nil {
		return nil, errors.New("admin: Config.CheckPage is required with Pages")
	}
	s := &Handler{
		store:     cfg.Store,
		pages:     cfg.Pages,
		checkPage: cfg.CheckPage,
		log:       log,
		now:       cfg.Now,
		mux:       http.NewServeMux(),
		want:      sha256.Sum256([]byte(cfg.Token)),
		dashboard: newSampler(cfg.Store),
		client:    cfg.Client,
		passCode:  cfg.PassCode,
		changed:   cfg.Changed,

		onRoomChange: cfg.OnRoomChange,
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.auth = newAuthFailures(authLimit, s.now)
	routes, err := s.routes(cfg.Routes)
	if err != nil {
		return nil, err
	}
	for p, h := range routes {
		if err := httperr.Handle(s.mux, p, h); err != nil {
			return nil, fmt.Errorf("admin: %w", err)
		}
		s.patterns = append(s.patterns, p)
	}
	slices.Sort(s.patterns)
	return s, nil
}

// routes are the operator API's routes and extra (the shop's admin
// handlers), each behind the bearer check, plus a catch-all under /admin/
// so that unknown admin paths answer 401 to strangers, not a map of what
// exists, and the dashboard's page and files, which need no token.
func (s *Handler) routes(extra map[string]http.Handler) (map[string]http.Handler, error) {
	admin := map[string]http.Handler{
		"GET /admin/rooms":                       s.serve(s.adminListRooms),
		"POST /admin/rooms":                      s.serve(s.adminCreateRoom),
		"GET /admin/rooms/{room}":                s.serve(s.adminShowRoom),
		"PATCH /admin/rooms/{room}":              s.serve(s.adminPatchRoom),
		"GET /admin/rooms/{room}/entrants":       s.serve(s.adminEntrants),
		"GET /admin/dashboard":                   s.serve(s.adminDashboard),
		"POST /admin/rooms/{room}/passes":        s.serve(s.adminCreatePass),
		"GET /admin/rooms/{room}/passes":         s.serve(s.adminListPasses),
		"DELETE /admin/rooms/{room}/passes/{id}": s.serve(s.adminRevokePass),
		"PUT /admin/rooms/{room}/page":           s.serve(s.adminPutPage),
		"GET /admin/rooms/{room}/page":           s.serve(s.adminGetPage),
		"DELETE /admin/rooms/{room}/page":        s.serve(s.adminDeletePage),
		"/admin/":                                s.serve(func(http.ResponseWriter, *http.Request) error { return httperr.ErrNotFound }),
	}
	for p, h := range extra {
		if !underAdmin(p) {
			return nil, fmt.Errorf("admin: route %q must be under /admin/", p)
		}
		if _, dup := admin[p]; dup {
			return nil, fmt.Errorf("admin: route %q is registered twice", p)
		}
		admin[p] = h
	}
	routes := make(map[string]http.Handler, len(admin))
	for p, h := range admin {
		routes[p] = s.Protect(h)
	}
	// The dashboard's page and files hold nothing secret: they load without
	// the token and ask for it.
	for p, h := range dashboardFiles() {
		routes[p] = h
	}
	return routes, nil
}

// ServeHTTP serves r by the operator API's routes; mount it under /admin/.
func (s *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Patterns are the ServeMux patterns the Handler serves, sorted: the
// routes a mounting server counts its metrics under.
func (s *Handler) Patterns() []string { return s.patterns }

// Pattern is the pattern of Patterns that r reaches, "" if none.
func (s *Handler) Pattern(r *http.Request) string {
	_, p := s.mux.Handler(r)
	return p
}

// serve adapts a handler that returns an error: the error is answered the
// one way every part answers it (httperr.Write).
func (s *Handler) serve(fn func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return httperr.Serve(func(w http.ResponseWriter, r *http.Request, err error) { httperr.Write(s.log, w, r, err) }, fn)
}

// underAdmin reports whether a ServeMux pattern ("[METHOD ][HOST]/PATH")
// has its path under /admin/.
func underAdmin(pattern string) bool {
	_, path, _ := strings.Cut(strings.TrimSpace(pattern), " ")
	if path == "" {
		path = pattern
	}
	path = strings.TrimSpace(path)
	if i := strings.IndexByte(path, '/'); i > 0 {
		path = path[i:] // drop a host
	}
	return strings.HasPrefix(path, "/admin/")
}

// Protect lets a request through to next only with "Authorization:
// Bearer <token>", from a client address within the limit of failed
// attempts (auth.go): the operator API's check, for whatever else the
// token guards (the server's /metrics). Digests are compared in constant
// time, so neither the token's bytes nor its length leak through timing.
func (s *Handler) Protect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, given, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		got := sha256.Sum256([]byte(strings.TrimSpace(given)))
		right := strings.EqualFold(scheme, "Bearer") && subtle.ConstantTimeCompare(got[:], s.want[:]) == 1
		client, key := s.client(r)
		limited, wait := s.auth.attempt(key, right)
		if right && !limited {
			next.ServeHTTP(w, r)
			return
		}
		if refused, ok := s.refusals.Allow(time.Now()); ok {
			s.log.WarnContext(r.Context(), "admin request refused: missing or wrong bearer token, or too many of them",
				"method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "client", client, "rate_limited", limited,
				"refused_since_last_warning", refused)
		}
		if limited {
			// The admin message, with the wait of the limit's refusal.
			httperr.Write(s.log, w, r, errors.Join(errAdminRateLimited, retryAfter(wait)))
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="waitroom admin"`)
		httperr.Write(s.log, w, r, errUnauthorized)
	})
}

// Codes the operator API adds to the store's.
var (
	errUnauthorized = &waitroom.Error{Code: "UNAUTHORIZED", Message: "a valid admin bearer token is required", Status: http.StatusUnauthorized}
	errRoomExists   = &waitroom.Error{Code: "ROOM_EXISTS", Message: "the room exists already", Status: http.StatusConflict}

	// Too many wrong admin tokens from one address (auth.go); an opening
	// set in the past.
	errAdminRateLimited = &waitroom.Error{Code: "RATE_LIMITED", Message: "too many wrong admin tokens from this address; wait as Retry-After says", Status: http.StatusTooManyRequests}
	errOpensAtPast      = &waitroom.Error{Code: "OPENS_AT_PAST", Message: "opens_at is in the past, so the room would open at once; give a time to come (\"\" clears it)", Status: http.StatusBadRequest}
)

// retryAfter is the wait a refusal's Retry-After tells (waitroom.Classify
// reads it).
type retryAfter time.Duration

func (d retryAfter) Error() string             { return "retry after " + time.Duration(d).String() }
func (d retryAfter) RetryAfter() time.Duration { return time.Duration(d) }

// pathRoom is the {room} of an admin path.
func pathRoom(r *http.Request) (string, error) {
	room := r.PathValue("room")
	if !waitroom.ValidRoomName(room) {
		return "", waitroom.BadRequest("room names are " + waitroom.RoomNameRule)
	}
	return room, nil
}

// pathRoomAndBody reads an operator call on one room: the room from the
// path, then the JSON body.
func pathRoomAndBody[T any](r *http.Request) (room string, body T, err error) {
	if room, err = pathRoom(r); err != nil {
		return "", body, err
	}
	if err := jsonhttp.Decode(r, &body); err != nil {
		return "", body, waitroom.BadRequest(err.Error())
	}
	return room, body, nil
}

// adminListRooms: GET /admin/rooms.
func (s *Handler) adminListRooms(w http.ResponseWriter, r *http.Request) error {
	names, err := s.store.Rooms(r.Context())
	if err != nil {
		return err
	}
	rooms := make([]adminapi.Room, 0, len(names))
	for _, name := range names {
		cfg, err := s.store.RoomConfig(r.Context(), name)
		if errors.Is(err, waitroom.ErrRoomNotFound) {
			continue // listed but not (or no longer) set up
		}
		if err != nil {
			return err
		}
		rooms = append(rooms, adminapi.NewRoom(name, cfg))
	}
	jsonhttp.Write(w, http.StatusOK, map[string]any{"rooms": rooms})
	return nil
}

// roomSettings is the body of POST and PATCH: every field optional, so a
// PATCH changes only what it names. A null is the same as leaving the
// field out.
type roomSettings struct {
	Rate            *float64 `json:"rate"`
	Slice           *string  `json:"slice"`
	MaxQueue        *int     `json:"max_queue"`
	TokenTTL        *string  `json:"token_ttl"`
	Lease           *string  `json:"lease"`
	MaxActive       *int     `json:"max_active"`
	State           *string  `json:"state"`
	Stock           *int     `json:"stock"`
	UnitsPerOrder   *int     `json:"units_per_order"`
	OneOrderPerUser *bool    `json:"one_order_per_user"`
	InviteOnly      *bool    `json:"invite_only"`
	AbandonAfter    *string  `json:"abandon_after"`
	FirstUseWithin  *string  `json:"first_use_within"`
	// NotifiedFirstUseWithin: for buyers who asked to be told.
	NotifiedFirstUseWithin *string `json:"notified_first_use_within"`
	// OpensAt and ClosesAt are RFC 3339; "" clears them.
	OpensAt       *string `json:"opens_at"`
	PrequeueOrder *string `json:"prequeue_order"`
	ClosesAt      *string `json:"closes_at"`
	// ShopURL is an absolute http(s) URL; "" clears it.
	ShopURL *string `json:"shop_url"`
	// ShopName and ProductName are shown on the waiting page; "" clears.
	ShopName    *string `json:"shop_name"`
	ProductName *string `json:"product_name"`
	// Shards spreads the room over Redis Cluster shards (1..16; more than
	// 1 on a Redis Cluster store only, and only while the room is empty
	// and has sold nothing to nobody).
	Shards *int `json:"shards"`
}

// createBody is the body of POST /admin/rooms.
type createBody struct {
	Name string `json:"name"`
	roomSettings
}

// set copies a field the body gave onto its setting.
func set[T any](v *T, into *T) {
	if v != nil {
		*into = *v
	}
}

// apply merges the given fields onto cfg. Checks of range are left to
// RoomConfig.Validate; here only what cannot be read is refused, naming the
// field.
func (p roomSettings) apply(cfg waitroom.RoomConfig) (waitroom.RoomConfig, error) {
	duration := func(field string, v *string, into *time.Duration) error {
		if v == nil {
			return nil
		}
		d, err := time.ParseDuration(strings.TrimSpace(*v))
		if err != nil {
			return waitroom.BadRequest(fmt.Sprintf("%s: %q is not a duration (such as 300ms, 30s, 5m)", field, *v))
		}
		*into = d
		return nil
	}
	set(p.Rate, &cfg.Rate)
	set(p.MaxQueue, &cfg.MaxQueue)
	set(p.MaxActive, &cfg.MaxActive)
	set(p.Shards, &cfg.Shards)
	set(p.Stock, &cfg.Stock)
	set(p.UnitsPerOrder, &cfg.UnitsPerOrder)
	set(p.InviteOnly, &cfg.InviteOnly)
	set(p.OneOrderPerUser, &cfg.OneOrderPerUser)
	set(p.ShopURL, &cfg.ShopURL)
	set(p.ShopName, &cfg.ShopName)
	set(p.ProductName, &cfg.ProductName)
	if p.PrequeueOrder != nil {
		cfg.PrequeueOrder = waitroom.PrequeueOrder(*p.PrequeueOrder)
	}
	instant := func(field string, v *string, into *time.Time) error {
		if v == nil {
			return nil
		}
		if strings.TrimSpace(*v) == "" {
			*into = time.Time{}
			return nil
		}
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(*v))
		if err != nil {
			return waitroom.BadRequest(fmt.Sprintf("%s: %q is not an RFC 3339 time (such as 2026-03-01T10:00:00Z)", field, *v))
		}
		*into = t
		return nil
	}
	if err := errors.Join(
		instant("opens_at", p.OpensAt, &cfg.OpensAt),
		instant("closes_at", p.ClosesAt, &cfg.ClosesAt),
	); err != nil {
		return cfg, err
	}
	if p.State != nil {
		cfg.State = waitroom.RoomState(*p.State)
	}
	if err := errors.Join(
		duration("slice", p.Slice, &cfg.Slice),
		duration("token_ttl", p.TokenTTL, &cfg.TokenTTL),
		duration("lease", p.Lease, &cfg.Lease),
		duration("abandon_after", p.AbandonAfter, &cfg.AbandonAfter),
		duration("first_use_within", p.FirstUseWithin, &cfg.FirstUseWithin),
		duration("notified_first_use_within", p.NotifiedFirstUseWithin, &cfg.NotifiedFirstUseWithin),
	); err != nil {
		return cfg, err
	}
	// Its default follows a shorter token_ttl unless given, as the flag's
	// does (rooms made before it had this setting included).
	if p.NotifiedFirstUseWithin == nil && cfg.NotifiedFirstUseWithin > cfg.TokenTTL {
		cfg.NotifiedFirstUseWithin = cfg.TokenTTL
	}
	return cfg, nil
}

// adminCreateRoom: POST /admin/rooms. Settings left out take the defaults.
func (s *Handler) adminCreateRoom(w http.ResponseWriter, r *http.Request) error {
	var body createBody
	if err := jsonhttp.Decode(r, &body); err != nil {
		return waitroom.BadRequest(err.Error())
	}
	if !waitroom.ValidRoomName(body.Name) {
		return waitroom.BadRequest(fmt.Sprintf("name: %q is not a room name (%s)", body.Name, waitroom.RoomNameRule))
	}
	cfg, err := body.apply(waitroom.RoomConfig{}.WithDefaults())
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := s.opensAhead(cfg.OpensAt); err != nil {
		return err
	}
	created, err := s.store.CreateRoom(r.Context(), body.Name, cfg)
	if err != nil {
		return err
	}
	if !created {
		return errRoomExists
	}
	s.log.InfoContext(r.Context(), "room created", "room", body.Name, "by", "admin", "remote", r.RemoteAddr, settingsAttr(cfg))
	if s.onRoomChange != nil {
		s.onRoomChange(body.Name, waitroom.RoomConfig{}, cfg, true)
	}
	jsonhttp.Write(w, http.StatusCreated, adminapi.NewRoom(body.Name, cfg))
	return nil
}

// adminShowRoom: GET /admin/rooms/{room}. Admissions per second are the
// growth of the store's admitted counter over a short window, so they count
// every instance's admitter, not only this one's.
func (s *Handler) adminShowRoom(w http.ResponseWriter, r *http.Request) error {
	room, err := pathRoom(r)
	if err != nil {
		return err
	}
	window := defaultFiguresWindow
	if v := r.URL.Query().Get("window"); v != "" {
		window, err = time.ParseDuration(v)
		if err != nil || window < 0 || window > maxFiguresWindow {
			return waitroom.BadRequest(fmt.Sprintf("window: %q must be a duration in [0s, %s]", v, maxFiguresWindow))
		}
	}
	cfg, err := s.store.RoomConfig(r.Context(), room)
	if err != nil {
		return err
	}
	first, err := s.store.Stats(r.Context(), room)
	if err != nil {
		return err
	}
	last := first
	var perSecond *float64
	if window > 0 {
		start := time.Now()
		timer := time.NewTimer(window)
		select {
		case <-r.Context().Done():
			timer.Stop()
			return r.Context().Err()
		case <-timer.C:
		}
		if last, err = s.store.Stats(r.Context(), room); err != nil {
			return err
		}
		v := float64(last.Admitted-first.Admitted) / time.Since(start).Seconds()
		perSecond = &v
	}
	body := adminapi.NewRoom(room, cfg)
	body.Figures = adminapi.NewFigures(cfg, last, perSecond, window)
	jsonhttp.Write(w, http.StatusOK, body)
	return nil
}

// adminPatchRoom: PATCH /admin/rooms/{room}. It reads the live settings,
// merges the fields given, validates and writes them back only if nobody
// changed the room meanwhile (else it merges again into the newer
// settings), so two operators, or an operator and the rate tuner, never
// undo each other. Every instance follows within one admission slice: the
// store's Admit and Enter read the settings from the store on every call.
func (s *Handler) adminPatchRoom(w http.ResponseWriter, r *http.Request) error {
	room, patch, err := pathRoomAndBody[roomSettings](r)
	if err != nil {
		return err
	}
	var old waitroom.RoomConfig
	cfg, err := waitroom.ChangeRoom(r.Context(), s.store, room, func(c *waitroom.RoomConfig) error {
		old = *c
		next, err := patch.apply(*c)
		if err != nil {
			return err
		}
		if err := next.Validate(); err != nil {
			return err
		}
		if !next.OpensAt.IsZero() && !next.OpensAt.Equal(c.OpensAt) {
			if err := s.notOpenedYet(r.Context(), room); err != nil {
				return err
			}
		}
		// Only a new opening: the room's own, once passed, may come back
		// in a body that repeats every setting.
		if !next.OpensAt.Equal(c.OpensAt) {
			if err := s.opensAhead(next.OpensAt); err != nil {
				return err
			}
		}
		*c = next
		return nil
	})
	if err != nil {
		return err
	}
	if cfg != old {
		// This instance's hints follow at once; the others' within
		// ConfigRefresh.
		s.changed(room)
		s.log.InfoContext(r.Context(), "room updated", append([]any{"room", room, "by", "admin", "remote", r.RemoteAddr},
			settingsDiff(old, cfg)...)...)
		if s.onRoomChange != nil {
			s.onRoomChange(room, old, cfg, false)
		}
	}
	jsonhttp.Write(w, http.StatusOK, adminapi.NewRoom(room, cfg))
	return nil
}

// notOpenedYet refuses a new opening time for a room whose draw is done:
// a room opens once, and the setting would change nothing but what the
// operator reads.
func (s *Handler) notOpenedYet(ctx context.Context, room string) error {
	d, err := s.store.Draw(ctx, room)
	switch {
	case errors.Is(err, waitroom.ErrNoDraw):
		return nil
	case err != nil:
		return err
	case d.State == waitroom.DrawDone:
		return waitroom.BadRequest(fmt.Sprintf("opens_at: the room opened at %s and its draw is done; a room opens once (\"\" clears the time)",
			d.DrawnAt.UTC().Format(time.RFC3339)))
	}
	return nil
}

// opensAhead refuses an opening time that has passed (OPENS_AT_PAST): the
// room would open at once, without the wait and the draw the operator
// scheduled, most likely a typo in the date.
func (s *Handler) opensAhead(opensAt time.Time) error {
	if !opensAt.IsZero() && !opensAt.After(s.now()) {
		return fmt.Errorf("%w (%s, now %s)", errOpensAtPast, opensAt.UTC().Format(time.RFC3339), s.now().UTC().Format(time.RFC3339))
	}
	return nil
}

func settingsAttr(cfg waitroom.RoomConfig) slog.Attr {
	return slog.Group("settings", "state", cfg.State, "rate", cfg.Rate, "slice", cfg.Slice, "max_queue", cfg.MaxQueue,
		"token_ttl", cfg.TokenTTL, "lease", cfg.Lease, "max_active", cfg.MaxActive, "stock", cfg.Stock,
		"units_per_order", cfg.UnitsPerOrder, "one_order_per_user", cfg.OneOrderPerUser, "invite_only", cfg.InviteOnly)
}

// settingsDiff lists the changed fields as old → new attributes.
func settingsDiff(old, cfg waitroom.RoomConfig) []any {
	var diff []any
	for _, c := range old.Changes(cfg) {
		diff = append(diff, slog.Group(c.Field, "old", c.From, "new", c.To))
	}
	return diff
}

// adminEntrants: GET /admin/rooms/{room}/entrants.
func (s *Handler) adminEntrants(w http.ResponseWriter, r *http.Request) error {
	room, err := pathRoom(r)
	if err != nil {
		return err
	}
	d, err := s.store.Draw(r.Context(), room)
	if err != nil {
		return err
	}
	entrants, err := s.store.Entrants(r.Context(), room)
	if err != nil {
		return err
	}
	jsonhttp.Write(w, http.StatusOK, adminapi.Entrants{Draw: adminapi.NewDrawRecord(room, d), Entrants: entrants})
	return nil
}
