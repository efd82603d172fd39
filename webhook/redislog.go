package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisLog is the Log in Redis, shared by every instance: a stream per
// partition with a consumer group per endpoint, so the instances share
// the work and the entries a dead one was handed stay pending until
// another claims them (XAUTOCLAIM). Every key carries one hash tag, so on
// a Cluster they are on one shard: webhook traffic is small beside the
// rooms'.
type RedisLog struct {
	client redis.UniversalClient
	base   string
	// Now is the clock of the streams' trimming; nil: time.Now.
	Now func() time.Time
	// Secrets, when set, seals the endpoints' signing secrets before they
	// are stored (SecretSealer): whoever reads Redis cannot sign messages
	// the shop would believe. Nil: kept as given.
	Secrets *SecretSealer
}

// Retention is how long an entry stays in its stream: the retry budget
// and an hour. Entries older than that are trimmed as entries are
// appended, pending or not.
const Retention = MaxAge + time.Hour

// NewRedisLog keeps the log under prefix (the store's key prefix) in
// client's Redis.
func NewRedisLog(client redis.UniversalClient, prefix string) *RedisLog {
	if prefix == "" {
		prefix = "wr"
	}
	return &RedisLog{client: client, base: prefix + ":{wh}"}
}

func (r *RedisLog) now() time.Time { return nowOf(r.Now) }

func (r *RedisLog) stream(p int) string { return r.base + ":p" + strconv.Itoa(p) }

// Append implements Log.
func (r *RedisLog) Append(ctx context.Context, entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	minID := strconv.FormatInt(r.now().Add(-Retention).UnixMilli(), 10)
	_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, e := range entries {
			p.XAdd(ctx, &redis.XAddArgs{
				Stream: r.stream(Partition(e.Event.Room)), MinID: minID, Approx: true,
				Values: []any{"id", e.Event.ID, "type", e.Event.Type, "room", e.Event.Room,
					"ts", e.Event.Timestamp.UnixNano(), "since", e.Since.UnixNano(), "only", e.Only, "body", e.Body},
			})
		}
		return nil
	})
	return err
}

// appendOnce is AppendOnce's script: the ids appended within Retention
// are the members of one sorted set, scored by when.
//
// KEYS[1]  relayed (zset: event id → ms appended)
// KEYS[2…] each entry's stream
// ARGV[1]  now ms; ARGV[2] the streams' MINID; ARGV[3] the set's MINID ms
// then per entry: id, type, room, ts, since, only, body
//
// Returns how many it appended.
var appendOnce = redis.NewScript(`
local now, min_id, min_ms = ARGV[1], ARGV[2], ARGV[3]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. min_ms)
local n = 0
for i = 2, #KEYS do
  local a = 4 + (i - 2) * 7
  if redis.call('ZADD', KEYS[1], 'NX', now, ARGV[a]) == 1 then
    redis.call('XADD', KEYS[i], 'MINID', '~', min_id, '*', 'id', ARGV[a], 'type', ARGV[a + 1], 'room', ARGV[a + 2],
      'ts', ARGV[a + 3], 'since', ARGV[a + 4], 'only', ARGV[a + 5], 'body', ARGV[a + 6])
    n = n + 1
  end
end
return n
`)

// AppendOnce implements Log: one script on the log's slot, so two relays
// appending the same entries at once append them once, in order.
func (r *RedisLog) AppendOnce(ctx context.Context, entries []Entry) (int, error) {
	if len(entries) == 0 {
		return 0, nil
	}
	now := r.now()
	keys := []string{r.base + ":relayed"}
	args := []any{now.UnixMilli(), now.Add(-Retention).UnixMilli(), now.Add(-Retention).UnixMilli()}
	for _, e := range entries {
		keys = append(keys, r.stream(Partition(e.Event.Room)))
		args = append(args, e.Event.ID, e.Event.Type, e.Event.Room, e.Event.Timestamp.UnixNano(), e.Since.UnixNano(), e.Only, e.Body)
	}
	n, err := appendOnce.Run(ctx, r.client, keys, args...).Int()
	return n, err
}

