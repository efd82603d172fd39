package waitroom

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
)

// A room's own waiting page: the shop's brand for that room, given in the
// admin API, kept in the store so that every instance shows it. It is an
// archive of a page directory (a zip of logo, theme.css, messages/ and
// page.html, as --page-dir holds), checked by the caller (package server)
// before it is stored; the store keeps its bytes and names the version in
// RoomConfig.Page, so that each instance follows a change as it follows
// the room's other settings.

// MaxPageBytes bounds a room's page archive: the files it may hold are
// bounded too (a logo 64 KB, a theme 64 KB, a template 256 KB, messages).
const MaxPageBytes = 1 << 20

// ErrPagesOff answers the page routes of a store that keeps no pages.
var ErrPagesOff = &Error{"PAGES_UNSUPPORTED", "this waiting room's store cannot keep a room's own page", http.StatusNotImplemented}

// PageStore is a Store that keeps a room's own page.
type PageStore interface {
	// SetPage keeps archive as room's page, replacing what it kept, and
	// sets the room's RoomConfig.Page to version; a nil archive (and ""
	// version) removes it. ErrRoomNotFound without the room. It returns
	// the room's settings after the change.
	SetPage(ctx context.Context, room string, archive []byte, version string) (RoomConfig, error)
	// Page returns the archive of room's page and its version (nil and
	// "": none).
	Page(ctx context.Context, room string) (archive []byte, version string, err error)
}

// PageVersion is the version a room's page archive is stored under: its
// SHA-256, so that the same archive stored twice changes nothing.
func PageVersion(archive []byte) string {
	sum := sha256.Sum256(archive)
	return hex.EncodeToString(sum[:])
}

// CheckPageVersion reports why v cannot name a room's page: a version is
// 1 to 64 of [0-9a-f], as PageVersion gives.
func CheckPageVersion(v string) error {
	if len(v) > 64 {
		return fmt.Errorf("must be at most 64 hex digits, got %d bytes", len(v))
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("must be hex digits, got %q", v)
		}
	}
	return nil
}

// CheckPage is what a store checks of SetPage's arguments: an archive of
// at most MaxPageBytes with a version, or neither (no page).
func CheckPage(archive []byte, version string) error {
	switch {
	case len(archive) > MaxPageBytes:
		return BadRequest(fmt.Sprintf("page: the archive must be at most %d KB, got %d bytes", MaxPageBytes>>10, len(archive)))
	case (len(archive) == 0) != (version == ""):
		return BadRequest("page: an archive and its version come together")
	}
	if err := CheckPageVersion(version); err != nil {
		return BadRequest("page: version " + err.Error())
	}
	return nil
}

// PageChangeRefusal refuses a CreateRoom (from is zero) or UpdateRoom
// that sets or changes Page, which only SetPage may write, with the
// archive it names.
func PageChangeRefusal(from, to RoomConfig) error {
	if from.Page != to.Page {
		return BadRequest("page: a room's page is set with its archive (PUT /admin/rooms/{room}/page), not as a setting")
	}
	return nil
}

// Pages returns the store's PageStore, guarded like every other call; ok
// is false when the store keeps no pages.
func (g *GuardedStore) Pages() (PageStore, bool) {
	if _, ok := g.store.(PageStore); !ok {
		return nil, false
	}
	return guardedPages{g}, true
}

type guardedPages struct{ g *GuardedStore }

func (p guardedPages) inner() PageStore { return p.g.store.(PageStore) }

func (p guardedPages) SetPage(ctx context.Context, room string, archive []byte, version string) (RoomConfig, error) {
	return guarded(ctx, p.g, room, func(ctx context.Context) (RoomConfig, error) { return p.inner().SetPage(ctx, room, archive, version) })
}

func (p guardedPages) Page(ctx context.Context, room string) ([]byte, string, error) {
	type page struct {
		archive []byte
		version string
	}
	got, err := guarded(ctx, p.g, room, func(ctx context.Context) (page, error) {
		archive, version, err := p.inner().Page(ctx, room)
		return page{archive, version}, err
	})
	return got.archive, got.version, err
}
