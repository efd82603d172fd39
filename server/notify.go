package server

import (
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/i18n"
	"github.com/waitroom/waitroom/jsonhttp"
	"github.com/waitroom/waitroom/notify"
)

// "Tell me when it's my turn" (package notify): a waiting buyer leaves an
// email address or a push subscription with its place; at its turn the
// notice carries a return link that restores the place on any device.
//
//	POST /notify/{room}   {"email":"…"} or {"push":{endpoint,keys}},
//	                      or the page's form (email=…): 303 back
//	GET  /return/{room}?l=…  a page with a button; spends nothing
//	POST /return/{room}   l=…: spends the link, sets this device's
//	                      visitor cookie, 303 to the room's page
//	GET  /notify-sw.js          the page's service worker for Web Push

var (
	errNoticesOff = &waitroom.Error{Code: errNotConfigured.Code, Message: "this waiting room sends no notices", Status: http.StatusNotFound}
	errCrossSite  = &waitroom.Error{Code: "CROSS_SITE", Message: "this is only possible from the waiting room's own pages", Status: http.StatusForbidden}
)

// maxNotifyBody bounds a notice request: a subscription is well under 1 KiB.
const maxNotifyBody = 4 << 10

var (
	returnTemplate = template.Must(template.ParseFS(webFiles, "web/return.html"))
	notifySW       = mustRead("web/notify-sw.js")
)

// notifyRequest is the JSON body of POST /notify/{room}.
type notifyRequest struct {
	Email string       `json:"email"`
	Push  *notify.Push `json:"push"`
}

// notices returns the store's notice requests, or why there are none.
func (s *Server) notices() (waitroom.NoticeStore, error) {
	if s.notifier == nil {
		return nil, errNoticesOff
	}
	n, ok := s.store.Notices()
	if !ok {
		return nil, waitroom.ErrNoticesOff
	}
	return n, nil
}

// noticeForm checks what both notice forms need: notices on, a request
// from this site, a valid room; it returns the store and the room.
func (s *Server) noticeForm(r *http.Request) (waitroom.NoticeStore, string, error) {
	store, err := s.notices()
	if err != nil {
		return nil, "", err
	}
	if err := joinOrigins.Check(r); err != nil {
		return nil, "", errCrossSite
	}
	room, err := noticeRoom(r)
	if err != nil {
		return nil, "", err
	}
	return store, room, nil
}

// noticeRoom is the {room} of the notify routes.
func noticeRoom(r *http.Request) (string, error) {
	room := r.PathValue("room")
	if !waitroom.ValidRoomName(room) {
		return "", waitroom.BadRequest("room names are " + waitroom.RoomNameRule)
	}
	return room, nil
}

// subscribe: POST /notify/{room}.
func (s *Server) subscribe(w http.ResponseWriter, r *http.Request) error {
	store, room, err := s.noticeForm(r)
	if err != nil {
		return err
	}
	user, err := s.user(r)
	if err != nil {
		return err
	}
	form := strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded")
	var c notify.Channel
	if form {
		r.Body = http.MaxBytesReader(w, r.Body, maxNotifyBody)
		if err := r.ParseForm(); err != nil {
			return waitroom.BadRequest("the form does not read (at most 4 KiB)")
		}
		c.Email = r.PostForm.Get("email")
	} else {
		var body notifyRequest
		if err := jsonhttp.Decode(r, &body); err != nil {
			return waitroom.BadRequest(err.Error())
		}
		c = notify.Channel{Email: body.Email, Push: body.Push}
	}
	switch {
	case (c.Email == "") == (c.Push == nil):
		return notify.ErrNoChannelInQuery
	case c.Email != "" && s.notifier.Mailer == nil, c.Push != nil && s.notifier.Pusher == nil:
		return notify.ErrChannelOff
	}
	old, err := store.Notice(r.Context(), room, user)
	if err != nil {
		return err
	}
	kept, req, err := notify.Add(old, c, s.pageLang(r))
	if err == nil {
		err = store.SetNotice(r.Context(), room, user, kept)
	}
	if form {
		// Back to the page, which says how it went.
		q := url.Values{"notice": {"saved"}}
		if err != nil {
			q = url.Values{"notice": {"refused"}, "code": {waitroom.ErrorCode(err)}}
		}
		http.Redirect(w, r, "/rooms/"+room+"?"+q.Encode(), http.StatusSeeOther)
		return nil
	}
	if err != nil {
		return err
	}
	jsonhttp.Write(w, http.StatusOK, map[string]any{"room": room, "channels": len(req.Channels), "lang": req.Lang})
	return nil
}

