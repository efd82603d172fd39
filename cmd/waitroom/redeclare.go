package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/waitroom/waitroom"
)

// redeclaringStore brings a lost room back at once when a request finds
// it missing. Redis keeps nothing on disk by default, so after a restart
// every room is gone; the RoomKeeper beside the admitter re-creates known
// rooms within a second, and this wrapper spares the requests of that
// second a ROOM_NOT_FOUND. The queue and the tokens are lost either way:
// users see NOT_IN_QUEUE and enter again.
type redeclaringStore struct {
	waitroom.Store
	keeper *waitroom.RoomKeeper
	log    *slog.Logger
}

func newRedeclaringStore(store waitroom.Store, keeper *waitroom.RoomKeeper, log *slog.Logger) *redeclaringStore {
	return &redeclaringStore{Store: store, keeper: keeper, log: log}
}

// redeclare reports whether the call that failed with err is worth one
// retry: err is ROOM_NOT_FOUND for a room the keeper knows, which it has
// just created again (or did less than a second ago).
func (s *redeclaringStore) redeclare(ctx context.Context, room string, err error) bool {
	if !errors.Is(err, waitroom.ErrRoomNotFound) {
		return false
	}
	known, err := s.keeper.Restore(ctx, room)
	if err != nil {
		s.log.WarnContext(ctx, "declaring a lost room again failed", "room", room, "err", err)
		return false
	}
	return known
}

func (s *redeclaringStore) Enter(ctx context.Context, room, user string) (waitroom.Status, error) {
	st, err := s.Store.Enter(ctx, room, user)
	if s.redeclare(ctx, room, err) {
		st, err = s.Store.Enter(ctx, room, user)
	}
	return st, err
}

func (s *redeclaringStore) Status(ctx context.Context, room, user string) (waitroom.Status, error) {
	st, err := s.Store.Status(ctx, room, user)
	if s.redeclare(ctx, room, err) {
		st, err = s.Store.Status(ctx, room, user)
	}
	return st, err
}

func (s *redeclaringStore) RoomConfig(ctx context.Context, room string) (waitroom.RoomConfig, error) {
	cfg, err := s.Store.RoomConfig(ctx, room)
	if s.redeclare(ctx, room, err) {
		cfg, err = s.Store.RoomConfig(ctx, room)
	}
	return cfg, err
}

func (s *redeclaringStore) UpdateRoom(ctx context.Context, room string, from, to waitroom.RoomConfig) error {
	err := s.Store.UpdateRoom(ctx, room, from, to)
	if s.redeclare(ctx, room, err) {
		// Re-created as last seen, which may not be from: then the caller
		// reads again (ErrRoomChanged), as it would after any change.
		err = s.Store.UpdateRoom(ctx, room, from, to)
	}
	return err
}

func (s *redeclaringStore) Claim(ctx context.Context, room, user, token string) (waitroom.Hold, error) {
	h, err := s.Store.Claim(ctx, room, user, token)
	if s.redeclare(ctx, room, err) {
		h, err = s.Store.Claim(ctx, room, user, token)
	}
	return h, err
}
