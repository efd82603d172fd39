package memstore

import (
	"context"

	"github.com/waitroom/waitroom"
)

// CreatePass stores a new pass to the room.
func (s *Store) CreatePass(ctx context.Context, name string, p waitroom.Pass) error {
	if err := p.Validate(); err != nil {
		return err
	}
	r, err := s.lockedRoom(ctx, name)
	if err != nil {
		return err
	}
	defer r.mu.Unlock()
	if _, ok := r.passes[p.ID]; ok {
		return waitroom.BadRequest("a pass with this id exists")
	}
	if len(r.passOrder) >= waitroom.MaxPasses {
		return waitroom.ErrTooManyPasses
	}
	if r.passes == nil {
		r.passes = make(map[string]*waitroom.Pass)
	}
	p.ExpiresAt = p.ExpiresAt.UTC()
	r.passes[p.ID] = &p
	r.passOrder = append(r.passOrder, p.ID)
	return nil
}

// RevokePass ends a pass at once.
func (s *Store) RevokePass(ctx context.Context, name, id string) error {
	r, err := s.lockedRoom(ctx, name)
	if err != nil {
		return err
	}
	defer r.mu.Unlock()
	p, ok := r.passes[id]
	if !ok {
		return waitroom.ErrPassInvalid
	}
	p.Revoked = true
	return nil
}

// Passes lists the room's passes, oldest first.
func (s *Store) Passes(ctx context.Context, name string) ([]waitroom.Pass, error) {
	r, err := s.lockedRoom(ctx, name)
	if err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	out := make([]waitroom.Pass, 0, len(r.passOrder))
	for _, id := range r.passOrder {
		out = append(out, *r.passes[id])
	}
	return out, nil
}

// EnterWithPass lets user in with a pass: one critical section, as
// Store.EnterWithPass describes.
func (s *Store) EnterWithPass(ctx context.Context, name, user, id string) (waitroom.Status, error) {
	if err := waitroom.CheckUserID(user); err != nil {
		return waitroom.Status{}, err
	}
	r, err := s.lockedRoom(ctx, name)
	if err != nil {
		return waitroom.Status{}, err
	}
	defer r.mu.Unlock()
	if r.bought(user) {
		return waitroom.Status{}, waitroom.ErrAlreadyOrdered
	}
	now := s.now()
	if st, ok := r.admitted(user, now); ok {
		return st, nil // holds a token already: the pass is not used
	}
	if t, ok := r.tokens.byUser[user]; ok && t.unsettled(now) {
		// An order holds the user's expired token and may yet complete
		// it: a new token now would reserve a second unit while the first
		// may be sold.
		return waitroom.Status{}, waitroom.ErrTokenInUse
	}
	p, ok := r.passes[id]
	switch {
	case !ok || p.Revoked || !p.ExpiresAt.After(now):
		return waitroom.Status{}, waitroom.ErrPassInvalid
	case p.Left <= 0:
		return waitroom.Status{}, waitroom.ErrPassUsedUp
	case r.cfg.ClosedAt(now):
		return waitroom.Status{}, waitroom.ErrRoomClosed
	}
	live := r.tokens.liveCount(now)
	if soldOut, _, _ := r.cfg.Units(0, r.stats.Sold, 0); soldOut {
		return waitroom.Status{}, waitroom.ErrSoldOut
	}
	if r.cfg.MaxActive > 0 && live >= r.cfg.MaxActive || r.cfg.TokensLeft(r.stats.Sold, int64(live)) == 0 {
		return waitroom.Status{}, waitroom.ErrNoFreeSlot
	}
	p.Left--
	// Out of the line, early arrivals waiting for the draw included.
	r.queue.Remove(user)
	r.pre.Remove(user)
	delete(r.notices, user)
	// As Admit issues it; the holder is told of it in this answer.
	t := &entryToken{user: user, value: waitroom.NewToken(), shown: true,
		expiresAt: now.Add(r.cfg.FirstUseWithin), ttlEnd: now.Add(r.cfg.TokenTTL)}
	if old := r.tokens.put(t); old != nil {
		r.countGone(old)
	}
	r.stats.Admitted++
	return waitroom.Status{State: waitroom.StateAdmitted, Token: t.value, ExpiresIn: t.ttlEnd.Sub(now)}, nil
}
