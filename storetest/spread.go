package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
)

// spread is cfg as the suite makes rooms: over h.Shards shards unless
// cfg names its own.
func (h Harness) spread(cfg waitroom.RoomConfig) waitroom.RoomConfig {
	if cfg.Shards == 0 {
		cfg.Shards = h.Shards
	}
	return cfg
}

// supported is cfg without what a spread harness's rooms refuse (checked
// refused by refusedWhenSpread's checks); cfg itself on one shard.
func (h Harness) supported(cfg waitroom.RoomConfig) waitroom.RoomConfig {
	if h.Shards > 1 {
		cfg.InviteOnly = false
	}
	return cfg
}

// refusedWhenSpread are the checks of what a spread room does not do,
// each replaced on a spread harness by the check that it is refused.
var refusedWhenSpread = func() map[string]func(t *testing.T, h Harness) {
	m := map[string]func(t *testing.T, h Harness){}
	for _, name := range []string{"PassBeforeTheOpening", "PassSkipsTheQueue", "PassRefusals", "PassCountsAgainstMaxActiveAndStock",
		"ConcurrentPassUses", "PassWaitsForAnUnsettledHold"} {
		m[name] = requirePassesRefused
	}
	return m
}()

// requireSettingRefused: a spread room is not made with the setting, nor
// given it later; the room is as it was.
func requireSettingRefused(t *testing.T, h Harness, set func(c *waitroom.RoomConfig, h Harness)) {
	ctx := ctxFor(t)
	cfg := h.spread(waitroom.RoomConfig{})
	set(&cfg, h)
	_, err := h.Store.CreateRoom(ctx, testenv.Unique("t-"), cfg)
	require.ErrorIs(t, err, waitroom.ErrShardsUnsupported)
	require.Equal(t, "SHARDS_UNSUPPORTED", waitroom.ErrorCode(err))

	room := newRoom(t, h, waitroom.RoomConfig{})
	before, err := h.Store.RoomConfig(ctx, room)
	require.NoError(t, err)
	_, err = waitroom.ChangeRoom(ctx, h.Store, room, func(c *waitroom.RoomConfig) error { set(c, h); return nil })
	require.ErrorIs(t, err, waitroom.ErrShardsUnsupported)
	after, err := h.Store.RoomConfig(ctx, room)
	require.NoError(t, err)
	require.Equal(t, before, after)
}

// requirePassesRefused: a spread room mints no pass and lets nobody in
// with one; invite-only is refused as a setting.
func requirePassesRefused(t *testing.T, h Harness) {
	ctx := ctxFor(t)
	requireSettingRefused(t, h, func(c *waitroom.RoomConfig, _ Harness) { c.InviteOnly = true })
	room := newRoom(t, h, waitroom.RoomConfig{})
	p := waitroom.Pass{ID: waitroom.NewToken(), Uses: 1, Left: 1, ExpiresAt: h.now().Add(time.Hour)}
	require.ErrorIs(t, h.Store.CreatePass(ctx, room, p), waitroom.ErrShardsUnsupported)
	_, err := h.Store.EnterWithPass(ctx, room, "holder", p.ID)
	require.ErrorIs(t, err, waitroom.ErrShardsUnsupported)
	passes, err := h.Store.Passes(ctx, room)
	require.NoError(t, err)
	require.Empty(t, passes)
}
