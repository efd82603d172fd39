package redisstore

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/waitroom/waitroom"
)

// The outbox (waitroom.OutboxStore): a room's stream of per-user events,
// wr:{ROOM}:out, in the room's hash tag, so that the admission script
// writes it in its own atomic step on a Cluster too (admitScript, tell).
// Each entry is one event type's users of one call, at most
// waitroom.OutboxMaxUsers. The script trims the stream to
// waitroom.OutboxMaxEntries exactly (XTRIM, not XADD's MAXLEN, whose count
// of what it dropped is not told) and adds what it dropped to the
// bucket's out_lost, which ReadOutbox hands the relay, with the
// bucket's named_no_shows, named_expired and named_abandoned: the users
// the script named of the stats' no_shows, expired and abandoned.

var _ waitroom.OutboxStore = (*Store)(nil)

// setOutboxScript marks whether Admit writes the room's outbox.
//
// KEYS[1] cfg
// KEYS[2] bucket
// ARGV[1] "1": on; anything else: off
//
// Returns "OK" or "ROOM_NOT_FOUND".
var setOutboxScript = newFunction("set_outbox")

// SetOutbox turns room's outbox on or off (waitroom.OutboxStore).
func (s *Store) SetOutbox(ctx context.Context, room string, on bool) error {
	if err := checkRoom(room); err != nil {
		return err
	}
	flag := "0"
	if on {
		flag = "1"
	}
	k := s.keys(room)
	r, err := s.do(ctx, "set outbox", setOutboxScript, []string{k.cfg, k.bucket}, flag)
	if err != nil {
		return err
	}
	switch r.code() {
	case "OK":
		return nil
	case "ROOM_NOT_FOUND":
		return waitroom.ErrRoomNotFound
	}
	return s.unexpected(ctx, "set outbox", r)
}

// readOutboxScript reads the oldest entries of a room's outbox.
//
// KEYS[1] cfg
// KEYS[2] bucket
// KEYS[3] out
// ARGV[1] count
//
// Returns {"OK", lost, on (1: the outbox is on), named no-shows, named
// expired, named abandoned, {id, type, at_ms, "user1 user2 …"}, …} or
// {"ROOM_NOT_FOUND"}.
var readOutboxScript = newFunction("read_outbox", "no-writes")

// maxOutboxRead bounds one ReadOutbox: an entry is at most ~130 KB.
const maxOutboxRead = 1000

// ReadOutbox returns up to count of the oldest entries of each of room's
// outbox streams (waitroom.OutboxStore): the room's own, and in a room
// spread over shards each sub-shard's (Stream its hash tag, ROOM#n),
// whose own steps name whom its tick admits and drops. Lost and Named
// are then the sub-shards' summed (a spread room's Stats are theirs), On
// the room's.
func (s *Store) ReadOutbox(ctx context.Context, room string, count int) (waitroom.OutboxRead, error) {
	if err := checkRoom(room); err != nil {
		return waitroom.OutboxRead{}, err
	}
	if count < 1 || count > maxOutboxRead {
		return waitroom.OutboxRead{}, waitroom.BadRequest("an outbox read takes 1 to " + strconv.Itoa(maxOutboxRead) + " entries")
	}
	k := s.keys(room)
	read, err := s.readOutbox(ctx, "", k.cfg, k.bucket, k.out, count)
	if err != nil {
		return waitroom.OutboxRead{}, err
	}
	l, err := s.layout(ctx, room)
	if err != nil || l.shards <= 1 {
		return read, err
	}
	subs := make([]waitroom.OutboxRead, l.shards)
	if err := s.eachShard(l, func(i int, sk *subKeys) error {
		var err error
		subs[i], err = s.readOutbox(ctx, sk.tag, sk.cfg, sk.stats, sk.out, count)
		return err
	}); err != nil {
		return waitroom.OutboxRead{}, err
	}
	read.Named = waitroom.OutboxNamed{}
	for _, sub := range subs {
		read.Entries = append(read.Entries, sub.Entries...)
		read.Lost += sub.Lost
		read.Named.NoShows += sub.Named.NoShows
		read.Named.Expired += sub.Named.Expired
		read.Named.Abandoned += sub.Named.Abandoned
	}
	return read, nil
}

