package server_test

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/server"
)

// zipOf is a page archive of files, as 'zip -r' of a page directory.
func zipOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		w, err := zw.Create(name)
		require.NoError(t, err)
		_, err = w.Write([]byte(body))
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// roomPageFixture is an admin fixture with a second room, name.
type roomPageFixture struct {
	*servertest.AdminFixture
	name string
}

func (f roomPageFixture) put(archive []byte, contentType string) servertest.Answer {
	f.T.Helper()
	return f.Do("PUT", "/admin/rooms/"+f.name+"/page", string(archive), "Authorization", "Bearer "+servertest.AdminToken, "Content-Type", contentType)
}

// raw is an answer kept as text: a page, a file, an archive.
func (f roomPageFixture) raw(srv *httptest.Server, path string, headers ...string) (*http.Response, string) {
	f.T.Helper()
	req, err := http.NewRequestWithContext(f.T.Context(), "GET", srv.URL+path, nil)
	require.NoError(f.T, err)
	req.Header.Set("Accept", "text/html")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return testenv.Do(f.T, srv.Client(), req)
}

const roomTheme = ":root { --accent: #0b3d91; }\n"

// TestRoomOwnPage: PUT /admin/rooms/{room}/page gives one room a page of
// its own (a zip of what --page-dir holds): its theme, logo and messages
// show on that room's page only, from /pages/{room}/ under a policy that
// allows them; every instance on the store shows it; the archive reads
// back byte for byte; DELETE gives the room the instance's page again.
func TestRoomOwnPage(t *testing.T) {
	t.Parallel()
	f := roomPageFixture{servertest.NewAdminFixture(t, servertest.FixtureOptions{}), servertest.UniqueRoom(t)}
	require.Equal(t, http.StatusCreated, f.Admin("POST", "/admin/rooms", `{"name":"`+f.name+`"}`).Status)
	archive := zipOf(t, map[string]string{
		"theme.css": roomTheme, "logo.svg": testLogo,
		"messages/ko.json": `{"join.title": "ACME 줄 서기"}`, ".DS_Store": "x", "__MACOSX/._theme.css": "x",
	})
	a := f.put(archive, "application/zip")
	require.Equal(t, http.StatusOK, a.Status, a.Raw)
	version := waitroom.PageVersion(archive)
	require.Equal(t, version, a.Str("page"))
	require.Equal(t, version, f.Admin("GET", "/admin/rooms/"+f.name+"?window=0", "").Str("page"))

	second := httptest.NewServer(servertest.MustServer(t, server.Config{Store: f.Store, DefaultRoom: f.Room}))
	t.Cleanup(second.Close)
	for i, srv := range []*httptest.Server{f.Srv, second} {
		resp, body := f.raw(srv, "/rooms/"+f.name)
		require.Equal(t, http.StatusOK, resp.StatusCode, "instance %d", i)
		require.Contains(t, body, `<link rel="stylesheet" href="/pages/`+f.name+`/theme.css?v=`, "instance %d", i)
		require.Contains(t, body, `<img class="logo" src="/pages/`+f.name+`/logo?v=`, "instance %d", i)
		require.Contains(t, resp.Header.Get("Content-Security-Policy"), "style-src 'self' ", "instance %d: the theme is allowed", i)
		_, body = f.raw(srv, "/rooms/"+f.name+"?lang=ko")
		require.Contains(t, body, "<h1>ACME 줄 서기</h1>", "instance %d", i)

		resp, body = f.raw(srv, "/pages/"+f.name+"/theme.css")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "text/css; charset=utf-8", resp.Header.Get("Content-Type"))
		require.Equal(t, roomTheme, body)
		resp, body = f.raw(srv, "/pages/"+f.name+"/logo")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "image/svg+xml", resp.Header.Get("Content-Type"))
		require.Equal(t, "default-src 'none'; style-src 'unsafe-inline'", resp.Header.Get("Content-Security-Policy"))
		require.Equal(t, testLogo, body)

		// The default room keeps the instance's page.
		resp, body = f.raw(srv, "/")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.NotContains(t, body, "/pages/")
		require.NotContains(t, resp.Header.Get("Content-Security-Policy"), "style-src 'self' ")
		for _, path := range []string{"/pages/" + f.Room + "/theme.css", "/pages/" + f.Room + "/logo", "/pages/nosuch/logo", "/pages/BAD%20NAME/logo", "/page/theme.css"} {
			resp, _ = f.raw(srv, path)
			require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
		}
	}

	resp, body := f.raw(f.Srv, "/admin/rooms/"+f.name+"/page", "Authorization", "Bearer "+servertest.AdminToken)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "application/zip", resp.Header.Get("Content-Type"))
	require.Equal(t, archive, []byte(body), "read back byte for byte")
	resp, _ = f.raw(f.Srv, "/admin/rooms/"+f.name+"/page")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the archive is the operator's")

	// A second archive replaces the first as a whole.
	logoOnly := zipOf(t, map[string]string{"logo.svg": testLogo})
	require.Equal(t, http.StatusOK, f.put(logoOnly, "application/zip").Status)
	_, body = f.raw(f.Srv, "/rooms/"+f.name)
	require.NotContains(t, body, "theme.css")
	require.Contains(t, body, "/pages/"+f.name+"/logo?v=")
	resp, _ = f.raw(f.Srv, "/pages/"+f.name+"/theme.css")
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	a = f.Admin("DELETE", "/admin/rooms/"+f.name+"/page", "")
	require.Equal(t, http.StatusOK, a.Status, a.Raw)
	require.Equal(t, "", a.Str("page"))
	_, body = f.raw(f.Srv, "/rooms/"+f.name)
	require.NotContains(t, body, "/pages/")
	f.Admin("GET", "/admin/rooms/"+f.name+"/page", "").RequireError(t, http.StatusNotFound, "PAGE_NOT_FOUND")
	f.Admin("GET", "/admin/rooms/nosuch/page", "").RequireError(t, http.StatusNotFound, "ROOM_NOT_FOUND")
}

