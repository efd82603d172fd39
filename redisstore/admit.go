package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom"
)

// admitScript cleans up expired tokens, then turns the head of the queue
// into token holders as the room's token bucket allows.
//
// The bucket keeps the Redis time of the last admission (µs) and a
// fractional carry of users allowed but not yet admitted. A call may admit
// carry + elapsed × rate users, at most quota (= ceil(rate × slice)), as
// many as are queued, within max_active, and no more than tokens were
// supplied. What it may admit but does not is carried, up to one slice's
// worth (rate × slice): a late tick's excess is made up, so the average rate
// is exact (175/s in 100 ms ticks admits 17, 18, 17, 18, …), while idle time
// or a pause cannot save up a burst. The first call ever only starts the
// bucket, empty: it admits nobody, like the first call after a pause, so a
// room's admissions never exceed rate × time since its first call. A paused
// room admits nobody and keeps its bucket empty, so resuming starts at the
// rate, not with a burst. All instances share the bucket, so together they
// admit the room's rate once.
//
// Expired tokens are those whose active score (expiry, or lease if later)
// has passed; at most max(1000, 2 × quota) per call go, more
// than a call can issue, so cleanup keeps up.
//
// KEYS[1] cfg
// KEYS[2] bucket
// KEYS[3] q
// KEYS[4] tok
// KEYS[5] active
// KEYS[6] stats
// ARGV    fresh tokens, one per user this call may admit
//
// Returns one of
//
//	{"OK", quota, user1, token1, user2, token2, …}  admitted, in arrival order
//	{"PAUSED", quota}                               the room is paused
//	{"ROOM_NOT_FOUND"}
var admitScript = redis.NewScript(luaLib + `
local cfg_key    = KEYS[1]
local bucket_key = KEYS[2]
local q_key      = KEYS[3]
local tok_key    = KEYS[4]
local active_key = KEYS[5]
local stats_key  = KEYS[6]
local tokens     = ARGV

local cfg = redis.call('HMGET', cfg_key, 'state', 'rate', 'slice_ms', 'quota', 'ttl_ms', 'max_active')
local state = cfg[1]
if not state then
  return {'ROOM_NOT_FOUND'}
end
local rate       = tonumber(cfg[2]) -- users per second
local slice_ms   = tonumber(cfg[3])
local quota      = tonumber(cfg[4]) -- per-call cap: ceil(rate × slice)
local ttl_ms     = math.floor(tonumber(cfg[5]))
local max_active = tonumber(cfg[6]) -- 0: no cap
-- Users per batched command: unpack must stay below Lua's C stack limit
-- (8000 values).
local batch = 500

-- Microseconds keep the bucket exact at high rates and short ticks.
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(now_us / 1000)

-- Clean up tokens whose expiry (and lease, when held) has passed. Batched
-- commands, not one per user: a big tick blocks Redis for less time.
local gone = redis.call('ZRANGEBYSCORE', active_key, '-inf', now, 'LIMIT', 0, math.max(1000, 2 * quota))
for from = 1, #gone, batch do
  local to = math.min(from + batch - 1, #gone)
  redis.call('HDEL', tok_key, unpack(gone, from, to))
  redis.call('ZREM', active_key, unpack(gone, from, to))
end
local expired = #gone

local out = {'OK', quota}
local cap = rate * slice_ms / 1000 -- one slice's worth of users

if state == 'paused' then
  -- Admit nobody and save nothing up, so resuming does not burst.
  redis.call('HSET', bucket_key, 'last_us', now_us, 'carry', 0)
  out[1] = 'PAUSED'
else
  local b = redis.call('HMGET', bucket_key, 'last_us', 'carry')
  local allow
  if not b[1] then
    -- First call ever: start the clock with an empty bucket.
    allow = 0
  else
    -- A clock that stepped back (failover) counts as no time passed.
    local elapsed_us = math.max(0, now_us - tonumber(b[1]))
    allow = tonumber(b[2]) + elapsed_us * rate / 1000000
  end

  -- The epsilon absorbs float error (14.999999… users is 15).
  local n = math.min(math.floor(allow + 1e-9), quota, #tokens, redis.call('ZCARD', q_key))
  if max_active > 0 then
    local live = redis.call('ZCOUNT', active_key, '(' .. string.format('%d', now), '+inf')
    n = math.min(n, math.max(0, max_active - live))
  end

  local issued = 0
  if n > 0 then
    local popped = redis.call('ZPOPMIN', q_key, n) -- user, score, user, score, …
    local users = {}
    for i = 1, #popped, 2 do
      users[#users + 1] = popped[i]
    end
    -- Every new entry is its token followed by the same ready state and
    -- expiry: format that tail once.
    local expires_at = now + ttl_ms
    local suffix = format_entry({token = '', state = 'ready', lease = '', lease_until = 0, expires_at = expires_at})
    for from = 1, #users, batch do
      local to = math.min(from + batch - 1, #users)
      local olds = redis.call('HMGET', tok_key, unpack(users, from, to))
      local entries, scores = {}, {}
      for i = from, to do
        local user = users[i]
        local old = parse_entry(olds[i - from + 1])
        if old and old.expires_at > now then
          -- Already holds a live token (Enter does not queue such users):
          -- it keeps that one and takes no share of the rate.
        else
          if old then
            expired = expired + 1 -- a stale entry cleanup had not reached
          end
          issued = issued + 1
          local token = tokens[issued]
          entries[#entries + 1] = user
          entries[#entries + 1] = token .. suffix
          scores[#scores + 1] = expires_at
          scores[#scores + 1] = user
          out[#out + 1] = user
          out[#out + 1] = token
        end
      end
      if #entries > 0 then
        redis.call('HSET', tok_key, unpack(entries))
        redis.call('ZADD', active_key, unpack(scores))
      end
    end
    if issued > 0 then
      redis.call('HINCRBY', stats_key, 'admitted', issued)
    end
  end
  -- Carry what was allowed but not admitted, at most one slice's worth.
  redis.call('HSET', bucket_key, 'last_us', now_us, 'carry', math.min(allow - issued, cap))
end

if expired > 0 then
  redis.call('HINCRBY', stats_key, 'expired', expired)
end
return out
`)

