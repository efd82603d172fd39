package waitroom

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"
)

// RoomKeeper re-creates rooms the store lost. A Redis restarted without
// persistence, or a replica promoted before it had a room's settings, has
// no wr:{room}:cfg: Enter and Status answer ROOM_NOT_FOUND, and the
// admitter, which lists rooms from the store, stops admitting. A server
// runs a RoomKeeper beside its admitter so that such a room comes back by
// itself within Interval, with no process restart.
//
// It keeps the settings it last read for every room it has seen, so a
// room comes back as the operator last set it, not only as the flags
// declared it. The queue, tokens and counters are not brought back: they
// are gone with the data (and reported as a Loss by the Store that handed
// them out). The Store itself keeps nothing of this: RoomKeeper works on
// any Store.
type RoomKeeper struct {
	Store Store
	// Rooms are the declared rooms and their settings; every one is kept
	// even before it has been seen.
	Rooms map[string]RoomConfig
	// Interval between checks; default 1 s.
	Interval time.Duration
	// Logger; default discards.
	Logger *slog.Logger
	// OnRecreate, if set, is told every room re-created.
	OnRecreate func(room string)

	mu    sync.Mutex
	known map[string]RoomConfig // last settings read, by room
	seen  map[string]string     // the version those settings had, by room

	restoreMu sync.Mutex
	restored  map[string]time.Time // room → last Restore's CreateRoom
}

// DefaultKeeperInterval is RoomKeeper.Interval's default: a check costs
// a few commands whatever the rooms (Tick), and a lost room is back
// before most users poll again.
const DefaultKeeperInterval = time.Second

