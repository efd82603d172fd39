package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/adminapi"
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
//	                              units_per_order, one_order_per_user, abandon_after, first_use_within, opens_at,
//	                              prequeue_order, closes_at, shop_url → 200 room
//	GET   /admin/rooms/{room}/entrants  the draw's record and its entrants with their places, for
//	                              'waitroom draw verify'; 409 DRAW_PENDING before the draw
//	GET   /admin/dashboard        every room with figures and samples, for the dashboard (dashboard.go)
//	GET   /admin/                 the dashboard's page, without the token (it asks for it)

// Bounds of ?window= on GET /admin/rooms/{room}.
const (
	defaultFiguresWindow = time.Second
	maxFiguresWindow     = 10 * time.Second
)

// addAdminRoutes adds the operator API's routes and extra (the shop's
// admin handlers) to routes, each behind the bearer check, plus a
// catch-all under /admin/ so that unknown admin paths answer 401 to
// strangers, not a map of what exists. Without a token it adds nothing.
func (s *Server) addAdminRoutes(routes map[string]http.Handler, token string, extra map[string]http.Handler) error {
	if token == "" {
		if len(extra) > 0 {
			s.log.Warn("admin routes are configured but no admin token: the admin API is off")
		}
		return nil
	}
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
		"/admin/":                                s.serve(func(http.ResponseWriter, *http.Request) error { return errNotFound }),
	}
	for p, h := range extra {
		if !underAdmin(p) {
			return fmt.Errorf("server: admin route %q must be under /admin/", p)
		}
		if _, dup := admin[p]; dup {
			return fmt.Errorf("server: admin route %q is registered twice", p)
		}
		admin[p] = h
	}
	want := sha256.Sum256([]byte(token))
	for p, h := range admin {
		if _, dup := routes[p]; dup {
			return fmt.Errorf("server: route %q is registered twice", p)
		}
		routes[p] = s.requireAdmin(want, h)
	}
	// The dashboard's page and files hold nothing secret: they load without
	// the token and ask for it.
	for p, h := range dashboardFiles() {
		if _, dup := routes[p]; dup {
			return fmt.Errorf("server: route %q is registered twice", p)
		}
		routes[p] = h
	}
	return nil
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

// requireAdmin lets a request through only with "Authorization: Bearer
// <token>", from a client address within the limit of failed attempts
// (adminauth.go). Digests are compared in constant time, so neither the
// token's bytes nor its length leak through timing.
func (s *Server) requireAdmin(want [sha256.Size]byte, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, given, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		got := sha256.Sum256([]byte(strings.TrimSpace(given)))
		right := strings.EqualFold(scheme, "Bearer") && subtle.ConstantTimeCompare(got[:], want[:]) == 1
		client := s.trusted.clientIP(r)
		limited, wait := s.adminAuth.attempt(addressKey(client), right)
		if right && !limited {
			next.ServeHTTP(w, r)
			return
		}
		if refused, ok := s.adminRefusals.allow(time.Now()); ok {
			s.log.WarnContext(r.Context(), "admin request refused: missing or wrong bearer token, or too many of them",
				"method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "client", client, "rate_limited", limited,
				"refused_since_last_warning", refused)
		}
		if limited {
			// The admin message, with the wait of the limit's refusal.
			s.writeError(w, r, errors.Join(errAdminRateLimited, &rateLimited{wait: wait}))
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="waitroom admin"`)
		s.writeError(w, r, errUnauthorized)
	})
}

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
func (s *Server) adminListRooms(w http.ResponseWriter, r *http.Request) error {
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
	// OpensAt and ClosesAt are RFC 3339; "" clears them.
	OpensAt       *string `json:"opens_at"`
	PrequeueOrder *string `json:"prequeue_order"`
	ClosesAt      *string `json:"closes_at"`
	// ShopURL is an absolute http(s) URL; "" clears it.
	ShopURL *string `json:"shop_url"`
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
	set(p.Stock, &cfg.Stock)
	set(p.UnitsPerOrder, &cfg.UnitsPerOrder)
	set(p.InviteOnly, &cfg.InviteOnly)
	set(p.OneOrderPerUser, &cfg.OneOrderPerUser)
	set(p.ShopURL, &cfg.ShopURL)
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
	); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// adminCreateRoom: POST /admin/rooms. Settings left out take the defaults.
func (s *Server) adminCreateRoom(w http.ResponseWriter, r *http.Request) error {
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
func (s *Server) adminShowRoom(w http.ResponseWriter, r *http.Request) error {
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
func (s *Server) adminPatchRoom(w http.ResponseWriter, r *http.Request) error {
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
		s.rooms.Delete(room)
		s.draws.forget(room)
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
func (s *Server) notOpenedYet(ctx context.Context, room string) error {
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
func (s *Server) opensAhead(opensAt time.Time) error {
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
func (s *Server) adminEntrants(w http.ResponseWriter, r *http.Request) error {
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
