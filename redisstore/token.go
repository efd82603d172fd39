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
var claimScript = newFunction("claim", `
local cfg_key    = KEYS[1]
local tok_key    = KEYS[2]
local active_key = KEYS[3]
local stats_key  = KEYS[4]
local user       = ARGV[1]
local token      = ARGV[2]
local lease      = ARGV[3]

-- No entry answers the same in a room that does not exist: the gate
-- needs no second code for a token that was never issued.
local e = parse_entry(redis.call('HGET', tok_key, user))
if not e then
  return 'ENTRY_TOKEN_NOT_FOUND'
end
local now = now_ms()
local cfg = redis.call('HMGET', cfg_key, 'lease_ms', 'one_order', 'units')
local one_order = 0
if cfg[2] == '1' then
  one_order = 1
end
local per = per_order(cfg[3])

if e.expires_at <= now and not unsettled(e, now) then
  -- Expired, and no order holds it that may yet complete it: clean it up
  -- now. One that may is in use (below).
  drop_tokens(tok_key, active_key, {user}, {user})
  count_gone(stats_key, e)
  return 'ENTRY_TOKEN_NOT_FOUND'
end

if e.token ~= token then
  return 'ENTRY_TOKEN_INVALID'
end

if e.state ~= 'held' and e.lease == lease then
  -- This claim's gate gave up on it and released it before it landed
  -- (release): it holds nothing, and nobody waits for this answer.
  return 'TOKEN_IN_USE'
end

-- Held, and not abandoned: a lease that ran out within the settle window
-- may be a gate cut off from Redis whose order succeeded and whose
-- Complete is on its way; a second order with the token must not pass.
-- Past the window its holder is gone: the token is claimable again.
if unsettled(e, now) then
  if e.lease == lease then
    -- The client's retry of this very claim (its reply was lost): the
    -- same answer, not TOKEN_IN_USE against itself for a whole lease.
    return {'OK', math.max(0, e.lease_until - now), one_order, per}
  end
  return 'TOKEN_IN_USE'
end

local lease_ms = cfg[1]
if not lease_ms then
  return 'ROOM_NOT_FOUND' -- tokens outlived their room's settings
end
lease_ms = math.floor(tonumber(lease_ms))
-- Claiming is using: an unconfirmed token gets its full TTL.
if e.state == 'new' or e.state == 'shown' then
  e.expires_at = e.lease_until
end
e.state, e.lease, e.lease_until = 'held', lease, now + lease_ms
redis.call('HSET', tok_key, user, format_entry(e))
-- Cleanup must wait for the lease too: the token cannot vanish mid-order.
redis.call('ZADD', active_key, active_score(e), user)
return {'OK', lease_ms, one_order, per}
`)

