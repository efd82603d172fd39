package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom"
)

// Work tells what each room holds for the admitter. Idle rooms cost one
// command for all: EXISTS of every room's queues and token hash, one per
// group of rooms on one slot (all rooms in one group off Cluster), in one
// pipeline. Only the rooms of a group that holds something get an EXISTS
// each, of their queues and token hash together (one slot), and those
// with one of the four a second, of the queues alone, to tell which. No
// script: a probe of an idle room should cost Redis as little as a
// command can.
func (s *Store) Work(ctx context.Context, rooms []string) ([]waitroom.Work, error) {
	if err := waitroom.CheckWorkRooms(rooms); err != nil {
		return nil, err
	}
	work := make([]waitroom.Work, len(rooms))
	if err := s.workSpread(ctx, rooms, work); err != nil {
		return nil, err
	}
	groups := s.slotGroups(rooms)
	// Early arrivals wait in pre until the draw, then in drawn.
	workKeys := func(room string) []string {
		k := s.keys(room)
		return []string{k.q, k.pre, k.drawn, k.tok}
	}
	anything := make([]*redis.IntCmd, len(groups))
	if _, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for g, group := range groups {
			keys := make([]string, 0, 4*len(group))
			for _, i := range group {
				keys = append(keys, workKeys(rooms[i])...)
			}
			anything[g] = p.Exists(ctx, keys...)
		}
		return nil
	}); err != nil {
		return nil, s.fail("work", err)
	}
	var busy []int // rooms of groups that hold something
	for g, group := range groups {
		if anything[g].Val() > 0 {
			busy = append(busy, group...)
		}
	}
	if len(busy) == 0 {
		return work, nil
	}
	held := make([]*redis.IntCmd, len(busy))
	if _, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for j, i := range busy {
			held[j] = p.Exists(ctx, workKeys(rooms[i])...)
		}
		return nil
	}); err != nil {
		return nil, s.fail("work", err)
	}
	var which []int
	for j, i := range busy {
		switch n := held[j].Val(); {
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
	out := make(chan string, waitroom.WakesBuffer)
	head, tail := s.prefix+":{", "}:q"
	pattern := globEscaper.Replace(head) + "*" + tail
	ps := s.client.PSubscribe(ctx, pattern)
	go func() {
		defer close(out)
		defer ps.Close()
		// A refusal (an ACL without the pattern) comes back once, here;
		// the reconnects after an outage are go-redis's and say nothing.
		// Bounded: a read does not end with ctx, and a Redis that does
		// not answer must not hold this goroutine past it.
		if _, err := ps.ReceiveTimeout(ctx, wakeConfirmWait); err != nil && ctx.Err() == nil && !unavailable(err) {
			s.log.WarnContext(ctx, "redisstore: no wakes: idle rooms are probed once a second instead, "+
				"so a user entering one waits up to a second longer", "pattern", pattern, "err", err)
		}
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

// wakeConfirmWait bounds the wait for the subscription's first answer; a
// later one is go-redis's to read.
const wakeConfirmWait = 2 * time.Second

// globEscaper escapes what PSUBSCRIBE's pattern would read as a wildcard.
var globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)

// Admitters keeps id alive for ttl by the Redis clock and lists the
// admitters alive now. The set spans rooms (no hash tag), like the rooms
// set: a zset of id → alive until (ms, Redis clock).
//
// Every admitter calls this every tick, so it is plain commands in one
// pipeline, not a function: on a Redis otherwise idle, a call every 25 ms
// finds it cold, and a function call then cost 90–100 µs of its time
// against a few µs per plain command. The Redis clock comes from
// serverNow, an estimate within half a round trip; the set's expiry only
// ever grows (NX, then GT), so it goes when the last admitter stops.
func (s *Store) Admitters(ctx context.Context, id string, ttl time.Duration) ([]string, error) {
	if err := waitroom.CheckAdmitter(id, ttl); err != nil {
		return nil, err
	}
	now, err := s.serverNow(ctx)
	if err != nil {
		return nil, s.fail("admitters", err)
	}
	key, nowMS := s.prefix+":admitters", now.UnixMilli()
	var alive *redis.StringSliceCmd
	if _, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, key, redis.Z{Score: float64(nowMS + ttl.Milliseconds()), Member: id})
		p.Do(ctx, "PEXPIRE", key, ttl.Milliseconds(), "NX")
		p.Do(ctx, "PEXPIRE", key, ttl.Milliseconds(), "GT")
		alive = p.ZRangeByScore(ctx, key, &redis.ZRangeBy{Min: "(" + strconv.FormatInt(nowMS, 10), Max: "+inf"})
		return nil
	}); err != nil {
		return nil, s.fail("admitters", err)
	}
	ids := alive.Val()
	slices.Sort(ids)
	return ids, nil
}

// clockResync is how often serverNow reads the Redis clock again; Redis
// clocks on one machine drift apart by far less than a tick a second,
// and a failover to a primary on another host is caught within it.
const clockResync = time.Second

// The package's tests move the Redis clock instead of sleeping
// (clock_test.go): every function call then carries the offset, which
// the tests' library adds to TIME, and this process's reading of the
// clock adds it too. Nil in production.
var testClockOffsets func(prefix string) time.Duration

// testClockOffset is how far tests moved s's clock; 0 in production.
func (s *Store) testClockOffset() time.Duration {
	if testClockOffsets == nil {
		return 0
	}
	return testClockOffsets(s.prefix)
}

// now is this process's clock, moved with the Redis clock in tests.
func (s *Store) now() time.Time { return time.Now().Add(s.testClockOffset()) }

// serverClock is the Redis clock's offset from this process's, read
// with TIME every clockResync.
type serverClock struct {
	mu     sync.Mutex
	offset time.Duration
	synced time.Time // zero: never
}

// serverNow estimates the Redis clock now; once every clockResync it
// reads it (TIME, taken at the middle of the round trip), and on the way
// drops the admitters whose time ran out a second ago or more (by the
// estimate so far, once there is one).
func (s *Store) serverNow(ctx context.Context) (time.Time, error) {
	c := &s.clock
	c.mu.Lock()
	offset, synced := c.offset, c.synced
	c.mu.Unlock()
	local := time.Now()
	if !synced.IsZero() && local.Sub(synced) < clockResync {
		return local.Add(offset + s.testClockOffset()), nil
	}
	var t *redis.TimeCmd
	if _, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		t = p.Time(ctx)
		if !synced.IsZero() {
			p.ZRemRangeByScore(ctx, s.prefix+":admitters", "-inf", strconv.FormatInt(local.Add(offset+s.testClockOffset()-time.Second).UnixMilli(), 10))
		}
		return nil
	}); err != nil {
		return time.Time{}, err
	}
	after := time.Now()
	mid := local.Add(after.Sub(local) / 2)
	c.mu.Lock()
	c.offset, c.synced = t.Val().Sub(mid), after
	offset = c.offset
	c.mu.Unlock()
	return after.Add(offset + s.testClockOffset()), nil
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
