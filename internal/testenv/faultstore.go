package testenv

import (
	"context"
	"sync"
	"time"

	"github.com/waitroom/waitroom"
)

// FaultStore is a Store whose every call first asks the fault set last,
// with the method's name ("Enter", "Claim", …): a fault at the store seam
// (a hang, a refused connection) that a test switches on and off while it
// runs. No fault, or a nil answer, lets the call through to Store.
type FaultStore struct {
	waitroom.Store
	mu    sync.Mutex
	fault func(ctx context.Context, method string) error
}

// SetFault makes fault decide every call from now on; nil: none fails.
func (s *FaultStore) SetFault(fault func(ctx context.Context, method string) error) {
	s.mu.Lock()
	s.fault = fault
	s.mu.Unlock()
}

func (s *FaultStore) check(ctx context.Context, method string) error {
	s.mu.Lock()
	fault := s.fault
	s.mu.Unlock()
	if fault == nil {
		return nil
	}
	return fault(ctx, method)
}

// faulted runs call unless the fault set for method fails it first; a
// failed call returns T's zero value.
func faulted[T any](ctx context.Context, s *FaultStore, method string, call func() (T, error)) (T, error) {
	if err := s.check(ctx, method); err != nil {
		var zero T
		return zero, err
	}
	return call()
}

func faultedErr(ctx context.Context, s *FaultStore, method string, call func() error) error {
	if err := s.check(ctx, method); err != nil {
		return err
	}
	return call()
}

func (s *FaultStore) CreateRoom(ctx context.Context, room string, cfg waitroom.RoomConfig) (bool, error) {
	return faulted(ctx, s, "CreateRoom", func() (bool, error) { return s.Store.CreateRoom(ctx, room, cfg) })
}

func (s *FaultStore) UpdateRoom(ctx context.Context, room string, from, to waitroom.RoomConfig) error {
	return faultedErr(ctx, s, "UpdateRoom", func() error { return s.Store.UpdateRoom(ctx, room, from, to) })
}

func (s *FaultStore) RoomConfig(ctx context.Context, room string) (waitroom.RoomConfig, error) {
	return faulted(ctx, s, "RoomConfig", func() (waitroom.RoomConfig, error) { return s.Store.RoomConfig(ctx, room) })
}

func (s *FaultStore) Rooms(ctx context.Context) ([]string, error) {
	return faulted(ctx, s, "Rooms", func() ([]string, error) { return s.Store.Rooms(ctx) })
}

func (s *FaultStore) RoomVersions(ctx context.Context, rooms []string) ([]string, error) {
	return faulted(ctx, s, "RoomVersions", func() ([]string, error) { return s.Store.RoomVersions(ctx, rooms) })
}

func (s *FaultStore) Enter(ctx context.Context, room, user string) (waitroom.Status, error) {
	return faulted(ctx, s, "Enter", func() (waitroom.Status, error) { return s.Store.Enter(ctx, room, user) })
}

func (s *FaultStore) Status(ctx context.Context, room, user string) (waitroom.Status, error) {
	return faulted(ctx, s, "Status", func() (waitroom.Status, error) { return s.Store.Status(ctx, room, user) })
}

func (s *FaultStore) Leave(ctx context.Context, room, user string) error {
	return faultedErr(ctx, s, "Leave", func() error { return s.Store.Leave(ctx, room, user) })
}

func (s *FaultStore) Admit(ctx context.Context, room string) ([]waitroom.Admission, error) {
	return faulted(ctx, s, "Admit", func() ([]waitroom.Admission, error) { return s.Store.Admit(ctx, room) })
}

func (s *FaultStore) Claim(ctx context.Context, room, user, token string) (waitroom.Hold, error) {
	return faulted(ctx, s, "Claim", func() (waitroom.Hold, error) { return s.Store.Claim(ctx, room, user, token) })
}

func (s *FaultStore) Complete(ctx context.Context, h waitroom.Hold) error {
	return faultedErr(ctx, s, "Complete", func() error { return s.Store.Complete(ctx, h) })
}

func (s *FaultStore) Release(ctx context.Context, h waitroom.Hold) error {
	return faultedErr(ctx, s, "Release", func() error { return s.Store.Release(ctx, h) })
}

func (s *FaultStore) Renew(ctx context.Context, h waitroom.Hold) error {
	return faultedErr(ctx, s, "Renew", func() error { return s.Store.Renew(ctx, h) })
}

func (s *FaultStore) Work(ctx context.Context, rooms []string) ([]waitroom.Work, error) {
	return faulted(ctx, s, "Work", func() ([]waitroom.Work, error) { return s.Store.Work(ctx, rooms) })
}

func (s *FaultStore) Admitters(ctx context.Context, id string, ttl time.Duration) ([]string, error) {
	return faulted(ctx, s, "Admitters", func() ([]string, error) { return s.Store.Admitters(ctx, id, ttl) })
}

func (s *FaultStore) CreatePass(ctx context.Context, room string, p waitroom.Pass) error {
	return faultedErr(ctx, s, "CreatePass", func() error { return s.Store.CreatePass(ctx, room, p) })
}

func (s *FaultStore) RevokePass(ctx context.Context, room, id string) error {
	return faultedErr(ctx, s, "RevokePass", func() error { return s.Store.RevokePass(ctx, room, id) })
}

func (s *FaultStore) Passes(ctx context.Context, room string) ([]waitroom.Pass, error) {
	return faulted(ctx, s, "Passes", func() ([]waitroom.Pass, error) { return s.Store.Passes(ctx, room) })
}

func (s *FaultStore) EnterWithPass(ctx context.Context, room, user, id string) (waitroom.Status, error) {
	return faulted(ctx, s, "EnterWithPass", func() (waitroom.Status, error) { return s.Store.EnterWithPass(ctx, room, user, id) })
}

func (s *FaultStore) Stats(ctx context.Context, room string) (waitroom.Stats, error) {
	return faulted(ctx, s, "Stats", func() (waitroom.Stats, error) { return s.Store.Stats(ctx, room) })
}

func (s *FaultStore) Ping(ctx context.Context) error {
	return faultedErr(ctx, s, "Ping", func() error { return s.Store.Ping(ctx) })
}

func (s *FaultStore) Draw(ctx context.Context, room string) (waitroom.Draw, error) {
	return faulted(ctx, s, "Draw", func() (waitroom.Draw, error) { return s.Store.Draw(ctx, room) })
}

func (s *FaultStore) Entrants(ctx context.Context, room string) ([]waitroom.Entrant, error) {
	return faulted(ctx, s, "Entrants", func() ([]waitroom.Entrant, error) { return s.Store.Entrants(ctx, room) })
}

// Wakes asks the fault once, when the subscription starts: a failed one
// delivers nothing (as a subscription that cannot reach the store) and is
// closed when ctx ends.
func (s *FaultStore) Wakes(ctx context.Context) <-chan string {
	if s.check(ctx, "Wakes") != nil {
		none := make(chan string)
		context.AfterFunc(ctx, func() { close(none) })
		return none
	}
	return s.Store.Wakes(ctx)
}
