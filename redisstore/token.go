package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/waitroom/waitroom"
)

// claimScript holds a user's entry token for the room's lease.
//
// KEYS[1] cfg
// KEYS[2] tok
// KEYS[3] active
// KEYS[4] stats
// ARGV[1] user
// ARGV[2] token
// ARGV[3] lease id, fresh for this claim
//
// Returns one of
//
//	{"OK", lease_ms, one, units}  held with lease ARGV[3] for lease_ms (now, or
//	                         by this same claim whose reply was lost and is
//	                         retried: then the lease it has left); one is 1
//	                         in a room with one order per user, else 0;
//	                         units the room's units per order
//	"ENTRY_TOKEN_NOT_FOUND"  no entry (also when the room does not exist), or
//	                         it expired (then it is cleaned up, counted a
//	                         no-show when never confirmed)
//	"ENTRY_TOKEN_INVALID"    the user's token has another value
//	"TOKEN_IN_USE"           held, and the hold is not abandoned: its lease
//	                         runs or ran out within waitroom.SettleWindow;
//	                         or this claim was released before it landed
//	"ROOM_NOT_FOUND"         a token but no settings (the cfg key was deleted)
var claimScript = newFunction("claim")

// Claim holds user's token for the room's lease under a fresh lease id.
// Exactly one of concurrent claims succeeds; the others get ErrTokenInUse.
// A call that got no answer is a *waitroom.UnansweredClaimError.
func (s *Store) Claim(ctx context.Context, room, user, token string) (waitroom.Hold, error) {
	if err := checkRoom(room); err != nil {
		return waitroom.Hold{}, err
	}
	lease := waitroom.NewToken()
	c, _, err := s.gateCall(ctx, room, user, func(k *roomKeys) fcall { return k.claim }, func(k *subKeys) fcall { return k.claim })
	if err != nil {
		return waitroom.Hold{}, err
	}
	r, err := s.doCall(ctx, "claim", c, user, token, lease)
	if err != nil && (errors.Is(err, waitroom.ErrStoreUnavailable) || ctx.Err() != nil) {
		// Sent, maybe run: the caller releases the hold it may have made.
		return waitroom.Hold{}, &waitroom.UnansweredClaimError{Hold: waitroom.Hold{Room: room, User: user, Token: token, Lease: lease}, Err: err}
	}
	if err != nil {
		return waitroom.Hold{}, err
	}
	ms, ok1 := r.int(1)
	one, ok2 := r.int(2)
	units, ok3 := r.int(3)
	if r.code() != "OK" || len(r) != 4 || !ok1 || !ok2 || !ok3 || units < 1 || units > waitroom.MaxUnitsPerOrder {
		return waitroom.Hold{}, s.unexpected(ctx, "claim", r)
	}
	return waitroom.Hold{Room: room, User: user, Token: token, Lease: lease,
		LeaseFor: time.Duration(ms) * time.Millisecond, OneOrderPerUser: one == 1, Units: int(units)}, nil
}

// completeScript spends a token: the order succeeded, and sold the units
// its claim reserved. With one order per user it remembers the buyer.
//
// KEYS[1] tok
// KEYS[2] active
// KEYS[3] stats
// KEYS[4] cfg
// KEYS[5] buyers
// ARGV[1] user
// ARGV[2] token
// ARGV[3] units the order sold (the hold's)
//
// Returns {"OK", sold, tracked} (the entry is gone; sold: the units sold
// in these keys now; tracked: 1 when the room tracks stock),
// "ENTRY_TOKEN_NOT_FOUND" or "ENTRY_TOKEN_INVALID".
var completeScript = newFunction("complete")

// Complete spends the token: the order succeeded and sold h.Units. It does
// not check the lease: even a holder whose lease ran out placed its order.
func (s *Store) Complete(ctx context.Context, h waitroom.Hold) error {
	if err := checkRoom(h.Room); err != nil {
		return err
	}
	c, watched, err := s.gateCall(ctx, h.Room, h.User, func(k *roomKeys) fcall { return k.complete }, func(k *subKeys) fcall { return k.complete })
	if err != nil {
		return err
	}
	r, err := s.doCall(ctx, "complete", c, h.User, h.Token, max(h.Units, 1))
	if err != nil {
		return err
	}
	sold, ok1 := r.int(1)
	tracked, ok2 := r.int(2)
	if r.code() != "OK" || !ok1 || !ok2 {
		return s.unexpected(ctx, "complete", r)
	}
	// A spent token lost in a failover is not a lost token (lost.go).
	s.watch(watched).spend(h.Token)
	if tracked == 1 && watched != h.Room {
		// A spread room's other sub-shards learn of the sale.
		s.pushSold(context.WithoutCancel(ctx), h.Room, h.User, sold)
	}
	return nil
}

// releaseScript gives a held token back: the order failed.
//
// KEYS[1] tok
// KEYS[2] active
// KEYS[3] stats
// ARGV[1] user
// ARGV[2] token
// ARGV[3] lease id of the hold
//
// Returns one of
//
//	"RELEASED"  ready again with the expiry it had
//	"EXPIRED"   its expiry passed meanwhile: deleted, counted expired
//	"LOST"      not held under this lease (spent, expired and cleaned up,
//	            claimed again after the hold was abandoned, or a claim
//	            that got no answer and has not landed): nothing written but,
//	            on a token not held, the lease, which voids that claim
//	            should it land later
var releaseScript = newFunction("release")

// Release makes the token usable again with the TTL it had left. A hold
// whose lease was lost is not released and is no error.
func (s *Store) Release(ctx context.Context, h waitroom.Hold) error {
	if err := checkRoom(h.Room); err != nil {
		return err
	}
	c, _, err := s.gateCall(ctx, h.Room, h.User, func(k *roomKeys) fcall { return k.release }, func(k *subKeys) fcall { return k.release })
	if err != nil {
		return err
	}
	r, err := s.doCall(ctx, "release", c, h.User, h.Token, h.Lease)
	if err != nil {
		return err
	}
	switch r.code() {
	case "RELEASED":
		return nil
	case "EXPIRED", "LOST":
		s.log.DebugContext(ctx, "redisstore: release found no live hold", "room", h.Room, "user", h.User, "result", r.code())
		return nil
	default:
		return s.unexpected(ctx, "release", r)
	}
}

// renewScript extends a held token's lease: the order is still running.
//
// KEYS[1] cfg
// KEYS[2] tok
// KEYS[3] active
// ARGV[1] user
// ARGV[2] token
// ARGV[3] lease id of the hold
//
// Returns one of
//
//	"OK"              held under ARGV[3] for the room's lease from now
//	"LOST"            not held under this lease any more (spent, gone, or
//	                  claimed again after the lease ran out): nothing written
//	"ROOM_NOT_FOUND"  the room's settings are gone
var renewScript = newFunction("renew")

// Renew extends h's lease to the room's lease from now, if h still holds
// the token; ErrTokenNotFound when it does not.
func (s *Store) Renew(ctx context.Context, h waitroom.Hold) error {
	if err := checkRoom(h.Room); err != nil {
		return err
	}
	c, _, err := s.gateCall(ctx, h.Room, h.User, func(k *roomKeys) fcall { return k.renew }, func(k *subKeys) fcall { return k.renew })
	if err != nil {
		return err
	}
	r, err := s.doCall(ctx, "renew", c, h.User, h.Token, h.Lease)
	if err != nil {
		return err
	}
	switch r.code() {
	case "OK":
		return nil
	case "LOST":
		return waitroom.ErrTokenNotFound
	default:
		return s.unexpected(ctx, "renew", r)
	}
}