// Run checks every Interval until ctx is done; it returns ctx's error. A
// failing check is retried on the next one.
func (k *RoomKeeper) Run(ctx context.Context) error {
	interval := k.Interval
	if interval <= 0 {
		interval = DefaultKeeperInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := k.Tick(ctx); err != nil && ctx.Err() == nil {
			k.logger().DebugContext(ctx, "room check failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Tick learns the settings of every room the store lists, then creates
// each known room that is missing, and returns those it re-created. A
// server may also call it when a request for a declared room finds
// ErrRoomNotFound, to bring the room back at once.
//
// What it costs does not grow with the rooms: one Rooms and one
// RoomVersions for all of them (a few commands on Redis, one per slot on
// Cluster). Only a room whose version changed since it was read (or was
// never read) has its settings read again, and only a room that is gone
// is created again. While the versions cannot be read (a Cluster shard
// down), it creates every known room that is missing, one call each, so
// rooms on the healthy shards still come back.
func (k *RoomKeeper) Tick(ctx context.Context) ([]string, error) {
	var errs []error
	listed, err := k.Store.Rooms(ctx)
	if err != nil {
		// Still re-create: the rooms set may live on a shard that is down
		// while the rooms themselves are on others.
		errs = append(errs, err)
	}
	known := k.rooms()
	names := slices.Sorted(maps.Keys(known))
	for _, room := range listed {
		if _, ok := known[room]; !ok {
			names = append(names, room)
		}
	}
	versions, err := k.readVersions(ctx, names)
	if err != nil {
		errs = append(errs, err)
	}

	var recreated []string
	for i, room := range names {
		if versions != nil && versions[i] != "" {
			if versions[i] != k.version(room) {
				errs = append(errs, k.read(ctx, room, versions[i]))
			}
			continue
		}
		cfg, ok := known[room]
		if !ok {
			// Listed but its settings are gone before they were seen:
			// nothing to bring it back as.
			continue
		}
		created, err := k.Store.CreateRoom(ctx, room, cfg)
		if err != nil {
			errs = append(errs, fmt.Errorf("room %s: %w", room, err))
			continue
		}
		if created {
			recreated = append(recreated, room)
			k.recreated(ctx, room, cfg)
		}
	}
	return recreated, errors.Join(errs...)
}

// readVersions asks the store for the versions of rooms' settings, in
// batches of at most MaxWorkRoomsBatch.
func (k *RoomKeeper) readVersions(ctx context.Context, rooms []string) ([]string, error) {
	var out []string
	for from := 0; from < len(rooms); from += MaxWorkRoomsBatch {
		v, err := k.Store.RoomVersions(ctx, rooms[from:min(from+MaxWorkRoomsBatch, len(rooms))])
		if err != nil {
			return nil, err
		}
		out = append(out, v...)
	}
	return out, nil
}

// read learns room's settings, which the store holds at version.
func (k *RoomKeeper) read(ctx context.Context, room, version string) error {
	cfg, err := k.Store.RoomConfig(ctx, room)
	switch {
	case errors.Is(err, ErrRoomNotFound):
		// Gone since its version was read: the next Tick re-creates it.
		return nil
	case err != nil:
		return err
	}
	// Read after the version: should the settings have changed between
	// the two, the next Tick reads them again, as their version differs.
	k.learn(room, cfg, version)
	return nil
}

// restoreEvery bounds how often Restore creates one room: a store that
// keeps losing it is not hammered from every request.
const restoreEvery = time.Second

// Restore re-creates room at once if the keeper knows it (declared, or
// seen before) and the store lost it: for a request that just found
// ErrRoomNotFound, so users need not wait for the next Tick. It reports
// whether the room is known; concurrent callers wait for one CreateRoom,
// and a room is created at most once per second.
func (k *RoomKeeper) Restore(ctx context.Context, room string) (bool, error) {
	cfg, ok := k.rooms()[room]
	if !ok {
		return false, nil
	}
	k.restoreMu.Lock()
	defer k.restoreMu.Unlock()
	if time.Since(k.restored[room]) < restoreEvery {
		return true, nil
	}
	if k.restored == nil {
		k.restored = map[string]time.Time{}
	}
	k.restored[room] = time.Now()
	created, err := k.Store.CreateRoom(ctx, room, cfg)
	if err != nil {
		return true, fmt.Errorf("room %s: %w", room, err)
	}
	if created {
		k.recreated(ctx, room, cfg)
	}
	return true, nil
}

// retry reports whether a call that failed with err is worth one more
// try: err is ErrRoomNotFound for a room the keeper knows, which it has
// just created again (or did less than a second ago). Redis keeps nothing
// on disk by default, so after a restart every room is gone; Run brings
// the known rooms back within Interval, and this spares the requests of
// that second a ROOM_NOT_FOUND. The queue and the tokens are lost either
// way: users see NOT_IN_QUEUE and enter again.
func (k *RoomKeeper) retry(ctx context.Context, room string, err error) bool {
	if !errors.Is(err, ErrRoomNotFound) {
		return false
	}
	known, err := k.Restore(ctx, room)
	if err != nil {
		k.logger().WarnContext(ctx, "declaring a lost room again failed", "room", room, "err", err)
		return false
	}
	return known
}

func (k *RoomKeeper) recreated(ctx context.Context, room string, cfg RoomConfig) {
	k.logger().WarnContext(ctx, "room re-created: the store had lost it (Redis restarted empty or failed over to a replica without it); its queue and tokens are gone, users enter again",
		"room", room, "rate", cfg.Rate, "state", cfg.State)
	if k.OnRecreate != nil {
		k.OnRecreate(room)
	}
}

func (k *RoomKeeper) learn(room string, cfg RoomConfig, version string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.known == nil {
		k.known, k.seen = map[string]RoomConfig{}, map[string]string{}
	}
	k.known[room], k.seen[room] = cfg, version
}

// version is the version of the settings last read of room; "" if none.
func (k *RoomKeeper) version(room string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.seen[room]
}

// rooms returns the declared rooms overlaid with the settings last read.
func (k *RoomKeeper) rooms() map[string]RoomConfig {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make(map[string]RoomConfig, len(k.Rooms)+len(k.known))
	for room, cfg := range k.Rooms {
		out[room] = cfg
	}
	for room, cfg := range k.known {
		out[room] = cfg
	}
	return out
}

func (k *RoomKeeper) logger() *slog.Logger {
	if k.Logger != nil {
		return k.Logger
	}
	return slog.New(slog.DiscardHandler)
}
