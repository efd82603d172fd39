package storetest

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

// RunPages checks a waitroom.PageStore: a room's own page is kept byte
// for byte with the version its settings name, replaced and removed as a
// whole, never half, and only SetPage writes it. A store runs it besides
// Run once it keeps pages (memstore and redisstore do).
func RunPages(t *testing.T, newHarness func(t *testing.T) Harness) {
	runExtension(t, newHarness, "pages", []extensionCase[waitroom.PageStore]{
		{"PageRoundTrip", testPageRoundTrip},
		{"PageRefusals", testPageRefusals},
		{"PageAndSettingsChanges", testPageAndSettingsChanges},
		{"PageConcurrentSets", testPageConcurrentSets},
	})
}

// extensionCase is one check of an optional store interface S.
type extensionCase[S any] struct {
	name string
	fn   func(t *testing.T, h Harness, s S)
}

// runExtension runs cases, each on a store of its own that must
// implement S (what it keeps: the failure says so).
func runExtension[S any](t *testing.T, newHarness func(t *testing.T) Harness, what string, cases []extensionCase[S]) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			s, ok := h.Store.(S)
			require.True(t, ok, "the store keeps no %s", what)
			tc.fn(t, h, s)
		})
	}
}

// archive is a page archive's stand-in: the store keeps bytes, which
// package server checks before it stores them. It holds a NUL and
// invalid UTF-8, as a zip does.
func archive(n int) []byte { return fmt.Appendf(nil, "PK\x03\x04\x00\xff page %d", n) }

func pageVersion(n int) string { return fmt.Sprintf("%012x", n) }

// testPageRoundTrip: a room without a page has none; SetPage keeps the
// archive and names its version in the settings (a new settings
// version, so that instances follow); a second SetPage replaces it; an
// empty one removes it.
func testPageRoundTrip(t *testing.T, h Harness, p waitroom.PageStore) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 5})
	got, version, err := p.Page(ctx, room)
	require.NoError(t, err)
	require.Nil(t, got)
	require.Empty(t, version)
	before, err := h.Store.RoomVersions(ctx, []string{room})
	require.NoError(t, err)

	for n := 1; n <= 2; n++ {
		cfg, err := p.SetPage(ctx, room, archive(n), pageVersion(n))
		require.NoError(t, err)
		require.Equal(t, pageVersion(n), cfg.Page)
		require.Equal(t, 5.0, cfg.Rate, "the other settings stay")
		stored, err := h.Store.RoomConfig(ctx, room)
		require.NoError(t, err)
		require.Equal(t, cfg, stored)
		got, version, err := p.Page(ctx, room)
		require.NoError(t, err)
		require.Equal(t, archive(n), got)
		require.Equal(t, pageVersion(n), version)
		after, err := h.Store.RoomVersions(ctx, []string{room})
		require.NoError(t, err)
		require.NotEqual(t, before, after, "instances must see the settings changed")
		before = after
	}

	cfg, err := p.SetPage(ctx, room, nil, "")
	require.NoError(t, err)
	require.Empty(t, cfg.Page)
	got, version, err = p.Page(ctx, room)
	require.NoError(t, err)
	require.Nil(t, got)
	require.Empty(t, version)
}

