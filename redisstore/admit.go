package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom"
)

// admitScript cleans up expired tokens, then turns the head of the queue
// into token holders as the room's token bucket allows.
//
// The bucket keeps the Redis time of the last admission (µs) and a
// fractional carry of users allowed but not yet admitted. A call may admit
// carry + elapsed × rate users, at most quota (= ceil(rate × slice)), as
// many as are queued, within max_active, within the stock (live tokens ×
// units per order + units sold never exceed it), and no more than tokens were
// supplied. What it may admit but does not is carried, up to one slice's
// worth plus one user (rate × slice + 1) while users wait: a fraction of a
// user adds up to a whole one at any rate (0.5/s in 100 ms ticks admits one
// every 20th tick), a late tick's excess is made up, so the average rate is
// exact (175/s in 100 ms ticks admits 17, 18, 17, 18, …), while a stall
// longer than a slice or a pause cannot save up a burst. With nobody
// waiting at most one user is carried: idle time saves up nothing more. The first call ever only starts the
// bucket, empty: it admits nobody, like the first call after a pause, so a
// room's admissions never exceed rate × time since its first call. A paused
// room admits nobody and keeps its bucket empty, so resuming starts at the
// rate, not with a burst. All instances share the bucket, so together they
// admit the room's rate once.
//
// Users at the head silent for longer than abandon_after have gone: the
// script drops them, counts them abandoned and admits the next instead, at
// most waitroom.MaxSkipsPerAdmit per call. One who asked to be told of its
// turn (SetNotice) is gone only after waitroom.MaxNoticeSilence; its
// channels come with its admission and are forgotten, and its token's
// first-use deadline is notified_first_use_within, started again by
// Notified. The notices are read only in a room whose bucket marks that it
// may have some (set_notice), so no other room pays for them.
//
// A room whose bucket says it wants per-user events (set_outbox) has the
// users this call admitted, the no-shows and expired tokens it cleaned up
// (also those it found stale as it issued) and the abandoned users it
// skipped written to its outbox (outbox.go), in this call; any other room
// pays nothing for it but one more field read.
//
// Expired tokens are those whose active score (expiry, or lease if later)
// has passed; at most max(1000, 2 × quota) per call go, more
// than a call can issue, so cleanup keeps up. The tokens one call issues
// share one active entry (due_tokens), not one each.
//
// The bucket also keeps the room's pace (waitroom.PaceSums, p_*) and the
// counters the previous call saw (m_*: arrival sequence, leaves, no-shows),
// so that each call adds what happened since, whichever operation did it.
//
// KEYS[1] cfg
// KEYS[2] bucket
// KEYS[3] q
// KEYS[4] tok
// KEYS[5] active
// KEYS[6] stats
// KEYS[7] seq
// KEYS[8] buyers
// KEYS[9] drawn
// KEYS[10] draw
// KEYS[11] notice
// KEYS[12] out
// ARGV    fresh tokens, one per user this call may admit
//
// Returns one of
//
//	{"OK", quota, seq, admitted_before, admitted_after,
//	 carry_micro, rate_micro, waiting, short,
//	 user1, user2, …}  admitted, in arrival order: the nth has ARGV[n]; a
//	                   user who asked to be told is {user, channels}
//	{"PAUSED", quota, seq, admitted, admitted, 0, rate_micro, 0, 0}  the room is paused
//	{"SCHEDULED", …}  the same shape: a scheduled room before its opening
//	{"DRAW", …}       the same shape: the opening has come and the early
//	                  arrivals wait for their draw (drop.go) before anyone
//	{"MORE", n}  no tokens were supplied but n users can be admitted:
//	             call again with n; nothing but cleanup was written
//	{"ROOM_NOT_FOUND"}
//
// carry_micro and rate_micro are the bucket's carry after the call and the
// rate, in millionths of a user (per second), and waiting the queue's length
// after it, short 1 when the call could have admitted more than the tokens
// it brought: from them the Store supplies the next call about as many
// tokens as it will admit (the quota after a short call, whose allowance
// the carry kept), so that ticks that admit nobody generate none.
//
// seq is the arrival sequence and admitted_before/after the admitted
// counter when the script began and ended; the Store watches them for lost
// writes (lost.go).
var admitScript = newFunction("admit")

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
//
// When it issued tokens on a primary with replicas, Admit waits (WAIT 1,
// at most Options.WaitTimeout) until one replica has them, so a failover
// right after cannot take back tokens users were told about. It knows the
// replicas from INFO replication, read at most once a second per room
// (replicaCountFresh) and after a WAIT that failed: a replica that
// attaches is waited for within a second, and it receives everything by
// its full synchronization anyway. Admit runs a
// few times a second per room, so the wait costs no user request anything.
// A WAIT that times out or fails does not fail Admit, whose tokens were
// issued; it is logged, and should the primary die before its replica
// caught up, the lost tokens are reported as a Loss.
func (s *Store) Admit(ctx context.Context, room string) ([]waitroom.Admission, error) {
	if err := checkRoom(room); err != nil {
		return nil, err
	}
	if l, err := s.layout(ctx, room); err != nil {
		return nil, err
	} else if l.shards > 1 {
		return s.admitSpread(ctx, room, l)
	}
	w := s.watch(room)
	at := w.marks()

	primary := s.onPrimary(ctx, s.keys(room).cfg)
	defer primary.close()

	// Usually one call. A second when the call brought fewer tokens than
	// the bucket allowed: none (MORE), or some (short), so that saving
	// tokens never loses a tick's admissions.
	var admitted []waitroom.Admission
	n := s.tokensWanted(room)
	for call := 0; ; call++ {
		keys, tokens := s.admitArgs(room, n)
		res, err := primary.call(ctx, admitScript, keys, tokens...)
		if err != nil && len(admitted) > 0 {
			break // the first call's admissions stand; the next tick retries
		}
		if err != nil {
			return nil, s.fail("admit", err)
		}
		r, ok := asReply(res)
		if ok && r.code() == "MORE" && len(tokens) == 0 && call == 0 {
			more, ok := r.int(1)
			if !ok || more < 1 || more > waitroom.MaxTickQuota {
				return nil, s.unexpected(ctx, "admit", res)
			}
			n = int(more)
			continue
		}
		got, err := s.admitted(ctx, room, res, tokens)
		if err != nil {
			return nil, err
		}
		if r.code() == "DRAW" && call == 0 {
			// Nobody was admitted: the opening's draw comes first, then
			// this tick, unless another instance is making the draw.
			done, err := s.drawOpening(ctx, room)
			if err != nil || !done {
				return nil, err
			}
			continue
		}
		admitted = append(admitted, got...)
		seq, _ := r.int(2)
		counts, _ := r.reading(3)
		s.observe(ctx, room, w, at, reading{seq, seq}, &counts)
		w.issuedNow(counts.before+1, got)
		// Short: the rest of the quota, so that one Admit stays within it.
		if short, _ := r.int(8); short == 1 && call < 2 {
			quota, _ := r.int(1)
			if n = int(quota) - len(admitted); n > 0 {
				continue
			}
		}
		break
	}
	primary.waitReplica(ctx, room, w, "issued tokens", len(admitted))
	return admitted, nil
}

