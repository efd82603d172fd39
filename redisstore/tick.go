package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom"
)

// Work tells what each room holds for the admitter. An idle room costs one
// command: EXISTS of its queue and token hash together (one slot, so also
// on Cluster), for all rooms in one pipeline, which the cluster client
// splits per shard. Only rooms with one of the two get a second EXISTS, of
// the queue alone, to tell which. No script: a probe of an idle room
// should cost Redis as little as a command can.
func (s *Store) Work(ctx context.Context, rooms []string) ([]waitroom.Work, error) {
	if err := waitroom.CheckWorkRooms(rooms); err != nil {
		return nil, err
	}
	work := make([]waitroom.Work, len(rooms))
	held := make([]*redis.IntCmd, len(rooms))
	if _, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, room := range rooms {
			k := s.keys(room)
			// Early arrivals wait in pre until the draw, then in drawn.
			held[i] = p.Exists(ctx, k.q, k.pre, k.drawn, k.tok)
		}
		return nil
	}); err != nil {
		return nil, s.fail("work", err)
	}
	var which []int
	for i := range rooms {
		switch n := held[i].Val(); {
		case n >= 2: // a queue and tokens, or two queues
			work[i] = waitroom.WorkQueue
		case n == 1:
			which = append(which, i)
		}
	}
	if len(which) == 0 {
		return work, nil
	}
	queued := make([]*redis.IntCmd, len(which))
	if _, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for j, i := range which {
			k := s.keys(rooms[i])
			queued[j] = p.Exists(ctx, k.q, k.pre, k.drawn)
		}
		return nil
	}); err != nil {
		return nil, s.fail("work", err)
	}
	for j, i := range which {
		work[i] = waitroom.WorkTokens
		if queued[j].Val() > 0 {
			work[i] = waitroom.WorkQueue
		}
	}
	return work, nil
}

// Wakes delivers the rooms a user entered while nobody waited in them:
// ENTER publishes on the room's queue key when it queues the first user,
// and this subscribes to the pattern of every room's queue key. The
// subscription reconnects by itself (to the new primary after a
// failover); what is published meanwhile is lost, which Wakes allows.
// On a Cluster every node relays a publication to the subscribers of all.
func (s *Store) Wakes(ctx context.Context) <-chan string {
	out := make(chan string, wakeBuffer)
	head, tail := s.prefix+":{", "}:q"
	ps := s.client.PSubscribe(ctx, globEscaper.Replace(head)+"*"+tail)
	go func() {
		defer close(out)
		defer ps.Close()
		msgs := ps.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case m, open := <-msgs:
				if !open {
					return
				}
				room, ok := strings.CutPrefix(m.Channel, head)
				if room, ok2 := strings.CutSuffix(room, tail); ok && ok2 && checkRoom(room) == nil {
					select {
					case out <- room:
					default: // the reader is behind: this wake is lost
					}
				}
			}
		}
	}()
	return out
}

// wakeBuffer is how many wakes a reader may fall behind before the next
// ones are dropped.
const wakeBuffer = 1024

// globEscaper escapes what PSUBSCRIBE's pattern would read as a wildcard.
var globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)

// admittersScript keeps one admitter alive and lists the live ones.
//
// KEYS[1] admitters  zset id → alive until (ms, Redis clock)
// ARGV[1] id
// ARGV[2] ttl_ms
//
// Returns the ids alive now, sorted (id among them).
var admittersScript = newFunction("admitters", `
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
	res, err := s.call(ctx, s.client, admittersScript, []string{s.prefix + ":admitters"}, id, ttl.Milliseconds()).StringSlice()
	if err != nil {
		return nil, s.fail("admitters", err)
	}
	return res, nil
}

// Bucket is a room's admission bucket as it stands, with the admitted
// counter read in the same step: over two readings, Admitted's growth plus
// Carry's is exactly rate × the time between the LastUS values while the
// queue stayed long enough, which is how a measurement checks the rate.
type Bucket struct {
	LastUS   int64   // Redis time of the last admission call, µs since the epoch
	Carry    float64 // users allowed but not yet admitted
	Admitted int64   // the room's admitted counter
}

// Bucket reads room's admission bucket and admitted counter in one
// transaction.
func (s *Store) Bucket(ctx context.Context, room string) (Bucket, error) {
	if err := checkRoom(room); err != nil {
		return Bucket{}, err
	}
	k := s.keys(room)
	var b *redis.SliceCmd
	var admitted *redis.StringCmd
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		b = p.HMGet(ctx, k.bucket, "last_us", "carry")
		admitted = p.HGet(ctx, k.stats, "admitted")
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Bucket{}, s.fail("bucket", err)
	}
	var out Bucket
	v := b.Val()
	if len(v) != 2 || v[0] == nil || v[1] == nil {
		return Bucket{}, waitroom.ErrRoomNotFound
	}
	last, err1 := strconv.ParseInt(fmt.Sprint(v[0]), 10, 64)
	carry, err2 := strconv.ParseFloat(fmt.Sprint(v[1]), 64)
	n, err3 := strconv.ParseInt(admitted.Val(), 10, 64)
	if admitted.Err() != nil {
		n, err3 = 0, nil // nobody admitted yet
	}
	if err := errors.Join(err1, err2, err3); err != nil {
		return Bucket{}, s.unexpected(ctx, "bucket", v)
	}
	out.LastUS, out.Carry, out.Admitted = last, carry, n
	return out, nil
}