// Claim holds user's token for the room's lease under a fresh lease id.
// Exactly one of concurrent claims succeeds; the others get ErrTokenInUse.
// A call that got no answer is a *waitroom.UnansweredClaimError.
func (s *Store) Claim(ctx context.Context, room, user, token string) (waitroom.Hold, error) {
	if err := checkRoom(room); err != nil {
		return waitroom.Hold{}, err
	}
	lease := waitroom.NewToken()
	k := s.keys(room)
	r, err := s.do(ctx, "claim", claimScript, []string{k.cfg, k.tok, k.active, k.stats}, user, token, lease)
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
// Returns "OK" (the entry is gone), "ENTRY_TOKEN_NOT_FOUND" or
// "ENTRY_TOKEN_INVALID".
var completeScript = newFunction("complete", `
local tok_key    = KEYS[1]
local active_key = KEYS[2]
local stats_key  = KEYS[3]
local cfg_key    = KEYS[4]
local buyers_key = KEYS[5]
local user       = ARGV[1]
local token      = ARGV[2]
local sold_now   = tonumber(ARGV[3])

local e = parse_entry(redis.call('HGET', tok_key, user))
if not e then
  return 'ENTRY_TOKEN_NOT_FOUND'
end
if e.token ~= token then
  return 'ENTRY_TOKEN_INVALID'
end

-- Whatever the lease and expiry: the order succeeded, the token is spent.
drop_tokens(tok_key, active_key, {user}, {user})
-- Units sold from what was counted so far (units_sold: before this
-- counter, one per completed order), then the order counted.
local c = redis.call('HMGET', stats_key, 'sold', 'completed')
redis.call('HSET', stats_key, 'sold', units_sold(c[1], c[2]) + sold_now)
redis.call('HINCRBY', stats_key, 'completed', 1)
if redis.call('HGET', cfg_key, 'one_order') == '1' then
  redis.call('SADD', buyers_key, user)
end
return 'OK'
`)

// Complete spends the token: the order succeeded and sold h.Units. It does
// not check the lease: even a holder whose lease ran out placed its order.
func (s *Store) Complete(ctx context.Context, h waitroom.Hold) error {
	if err := checkRoom(h.Room); err != nil {
		return err
	}
	k := s.keys(h.Room)
	r, err := s.do(ctx, "complete", completeScript, []string{k.tok, k.active, k.stats, k.cfg, k.buyers}, h.User, h.Token, max(h.Units, 1))
	if err != nil {
		return err
	}
	if r.code() != "OK" {
		return s.unexpected(ctx, "complete", r)
	}
	// A spent token lost in a failover is not a lost token (lost.go).
	s.watch(h.Room).spend(h.Token)
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
var releaseScript = newFunction("release", `
local tok_key    = KEYS[1]
local active_key = KEYS[2]
local stats_key  = KEYS[3]
local user       = ARGV[1]
local token      = ARGV[2]
local lease      = ARGV[3]

local e = held_entry(tok_key, user, token, lease)
if not e then
  local other = parse_entry(redis.call('HGET', tok_key, user))
  if other and other.token == token and other.state ~= 'held' and other.lease ~= lease then
    -- A claim whose gate got no answer and gave it up, not landed yet:
    -- remembered in the unheld entry's lease field, so it holds nothing
    -- when it lands (claim).
    other.lease = lease
    redis.call('HSET', tok_key, user, format_entry(other))
  end
  return 'LOST'
end

local now = now_ms()
if e.expires_at <= now then
  drop_tokens(tok_key, active_key, {user}, {user})
  redis.call('HINCRBY', stats_key, 'expired', 1)
  return 'EXPIRED'
end

-- The expiry it had, never a fresh TTL: a failing order cannot extend it.
e.state, e.lease, e.lease_until = 'ready', '', 0
redis.call('HSET', tok_key, user, format_entry(e))
redis.call('ZADD', active_key, e.expires_at, user)
redis.call('HINCRBY', stats_key, 'released', 1)
return 'RELEASED'
`)

// Release makes the token usable again with the TTL it had left. A hold
// whose lease was lost is not released and is no error.
func (s *Store) Release(ctx context.Context, h waitroom.Hold) error {
	if err := checkRoom(h.Room); err != nil {
		return err
	}
	k := s.keys(h.Room)
	r, err := s.do(ctx, "release", releaseScript, []string{k.tok, k.active, k.stats}, h.User, h.Token, h.Lease)
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
var renewScript = newFunction("renew", `
local cfg_key    = KEYS[1]
local tok_key    = KEYS[2]
local active_key = KEYS[3]
local user       = ARGV[1]
local token      = ARGV[2]
local lease      = ARGV[3]

-- A lease that ran out but was not claimed again may go on (held_entry).
local e = held_entry(tok_key, user, token, lease)
if not e then
  return 'LOST'
end
local lease_ms = redis.call('HGET', cfg_key, 'lease_ms')
if not lease_ms then
  return 'ROOM_NOT_FOUND'
end
e.lease_until = now_ms() + math.floor(tonumber(lease_ms))
redis.call('HSET', tok_key, user, format_entry(e))
-- Cleanup waits for the new end of the lease too.
redis.call('ZADD', active_key, active_score(e), user)
return 'OK'
`)

// Renew extends h's lease to the room's lease from now, if h still holds
// the token; ErrTokenNotFound when it does not.
func (s *Store) Renew(ctx context.Context, h waitroom.Hold) error {
	if err := checkRoom(h.Room); err != nil {
		return err
	}
	k := s.keys(h.Room)
	r, err := s.do(ctx, "renew", renewScript, []string{k.cfg, k.tok, k.active}, h.User, h.Token, h.Lease)
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