// primaryCaller runs functions on one connection to a key's primary, so
// that a WAIT after them covers their writes (WAIT counts those of its own
// connection only), and on the client when it offers no such connection
// or the slot moved.
type primaryCaller struct {
	s    *Store
	conn *redis.Conn // nil: the client's own routing, without WAIT
}

// onPrimary returns the caller of key's primary; the caller closes it.
func (s *Store) onPrimary(ctx context.Context, key string) *primaryCaller {
	return &primaryCaller{s: s, conn: s.primaryConn(ctx, key)}
}

// call runs f as Store.call does.
func (p *primaryCaller) call(ctx context.Context, f *function, keys []string, args ...any) (any, error) {
	if p.conn != nil {
		res, err := p.s.call(ctx, p.conn, f, keys, args...).Result()
		if !redirected(err) {
			return res, err
		}
		// The slot moved (a failover or resharding): the script did not
		// run; the cluster client follows the redirect, without WAIT.
		p.close()
	}
	return p.s.call(ctx, p.s.client, f, keys, args...).Result()
}

// waitReplica waits, after calls that wrote n things users are told of
// (what: "issued tokens", "drawn places"), until a replica of the
// primary has them (Store.waitReplica); name is what the log says.
func (p *primaryCaller) waitReplica(ctx context.Context, name string, w *roomWatch, what string, n int) {
	if n > 0 && p.conn != nil && p.s.waitTimeout > 0 {
		p.s.waitReplica(ctx, name, w, p.conn, what, n)
	}
}

