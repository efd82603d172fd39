package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
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
	if l, err := s.layout(ctx, room); err != nil {
		return waitroom.Status{}, err
	} else if l.shards > 1 {
		return s.spreadEnterWithPass(ctx, room, l, user, id)
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

// A pass on a room spread over shards: the pass lives on the room's own
// shard, the user's token on its sub-shard, and max_active and the stock
// are the room's over every sub-shard, so a use is one fenced step, as a
// tick (spreadAdmit): the user's standing on its sub-shard (a token it
// holds comes back, the pass unused); begin (the pass, the room's state
// and a full room's recent refusal checked before anything is sealed; a
// tick under way waited for; a lock, so uses go one at a time; a fence);
// seal and count every sub-shard; the user's standing again, under the
// fence; take the use on the room's shard (slots and units over the
// room, refused as on one shard); issue the token on the sub-shard under
// the fence; end (the lock given up; the use given back when no token
// came of it). A tick that begins meanwhile makes the use stale: it
// starts again. So uses at a rate no pass allows (spent, revoked, at a
// closed or full room) cost a call each and never stall admission.

// passLease bounds how long a pass use holds the room's pass lock: far
// more than its few calls take, so a use that dies holds up others only
// that long.
const passLease = 2 * time.Second

// spreadPassBeginScript locks a spread room's pass uses and takes a fence.
//
// KEYS[1] cfg
// KEYS[2] fence
// KEYS[3] passlock
// KEYS[4] bucket: the tick under way (tick_fence, tick_at, tick_done:
// spread_begin, spread_commit), a full room's last refusal
// (pass_refused, pass_refused_until: spread_pass_take)
// KEYS[5] passes
// ARGV[1] layout id
// ARGV[2] owner: this use's own id
// ARGV[3] lease ms
// ARGV[4] pass id
//
// Returns {"OK", fence}, {"BUSY"} (another use holds the lock, or a tick
// is under way), {"PASS_INVALID"}, {"PASS_USED_UP"}, {"ROOM_CLOSED"},
// {"SOLD_OUT"} or {"NO_FREE_SLOT"} (found so a moment ago),
// {"ROOM_NOT_FOUND"} or {"RESHARDED"}.
var spreadPassBeginScript = newFunction("spread_pass_begin")

// spreadPassIssueScript reads the user's standing on its sub-shard and,
// with issue, lets it in with a token under the fence.
//
// KEYS    sub cfg, q, tok, active, stats, buyers, pre, notice, mirror, left
// ARGV[1] layout id
// ARGV[2] fence
// ARGV[3] user
// ARGV[4] a fresh token
// ARGV[5] issue: "1" issue it, "0" only read the standing
//
// Returns {"OK"} (no issue: it may have a token), {"ADMITTED", token,
// ms_left} (its live token, or the one issued; issued, then the ticket it
// left in the queue, if any), {"ALREADY_ORDERED"}, {"TOKEN_IN_USE"},
// {"STALE"}, {"ROOM_NOT_FOUND"} or {"RESHARDED"}.
var spreadPassIssueScript = newFunction("spread_pass_issue")

// spreadPassTakeScript takes a use of a pass for a spread room's user.
//
// KEYS[1] cfg
// KEYS[2] passes
// KEYS[3] fence
// KEYS[4] bucket: a refusal for lack of slots or units is kept there
// 100 ms for the next uses (pass_refused, pass_refused_until)
// ARGV[1] fence
// ARGV[2] pass id
// ARGV[3] live tokens over the sub-shards, ARGV[4] units sold over them
//
// Returns {"OK"}, {"PASS_INVALID"}, {"PASS_USED_UP"}, {"ROOM_CLOSED"},
// {"SOLD_OUT"}, {"NO_FREE_SLOT"} or {"STALE"} (a tick began since).
var spreadPassTakeScript = newFunction("spread_pass_take")

// spreadPassEndScript ends a pass use.
//
// KEYS[1] passlock
// KEYS[2] passes
// ARGV[1] owner
// ARGV[2] the pass id whose use goes back ("" none)
//
// Returns "OK".
var spreadPassEndScript = newFunction("spread_pass_end")

// spreadEnterWithPass is EnterWithPass on a spread room.
func (s *Store) spreadEnterWithPass(ctx context.Context, room string, l *spreadLayout, user, id string) (waitroom.Status, error) {
	k := s.keys(room)
	owner := waitroom.NewToken()
	wait := time.Millisecond
	for {
		st, err := s.spreadPassUse(ctx, room, l, k, owner, user, id)
		switch {
		case errors.Is(err, errPassBusy):
			// Another use holds the lock, or a tick is under way: a few
			// milliseconds at most.
		case errors.Is(err, errStale):
			// A tick began meanwhile: begin again.
		case errors.Is(err, errResharded):
			s.forgetLayout(room)
			return waitroom.Status{}, fmt.Errorf("%w: redisstore enter with pass: the room is being resharded", waitroom.ErrStoreUnavailable)
		default:
			return st, err
		}
		select {
		case <-ctx.Done():
			return waitroom.Status{}, s.fail("enter with pass", ctx.Err())
		case <-time.After(wait + rand.N(wait)):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// errPassBusy: another pass use holds the room's lock, or a tick is
// under way.
var errPassBusy = errors.New("redisstore: another pass use or a tick is under way")

// spreadPassUse is one try of spreadEnterWithPass.
func (s *Store) spreadPassUse(ctx context.Context, room string, l *spreadLayout, k *roomKeys, owner, user, id string) (waitroom.Status, error) {
	g := l.of(user)
	sk := l.subs[g]
	issue := func(fence int64, issue bool) (reply, error) {
		keys := []string{sk.cfg, sk.q, sk.tok, sk.active, sk.stats, sk.buyers, sk.pre, sk.notice, sk.mirror, sk.left}
		return s.do(ctx, "enter with pass", spreadPassIssueScript, keys, l.id, fence, user, waitroom.NewToken(), boolArg(issue))
	}
	// The standing the pass does not change, read before anything is
	// sealed (and again under the fence, below).
	r, err := issue(0, false)
	if err != nil {
		return waitroom.Status{}, err
	}
	if r.code() != "OK" {
		return s.passStanding(ctx, r)
	}

	r, err = s.do(ctx, "enter with pass", spreadPassBeginScript, []string{k.cfg, k.fence, k.passLock, k.bucket, k.passes},
		l.id, owner, passLease.Milliseconds(), id)
	if err != nil {
		return waitroom.Status{}, err
	}
	switch r.code() {
	case "BUSY":
		if s.passBusy != nil {
			s.passBusy()
		}
		return waitroom.Status{}, errPassBusy
	case "RESHARDED":
		return waitroom.Status{}, errResharded
	}
	fence, ok := r.int(1)
	if r.code() != "OK" || !ok {
		return waitroom.Status{}, s.unexpected(ctx, "enter with pass", r)
	}
	giveBack := ""
	defer func() {
		// With a context of its own: the use's end is owed even when the
		// caller gave up (else the lock holds for its lease).
		end, cancel := context.WithTimeout(context.WithoutCancel(ctx), passLease)
		defer cancel()
		_ = s.call(end, s.client, spreadPassEndScript, []string{k.passLock, k.passes}, owner, giveBack).Err()
	}()

	// Every sub-shard sealed under the fence, its expired tokens cleaned
	// up, its live tokens and units sold read (spread_head, no head).
	var live, sold atomic.Int64
	if err := s.eachShard(l, func(_ int, sk *subKeys) error {
		r, err := s.spreadCall(ctx, "enter with pass", spreadHeadScript, sk.headKeys(), l.id, fence, 0, 0, 0, "0") // what it cleans up is told as counts
		if err != nil {
			return err
		}
		h, ok := readHead(r)
		if !ok {
			return s.unexpected(ctx, "enter with pass", r)
		}
		live.Add(h.live)
		sold.Add(h.sold)
		return nil
	}); err != nil {
		return waitroom.Status{}, err
	}
	if s.passCut != nil {
		s.passCut()
	}

	r, err = issue(fence, false)
	if err != nil {
		return waitroom.Status{}, err
	}
	if r.code() != "OK" {
		return s.passStanding(ctx, r)
	}
	r, err = s.do(ctx, "enter with pass", spreadPassTakeScript, []string{k.cfg, k.passes, k.fence, k.bucket}, fence, id, live.Load(), sold.Load())
	if err != nil {
		return waitroom.Status{}, err
	}
	if r.code() != "OK" {
		return s.passStanding(ctx, r)
	}
	r, err = issue(fence, true)
	if err != nil {
		// The token may or may not have been issued: the use stays taken,
		// so the pass never lets in more than it was made for.
		return waitroom.Status{}, err
	}
	if r.code() != "ADMITTED" {
		giveBack = id // no token came of the use: a tick sealed the sub-shard since
	}
	if r.code() == "ADMITTED" && len(r) > 3 {
		s.pushGone(ctx, l, g, r[3:])
		r = r[:3]
	}
	return s.passStanding(ctx, r)
}

// passStanding reads a pass use's answer: ADMITTED is the standing,
// STALE errStale, RESHARDED errResharded; the refusals are do's errors.
func (s *Store) passStanding(ctx context.Context, r reply) (waitroom.Status, error) {
	switch r.code() {
	case "STALE":
		return waitroom.Status{}, errStale
	case "RESHARDED":
		return waitroom.Status{}, errResharded
	case "ADMITTED":
		if st, _, ok := standing(r); ok {
			return st, nil
		}
	}
	return waitroom.Status{}, s.unexpected(ctx, "enter with pass", r)
}