// TestRoomOwnPageRefusals: an archive that would show a broken page (or
// is no archive, too large, or unpacks to far more than it weighs) is
// refused with a code and, for its files, the file and line; nothing
// refused is stored, and the room keeps the page it had. The settings
// cannot name a page by themselves.
func TestRoomOwnPageRefusals(t *testing.T) {
	t.Parallel()
	f := roomPageFixture{servertest.NewAdminFixture(t, servertest.FixtureOptions{}), servertest.UniqueRoom(t)}
	require.Equal(t, http.StatusCreated, f.Admin("POST", "/admin/rooms", `{"name":"`+f.name+`"}`).Status)
	good := zipOf(t, map[string]string{"theme.css": roomTheme})
	require.Equal(t, http.StatusOK, f.put(good, "application/zip").Status)

	many := map[string]string{}
	for i := range 65 {
		many[fmt.Sprintf("messages/.note%d", i)] = "x"
	}
	var bomb bytes.Buffer
	zw := zip.NewWriter(&bomb)
	w, err := zw.Create("theme.css")
	require.NoError(t, err)
	_, err = w.Write(bytes.Repeat([]byte{' '}, 5<<20))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	require.Less(t, bomb.Len(), 64<<10, "the bomb is small")

	for _, c := range []struct {
		name    string
		archive []byte
		want    string
	}{
		{"not a zip", []byte("GIF89a, surely"), "not a zip archive"},
		{"empty", nil, "the body is empty"},
		{"does not parse", zipOf(t, map[string]string{"page.html": "<p>\n{{.Title}</p>"}), "page.html: template: page.html:2: bad character U+007D '}'"},
		{"fails in a state", zipOf(t, map[string]string{"page.html": "<p>\n{{if eq .State \"sold_out\"}}{{index .Langs 99}}{{end}}</p>"}),
			"page.html: rendering the sold_out state (en): template: page.html:2:29"},
		{"an unknown file", zipOf(t, map[string]string{"evil.js": "alert(1)"}), "evil.js: not a file of the page"},
		{"a folder around the files", zipOf(t, map[string]string{"brand/theme.css": roomTheme}), "brand: not a file of the page"},
		{"not an SVG", zipOf(t, map[string]string{"logo.svg": `<html><script>alert(1)</script></html>`}), "logo.svg: not an SVG image"},
		{"an unknown key", zipOf(t, map[string]string{"messages/en.json": `{"page.title": "x"}`}), `messages/en.json: key "page.title": English has no such message`},
		{"too many files", zipOf(t, many), "the archive holds 65 files"},
		{"a bomb", bomb.Bytes(), "the archive unpacks to 5242880 bytes"},
	} {
		a := f.put(c.archive, "application/zip")
		a.RequireError(t, http.StatusBadRequest, "PAGE_INVALID", c.name)
		e, _ := a.Body["error"].(map[string]any)
		require.Contains(t, e["message"], c.want, c.name)
	}
	f.put(good, "application/json").RequireError(t, http.StatusUnsupportedMediaType, "PAGE_NOT_ZIP")
	f.put(good, "").RequireError(t, http.StatusUnsupportedMediaType, "PAGE_NOT_ZIP")
	f.put(bytes.Repeat([]byte{'x'}, waitroom.MaxPageBytes+1), "application/zip").RequireError(t, http.StatusRequestEntityTooLarge, "PAGE_TOO_LARGE")
	f.Do("PUT", "/admin/rooms/nosuch/page", string(good), "Authorization", "Bearer "+servertest.AdminToken, "Content-Type", "application/zip").
		RequireError(t, http.StatusNotFound, "ROOM_NOT_FOUND")
	f.Do("PUT", "/admin/rooms/"+f.name+"/page", string(good), "Content-Type", "application/zip").
		RequireError(t, http.StatusUnauthorized, "UNAUTHORIZED")
	f.Admin("PATCH", "/admin/rooms/"+f.name, `{"page":"abc"}`).RequireError(t, http.StatusBadRequest, "BAD_REQUEST")

	cfg, err := f.Store.RoomConfig(t.Context(), f.name)
	require.NoError(t, err)
	require.Equal(t, waitroom.PageVersion(good), cfg.Page, "nothing refused was stored")
	_, body := f.raw(f.Srv, "/pages/"+f.name+"/theme.css")
	require.Equal(t, roomTheme, body)
}

