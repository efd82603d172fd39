package waitroom

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

	restoreMu sync.Mutex
	restored  map[string]time.Time // room → last Restore's CreateRoom
}

// DefaultKeeperInterval is RoomKeeper.Interval's default: two round trips
// per room a second are nothing next to the traffic, and a lost room is
// back before most users poll again.
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
func (k *RoomKeeper) Tick(ctx context.Context) ([]string, error) {
	var errs []error
	if rooms, err := k.Store.Rooms(ctx); err != nil {
		// Still re-create: the rooms set may live on a shard that is down
		// while the rooms themselves are on others.
		errs = append(errs, err)
	} else {
		for _, room := range rooms {
			cfg, err := k.Store.RoomConfig(ctx, room)
			switch {
			case errors.Is(err, ErrRoomNotFound):
				// Listed but its settings are gone: re-created below if known.
			case err != nil:
				errs = append(errs, err)
			default:
				k.learn(room, cfg)
			}
		}
	}

	var recreated []string
	for room, cfg := range k.rooms() {
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

func (k *RoomKeeper) learn(room string, cfg RoomConfig) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.known == nil {
		k.known = map[string]RoomConfig{}
	}
	k.known[room] = cfg
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
