package redisstore

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom"
)

// Work tells what each room holds for the admitter: two EXISTS per room
// (the queue, the token hash) in one pipeline, which the cluster client
// splits per shard. No script: a probe of an idle room should cost Redis
// as little as a command can.
func (s *Store) Work(ctx context.Context, rooms []string) ([]waitroom.Work, error) {
	if err := waitroom.CheckWorkRooms(rooms); err != nil {
		return nil, err
	}
	if len(rooms) == 0 {
		return []waitroom.Work{}, nil
	}
	queued := make([]*redis.IntCmd, len(rooms))
	held := make([]*redis.IntCmd, len(rooms))
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, room := range rooms {
			k := s.keys(room)
			queued[i] = p.Exists(ctx, k.q)
			held[i] = p.Exists(ctx, k.tok)
		}
		return nil
	})
	if err != nil {
		return nil, s.fail("work", err)
	}
	work := make([]waitroom.Work, len(rooms))
	for i := range rooms {
		switch {
		case queued[i].Val() > 0:
			work[i] = waitroom.WorkQueue
		case held[i].Val() > 0:
			work[i] = waitroom.WorkTokens
		}
	}
	return work, nil
}

// admittersScript keeps one admitter alive and lists the live ones.
//
// KEYS[1] admitters  zset id → alive until (ms, Redis clock)
// ARGV[1] id
// ARGV[2] ttl_ms
//
// Returns the ids alive now, sorted (id among them).
var admittersScript = redis.NewScript(luaLib + `
local key    = KEYS[1]
local id     = ARGV[1]
local ttl_ms = tonumber(ARGV[2])

local now = now_ms()
-- Admitters silent for their ttl are gone: others take over their rooms.
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
redis.call('ZADD', key, now + ttl_ms, id)
-- The set goes when the last admitter stops.
if redis.call('PTTL', key) < ttl_ms then
  redis.call('PEXPIRE', key, ttl_ms)
end
local ids = redis.call('ZRANGE', key, 0, -1)
table.sort(ids)
return ids
`)

// Admitters keeps id alive for ttl by the Redis clock and lists the
// admitters alive now. The set spans rooms (no hash tag), like the rooms
// set.
func (s *Store) Admitters(ctx context.Context, id string, ttl time.Duration) ([]string, error) {
	if err := waitroom.CheckAdmitter(id, ttl); err != nil {
		return nil, err
	}
	res, err := admittersScript.Run(ctx, s.client, []string{s.prefix + ":admitters"}, id, ttl.Milliseconds()).StringSlice()
	if err != nil {
		return nil, s.fail("admitters", err)
	}
	return res, nil
}
