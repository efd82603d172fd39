package server

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/i18n"
	"github.com/waitroom/waitroom/jsonhttp"
)

// The waiting page: one HTML template with its CSS and script inline, so the
// binary serves it without a build step or a second request, and it works
// with scripts off (the server renders the state and a meta refresh).
var (
	//go:embed web
	webFiles embed.FS

	pageTemplate = template.Must(template.ParseFS(webFiles, "web/page.html"))
	pageCSS      = template.CSS(mustRead("web/page.css"))
	pageJS       = template.JS(mustRead("web/page.js"))
	// pagePolicy allows exactly the page's own inline style and script (by
	// hash) and requests to this origin: an injected script would not run.
	pagePolicy = "default-src 'none'; " +
		"script-src " + cspHash(string(pageJS)) + "; " +
		"style-src " + cspHash(string(pageCSS)) + "; " +
		"connect-src 'self'; img-src 'self' data:; worker-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)

func mustRead(name string) string {
	b, err := webFiles.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func cspHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// scriptKeys are the messages the page's script writes itself (page.js):
// only these, in the chosen language only, go to the browser, in a JSON
// element the script reads (the page's policy runs no inline script but
// its own).
var scriptKeys = []string{
	"page.name", "page.title_waiting", "page.title_admitted", "page.title_scheduled",
	"join.rate_limited", "join.failed", "join.unreachable",
	"waiting.progress", "waiting.next", "waiting.announce", "admitted.announce", "waiting.units_left", "waiting.units_ahead", "waiting.on_hold",
	"wait.under_minute", "wait.minutes", "wait.range", "wait.hours", "wait.hours_minutes",
	"scheduled.by_arrival", "queue_full.retry", "queue_full.retry_now",
	"order.in_use", "order.busy", "order.too_many", "order.refused", "order.unreachable",
	"invitation.invite_only", "invitation.pass_invalid", "invitation.pass_used_up",
}

// langCookieAge is how long the page remembers a chosen language.
const langCookieAge = 365 * 24 * 60 * 60

// Page states: the first group the server renders, the rest only the
// script reaches (after a poll or an order attempt).
const (
	pageWaiting     = "waiting"
	pageAdmitted    = "admitted"
	pageSoldOut     = "sold_out"
	pageScheduled   = "scheduled"
	pageOrdered     = "already_ordered"
	pageQueueFull   = "queue_full"
	pageClosed      = "closed"
	pageInvitation  = "invitation"
	pageNoRoom      = "no_room"
	pageUnavailable = "unavailable"
	pageError       = "error"
	pageJoin        = "join"
)

// pageView is what the template renders. Its texts are in L, the
// visitor's language (pageLang); the template says its fixed ones with
// {{.L.T "key"}}.
type pageView struct {
	L            *i18n.Lang
	Title        string
	Room         string
	PageURL      string
	State        string
	Position     string
	Ahead        string
	Wait         string
	Paused       bool
	UnitsLeft    string // set when the units left are fewer than the users up to this one
	UnitsAhead   string // with UnitsLeft: how many people are ahead, in a sentence
	OpensIn      string // scheduled: the countdown to the opening, h:mm:ss
	Drawn        bool   // scheduled: places are drawn at the opening (random)
	ByArrival    string // scheduled, not drawn: the place, in a sentence
	Progress     int    // percent of the way from the place at entry to the front
	ProgressText string
	ShowRoom     bool // the room's name is worth showing: not the default room
	Refresh      string
	TimeLeft     string
	RetryAfter   int
	RetryText    string
	CanOrder     bool
	ShopURL      string // the room's shop_url: where the buyer goes on to order
	ShopName     string // the room's shop_name: who sells; empty: not said
	ProductName  string // the room's product_name: what is sold; empty: not said
	Message      string // a refusal, in a sentence for buyers
	Pass         string // the pass code the visitor came with, if any
	Challenge    string // the join challenge to solve, if on
	// The opt-in to be told of one's turn (notify.go).
	Notify, NotifyEmail        bool
	NotifySaved, NotifyRefused bool
	NotifyURL                  string
	Langs                      []langLink
	Messages                   map[string]any // scriptKeys in L
	Boot                       pageBoot
	CSS                        template.CSS
	JS                         template.JS
	ThemeURL                   string // the operator's theme.css, if any (brand.go)
	LogoURL                    string // the operator's logo, if any
	brand                      *brand // what the page is rendered with: the room's own page or the instance's
}

// langLink is one language of the switcher.
type langLink struct {
	Code, Name, Href string
	Current          bool
}

// pageBoot is the state handed to the script, in the shapes of the status
// API so that the script reads both the same way.
type pageBoot struct {
	Room      string `json:"room"`
	State     string `json:"state"`
	PageURL   string `json:"page_url"`
	StatusURL string `json:"status_url"`
	OrderURL  string `json:"order_url,omitempty"`
	ProductID string `json:"product_id,omitempty"`
	ShopName  string `json:"shop_name,omitempty"`
	waitingPlace
	Token       string `json:"token,omitempty"`
	ExpiresInMS int64  `json:"expires_in_ms,omitempty"`
	RetryAfter  int    `json:"retry_after,omitempty"`
	Pass        string `json:"pass,omitempty"`
	Challenge   string `json:"challenge,omitempty"`
	Difficulty  int    `json:"difficulty,omitempty"`
	OpensInMS   int64  `json:"opens_in_ms,omitempty"`
	Order       string `json:"prequeue_order,omitempty"`
	NotifyURL   string `json:"notify_url,omitempty"`
	PushKey     string `json:"push_key,omitempty"`
}

// page: GET / (the default room) and GET /rooms/{room}. Browsers get the
// waiting page; apps asking for JSON get the status answer, as from
// /status. Loading the page never takes a place: a visitor without one
// (no cookie, or not in the queue) gets the join view, answered without a
// store call, and joins by an explicit POST (join) — the page's script
// sends it at once, a browser without scripts by the form's button — so
// link previews, prefetchers and crawlers queue nobody.
func (s *Server) page(w http.ResponseWriter, r *http.Request) error {
	w.Header().Add("Vary", "Accept")
	if wantsJSON(r.Header.Get("Accept")) {
		return s.inRoom(s.status)(w, r)
	}
	s.setPageHeaders(w.Header())
	room, err := s.room(r)
	if err != nil {
		s.renderError(w, r, "", err)
		return nil
	}
	if len(r.Header.Values(s.userHeader)) == 0 {
		// Only the room's cached settings: a made-up room is still told.
		if _, err := s.roomConfig(r.Context(), room); err != nil {
			s.renderError(w, r, room, err)
			return nil
		}
		s.renderPage(w, r, s.joinView(r, room, visitorPrefix+newVisitorID()), http.StatusOK)
		return nil
	}
	user, err := s.user(r)
	if err != nil {
		s.renderError(w, r, room, err)
		return nil
	}
	st, err := s.store.Status(r.Context(), room, user)
	if errors.Is(err, waitroom.ErrNotInQueue) {
		s.renderPage(w, r, s.joinView(r, room, user), http.StatusOK)
		return nil
	}
	if err != nil {
		s.renderError(w, r, room, err)
		return nil
	}
	if st.State == waitroom.StateAdmitted {
		// This page shows "your turn": its holder is here, so it confirms
		// the token (a second look), which then lives its whole TTL
		// rather than expiring as a no-show at first_use_within.
		if confirmed, err := s.store.Status(r.Context(), room, user); err == nil {
			st = confirmed
		}
	}
	v, err := s.statusView(r, room, st)
	if err != nil {
		s.renderError(w, r, room, err)
		return nil
	}
	s.setTokenCookie(w, st)
	s.renderPage(w, r, v, http.StatusOK)
	return nil
}

// joinView is the page of someone without a place: a button that joins
// (and, with the join challenge on, the challenge for user to solve: a
// new visitor's, which names the id it will join as, when the request
// has no user).
func (s *Server) joinView(r *http.Request, room, user string) pageView {
	v := s.baseView(r, room, pageJoin)
	// A pass link: the join takes the code along (checked there).
	if code := r.URL.Query().Get("pass"); code != "" && len(code) <= maxPassCode {
		v.Pass, v.Boot.Pass = code, code
	}
	if s.joinDifficulty > 0 {
		// A new visitor's challenge issues its id (adoptVisitor); the
		// page never names one for the join to send back.
		kind := challengeForUser
		if len(r.Header.Values(s.userHeader)) == 0 {
			kind = challengeForNewVisitor
		}
		v.Challenge = s.newChallenge(kind, room, user)
		v.Boot.Challenge, v.Boot.Difficulty = v.Challenge, s.joinDifficulty
	}
	return v
}

// maxJoinForm bounds the join form: a challenge, a nonce and a pass code.
const maxJoinForm = 2 << 10

// join: POST / and POST /rooms/{room}, the explicit step that takes a
// place, refused from another site's page. A request without a user
// becomes a new visitor (limited per client address; with the join
// challenge on, the one its solved challenge issued) whose cookie is set
// here. Answers the status JSON to the page's
// script, and a redirect back to the page to a form without scripts.
func (s *Server) join(w http.ResponseWriter, r *http.Request) error {
	api := wantsJSON(r.Header.Get("Accept"))
	newVisitor := ""
	fail := func(room string, err error) error {
		if api {
			return err
		}
		s.setPageHeaders(w.Header())
		if room != "" && (errors.Is(err, errChallengeRequired) || errors.Is(err, waitroom.ErrBadRequest) && s.joinDifficulty > 0) {
			// Without scripts the challenge cannot be solved: say so on
			// the join view rather than on an error page.
			user := r.Header.Get(s.userHeader)
			if newVisitor != "" || user == "" {
				r.Header.Del(s.userHeader)
				user = visitorPrefix + newVisitorID()
			}
			v := s.joinView(r, room, user)
			v.Message = v.L.T("join.challenge")
			s.renderPage(w, r, v, http.StatusPreconditionRequired)
			return nil
		}
		s.renderError(w, r, room, err)
		return nil
	}
	room, err := s.room(r)
	if err != nil {
		return fail("", err)
	}
	if err := checkJoinOrigin(r); err != nil {
		return fail(room, err)
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxJoinForm)
	if err := r.ParseForm(); err != nil {
		return fail(room, waitroom.BadRequest("the join form is malformed or too large"))
	}
	form := r.PostForm
	if len(r.Header.Values(s.userHeader)) == 0 {
		if err := s.allow(r.Context(), "visitor-ip:"+addressKey(s.trusted.clientIP(r)), s.visitorLimit); err != nil {
			return fail(room, err)
		}
		newVisitor = newVisitorID()
		if s.joinDifficulty > 0 && form.Get("pass") == "" {
			// The id is the one the solved challenge issued; a visitor
			// id the form names is never taken. (A pass, checked by the
			// enter, stands for the challenge, as for a known user, and
			// its visitor gets a fresh id.)
			if newVisitor, err = s.adoptVisitor(r.Context(), room, form.Get("challenge"), form.Get("nonce")); err != nil {
				return fail(room, err)
			}
		}
		r.Header.Set(s.userHeader, visitorPrefix+newVisitor)
	}
	user, err := s.user(r)
	if err != nil {
		return fail(room, err)
	}
	st, err := s.enterOnce(r, room, user, form.Get("challenge"), form.Get("nonce"), form.Get("pass"))
	if err != nil {
		return fail(room, err)
	}
	if newVisitor != "" {
		s.visitors.setCookie(w, r, newVisitor)
	}
	if api {
		return s.answer(w, r, room, st)
	}
	http.Redirect(w, r, s.baseView(r, room, "").PageURL, http.StatusSeeOther)
	return nil
}

func (s *Server) baseView(r *http.Request, room, state string) pageView {
	pageURL := "/"
	if room != s.defaultRoom {
		pageURL = "/rooms/" + room
	}
	// The room's settings, for the views that lead to the turn: the shop's
	// link and names (the script shows them without a reload) and the
	// room's own page; never on a page about a missing room or a store
	// that is down, which would only ask the store again.
	var cfg waitroom.RoomConfig
	if room != "" && state != pageNoRoom && state != pageUnavailable {
		cfg, _ = s.roomConfig(r.Context(), room)
	}
	b := s.brandOf(r.Context(), room, cfg)
	chosen, _ := chosenLang(r)
	v := pageView{
		brand:    b,
		L:        b.lang(chosen),
		Room:     room,
		ShowRoom: room != "" && room != s.defaultRoom,
		PageURL:  pageURL,
		State:    state,
		Boot: pageBoot{
			Room:      room,
			State:     state,
			PageURL:   pageURL,
			StatusURL: "/rooms/" + room + "/status",
		},
		CSS:      pageCSS,
		JS:       pageJS,
		ThemeURL: b.themeURL,
		LogoURL:  b.logoURL,
		ShopURL:  cfg.ShopURL, ShopName: cfg.ShopName, ProductName: cfg.ProductName,
	}
	v.Boot.ShopName = cfg.ShopName
	// The gate admits with the default room's tokens only, so only its
	// page can lead to the order.
	if room == s.defaultRoom && s.orderPath != "" && s.orderProduct != "" {
		v.CanOrder = true
		v.Boot.OrderURL, v.Boot.ProductID = s.orderPath, s.orderProduct
	}
	s.notifyView(r, &v)
	return v
}

func (s *Server) statusView(r *http.Request, room string, st waitroom.Status) (pageView, error) {
	switch st.State {
	case waitroom.StateAdmitted:
		v := s.baseView(r, room, pageAdmitted)
		v.TimeLeft = clockText(st.ExpiresIn.Milliseconds())
		v.Boot.Token, v.Boot.ExpiresInMS = st.Token, st.ExpiresIn.Milliseconds()
		return v, nil
	case waitroom.StateWaiting:
		place, err := s.waitingPlace(r.Context(), room, st)
		if err != nil {
			return pageView{}, err
		}
		v := s.baseView(r, room, pageWaiting)
		v.Boot.waitingPlace = place
		v.Position, v.Ahead = v.L.Number(place.Position), v.L.Number(place.Ahead)
		v.Paused = place.Paused
		if place.UnitsLeft != nil {
			v.UnitsLeft = v.L.Plural("waiting.units_left", *place.UnitsLeft)
			v.UnitsAhead = v.L.Plural("waiting.units_ahead", place.Ahead)
		}
		v.Wait = waitText(v.L, place.ETASeconds, place.ETALowSeconds, place.ETAHighSeconds)
		if v.Paused {
			v.Wait = v.L.T("waiting.on_hold")
		}
		// Without scripts the page learns its place at entry from the
		// refresh URL it wrote itself; a bad or stale value only costs the
		// bar its start.
		from := st.Position
		if f, err := strconv.ParseInt(r.URL.Query().Get("from"), 10, 64); err == nil && f >= st.Position && f <= waitroom.MaxMaxQueue {
			from = f
		}
		v.Progress = progress(from, st.Position)
		v.ProgressText = v.L.T("waiting.progress", "Percent", v.L.Number(int64(v.Progress)))
		if st.Ahead() == 0 {
			v.ProgressText = v.L.T("waiting.next")
		}
		refresh := max(int64(1), (place.PollAfterMS+999)/1000)
		v.Refresh = fmt.Sprintf("%d; url=%s?from=%d", refresh, v.PageURL, from)
		return v, nil
	case waitroom.StateSoldOut:
		return s.baseView(r, room, pageSoldOut), nil
	case waitroom.StateScheduled:
		body, err := s.scheduled(r, room, st)
		if err != nil {
			return pageView{}, err
		}
		v := s.baseView(r, room, pageScheduled)
		v.OpensIn = countdownText(body.OpensInMS)
		v.Drawn = body.Order == string(waitroom.PrequeueRandom)
		v.Position = v.L.Number(body.Position)
		v.ByArrival = v.L.T("scheduled.by_arrival", "Position", v.Position)
		v.Boot.OpensInMS, v.Boot.Order, v.Boot.Position = body.OpensInMS, body.Order, body.Position
		v.Boot.PollAfterMS = body.PollAfterMS
		v.Refresh = fmt.Sprintf("%d; url=%s", max(int64(1), (body.PollAfterMS+999)/1000), v.PageURL)
		return v, nil
	default:
		return pageView{}, fmt.Errorf("store answered an unknown state %q", st.State)
	}
}

func (s *Server) renderError(w http.ResponseWriter, r *http.Request, room string, err error) {
	v, status := s.errorView(w, r, room, err)
	s.renderPage(w, r, v, status)
}

// errorView turns a refusal into its page and the status the JSON API
// would answer; it sets Retry-After where the API does.
func (s *Server) errorView(w http.ResponseWriter, r *http.Request, room string, err error) (pageView, int) {
	a := classify(s.log, r, err)
	if a.RetryAfter > 0 {
		jsonhttp.RetryAfter(w, a.RetryAfter)
	}
	code, status := a.Code, a.Status
	var v pageView
	switch code {
	case waitroom.ErrQueueFull.Code:
		v = s.baseView(r, room, pageQueueFull)
		// The crowd turned away is spread, as by the API, and the page never
		// comes back by itself: a full queue must not be knocked on in step.
		v.RetryAfter, _ = strconv.Atoi(w.Header().Get("Retry-After"))
		v.Boot.RetryAfter = v.RetryAfter
		v.RetryText = v.L.Plural("queue_full.retry", int64(v.RetryAfter))
	case waitroom.ErrRoomClosed.Code:
		v = s.baseView(r, room, pageClosed)
	case waitroom.ErrInviteOnly.Code, waitroom.ErrPassInvalid.Code, waitroom.ErrPassUsedUp.Code:
		// Nothing a retry changes: the way in is a (valid) invitation.
		v = s.baseView(r, room, pageInvitation)
		v.Message = v.L.T(refusalKey(code, room))
	case waitroom.ErrSoldOut.Code:
		v = s.baseView(r, room, pageSoldOut)
	case waitroom.ErrAlreadyOrdered.Code:
		v = s.baseView(r, room, pageOrdered)
	case waitroom.ErrRoomNotFound.Code:
		v = s.baseView(r, room, pageNoRoom)
	case waitroom.ErrStoreUnavailable.Code:
		v = s.baseView(r, room, pageUnavailable)
	default:
		v = s.baseView(r, room, pageError)
		v.Message = v.L.T("error.internal")
		if a.Known && status < 500 {
			v.Message = v.L.T(refusalKey(code, room))
		}
	}
	if room == "" {
		// A malformed room name: there is no room's page to link back to.
		v.PageURL, v.Boot.PageURL, v.Boot.StatusURL = "/", "/", ""
		v.CanOrder, v.Boot.OrderURL = false, ""
	}
	return v, status
}

// refusalKey is the message that tells a buyer of a refusal: never the
// API's wording, which is written for the shop's developers.
func refusalKey(code, room string) string {
	switch code {
	case waitroom.ErrInviteOnly.Code:
		return "invitation.invite_only"
	case waitroom.ErrPassInvalid.Code:
		return "invitation.pass_invalid"
	case waitroom.ErrPassUsedUp.Code:
		return "invitation.pass_used_up"
	case errRateLimited.Code:
		return "error.rate_limited"
	case errCrossSiteJoin.Code:
		return "error.cross_site"
	case errChallengeRequired.Code:
		return "join.challenge"
	case waitroom.ErrBadRequest.Code:
		if room == "" {
			return "error.bad_link" // the room's name in the link is malformed
		}
	}
	return "error.refused"
}

// pageLang is the page's language for r (chosenLang), with the
// operator's messages.
func (s *Server) pageLang(r *http.Request) *i18n.Lang {
	l, _ := chosenLang(r)
	return s.brand.lang(l)
}

// chosenLang picks the page's language: a ?lang= the visitor chose
// (chosen, which renderPage remembers in a cookie), else the one
// remembered, else the best of Accept-Language, else English. A value
// that names none of the page's languages, or no language at all, is
// passed over.
func chosenLang(r *http.Request) (l *i18n.Lang, chosen bool) {
	if l := i18n.Find(r.URL.Query().Get("lang")); l != nil {
		return l, true
	}
	if c, err := r.Cookie(i18n.Cookie); err == nil {
		if l := i18n.Find(c.Value); l != nil {
			return l, false
		}
	}
	if l := i18n.FromAcceptLanguage(r.Header.Get("Accept-Language")); l != nil {
		return l, false
	}
	return i18n.English(), false
}

// finishView fills in what depends on the view's final state and page
// URL: the title, the switcher's links and the script's messages.
func (s *Server) finishView(r *http.Request, v *pageView) {
	switch v.State {
	case pageWaiting:
		v.Title = v.L.T("page.title_waiting", "Position", v.Position)
	case pageAdmitted:
		v.Title = v.L.T("page.title_admitted")
	case pageScheduled:
		v.Title = v.L.T("page.title_scheduled")
	default:
		v.Title = v.L.T("page.name")
	}
	if v.ShopName != "" {
		v.Title += " · " + v.ShopName
	}
	// A switch keeps what the page's address carries: the pass of a pass
	// link, the place at entry of a page without scripts.
	q := url.Values{}
	if v.Pass != "" {
		q.Set("pass", v.Pass)
	}
	if from := r.URL.Query().Get("from"); from != "" && v.State == pageWaiting {
		if _, err := strconv.ParseInt(from, 10, 64); err == nil {
			q.Set("from", from)
		}
	}
	v.Langs = v.Langs[:0]
	for _, l := range i18n.All() {
		q.Set("lang", l.Code)
		v.Langs = append(v.Langs, langLink{Code: l.Code, Name: l.Name, Href: v.PageURL + "?" + q.Encode(), Current: l == v.L})
	}
	v.Messages = v.brand.script[v.L.Code]
}

func (s *Server) renderPage(w http.ResponseWriter, r *http.Request, v pageView, status int) {
	if v.brand == nil {
		v.brand = s.brand
	}
	if v.L == nil {
		v.L = s.pageLang(r)
	}
	s.finishView(r, &v)
	// Render first, so that a template failure is not half an answer.
	var buf bytes.Buffer
	if err := v.brand.template.Execute(&buf, v); err != nil {
		s.log.ErrorContext(r.Context(), "rendering the waiting page failed", "room", v.Room, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Language", v.L.Code)
	// A room's own page has a policy of its own (its stylesheet).
	w.Header().Set("Content-Security-Policy", v.brand.policy)
	if l, chosen := chosenLang(r); chosen {
		http.SetCookie(w, &http.Cookie{
			Name:     i18n.Cookie,
			Value:    l.Code,
			Path:     "/",
			MaxAge:   langCookieAge,
			HttpOnly: true,
			SameSite: http.SameSiteLaxMode,
			Secure:   s.visitors.secure || r.TLS != nil,
		})
	}
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// The headers every page answer carries; set before WriteHeader.
func (s *Server) setPageHeaders(h http.Header) {
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", s.brand.policy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Add("Vary", "Accept-Language")
}

// wantsJSON reports whether an Accept header prefers JSON to HTML. Browsers
// navigating send text/html first; apps and the page's own script ask for
// application/json.
func wantsJSON(accept string) bool {
	jsonQ, htmlQ := -1.0, -1.0
	jsonAt, htmlAt := 0, 0
	for i, part := range strings.Split(accept, ",") {
		mediaType, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if qs, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(qs, 64); err == nil && f >= 0 && f <= 1 {
				q = f
			}
		}
		switch mediaType {
		case "application/json":
			if q > jsonQ {
				jsonQ, jsonAt = q, i
			}
		case "text/html":
			if q > htmlQ {
				htmlQ, htmlAt = q, i
			}
		}
	}
	switch {
	case jsonQ <= 0:
		return false
	case htmlQ < 0:
		return true
	case jsonQ != htmlQ:
		return jsonQ > htmlQ
	default:
		return jsonAt < htmlAt
	}
}

// orderPathOf picks the path the page's order button posts to: the first
// gated route that is a plain POST to a fixed path.
func orderPathOf(gated []string) string {
	for _, p := range gated {
		method, path, ok := strings.Cut(p, " ")
		path = strings.TrimSpace(path)
		if ok && method == http.MethodPost && strings.HasPrefix(path, "/") && !strings.ContainsAny(path, "{}") {
			return path
		}
	}
	return ""
}

// progress is how far a user has come from its place at entry to the front,
// in percent.
func progress(from, position int64) int {
	if from <= 1 || position >= from {
		if position <= 1 {
			return 100
		}
		return 0
	}
	return int((from - position) * 100 / (from - 1))
}

// waitText says an ETA and its range in words ("about 12–15 minutes",
// "약 12–15분"), rounded the way people say waits; the script has the same
// rules (page.js).
func waitText(l *i18n.Lang, eta, low, high int64) string {
	if high < 60 {
		return l.T("wait.under_minute")
	}
	lo, hi := max((low+30)/60, 1), max((high+30)/60, 1)
	if eta < 3600 {
		if lo >= hi {
			return l.Plural("wait.minutes", hi)
		}
		return l.T("wait.range", "Low", l.Number(lo), "High", l.Number(hi))
	}
	minutes := (eta + 30) / 60
	if minutes%60 == 0 {
		return l.T("wait.hours", "H", l.Number(minutes/60))
	}
	return l.T("wait.hours_minutes", "H", l.Number(minutes/60), "M", l.Number(minutes%60))
}

// clockText says a time left as m:ss, rounded down so it never promises
// time the token does not have.
func clockText(ms int64) string {
	secs := max(ms, 0) / 1000
	return fmt.Sprintf("%d:%02d", secs/60, secs%60)
}

// countdownText says the time to an opening as h:mm:ss, as the script does.
func countdownText(ms int64) string {
	secs := max(ms, 0) / 1000
	return fmt.Sprintf("%d:%02d:%02d", secs/3600, secs/60%60, secs%60)
}
