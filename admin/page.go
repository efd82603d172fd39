package admin

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/adminapi"
	"github.com/waitroom/waitroom/jsonhttp"
)

// A room's own waiting page: the operator sends a zip of what a
// --page-dir holds (logo, theme.css, messages/LANG.json, page.html); it is
// checked as serve checks a --page-dir at start, so a template that fails
// in any state or language is refused here with the file and line, never
// shown to a buyer; then stored, and every instance shows it within a
// slice, as it follows the room's other settings.

// Errors of the page routes; PAGE_INVALID (400) says what is wrong with
// the archive (pageInvalid).
var (
	ErrPageTooLarge = &waitroom.Error{Code: "PAGE_TOO_LARGE", Message: fmt.Sprintf("a page archive is at most %d KB", waitroom.MaxPageBytes>>10), Status: http.StatusRequestEntityTooLarge}
	ErrPageType     = &waitroom.Error{Code: "PAGE_NOT_ZIP", Message: "send the page as Content-Type: application/zip", Status: http.StatusUnsupportedMediaType}
	ErrPageNotFound = &waitroom.Error{Code: "PAGE_NOT_FOUND", Message: "this room shows the instance's page: it has none of its own", Status: http.StatusNotFound}
)

func pageInvalid(why string) error {
	return &waitroom.Error{Code: "PAGE_INVALID", Message: why, Status: http.StatusBadRequest}
}

// roomPages is the room, from the path, and the store's pages.
func (s *Handler) roomPages(r *http.Request) (string, waitroom.PageStore, error) {
	room, err := pathRoom(r)
	if err != nil {
		return "", nil, err
	}
	if s.pages == nil {
		return "", nil, waitroom.ErrPagesOff
	}
	return room, s.pages, nil
}

// adminPutPage: PUT /admin/rooms/{room}/page.
func (s *Handler) adminPutPage(w http.ResponseWriter, r *http.Request) error {
	room, pages, err := s.roomPages(r)
	if err != nil {
		return err
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/zip" {
		return ErrPageType
	}
	archive, err := io.ReadAll(http.MaxBytesReader(w, r.Body, waitroom.MaxPageBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return ErrPageTooLarge
	case err != nil:
		return waitroom.BadRequest("the page archive could not be read: " + err.Error())
	case len(archive) == 0:
		return pageInvalid("the body is empty: send a zip of the page's files")
	}
	// The room first: a page for a room that is not there is 404, not a
	// check of its files.
	old, err := s.store.RoomConfig(r.Context(), room)
	if err != nil {
		return err
	}
	if err := s.checkPage(room, archive); err != nil {
		return pageInvalid(err.Error())
	}
	version := waitroom.PageVersion(archive)
	cfg, err := pages.SetPage(r.Context(), room, archive, version)
	if err != nil {
		return err
	}
	s.pageChanged(r, room, old, cfg)
	jsonhttp.Write(w, http.StatusOK, adminapi.NewRoom(room, cfg))
	return nil
}

// adminGetPage: GET /admin/rooms/{room}/page, the archive as stored.
func (s *Handler) adminGetPage(w http.ResponseWriter, r *http.Request) error {
	room, pages, err := s.roomPages(r)
	if err != nil {
		return err
	}
	if _, err := s.store.RoomConfig(r.Context(), room); err != nil {
		return err
	}
	archive, version, err := pages.Page(r.Context(), room)
	if err != nil {
		return err
	}
	if version == "" {
		return ErrPageNotFound
	}
	h := w.Header()
	h.Set("Content-Type", "application/zip")
	h.Set("Content-Length", strconv.Itoa(len(archive)))
	h.Set("Content-Disposition", `attachment; filename="`+room+`-page.zip"`)
	h.Set("ETag", `"`+version+`"`)
	h.Set("Cache-Control", "no-store")
	_, _ = w.Write(archive)
	return nil
}

// adminDeletePage: DELETE /admin/rooms/{room}/page.
func (s *Handler) adminDeletePage(w http.ResponseWriter, r *http.Request) error {
	room, pages, err := s.roomPages(r)
	if err != nil {
		return err
	}
	old, err := s.store.RoomConfig(r.Context(), room)
	if err != nil {
		return err
	}
	cfg, err := pages.SetPage(r.Context(), room, nil, "")
	if err != nil {
		return err
	}
	s.pageChanged(r, room, old, cfg)
	jsonhttp.Write(w, http.StatusOK, adminapi.NewRoom(room, cfg))
	return nil
}

// pageChanged tells this instance's server and the log of a page change.
func (s *Handler) pageChanged(r *http.Request, room string, old, cfg waitroom.RoomConfig) {
	s.changed(room)
	if old.Page != cfg.Page {
		s.log.InfoContext(r.Context(), "room page changed", "room", room, "by", "admin", "remote", r.RemoteAddr,
			"old", old.Page, "new", cfg.Page)
	}
}