func entryOf(m redis.XMessage) (Entry, error) {
	str := func(k string) string { s, _ := m.Values[k].(string); return s }
	nanos := func(k string) (time.Time, error) {
		n, err := strconv.ParseInt(str(k), 10, 64)
		return time.Unix(0, n).UTC(), err
	}
	ts, err1 := nanos("ts")
	since, err2 := nanos("since")
	if err := errors.Join(err1, err2); err != nil || str("id") == "" {
		return Entry{}, fmt.Errorf("webhook: malformed log entry %s", m.ID)
	}
	body := []byte(str("body"))
	var data struct {
		Data json.RawMessage `json:"data"`
	}
	_ = json.Unmarshal(body, &data)
	return Entry{Seq: m.ID, Body: body, Since: since, Only: str("only"),
		Event: Event{ID: str("id"), Version: Version, Type: str("type"), Room: str("room"), Timestamp: ts, Data: data.Data}}, nil
}

func entriesOf(msgs []redis.XMessage) ([]Entry, error) {
	out := make([]Entry, 0, len(msgs))
	var errs []error
	for _, m := range msgs {
		e, err := entryOf(m)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}

// AddGroup implements Log.
func (r *RedisLog) AddGroup(ctx context.Context, endpoint string) error {
	for p := range Partitions {
		err := r.client.XGroupCreateMkStream(ctx, r.stream(p), endpoint, "$").Err()
		if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
			return err
		}
	}
	return nil
}

// RemoveGroup implements Log.
func (r *RedisLog) RemoveGroup(ctx context.Context, endpoint string) error {
	for p := range Partitions {
		if err := r.client.XGroupDestroy(ctx, r.stream(p), endpoint).Err(); err != nil {
			return err
		}
	}
	return nil
}

// Read implements Log.
func (r *RedisLog) Read(ctx context.Context, endpoint string, p int, consumer string, count int) ([]Entry, error) {
	res, err := r.client.XReadGroup(ctx, &redis.XReadGroupArgs{Group: endpoint, Consumer: consumer,
		Streams: []string{r.stream(p), ">"}, Count: int64(count), Block: -1}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var msgs []redis.XMessage
	for _, s := range res {
		msgs = append(msgs, s.Messages...)
	}
	return entriesOf(msgs)
}

// Claim implements Log: XAUTOCLAIM with no minimum idle time, since the
// dispatchers' ownership (Consumers, Owner) already says who may.
func (r *RedisLog) Claim(ctx context.Context, endpoint string, p int, consumer, after string, count int) ([]Entry, string, error) {
	if after == "" {
		after = "0-0"
	}
	msgs, next, err := r.client.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: r.stream(p), Group: endpoint,
		Consumer: consumer, Start: after, Count: int64(count)}).Result()
	if err != nil {
		return nil, "", err
	}
	if next == "0-0" {
		next = ""
	}
	entries, err := entriesOf(msgs)
	return entries, next, err
}

// Ack implements Log.
func (r *RedisLog) Ack(ctx context.Context, endpoint string, p int, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	return r.client.XAck(ctx, r.stream(p), endpoint, ids...).Err()
}

// Consumers implements Log.
func (r *RedisLog) Consumers(ctx context.Context, id string, now time.Time, ttl time.Duration) ([]string, error) {
	key := r.base + ":consumers"
	var live *redis.StringSliceCmd
	_, err := r.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, key, redis.Z{Score: float64(now.Add(ttl).UnixMilli()), Member: id})
		p.ZRemRangeByScore(ctx, key, "-inf", strconv.FormatInt(now.UnixMilli(), 10))
		live = p.ZRange(ctx, key, 0, -1)
		return nil
	})
	if err != nil {
		return nil, err
	}
	ids := live.Val()
	slices.Sort(ids)
	return ids, nil
}

