package server_test

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/server"
	"github.com/waitroom/waitroom/shop"
	"github.com/waitroom/waitroom/shop/inmem"
)

// testProduct is what the waiting page of a pageFixture orders.
const testProduct = "tv-55"

// pageFixture is the waiting room as 'waitroom serve' runs it, in process:
// memstore on a fake clock, the real admitter, and the in-process shop
// behind the gate, on a real listener.
type pageFixture struct {
	t        *testing.T
	clock    *memstore.ManualClock
	store    *memstore.Store
	shop     *inmem.Store
	admitter *waitroom.Admitter
	room     string
	handler  *server.Server
	srv      *httptest.Server
}

type pageOptions struct {
	room    waitroom.RoomConfig  // Rate default 1/s, so each second admits one
	soldOut bool                 // testProduct has no stock; else 10
	secret  []byte               // default a fixed 32-byte secret
	server  func(*server.Config) // changes to the server's settings
}

var testSecret = []byte("0123456789abcdef0123456789abcdef")

func newPageFixture(t *testing.T, opts pageOptions) *pageFixture {
	t.Helper()
	if opts.room.Rate == 0 {
		opts.room.Rate = 1
	}
	stock := int64(10)
	if opts.soldOut {
		stock = 0
	}
	if opts.secret == nil {
		opts.secret = testSecret
	}
	base := servertest.NewStoreFixture(t, opts.room)
	f := &pageFixture{t: t, clock: base.Clock, store: base.Store, shop: inmem.New(), room: base.Room}
	f.admitter = &waitroom.Admitter{Store: f.store}
	require.NoError(t, f.shop.CreateProduct(t.Context(), shop.Product{ID: testProduct, Name: "TV 55\"", Stock: stock}))
	orders := shop.NewHandler(f.shop, shop.Options{})
	cfg := server.Config{
		Store:        f.store,
		DefaultRoom:  f.room,
		Protected:    orders,
		Routes:       map[string]http.Handler{"GET /orders/{id}": orders},
		CookieSecret: opts.secret,
		OrderProduct: testProduct,
	}
	if opts.server != nil {
		opts.server(&cfg)
	}
	f.handler = servertest.MustServer(t, cfg)
	f.srv = httptest.NewServer(f.handler)
	t.Cleanup(f.srv.Close)
	// The first tick starts the room's bucket; each later second admits one.
	_, err := f.admitter.Tick(t.Context())
	require.NoError(t, err)
	return f
}

// enterUsers queues users straight in the store, ahead of any visitor.
func (f *pageFixture) enterUsers(users ...string) {
	f.t.Helper()
	for _, u := range users {
		_, err := f.store.Enter(f.t.Context(), f.room, u)
		require.NoError(f.t, err)
	}
}

// admitNext lets the admitter admit n users, one per second of the clock.
func (f *pageFixture) admitNext(n int) {
	f.t.Helper()
	for range n {
		f.clock.Advance(time.Second)
		admitted, err := f.admitter.Tick(f.t.Context())
		require.NoError(f.t, err)
		require.Equal(f.t, 1, admitted)
	}
}

func (f *pageFixture) waiting() int64 {
	f.t.Helper()
	st, err := f.store.Stats(f.t.Context(), f.room)
	require.NoError(f.t, err)
	return st.Waiting
}

func (f *pageFixture) setState(state waitroom.RoomState) {
	f.t.Helper()
	cfg, err := f.store.RoomConfig(f.t.Context(), f.room)
	require.NoError(f.t, err)
	cfg.State = state
	require.NoError(f.t, f.store.UpdateRoom(f.t.Context(), f.room, testenv.RoomConfig(f.t, f.store, f.room), cfg))
}

// page is one answer of the server, its body kept as text.
type page struct {
	status int
	header http.Header
	body   string
}

func (p page) visitorCookie() *http.Cookie {
	for _, c := range (&http.Response{Header: p.header}).Cookies() {
		if c.Name == "waitroom_visitor" {
			return c
		}
	}
	return nil
}

func (p page) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(p.body), &m), "body %q", p.body)
	return m
}

// get sends one request with the given cookies; headers are name, value
// pairs.
func (f *pageFixture) request(method, path string, cookies []*http.Cookie, headers ...string) page {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.t.Context(), method, f.srv.URL+path, nil)
	require.NoError(f.t, err)
	for _, c := range cookies {
		req.AddCookie(c)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return pageOf(f.t, f.srv.Client(), req)
}