// countingPages is the real in-process store, counting the reads of
// rooms' page archives.
type countingPages struct {
	*memstore.Store
	reads atomic.Int64
	down  atomic.Bool // Page fails as a store that cannot be reached
}

func (c *countingPages) Page(ctx context.Context, room string) ([]byte, string, error) {
	c.reads.Add(1)
	if c.down.Load() {
		return nil, "", waitroom.ErrStoreUnavailable
	}
	return c.Store.Page(ctx, room)
}

// TestRoomOwnPageReadOnce: a crowd loading a room's page at once, right
// after its page is set, costs the store one read of the archive and the
// instance one check of it, not one per visitor.
func TestRoomOwnPageReadOnce(t *testing.T) {
	t.Parallel()
	store := &countingPages{Store: servertest.MemRoom(t, "default", waitroom.RoomConfig{})}
	archive := zipOf(t, map[string]string{"theme.css": roomTheme})
	_, err := store.SetPage(t.Context(), "default", archive, waitroom.PageVersion(archive))
	require.NoError(t, err)
	srv := httptest.NewServer(servertest.MustServer(t, server.Config{Store: store, DefaultRoom: "default"}))
	t.Cleanup(srv.Close)

	const visitors = 64
	bodies := make([]string, visitors)
	testenv.AtOnce(visitors, func(i int) {
		req, err := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/", nil)
		if err == nil {
			req.Header.Set("Accept", "text/html")
			_, bodies[i] = testenv.Do(t, srv.Client(), req)
		}
	})
	for i, body := range bodies {
		require.Contains(t, body, `href="/pages/default/theme.css?v=`, "visitor %d", i)
	}
	require.EqualValues(t, 1, store.reads.Load(), "one read of the archive for the whole crowd")
}