// PutEndpoint implements Log.
func (r *RedisLog) PutEndpoint(ctx context.Context, e Endpoint) error {
	b, err := json.Marshal(r.Secrets.sealAll(e))
	if err != nil {
		return err
	}
	return r.client.HSet(ctx, r.base+":endpoints", e.ID, b).Err()
}

// Endpoints implements Log.
func (r *RedisLog) Endpoints(ctx context.Context) ([]Endpoint, error) {
	all, err := r.client.HGetAll(ctx, r.base+":endpoints").Result()
	if err != nil {
		return nil, err
	}
	out := make([]Endpoint, 0, len(all))
	for id, raw := range all {
		var e Endpoint
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			return nil, fmt.Errorf("webhook: endpoint %s: %w", id, err)
		}
		out = append(out, r.Secrets.openAll(e))
	}
	sortEndpoints(out)
	return out, nil
}

// DeleteEndpoint implements Log.
func (r *RedisLog) DeleteEndpoint(ctx context.Context, id string) error {
	n, err := r.client.HDel(ctx, r.base+":endpoints", id).Result()
	if err == nil && n == 0 {
		return ErrNotFound
	}
	return err
}

// AddDead implements Log.
func (r *RedisLog) AddDead(ctx context.Context, d DeadLetter) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	hash, order := r.base+":dead", r.base+":deadorder"
	seq, err := r.client.Incr(ctx, r.base+":deadseq").Result()
	if err != nil {
		return err
	}
	if _, err := r.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, hash, d.ID, b)
		p.ZAdd(ctx, order, redis.Z{Score: float64(seq), Member: d.ID})
		return nil
	}); err != nil {
		return err
	}
	old, err := r.client.ZRange(ctx, order, 0, -MaxDead-1).Result()
	if err != nil || len(old) == 0 {
		return err
	}
	_, err = r.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, order, toAny(old)...)
		p.HDel(ctx, hash, old...)
		return nil
	})
	return err
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// Dead implements Log.
func (r *RedisLog) Dead(ctx context.Context, limit int) ([]DeadLetter, error) {
	if limit <= 0 {
		return nil, nil
	}
	ids, err := r.client.ZRevRange(ctx, r.base+":deadorder", 0, int64(limit-1)).Result()
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	raws, err := r.client.HMGet(ctx, r.base+":dead", ids...).Result()
	if err != nil {
		return nil, err
	}
	out := make([]DeadLetter, 0, len(raws))
	for _, raw := range raws {
		s, ok := raw.(string)
		if !ok {
			continue // taken meanwhile
		}
		var d DeadLetter
		if err := json.Unmarshal([]byte(s), &d); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// TakeDead implements Log: of concurrent takes of one letter, one gets it.
func (r *RedisLog) TakeDead(ctx context.Context, id string) (DeadLetter, error) {
	var get *redis.StringCmd
	var del *redis.IntCmd
	_, err := r.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get = p.HGet(ctx, r.base+":dead", id)
		del = p.HDel(ctx, r.base+":dead", id)
		p.ZRem(ctx, r.base+":deadorder", id)
		return nil
	})
	if errors.Is(err, redis.Nil) || (err == nil && del.Val() == 0) {
		return DeadLetter{}, ErrNotFound
	}
	if err != nil {
		return DeadLetter{}, err
	}
	var d DeadLetter
	if err := json.Unmarshal([]byte(get.Val()), &d); err != nil {
		return DeadLetter{}, err
	}
	return d, nil
}

// advance is Log.Advance's script: the webhook log's own keys, not the
// rooms'.
var advance = redis.NewScript(`
local last = redis.call('HGET', KEYS[1], ARGV[1])
local total = tonumber(ARGV[2])
if last and total <= tonumber(last) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if not last then return 0 end
return total - tonumber(last)
`)

// Advance implements Log.
func (r *RedisLog) Advance(ctx context.Context, name string, total int64) (int64, error) {
	return advance.Run(ctx, r.client, []string{r.base + ":counters"}, name, total).Int64()
}
