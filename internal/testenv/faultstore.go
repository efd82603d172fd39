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

func (s *FaultStore) CreateRoom(ctx context.Context, room string, cfg waitroom.RoomConfig) (bool, error) {
	if err := s.check(ctx, "CreateRoom"); err != nil {
		return false, err
	}
	return s.Store.CreateRoom(ctx, room, cfg)
}

func (s *FaultStore) UpdateRoom(ctx context.Context, room string, from, to waitroom.RoomConfig) error {
	if err := s.check(ctx, "UpdateRoom"); err != nil {
		return err
	}
	return s.Store.UpdateRoom(ctx, room, from, to)
}

func (s *FaultStore) RoomConfig(ctx context.Context, room string) (waitroom.RoomConfig, error) {
	if err := s.check(ctx, "RoomConfig"); err != nil {
		return waitroom.RoomConfig{}, err
	}
	return s.Store.RoomConfig(ctx, room)
}

func (s *FaultStore) Rooms(ctx context.Context) ([]string, error) {
	if err := s.check(ctx, "Rooms"); err != nil {
		return nil, err
	}
	return s.Store.Rooms(ctx)
}

func (s *FaultStore) Enter(ctx context.Context, room, user string) (waitroom.Status, error) {
	if err := s.check(ctx, "Enter"); err != nil {
		return waitroom.Status{}, err
	}
	return s.Store.Enter(ctx, room, user)
}

func (s *FaultStore) Status(ctx context.Context, room, user string) (waitroom.Status, error) {
	if err := s.check(ctx, "Status"); err != nil {
		return waitroom.Status{}, err
	}
	return s.Store.Status(ctx, room, user)
}

func (s *FaultStore) Leave(ctx context.Context, room, user string) error {
	if err := s.check(ctx, "Leave"); err != nil {
		return err
	}
	return s.Store.Leave(ctx, room, user)
}

func (s *FaultStore) Admit(ctx context.Context, room string) ([]waitroom.Admission, error) {
	if err := s.check(ctx, "Admit"); err != nil {
		return nil, err
	}
	return s.Store.Admit(ctx, room)
}

func (s *FaultStore) Claim(ctx context.Context, room, user, token string) (waitroom.Hold, error) {
	if err := s.check(ctx, "Claim"); err != nil {
		return waitroom.Hold{}, err
	}
	return s.Store.Claim(ctx, room, user, token)
}

func (s *FaultStore) Complete(ctx context.Context, h waitroom.Hold) error {
	if err := s.check(ctx, "Complete"); err != nil {
		return err
	}
	return s.Store.Complete(ctx, h)
}

func (s *FaultStore) Release(ctx context.Context, h waitroom.Hold) error {
	if err := s.check(ctx, "Release"); err != nil {
		return err
	}
	return s.Store.Release(ctx, h)
}

func (s *FaultStore) Renew(ctx context.Context, h waitroom.Hold) error {
	if err := s.check(ctx, "Renew"); err != nil {
		return err
	}
	return s.Store.Renew(ctx, h)
}

func (s *FaultStore) Work(ctx context.Context, rooms []string) ([]waitroom.Work, error) {
	if err := s.check(ctx, "Work"); err != nil {
		return nil, err
	}
	return s.Store.Work(ctx, rooms)
}

func (s *FaultStore) Admitters(ctx context.Context, id string, ttl time.Duration) ([]string, error) {
	if err := s.check(ctx, "Admitters"); err != nil {
		return nil, err
	}
	return s.Store.Admitters(ctx, id, ttl)
}

func (s *FaultStore) CreatePass(ctx context.Context, room string, p waitroom.Pass) error {
	if err := s.check(ctx, "CreatePass"); err != nil {
		return err
	}
	return s.Store.CreatePass(ctx, room, p)
}

func (s *FaultStore) RevokePass(ctx context.Context, room, id string) error {
	if err := s.check(ctx, "RevokePass"); err != nil {
		return err
	}
	return s.Store.RevokePass(ctx, room, id)
}

func (s *FaultStore) Passes(ctx context.Context, room string) ([]waitroom.Pass, error) {
	if err := s.check(ctx, "Passes"); err != nil {
		return nil, err
	}
	return s.Store.Passes(ctx, room)
}

func (s *FaultStore) EnterWithPass(ctx context.Context, room, user, id string) (waitroom.Status, error) {
	if err := s.check(ctx, "EnterWithPass"); err != nil {
		return waitroom.Status{}, err
	}
	return s.Store.EnterWithPass(ctx, room, user, id)
}

func (s *FaultStore) Stats(ctx context.Context, room string) (waitroom.Stats, error) {
	if err := s.check(ctx, "Stats"); err != nil {
		return waitroom.Stats{}, err
	}
	return s.Store.Stats(ctx, room)
}

func (s *FaultStore) Ping(ctx context.Context) error {
	if err := s.check(ctx, "Ping"); err != nil {
		return err
	}
	return s.Store.Ping(ctx)
}

func (s *FaultStore) Draw(ctx context.Context, room string) (waitroom.Draw, error) {
	if err := s.check(ctx, "Draw"); err != nil {
		return waitroom.Draw{}, err
	}
	return s.Store.Draw(ctx, room)
}

func (s *FaultStore) Entrants(ctx context.Context, room string) ([]waitroom.Entrant, error) {
	if err := s.check(ctx, "Entrants"); err != nil {
		return nil, err
	}
	return s.Store.Entrants(ctx, room)
}