// pageOf sends req with client and keeps its answer as text.
func pageOf(t *testing.T, client *http.Client, req *http.Request) page {
	t.Helper()
	resp, body := testenv.Do(t, client, req)
	return page{status: resp.StatusCode, header: resp.Header, body: body}
}

func (f *pageFixture) get(path string, cookies ...*http.Cookie) page {
	f.t.Helper()
	return f.request("GET", path, cookies, "Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
}

// visit is a browser's first visit: it loads the page (which queues
// nobody), joins by the page's form (POST, as the button without scripts
// does) and loads the page again with the cookie the join set. A join that
// is refused answers with its own page, which visit returns.
func (f *pageFixture) visit(path string, cookies ...*http.Cookie) page {
	f.t.Helper()
	join := f.join(path, cookies...)
	if join.status != http.StatusSeeOther {
		return join
	}
	cookie := join.visitorCookie()
	if cookie == nil && len(cookies) > 0 {
		cookie = cookies[0]
	}
	var p page
	if cookie != nil {
		p = f.get(path, cookie)
	} else {
		p = f.get(path)
	}
	if p.visitorCookie() == nil && join.visitorCookie() != nil {
		p.header.Add("Set-Cookie", join.header.Get("Set-Cookie"))
	}
	return p
}

// join posts the page's join form, without following the redirect.
func (f *pageFixture) join(path string, cookies ...*http.Cookie) page {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.t.Context(), "POST", f.srv.URL+path, strings.NewReader(""))
	require.NoError(f.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "text/html")
	for _, c := range cookies {
		req.AddCookie(c)
	}
	client := *f.srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return pageOf(f.t, &client, req)
}

// statusOf asks the status API as a visitor with cookie.
func (f *pageFixture) statusOf(cookie *http.Cookie) page {
	f.t.Helper()
	return f.request("GET", "/rooms/"+f.room+"/status", []*http.Cookie{cookie}, "Accept", "application/json")
}

// text finds an element's text by id in a rendered page.
func text(t *testing.T, body, id string) string {
	t.Helper()
	m := regexp.MustCompile(`id="` + regexp.QuoteMeta(id) + `"[^>]*>([^<]*)<`).FindStringSubmatch(body)
	require.NotNil(t, m, "no element #%s in the page", id)
	return html.UnescapeString(m[1])
}

// requireShows asserts that p was answered with status and shows the
// section id.
func (p page) requireShows(t *testing.T, status int, id string, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, status, p.status, msgAndArgs...)
	require.True(t, shown(t, p.body, id), msgAndArgs...)
}

// shown reports whether a page's section is rendered visible.
func shown(t *testing.T, body, id string) bool {
	t.Helper()
	m := regexp.MustCompile(`<section id="` + regexp.QuoteMeta(id) + `"[^>]*>`).FindString(body)
	require.NotEmpty(t, m, "no section #%s in the page", id)
	return !strings.Contains(m, " hidden")
}

func TestPageShowsTheWaitingState(t *testing.T) {
	t.Parallel()
	f := newPageFixture(t, pageOptions{})
	f.enterUsers("u1", "u2")

	p := f.visit("/")
	require.Equal(t, http.StatusOK, p.status)
	require.Equal(t, "text/html; charset=utf-8", p.header.Get("Content-Type"))
	require.Equal(t, "no-store", p.header.Get("Cache-Control"))
	require.Contains(t, p.header.Values("Vary"), "Accept")
	require.Contains(t, p.header.Get("Content-Security-Policy"), "script-src 'sha256-")
	require.True(t, shown(t, p.body, "waiting"))
	require.False(t, shown(t, p.body, "admitted"))
	require.Equal(t, "3", text(t, p.body, "position"))
	require.Equal(t, "2", text(t, p.body, "ahead"))
	require.Equal(t, "less than a minute", text(t, p.body, "wait"))
	require.Contains(t, p.body, `<meta name="viewport" content="width=device-width, initial-scale=1">`)
	// Without scripts the page refreshes itself at the poll hint, carrying
	// its place at entry for the progress bar.
	m := regexp.MustCompile(`<noscript><meta http-equiv="refresh" content="(\d+); url=/\?from=3"></noscript>`).FindStringSubmatch(p.body)
	require.NotNil(t, m, "no meta refresh in %s", p.body)
	secs, _ := strconv.Atoi(m[1])
	require.GreaterOrEqual(t, secs, 1)
	require.Equal(t, int64(3), f.waiting())

	// Reloads keep the place; the refresh URL's from= moves the bar.
	cookie := p.visitorCookie()
	require.NotNil(t, cookie)
	f.admitNext(1)
	p = f.get("/?from=3", cookie)
	require.Equal(t, "2", text(t, p.body, "position"))
	require.Contains(t, p.body, `<progress id="progress" max="100" value="50"`)
	require.Equal(t, int64(2), f.waiting())
	// A from= that cannot be the place at entry is ignored.
	p = f.get("/?from=1", cookie)
	require.Contains(t, p.body, `<progress id="progress" max="100" value="0"`)
}

