package memstore

import (
	"context"
	"time"

	"github.com/waitroom/waitroom"
)

var _ waitroom.NoticeStore = (*Store)(nil)

// SetNotice keeps channels with user's place (waitroom.NoticeStore).
func (s *Store) SetNotice(ctx context.Context, name, user string, channels []byte) error {
	if err := waitroom.CheckUserID(user); err != nil {
		return err
	}
	if len(channels) > waitroom.MaxNoticeBytes {
		return waitroom.BadRequest("a notice request is at most 4 KiB")
	}
	r, err := s.userRoom(ctx, name, user)
	if err != nil {
		return err
	}
	defer r.mu.Unlock()
	// Only a place still standing counts: standing drops a silent one.
	st, ok := r.standing(user, s.now())
	if !ok || (st.State != waitroom.StateWaiting && st.State != waitroom.StateScheduled && st.State != waitroom.StateSoldOut) {
		return waitroom.ErrNotInQueue
	}
	if len(channels) == 0 {
		delete(r.notices, user)
		return nil
	}
	r.notices[user] = append([]byte(nil), channels...)
	return nil
}

// Notice returns the channels kept with user's place.
func (s *Store) Notice(ctx context.Context, name, user string) ([]byte, error) {
	if err := waitroom.CheckUserID(user); err != nil {
		return nil, err
	}
	r, err := s.lockedRoom(ctx, name)
	if err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	return append([]byte(nil), r.notices[user]...), nil
}

// Notified starts user's first-use deadline from now.
func (s *Store) Notified(ctx context.Context, name, user, nonce string) (time.Duration, error) {
	if err := waitroom.CheckUserID(user); err != nil {
		return 0, err
	}
	if nonce == "" {
		return 0, waitroom.BadRequest("a return link needs a nonce")
	}
	r, err := s.lockedRoom(ctx, name)
	if err != nil {
		return 0, err
	}
	defer r.mu.Unlock()
	now := s.now()
	t, ok := r.tokens.byUser[user]
	if !ok || !t.expiresAt.After(now) {
		return 0, waitroom.ErrTokenNotFound
	}
	// Only a buyer who asked to be told gets its deadline from the notice.
	if t.notice && !t.confirmed {
		t.expiresAt = now.Add(r.cfg.NotifiedFirstUseWithin)
		if t.expiresAt.After(t.ttlEnd) {
			t.expiresAt = t.ttlEnd
		}
		r.tokens.setLease(t, t.lease, t.leaseUntil) // recomputes the deadline
	}
	t.linkNonce = nonce
	return t.ttlEnd.Sub(now), nil
}

// UseReturnLink spends user's return link: once. The buyer is back, so
// its token is confirmed.
func (s *Store) UseReturnLink(ctx context.Context, name, user, nonce string) error {
	if err := waitroom.CheckUserID(user); err != nil {
		return err
	}
	r, err := s.lockedRoom(ctx, name)
	if err != nil {
		return err
	}
	defer r.mu.Unlock()
	t, ok := r.tokens.byUser[user]
	if !ok || !t.expiresAt.After(s.now()) {
		return waitroom.ErrTokenNotFound
	}
	if nonce == "" || t.linkNonce != nonce {
		return waitroom.ErrReturnLinkUsed
	}
	t.linkNonce = ""
	r.tokens.confirm(t)
	return nil
}