// TestRoomPagesPastTheBound: an instance keeps at most MaxRoomPages room
// pages parsed; one more room makes one kept page go, not all of them, so
// the others are shown again without a read.
func TestRoomPagesPastTheBound(t *testing.T) {
	t.Parallel()
	store := &countingPages{Store: memstore.New(memstore.Options{})}
	archive := zipOf(t, map[string]string{"theme.css": roomTheme})
	room := func(i int) string { return fmt.Sprintf("r%d", i) }
	for i := range server.MaxRoomPages + 1 {
		_, err := store.CreateRoom(t.Context(), room(i), waitroom.RoomConfig{})
		require.NoError(t, err)
		_, err = store.SetPage(t.Context(), room(i), archive, waitroom.PageVersion(archive))
		require.NoError(t, err)
	}
	s := servertest.MustServer(t, server.Config{Store: store})
	show := func(room string) {
		t.Helper()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/rooms/"+room, nil)
		req.Header.Set("Accept", "text/html")
		s.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, room)
		require.Contains(t, rec.Body.String(), `href="/pages/`+room+`/theme.css?v=`, room)
	}
	for i := range server.MaxRoomPages {
		show(room(i))
	}
	require.EqualValues(t, server.MaxRoomPages, store.reads.Load())
	show(room(server.MaxRoomPages))
	kept := server.KeptRoomPages(s)
	require.Len(t, kept, server.MaxRoomPages, "one page went to make room")
	require.Contains(t, kept, room(server.MaxRoomPages))
	var gone string
	for i := range server.MaxRoomPages {
		if !slices.Contains(kept, room(i)) {
			require.Empty(t, gone, "a second page went")
			gone = room(i)
		}
	}
	require.NotEmpty(t, gone)

	reads := store.reads.Load()
	for _, r := range kept {
		show(r)
	}
	require.Equal(t, reads, store.reads.Load(), "every kept page is shown without a read")
	show(gone)
	require.Equal(t, reads+1, store.reads.Load(), "the page that went is read again, once")
	require.Len(t, server.KeptRoomPages(s), server.MaxRoomPages)
}

// TestRoomPageWhileTheStoreIsDown: a room whose page cannot be read is
// shown with the instance's page, and its page is read again at most once
// a second meanwhile, not on every load; once the store answers, the
// room's own page is back.
func TestRoomPageWhileTheStoreIsDown(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := &countingPages{Store: servertest.MemRoom(t, "default", waitroom.RoomConfig{})}
		archive := zipOf(t, map[string]string{"theme.css": roomTheme})
		_, err := store.SetPage(t.Context(), "default", archive, waitroom.PageVersion(archive))
		require.NoError(t, err)
		s := servertest.MustServer(t, server.Config{Store: store})
		show := func() string {
			t.Helper()
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", "/", nil)
			req.Header.Set("Accept", "text/html")
			s.ServeHTTP(rec, req)
			require.Equal(t, http.StatusOK, rec.Code)
			return rec.Body.String()
		}
		store.down.Store(true)
		for range 20 {
			require.NotContains(t, show(), "/pages/default/theme.css", "the instance's page while the room's cannot be read")
		}
		require.EqualValues(t, 1, store.reads.Load(), "one read, not one per load")
		time.Sleep(time.Second)
		show()
		require.EqualValues(t, 2, store.reads.Load(), "read again after a second")
		store.down.Store(false)
		require.NotContains(t, show(), "/pages/default/theme.css", "within the second after a failure, not read")
		time.Sleep(time.Second)
		require.Contains(t, show(), `href="/pages/default/theme.css?v=`, "the room's own page is back")
		require.EqualValues(t, 3, store.reads.Load())
	})
}