func TestPageAnswersJSONToApps(t *testing.T) {
	t.Parallel()
	f := newPageFixture(t, pageOptions{})
	f.enterUsers("alice")

	for _, path := range []string{"/", "/rooms/" + f.room} {
		p := f.request("GET", path, nil, "Accept", "application/json", "X-User-Id", "alice")
		require.Equal(t, http.StatusOK, p.status, path)
		require.Equal(t, "application/json", p.header.Get("Content-Type"), path)
		status := f.request("GET", "/rooms/"+f.room+"/status", nil, "Accept", "application/json", "X-User-Id", "alice")
		require.JSONEq(t, status.body, p.body, path)
		require.Nil(t, p.visitorCookie(), "no cookie for a user the header names")

		// Asking for JSON does not enter: someone unknown is not in the room.
		p = f.request("GET", path, nil, "Accept", "application/json", "X-User-Id", "bob")
		require.Equal(t, http.StatusNotFound, p.status, path)
		require.Equal(t, "NOT_IN_QUEUE", p.json(t)["error"].(map[string]any)["code"])
		p = f.request("GET", path, nil, "Accept", "application/json")
		require.Equal(t, http.StatusBadRequest, p.status, path)
		require.Nil(t, p.visitorCookie(), "an app asking for JSON gets no visitor")
	}
	require.Equal(t, int64(1), f.waiting())
}