// defaultQuota is how many tokens the first Admit of a room supplies before
// the store has learned the room's quota.
var defaultQuota = waitroom.RoomConfig{}.WithDefaults().TickQuota()

// Admit turns the head of the queue into token holders, as the room's token
// bucket allows, and returns them in arrival order.
//
// Tokens come from crypto/rand in Go (Lua has no secure random source) and
// go to the script as arguments: as many as the room's quota, learned from
// the previous reply. When the quota grew since, a call admits at most the
// tokens it brought; the bucket carries the rest to the next call.
func (s *Store) Admit(ctx context.Context, room string) ([]waitroom.Admission, error) {
	if err := checkRoom(room); err != nil {
		return nil, err
	}
	keys, tokens := s.admitArgs(room)
	res, err := admitScript.Run(ctx, s.client, keys, tokens...).Result()
	if err != nil {
		return nil, s.fail("admit", err)
	}
	return s.admitted(ctx, room, res)
}

// admitArgs returns admitScript's KEYS and ARGV for room. Apart from Admit
// so that a test can run the script inside a transaction.
func (s *Store) admitArgs(room string) (keys []string, tokens []any) {
	want := defaultQuota
	if q, ok := s.quotas.Load(room); ok {
		want = q.(int)
	}
	tokens = make([]any, want)
	for i := range tokens {
		tokens[i] = waitroom.NewToken()
	}
	k := s.keys(room)
	return []string{k.cfg, k.bucket, k.q, k.tok, k.active, k.stats}, tokens
}

// admitted decodes admitScript's reply and learns the room's quota.
func (s *Store) admitted(ctx context.Context, room string, res any) ([]waitroom.Admission, error) {
	r, ok := asReply(res)
	if !ok {
		return nil, s.unexpected(ctx, "admit", res)
	}
	switch r.code() {
	case "OK", "PAUSED":
	case "ROOM_NOT_FOUND":
		return nil, waitroom.ErrRoomNotFound
	default:
		return nil, s.unexpected(ctx, "admit", res)
	}
	quota, ok := r.int(1)
	if !ok || len(r)%2 != 0 {
		return nil, s.unexpected(ctx, "admit", res)
	}
	s.quotas.Store(room, int(quota))

	var admitted []waitroom.Admission
	for i := 2; i < len(r); i += 2 {
		user, ok1 := r.str(i)
		token, ok2 := r.str(i + 1)
		if !ok1 || !ok2 {
			return nil, s.unexpected(ctx, "admit", res)
		}
		admitted = append(admitted, waitroom.Admission{User: user, Token: token})
	}
	return admitted, nil
}
