package main

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/waitroom/waitroom"
)

// redeclareEvery bounds how often one room is created again: a store that
// keeps losing it is not hammered with CreateRoom.
const redeclareEvery = time.Second

// redeclaringStore declares a room of the flags again when the store says
// it does not exist. Redis keeps nothing on disk by default, so after a
// restart every room is gone; without this the server would answer
// ROOM_NOT_FOUND until someone restarts it. The queue and the tokens are
// lost either way: users see NOT_IN_QUEUE and enter again.
type redeclaringStore struct {
	waitroom.Store
	rooms []string
	cfg   waitroom.RoomConfig
	log   *slog.Logger

	mu   sync.Mutex
	last map[string]time.Time // room → last CreateRoom
}

func newRedeclaringStore(store waitroom.Store, rooms []string, cfg waitroom.RoomConfig, log *slog.Logger) *redeclaringStore {
	return &redeclaringStore{Store: store, rooms: rooms, cfg: cfg, log: log, last: map[string]time.Time{}}
}

// redeclare reports whether the call that failed with err is worth one
// retry: err is ROOM_NOT_FOUND for a declared room, and the room exists
// again (created now, or by a call less than redeclareEvery ago).
func (s *redeclaringStore) redeclare(ctx context.Context, room string, err error) bool {
	if !errors.Is(err, waitroom.ErrRoomNotFound) || !slices.Contains(s.rooms, room) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock() // concurrent callers wait for one CreateRoom
	if time.Since(s.last[room]) < redeclareEvery {
		return true
	}
	s.last[room] = time.Now()
	created, err := s.Store.CreateRoom(ctx, room, s.cfg)
	if err != nil {
		s.log.WarnContext(ctx, "declaring a lost room again failed", "room", room, "err", err)
		return false
	}
	if created {
		s.log.WarnContext(ctx, "room was missing from the store (Redis restarted without its data?); declared it again with the flags' settings; its queue and entry tokens are lost and users enter again",
			"room", room, "rate", s.cfg.Rate)
	}
	return true
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

func (s *redeclaringStore) UpdateRoom(ctx context.Context, room string, cfg waitroom.RoomConfig) error {
	err := s.Store.UpdateRoom(ctx, room, cfg)
	if s.redeclare(ctx, room, err) {
		err = s.Store.UpdateRoom(ctx, room, cfg)
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
