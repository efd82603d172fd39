package server

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/waitroom/waitroom"
)

// A room's own page (waitroom.PageStore): the admin API stores a zip of
// what a page directory holds, checked here as --page-dir is checked at
// start; the room's settings name its version. Each instance reads the
// archive when a room's settings name a version it has not read yet,
// checks it again and keeps the result in memory, so that a page is read
// and parsed once per change and instance, not once per visitor. A room
// without one shows the instance's page (--page-dir or the built-in one);
// its files are served under /pages/{room}/, outside /rooms/{room}/,
// where more routes would cost every poll (allocs_test.go).

// Bounds of an archive beyond its size (waitroom.MaxPageBytes): a page
// directory has a handful of files, and what they unpack to is bounded
// before anything is unpacked (archive/zip fails a file that unpacks to
// more than its header says).
const (
	maxArchiveFiles    = 64
	maxArchiveUnpacked = 4 << 20
)

// maxRoomBrands bounds the room pages an instance keeps parsed; past it
// one kept page makes room for the new one (and is read again, once, when
// its room is next shown), so a platform with more rooms than this reads
// one page per miss rather than every page after every reset.
const maxRoomBrands = 256

// roomBrand is a room's page as this instance read it.
type roomBrand struct {
	version string
	brand   *brand
}

// roomBrands are the room pages read, by room.
type roomBrands struct {
	mu     sync.Mutex
	byRoom map[string]roomBrand
	failed map[string]time.Time // room → when its page last could not be read
	reads  singleflight.Group
}

// pageRetryAfter is how long a room whose page could not be read (the
// store down) is shown with the instance's page before it is read again:
// during an outage each page load would otherwise wait for the store.
const pageRetryAfter = time.Second

// CheckPageArchive reports why archive cannot be a room's page, naming the
// file (and its line or key) as serve names a --page-dir's.
func CheckPageArchive(room string, archive []byte) error {
	_, err := archiveBrand(room, archive)
	return err
}

// archiveBrand reads a room's page archive.
func archiveBrand(room string, archive []byte) (*brand, error) {
	if len(archive) > waitroom.MaxPageBytes {
		return nil, fmt.Errorf("the archive must be at most %d KB, got %d bytes", waitroom.MaxPageBytes>>10, len(archive))
	}
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		return nil, fmt.Errorf("not a zip archive: %w", err)
	}
	if len(zr.File) > maxArchiveFiles {
		return nil, fmt.Errorf("the archive holds %d files; a page has at most %d", len(zr.File), maxArchiveFiles)
	}
	var unpacked uint64
	for _, f := range zr.File {
		unpacked += f.UncompressedSize64
	}
	if unpacked > maxArchiveUnpacked {
		return nil, fmt.Errorf("the archive unpacks to %d bytes; a page's files are at most %d KB in all", unpacked, maxArchiveUnpacked>>10)
	}
	return loadBrandFS(zr, "", roomPagePath(room))
}

// roomPagePath is where a room's own page files are served.
func roomPagePath(room string) string { return "/pages/" + room }

// brandOf is the page room is shown with: its own, when its settings name
// one, else the instance's. A page that cannot be read now (the store
// down) is the instance's until it can, read again at most once a
// pageRetryAfter; one that no longer passes this
// binary's checks (stored by another version) stays the instance's, and
// is said in the log once per version.
func (s *Server) brandOf(ctx context.Context, room string, cfg waitroom.RoomConfig) *brand {
	if cfg.Page == "" || s.pages == nil {
		return s.brand
	}
	rb := &s.roomBrands
	rb.mu.Lock()
	got, ok := rb.byRoom[room]
	failedAt, failed := rb.failed[room]
	rb.mu.Unlock()
	if ok && got.version == cfg.Page {
		return got.brand
	}
	if failed && time.Since(failedAt) < pageRetryAfter {
		return s.brand
	}
	// One read per room and version, however many visitors come at once.
	v, err, _ := rb.reads.Do(room+" "+cfg.Page, func() (any, error) {
		archive, version, err := s.pages.Page(context.WithoutCancel(ctx), room)
		if err != nil {
			rb.mu.Lock()
			if rb.failed == nil {
				rb.failed = make(map[string]time.Time)
			}
			if len(rb.failed) >= maxRoomBrands {
				clear(rb.failed) // only a brief pause in reads is lost
			}
			rb.failed[room] = time.Now()
			rb.mu.Unlock()
			return nil, err
		}
		read := roomBrand{version: version, brand: s.brand}
		if version != "" {
			b, err := archiveBrand(room, archive)
			if err != nil {
				s.log.ErrorContext(ctx, "a room's own page does not pass this version's checks: showing the instance's page",
					"room", room, "page", version, "err", err)
			} else {
				read.brand = b
			}
		}
		rb.mu.Lock()
		if rb.byRoom == nil {
			rb.byRoom = make(map[string]roomBrand)
		}
		if _, kept := rb.byRoom[room]; !kept && len(rb.byRoom) >= maxRoomBrands {
			for other := range rb.byRoom {
				delete(rb.byRoom, other)
				break
			}
		}
		rb.byRoom[room] = read
		delete(rb.failed, room)
		rb.mu.Unlock()
		return read.brand, nil
	})
	if err != nil {
		return s.brand
	}
	return v.(*brand)
}

// roomTheme and roomLogo: GET /pages/{room}/theme.css and
// /pages/{room}/logo, a room's own page's files, or 404.
func (s *Server) roomTheme(w http.ResponseWriter, r *http.Request) {
	b := s.pathRoomBrand(r)
	serveBrandFile(w, r, b.theme, "text/css; charset=utf-8", "")
}

func (s *Server) roomLogo(w http.ResponseWriter, r *http.Request) {
	b := s.pathRoomBrand(r)
	serveBrandFile(w, r, b.logo, b.logoType, logoPolicy)
}

// pathRoomBrand is the own page of the room the path names, or an empty
// brand (404s) for a room without one or none at all.
func (s *Server) pathRoomBrand(r *http.Request) *brand {
	room := r.PathValue("room")
	if !waitroom.ValidRoomName(room) {
		return &brand{}
	}
	cfg, err := s.roomConfig(r.Context(), room)
	if err != nil || cfg.Page == "" {
		return &brand{}
	}
	if b := s.brandOf(r.Context(), room, cfg); b != s.brand {
		return b
	}
	return &brand{}
}
