package redisstore

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/waitroom/waitroom"
)

// A room's passes live in one hash (wr:{ROOM}:passes), id →
// "n|uses|left|expires_ms|revoked": n numbers the passes in the order they
// were made (passes are revoked, never deleted), revoked is 0 or 1.

// createPassScript stores a new pass.
//
// KEYS[1] cfg
// KEYS[2] passes
// ARGV[1] id
// ARGV[2] uses
// ARGV[3] left
// ARGV[4] expires_ms
// ARGV[5] most passes a room keeps
//
// Returns "OK", "EXISTS" (the id is taken), "TOO_MANY_PASSES" or
// "ROOM_NOT_FOUND".
var createPassScript = newFunction("create_pass")

// CreatePass stores a new pass to room.
func (s *Store) CreatePass(ctx context.Context, room string, p waitroom.Pass) error {
	if err := checkRoom(room); err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return err
	}
	if err := s.refuseSpread(ctx, room, "passes"); err != nil {
		return err
	}
	k := s.keys(room)
	r, err := s.do(ctx, "create pass", createPassScript, []string{k.cfg, k.passes},
		p.ID, p.Uses, p.Left, p.ExpiresAt.UnixMilli(), waitroom.MaxPasses)
	if err != nil {
		return err
	}
	switch r.code() {
	case "OK":
		return nil
	case "EXISTS":
		return waitroom.BadRequest("a pass with this id exists")
	default:
		return s.unexpected(ctx, "create pass", r)
	}
}

// revokePassScript marks a pass revoked.
//
// KEYS[1] passes
// ARGV[1] id
//
// Returns "OK" or "PASS_INVALID" (no such pass).
var revokePassScript = newFunction("revoke_pass")

// RevokePass ends a pass at once.
func (s *Store) RevokePass(ctx context.Context, room, id string) error {
	if err := checkRoom(room); err != nil {
		return err
	}
	r, err := s.do(ctx, "revoke pass", revokePassScript, []string{s.keys(room).passes}, id)
	if err != nil {
		return err
	}
	if r.code() != "OK" {
		return s.unexpected(ctx, "revoke pass", r)
	}
	return nil
}

// listPassesScript reads a room's passes.
//
// KEYS[1] cfg
// KEYS[2] passes
//
// Returns {"OK", id1, value1, id2, value2, …} or {"ROOM_NOT_FOUND"}.
var listPassesScript = newFunction("list_passes", "no-writes")

// Passes lists room's passes, oldest first.
func (s *Store) Passes(ctx context.Context, room string) ([]waitroom.Pass, error) {
	if err := checkRoom(room); err != nil {
		return nil, err
	}
	k := s.keys(room)
	r, err := s.do(ctx, "passes", listPassesScript, []string{k.cfg, k.passes})
	if err != nil {
		return nil, err
	}
	if r.code() != "OK" || len(r)%2 != 1 {
		return nil, s.unexpected(ctx, "passes", r)
	}
	type created struct {
		n int64
		p waitroom.Pass
	}
	list := make([]created, 0, len(r)/2)
	for i := 1; i < len(r); i += 2 {
		id, ok1 := r.str(i)
		v, ok2 := r.str(i + 1)
		n, p, ok3 := parsePass(id, v)
		if !ok1 || !ok2 || !ok3 {
			return nil, s.unexpected(ctx, "passes", r)
		}
		list = append(list, created{n, p})
	}
	slices.SortFunc(list, func(a, b created) int {
		return int(a.n - b.n)
	})
	out := make([]waitroom.Pass, len(list))
	for i, c := range list {
		out[i] = c.p
	}
	return out, nil
}

// parsePass reads a pass's stored value.
func parsePass(id, v string) (n int64, p waitroom.Pass, ok bool) {
	f := strings.Split(v, "|")
	if len(f) != 5 {
		return 0, p, false
	}
	var nums [4]int64
	for i := range nums {
		x, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, p, false
		}
		nums[i] = x
	}
	p = waitroom.Pass{ID: id, Uses: int(nums[1]), Left: int(nums[2]), ExpiresAt: time.UnixMilli(nums[3]).UTC(), Revoked: f[4] == "1"}
	return nums[0], p, true
}

// enterWithPassScript lets a user in with a pass (Store.EnterWithPass).
//
// KEYS[1] cfg
// KEYS[2] q
// KEYS[3] tok
// KEYS[4] active
// KEYS[5] stats
// KEYS[6] buyers
// KEYS[7] passes
// KEYS[8] pre
// KEYS[9] drawn
// KEYS[10] draw
// KEYS[11] notice
// ARGV[1] user
// ARGV[2] pass id
// ARGV[3] a fresh token, used if the user gets one
//
// Returns one of
//
//	{"ADMITTED", token, ms_left}  the user holds a live token already (the
//	                              pass is not used) or got one now
//	{"ALREADY_ORDERED"}           one order per user, and it ordered
//	{"PASS_INVALID"}              unknown, revoked or expired
//	{"PASS_USED_UP"}              no use left
//	{"ROOM_CLOSED"}, {"SOLD_OUT"}
//	{"NO_FREE_SLOT"}              live tokens at max_active or at the unsold stock
//	{"TOKEN_IN_USE"}              an order holds the user's expired token and
//	                              may yet complete it (the settle window)
//	{"ROOM_NOT_FOUND"}
var enterWithPassScript = newFunction("enter_with_pass")

// EnterWithPass lets user in with pass id, as Store.EnterWithPass says.
func (s *Store) EnterWithPass(ctx context.Context, room, user, id string) (waitroom.Status, error) {
	if err := checkRoom(room); err != nil {
		return waitroom.Status{}, err
	}
	if err := waitroom.CheckUserID(user); err != nil {
		return waitroom.Status{}, err
	}
	if err := s.refuseSpread(ctx, room, "passes"); err != nil {
		return waitroom.Status{}, err
	}
	k := s.keys(room)
	r, err := s.do(ctx, "enter with pass", enterWithPassScript, []string{k.cfg, k.q, k.tok, k.active, k.stats, k.buyers, k.passes, k.pre, k.drawn, k.draw, k.notice},
		user, id, waitroom.NewToken())
	if err != nil {
		return waitroom.Status{}, err
	}
	// {"ADMITTED", token, ms_left}: as Enter's, without the sequence.
	st, _, ok := standing(r)
	if r.code() != "ADMITTED" || !ok {
		return waitroom.Status{}, s.unexpected(ctx, "enter with pass", r)
	}
	return st, nil
}