// readOutbox reads one outbox stream: out, beside cfg (the room's, or a
// sub-shard's: ROOM_NOT_FOUND without it) and the hash of its counters
// (the room's bucket, or the sub-shard's stats); stream names it in the
// entries ("" the room's own).
func (s *Store) readOutbox(ctx context.Context, stream, cfg, counters, out string, count int) (waitroom.OutboxRead, error) {
	r, err := s.do(ctx, "read outbox", readOutboxScript, []string{cfg, counters, out}, count)
	if err != nil {
		return waitroom.OutboxRead{}, err
	}
	switch r.code() {
	case "OK":
	case "ROOM_NOT_FOUND":
		return waitroom.OutboxRead{}, waitroom.ErrRoomNotFound
	default:
		return waitroom.OutboxRead{}, s.unexpected(ctx, "read outbox", r)
	}
	lost, ok1 := r.int(1)
	on, ok2 := r.int(2)
	noShows, ok3 := r.int(3)
	expired, ok4 := r.int(4)
	abandoned, ok5 := r.int(5)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return waitroom.OutboxRead{}, s.unexpected(ctx, "read outbox", r)
	}
	read := waitroom.OutboxRead{Lost: lost, On: on == 1,
		Named: waitroom.OutboxNamed{NoShows: noShows, Expired: expired, Abandoned: abandoned}}
	for _, v := range r[6:] {
		e, ok := outboxEntry(v)
		if !ok {
			return waitroom.OutboxRead{}, s.unexpected(ctx, "read outbox", r)
		}
		if stream != "" {
			e.Stream, e.ID = stream, stream+"/"+e.ID
		}
		read.Entries = append(read.Entries, e)
	}
	return read, nil
}

// outboxEntry decodes one entry of readOutboxScript's reply.
func outboxEntry(v any) (waitroom.OutboxEntry, bool) {
	f, ok := v.([]any)
	if !ok || len(f) != 4 {
		return waitroom.OutboxEntry{}, false
	}
	id, ok1 := f[0].(string)
	typ, ok2 := f[1].(string)
	at, ok3 := f[2].(string)
	users, ok4 := f[3].(string)
	ms, err := strconv.ParseInt(at, 10, 64)
	if !ok1 || !ok2 || !ok3 || !ok4 || err != nil || users == "" {
		return waitroom.OutboxEntry{}, false
	}
	return waitroom.OutboxEntry{ID: id, Type: typ, At: time.UnixMilli(ms).UTC(), Users: strings.Split(users, " ")}, true
}

// TrimOutbox removes the entries of id's outbox stream up to and
// including id (waitroom.OutboxStore): XTRIM MINID with the id after it,
// so a trim that comes late (another relay trimmed further meanwhile)
// removes nothing it should not. An id of a sub-shard's stream names its
// hash tag, ROOM#n, which must be room's.
func (s *Store) TrimOutbox(ctx context.Context, room, id string) error {
	if err := checkRoom(room); err != nil {
		return err
	}
	key := s.keys(room).out
	if tag, rest, ok := strings.Cut(id, "/"); ok {
		n, found := strings.CutPrefix(tag, room+"#")
		if _, err := strconv.ParseUint(n, 10, 32); !found || err != nil {
			return waitroom.BadRequest("an outbox id is ms-n, or ROOM#n/ms-n for a sub-shard of the room")
		}
		key, id = s.prefix+":{"+tag+"}:out", rest
	}
	ms, seq, ok := strings.Cut(id, "-")
	n, err1 := strconv.ParseUint(ms, 10, 64)
	m, err2 := strconv.ParseUint(seq, 10, 64)
	if !ok || err1 != nil || err2 != nil || m == ^uint64(0) {
		return waitroom.BadRequest("an outbox id is ms-n")
	}
	next := strconv.FormatUint(n, 10) + "-" + strconv.FormatUint(m+1, 10)
	if err := s.client.XTrimMinID(ctx, key, next).Err(); err != nil {
		return s.fail("trim outbox", err)
	}
	return nil
}