// returnView is the return page: the button that spends the link.
type returnView struct {
	L      *i18n.Lang
	Action string
	Link   string
	Error  string // the refusal's code, when the link does not work
	CSS    template.CSS
}

// returnPage: GET /return/{room}?l=…. It checks the link and shows
// a button that posts it; it spends nothing, so a mail client's or a
// chat's preview costs the buyer no link.
func (s *Server) returnPage(w http.ResponseWriter, r *http.Request) error {
	if s.notifier == nil {
		return errNoticesOff
	}
	room, err := noticeRoom(r)
	if err != nil {
		return err
	}
	value := r.URL.Query().Get("l")
	if _, err := s.notifier.Linker.Open(value, room); err != nil {
		return s.returnRefused(w, r, err)
	}
	s.setPageHeaders(w.Header())
	// The link is in this page's URL: it goes nowhere else.
	w.Header().Set("Referrer-Policy", "no-referrer")
	return returnTemplate.Execute(w, returnView{L: s.pageLang(r), Action: "/return/" + room, Link: value, CSS: pageCSS})
}

// returnRefused answers a link that does not work: 403 with its code, as
// JSON to a client that asks for it, else as a page in the buyer's
// language that names the code.
func (s *Server) returnRefused(w http.ResponseWriter, r *http.Request, err error) error {
	if wantsJSON(r.Header.Get("Accept")) {
		return err
	}
	a := classify(s.log, r, err)
	s.setPageHeaders(w.Header())
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(a.Status)
	return returnTemplate.Execute(w, returnView{L: s.pageLang(r), Error: a.Code, CSS: pageCSS})
}

// spendReturn: POST /return/{room}. The link is spent once; this
// device then is the buyer (its visitor cookie names the buyer).
func (s *Server) spendReturn(w http.ResponseWriter, r *http.Request) error {
	store, room, err := s.noticeForm(r)
	if err != nil {
		return err
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxNotifyBody)
	if err := r.ParseForm(); err != nil {
		return waitroom.BadRequest("the form does not read (at most 4 KiB)")
	}
	l, err := s.notifier.Linker.Open(r.PostForm.Get("l"), room)
	if err != nil {
		return s.returnRefused(w, r, err)
	}
	if err := store.UseReturnLink(r.Context(), room, l.User, l.Nonce); err != nil {
		if errors.Is(err, waitroom.ErrTokenNotFound) {
			err = notify.ErrLinkExpired // the entry is gone: spent, or run out
		}
		return s.returnRefused(w, r, err)
	}
	// A shop's user (no visitor) is identified by the shop's auth layer
	// on every device; a visitor by the cookie this sets.
	if id, ok := visitorID(l.User); ok && validVisitorID(id) {
		s.visitors.setCookie(w, r, id)
	}
	http.Redirect(w, r, "/rooms/"+room, http.StatusSeeOther)
	return nil
}

// serviceWorker: GET /notify-sw.js, which shows a push notice and opens
// its return link on a click.
func (s *Server) serviceWorker(w http.ResponseWriter, r *http.Request) error {
	if s.notifier == nil || s.notifier.Pusher == nil {
		return errNoticesOff
	}
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write([]byte(notifySW))
	return nil
}

// notifyView fills in the page's opt-in: shown when notices are on.
func (s *Server) notifyView(r *http.Request, v *pageView) {
	if s.notifier == nil {
		return
	}
	if _, ok := s.store.Notices(); !ok {
		return
	}
	v.Notify = true
	v.NotifyEmail = s.notifier.Mailer != nil
	v.NotifyURL = "/notify/" + v.Room
	v.Boot.NotifyURL = v.NotifyURL
	if s.notifier.Pusher != nil {
		v.Boot.PushKey = s.notifier.Pusher.Keys.PublicKey
	}
	switch r.URL.Query().Get("notice") {
	case "saved":
		v.NotifySaved = true
	case "refused":
		v.NotifyRefused = true
	}
}