func (p *primaryCaller) close() {
	if p.conn != nil {
		_ = p.conn.Close() // back to the pool
		p.conn = nil
	}
}

// admitHeader is how many elements precede the admissions in admitScript's
// reply.
const admitHeader = 9

// tickState is what a room's last admitScript reply told about its next
// call.
type tickState struct {
	quota   int
	carry   float64 // users the bucket carried
	rate    float64 // users per second
	waiting int64
	short   bool      // the call could have admitted more than it brought
	at      time.Time // when the reply came
}

// tokensWanted is how many tokens the next Admit of room should supply:
// as many as the bucket will likely allow by then (from the last reply and
// the time since, with a quarter to spare), never more than the quota or
// the users waiting. The default quota before the first reply, and the
// quota after a call that was short of tokens: the time since a reply
// underestimates the Redis time since its call when replies are slow, and
// a short call carries the users it could not issue for the next. Too few
// cost nothing otherwise, and a call that brought none when some could go
// gets a second run (MORE).
func (s *Store) tokensWanted(room string) int {
	v, ok := s.ticks.Load(room)
	if !ok {
		return defaultQuota
	}
	st := v.(tickState)
	if st.short {
		return st.quota
	}
	allow := st.carry + st.rate*s.now().Sub(st.at).Seconds()*1.25
	return int(min(int64(st.quota), st.waiting, int64(allow+1e-9)))
}

// primaryConn returns one connection to the primary that serves key (the
// caller closes it), or nil when the client offers none; then Admit runs
// without WAIT.
func (s *Store) primaryConn(ctx context.Context, key string) *redis.Conn {
	switch c := s.client.(type) {
	case *redis.Client: // standalone, or a Sentinel failover client
		return c.Conn()
	case *redis.ClusterClient:
		node, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil // the cluster client's own call reports the cause
		}
		return node.Conn()
	}
	return nil
}

// redirected reports a MOVED or ASK reply: the command went to a node that
// does not serve its slot (any more), and did not run.
func redirected(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ")
}

// waitReplica waits until one replica has the writes conn made, when the
// primary has replicas, and warns once per run of failures when none has
// them in time, or when a primary that had replicas has none connected.
func (s *Store) waitReplica(ctx context.Context, room string, w *roomWatch, conn *redis.Conn, what string, n int) {
	replicas := s.replicasOf(ctx, w, conn)
	w.mu.Lock()
	had := w.hadReplicas
	w.hadReplicas = had || replicas > 0
	w.mu.Unlock()
	var acked int64
	var err error
	switch {
	case replicas > 0:
		acked, err = conn.Wait(ctx, 1, s.waitTimeout).Result()
	case !had:
		return // a standalone Redis: nothing to wait for
	}
	ok := err == nil && acked >= 1
	w.mu.Lock()
	was := w.unreplicated
	w.unreplicated = !ok
	if !ok && replicas > 0 {
		w.replicasAt = time.Time{} // no replica answered: read the count again next time
	}
	w.mu.Unlock()
	switch {
	case !ok && !was:
		s.log.WarnContext(ctx, "redisstore: "+what+" are not on a replica yet; a failover now would lose them",
			"room", room, "count", n, "replicas_connected", replicas, "wait", s.waitTimeout, "acked", acked, "err", err)
	case ok && was:
		s.log.InfoContext(ctx, "redisstore: a replica acknowledges "+what+" again", "room", room)
	}
}