// testPageRefusals: no page for a room that does not exist (and none
// made by it), none too large, none without its version or with one
// that is not one; the settings cannot name a page by themselves. Nothing
// refused is stored.
func testPageRefusals(t *testing.T, h Harness, p waitroom.PageStore) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{})
	_, err := p.SetPage(ctx, room+"-none", archive(1), pageVersion(1))
	require.ErrorIs(t, err, waitroom.ErrRoomNotFound)
	_, err = h.Store.RoomConfig(ctx, room+"-none")
	require.ErrorIs(t, err, waitroom.ErrRoomNotFound, "SetPage made no room")

	_, err = p.SetPage(ctx, room, archive(1), pageVersion(1))
	require.NoError(t, err)
	stored, err := h.Store.RoomConfig(ctx, room)
	require.NoError(t, err)
	for name, bad := range map[string]struct {
		archive []byte
		version string
	}{
		"too large":          {bytes.Repeat([]byte{'x'}, waitroom.MaxPageBytes+1), pageVersion(2)},
		"no version":         {archive(2), ""},
		"no archive":         {nil, pageVersion(2)},
		"version not hex":    {archive(2), "XYZ"},
		"version with space": {archive(2), "ab cd"},
		"version too long":   {archive(2), strings.Repeat("a", 65)},
	} {
		_, err := p.SetPage(ctx, room, bad.archive, bad.version)
		require.ErrorIs(t, err, waitroom.ErrBadRequest, name)
	}

	changed := stored
	changed.Page = pageVersion(9)
	require.ErrorIs(t, h.Store.UpdateRoom(ctx, room, stored, changed), waitroom.ErrBadRequest, "an update names no page")
	changed.Page = ""
	require.ErrorIs(t, h.Store.UpdateRoom(ctx, room, stored, changed), waitroom.ErrBadRequest, "nor removes one")
	_, err = h.Store.CreateRoom(ctx, room+"-made", waitroom.RoomConfig{Page: pageVersion(1)})
	require.ErrorIs(t, err, waitroom.ErrBadRequest, "a new room names no page")

	after, err := h.Store.RoomConfig(ctx, room)
	require.NoError(t, err)
	require.Equal(t, stored, after, "nothing refused was stored")
	got, version, err := p.Page(ctx, room)
	require.NoError(t, err)
	require.Equal(t, archive(1), got)
	require.Equal(t, pageVersion(1), version)
}

// testPageAndSettingsChanges: a change of the other settings keeps the
// page; an update made from settings read before a SetPage is refused
// (ROOM_CHANGED) rather than writing the old page's name back.
func testPageAndSettingsChanges(t *testing.T, h Harness, p waitroom.PageStore) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{Rate: 5})
	_, err := p.SetPage(ctx, room, archive(1), pageVersion(1))
	require.NoError(t, err)
	cfg, err := waitroom.ChangeRoom(ctx, h.Store, room, func(c *waitroom.RoomConfig) error {
		c.Rate = 7
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, pageVersion(1), cfg.Page, "the page stays")

	stale, err := h.Store.RoomConfig(ctx, room)
	require.NoError(t, err)
	_, err = p.SetPage(ctx, room, archive(2), pageVersion(2))
	require.NoError(t, err)
	to := stale
	to.Rate = 9
	require.ErrorIs(t, h.Store.UpdateRoom(ctx, room, stale, to), waitroom.ErrRoomChanged)
	got, err := h.Store.RoomConfig(ctx, room)
	require.NoError(t, err)
	require.Equal(t, pageVersion(2), got.Page)
	require.Equal(t, 7.0, got.Rate)
}

// testPageConcurrentSets: of many SetPage calls at once every one lands
// in turn, and what is left is whole: the archive of the version the
// settings name, never one version's name over another's bytes.
func testPageConcurrentSets(t *testing.T, h Harness, p waitroom.PageStore) {
	ctx := ctxFor(t)
	room := newRoom(t, h, waitroom.RoomConfig{})
	const setters = 16
	errs := race(setters, func(i int) error {
		_, err := p.SetPage(ctx, room, archive(i), pageVersion(i))
		return err
	})
	require.Equal(t, map[string]int{"ok": setters}, countErrors(errs))
	cfg, err := h.Store.RoomConfig(ctx, room)
	require.NoError(t, err)
	got, version, err := p.Page(ctx, room)
	require.NoError(t, err)
	require.Equal(t, cfg.Page, version)
	var n int
	_, err = fmt.Sscanf(version, "%x", &n)
	require.NoError(t, err)
	require.Equal(t, archive(n), got)
}