func TestPageStates(t *testing.T) {
	t.Parallel()

	t.Run("admitted", func(t *testing.T) {
		t.Parallel()
		f := newPageFixture(t, pageOptions{})
		p := f.visit("/")
		f.admitNext(1)
		p = f.get("/", p.visitorCookie())
		p.requireShows(t, http.StatusOK, "admitted")
		require.Equal(t, "5:00", text(t, p.body, "time-left"))
		require.Contains(t, p.body, `<button id="order" type="button" hidden>`)
		require.Contains(t, p.body, "Ordering from this page needs JavaScript")
		require.NotContains(t, p.body, `http-equiv="refresh"`)
	})
	t.Run("paused", func(t *testing.T) {
		t.Parallel()
		f := newPageFixture(t, pageOptions{room: waitroom.RoomConfig{State: waitroom.RoomPaused}})
		p := f.visit("/")
		p.requireShows(t, http.StatusOK, "waiting")
		require.Contains(t, p.body, `<p class="note" id="paused">The sale is paused`)
		require.Equal(t, "on hold while the sale is paused", text(t, p.body, "wait"))
	})
	t.Run("queue full", func(t *testing.T) {
		t.Parallel()
		f := newPageFixture(t, pageOptions{room: waitroom.RoomConfig{MaxQueue: 1}})
		f.enterUsers("u1")
		p := f.visit("/")
		p.requireShows(t, http.StatusTooManyRequests, "queue_full")
		retry, err := strconv.Atoi(p.header.Get("Retry-After"))
		require.NoError(t, err)
		require.Contains(t, p.body, `<p id="retry-after" data-seconds="`+strconv.Itoa(retry)+`">`)
		require.Equal(t, "Please try again in "+strconv.Itoa(retry)+" seconds.", text(t, p.body, "retry-after"))
		require.GreaterOrEqual(t, retry, 30)
		require.NotContains(t, p.body, `http-equiv="refresh"`, "a full queue is not retried by itself")
		require.Equal(t, int64(1), f.waiting())
	})
	t.Run("closed", func(t *testing.T) {
		t.Parallel()
		f := newPageFixture(t, pageOptions{})
		queued := f.visit("/")
		f.setState(waitroom.RoomClosed)
		p := f.visit("/")
		p.requireShows(t, http.StatusForbidden, "closed")
		// Someone already in line keeps the place.
		p = f.get("/", queued.visitorCookie())
		require.Equal(t, http.StatusOK, p.status)
		require.Equal(t, "1", text(t, p.body, "position"))
	})
	t.Run("invite only", func(t *testing.T) {
		t.Parallel()
		f := newPageFixture(t, pageOptions{room: waitroom.RoomConfig{InviteOnly: true}})
		p := f.visit("/")
		p.requireShows(t, http.StatusForbidden, "invitation")
		require.False(t, shown(t, p.body, "error"), "not an error to try again")
		require.Equal(t, "Only guests with an invitation can join this sale.", text(t, p.body, "invitation-message"),
			"a sentence for buyers, not the API's")
		require.Equal(t, int64(0), f.waiting())
	})
	t.Run("no such room", func(t *testing.T) {
		t.Parallel()
		f := newPageFixture(t, pageOptions{})
		p := f.get("/rooms/nosuch")
		p.requireShows(t, http.StatusNotFound, "no_room")
		require.Contains(t, p.body, "No waiting room is called “nosuch”")
	})
	t.Run("bad room name", func(t *testing.T) {
		t.Parallel()
		f := newPageFixture(t, pageOptions{})
		p := f.get("/rooms/Bad.Room")
		p.requireShows(t, http.StatusBadRequest, "error")
		require.Equal(t, "This link doesn't lead to a waiting room. Check the link you followed.", text(t, p.body, "error-message"))
	})
	t.Run("store unavailable", func(t *testing.T) {
		t.Parallel()
		store := servertest.MemRoom(t, "default", waitroom.RoomConfig{})
		srv := httptest.NewServer(servertest.MustServer(t, server.Config{
			Store: failingStore{Store: store, err: waitroom.ErrStoreUnavailable},
		}))
		t.Cleanup(srv.Close)
		resp, err := srv.Client().Post(srv.URL+"/", "application/x-www-form-urlencoded", nil)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		require.Equal(t, "5", resp.Header.Get("Retry-After"))
		require.True(t, shown(t, string(b), "unavailable"))
	})
	t.Run("another room has no order button", func(t *testing.T) {
		t.Parallel()
		f := newPageFixture(t, pageOptions{})
		_, err := f.store.CreateRoom(t.Context(), "side-sale", waitroom.RoomConfig{Rate: 1})
		require.NoError(t, err)
		p := f.visit("/rooms/side-sale")
		require.Equal(t, http.StatusOK, p.status)
		require.NotContains(t, p.body, `id="order"`, "the gate takes the default room's tokens only")
		require.Contains(t, p.body, "url=/rooms/side-sale?from=1")
	})
}

// A page answer is whole even when the client's context ends before it:
// the store call fails with the context and the page says so, never a
// half-written template.
func TestPageWithCancelledRequest(t *testing.T) {
	t.Parallel()
	f := newPageFixture(t, pageOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	req := httptest.NewRequestWithContext(ctx, "POST", "/", nil)
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	require.Contains(t, rec.Body.String(), "</html>")
}

// TestPageConfirmsYourTurn: the page that shows "your turn" confirms the
// token, which then lives its whole TTL; a token its holder was told of
// once and never came back for expires at first_use_within.
func TestPageConfirmsYourTurn(t *testing.T) {
	t.Parallel()
	f := newPageFixture(t, pageOptions{room: waitroom.RoomConfig{Rate: 1, TokenTTL: 5 * time.Minute, FirstUseWithin: 10 * time.Second}})
	p := f.visit("/")
	require.True(t, shown(t, p.body, "waiting"))
	cookie := p.visitorCookie()
	f.enterUsers("api")
	f.admitNext(2)

	p = f.get("/", cookie)
	require.True(t, shown(t, p.body, "admitted"), "your turn")
	st, err := f.store.Status(t.Context(), f.room, "api")
	require.NoError(t, err)
	require.Equal(t, waitroom.StateAdmitted, st.State, "told once, never back")

	f.clock.Advance(30 * time.Second)
	_, err = f.admitter.Tick(t.Context())
	require.NoError(t, err)
	p = f.get("/", cookie)
	require.True(t, shown(t, p.body, "admitted"), "confirmed: the whole TTL")
	_, err = f.store.Status(t.Context(), f.room, "api")
	require.ErrorIs(t, err, waitroom.ErrNotInQueue, "a no-show at first_use_within")
	stats, err := f.store.Stats(t.Context(), f.room)
	require.NoError(t, err)
	require.Equal(t, int64(1), stats.NoShows)
}