// replicaCountFresh is how long Admit trusts the count of replicas it read
// from a room's primary (INFO replication): replicas come and go rarely,
// and reading the count in the admission script cost it a twentieth of
// its time. A WAIT that finds no replica in time has it read again.
const replicaCountFresh = time.Second

// replicasOf is how many replicas the primary behind conn has, as read at
// most replicaCountFresh ago.
func (s *Store) replicasOf(ctx context.Context, w *roomWatch, conn *redis.Conn) int64 {
	w.mu.Lock()
	n, at := w.replicas, w.replicasAt
	w.mu.Unlock()
	if !at.IsZero() && s.now().Sub(at) < replicaCountFresh {
		return n
	}
	info, err := conn.Info(ctx, "replication").Result()
	if err != nil {
		return n // the last count; the WAIT on the same connection says what failed
	}
	n, err = strconv.ParseInt(InfoField(info, "connected_slaves"), 10, 64)
	w.mu.Lock()
	warn := err != nil && !w.replicasUnknown
	w.replicasUnknown = err != nil
	w.replicas, w.replicasAt = max(n, 0), s.now() // unknown: none, read again in a second
	w.mu.Unlock()
	if warn {
		s.log.WarnContext(ctx, "redisstore: INFO replication has no replica count; issued tokens are not waited for", "err", err)
	}
	return max(n, 0)
}

// admitArgs returns admitScript's KEYS and ARGV for room with n fresh
// tokens. Apart from Admit so that a test can run the script inside a
// transaction.
func (s *Store) admitArgs(room string, n int) (keys []string, tokens []any) {
	tokens = make([]any, n)
	for i := range tokens {
		tokens[i] = waitroom.NewToken()
	}
	k := s.keys(room)
	return []string{k.cfg, k.bucket, k.q, k.tok, k.active, k.stats, k.seq, k.buyers, k.drawn, k.draw, k.notice, k.out}, tokens
}

// admitted decodes admitScript's reply to a call that brought tokens, and
// learns the room's quota.
func (s *Store) admitted(ctx context.Context, room string, res any, tokens []any) ([]waitroom.Admission, error) {
	r, ok := asReply(res)
	if !ok {
		return nil, s.unexpected(ctx, "admit", res)
	}
	switch r.code() {
	case "OK", "PAUSED", "SCHEDULED", "DRAW":
	case "ROOM_NOT_FOUND":
		return nil, waitroom.ErrRoomNotFound
	default:
		return nil, s.unexpected(ctx, "admit", res)
	}
	quota, ok1 := r.int(1)
	carry, ok2 := r.int(5)
	rate, ok3 := r.int(6)
	waiting, ok4 := r.int(7)
	short, ok5 := r.int(8)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || len(r) < admitHeader || len(r)-admitHeader > len(tokens) {
		return nil, s.unexpected(ctx, "admit", res)
	}
	s.ticks.Store(room, tickState{
		quota: int(quota), carry: float64(carry) / 1e6, rate: float64(rate) / 1e6,
		waiting: waiting, short: short == 1, at: s.now(),
	})

	// The nth user admitted has the nth token.
	var admitted []waitroom.Admission
	for i := admitHeader; i < len(r); i++ {
		a, ok := admission(r[i])
		if !ok {
			return nil, s.unexpected(ctx, "admit", res)
		}
		a.Token = tokens[i-admitHeader].(string)
		admitted = append(admitted, a)
	}
	return admitted, nil
}

// admission decodes one admitted user of admitScript's reply: its name,
// or {name, channels} when it asked to be told.
func admission(v any) (waitroom.Admission, bool) {
	if user, ok := v.(string); ok {
		return waitroom.Admission{User: user}, true
	}
	pair, ok := v.([]any)
	if !ok || len(pair) != 2 {
		return waitroom.Admission{}, false
	}
	user, ok1 := pair[0].(string)
	channels, ok2 := pair[1].(string)
	if !ok1 || !ok2 || channels == "" {
		return waitroom.Admission{}, false
	}
	return waitroom.Admission{User: user, Notice: []byte(channels)}, true
}
