// Package baseline holds the baseline scripts: what the design's first
// write-up does per request, the yardstick the room's own scripts are held
// to by waitroom bench and the redisstore benchmarks. They build key names
// from ARGV (one hash tag, so one slot), which the room's scripts never
// do; they exist only to be measured beside them, on the same Redis in the
// same run.
package baseline

import "github.com/redis/go-redis/v9"

var (
	// ENTER: live token check, rank, size check, INCR, ZADD, rank.
	Enter = redis.NewScript(`
local q, seq, user, tokp, max = KEYS[1], KEYS[2], ARGV[1], ARGV[2], tonumber(ARGV[3])
local tok = redis.call('GET', tokp .. user)
if tok then return {1, tok} end
local r = redis.call('ZRANK', q, user)
if r then return {2, r + 1} end
if redis.call('ZCARD', q) >= max then return {3} end
local n = redis.call('INCR', seq)
redis.call('ZADD', q, n, user)
return {2, redis.call('ZRANK', q, user) + 1}
`)
	// STATUS: token check + ZRANK.
	Status = redis.NewScript(`
local tok = redis.call('GET', ARGV[2] .. ARGV[1])
if tok then return {1, tok} end
local r = redis.call('ZRANK', KEYS[1], ARGV[1])
if r then return {2, r + 1} end
return {0}
`)
	// STATUS with the leavers' last-seen: token check, the score read and
	// rewritten (ZSCORE, ZADD XX), ZRANK: what "silence is leaving" adds.
	StatusSeen = redis.NewScript(`
local tok = redis.call('GET', ARGV[2] .. ARGV[1])
if tok then return {1, tok} end
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then return {0} end
redis.call('ZADD', KEYS[1], 'XX', math.floor(tonumber(score)) + tonumber(ARGV[3]), ARGV[1])
return {2, redis.call('ZRANK', KEYS[1], ARGV[1]) + 1}
`)
	// ADMIT: ZPOPMIN + SET EX per user. KEYS[1] the queue; ARGV users to
	// pop, seconds to live, the token keys' prefix, then a token per user.
	// Returns how many it admitted.
	Admit = redis.NewScript(`
local popped = redis.call('ZPOPMIN', KEYS[1], tonumber(ARGV[1]))
local n = 0
for i = 1, #popped, 2 do
  n = n + 1
  redis.call('SET', ARGV[3] .. popped[i], ARGV[3 + n], 'EX', tonumber(ARGV[2]))
end
return n
`)
)
