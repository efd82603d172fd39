package memstore

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/waitroom/waitroom"
)

var _ waitroom.OutboxStore = (*Store)(nil)

// outbox is a room's outbox (waitroom.OutboxStore), as redisstore keeps
// it: Admit writes it in its critical section while on.
type outbox struct {
	on      bool
	entries []waitroom.OutboxEntry // oldest first
	lost    int64                  // entries dropped unrelayed, past OutboxMaxEntries
	named   waitroom.OutboxNamed   // the no-shows, expired and abandoned it named
	lastMS  int64                  // the last id's ms and n
	lastN   uint64
}

// toldUsers are the users of one Admit's per-user events, each list in
// the order Admit met them.
type toldUsers struct{ noShow, expired, abandoned, admitted []string }

// gone adds a token dropped unused: a no-show when never confirmed.
func (t *toldUsers) gone(tok *entryToken) {
	if tok.confirmed {
		t.expired = append(t.expired, tok.user)
	} else {
		t.noShow = append(t.noShow, tok.user)
	}
}

// tell writes told to the outbox, an entry per event type and at most
// OutboxMaxUsers users, in redisstore's order: no-shows, expired,
// abandoned, admitted; and counts the users it names of the first three
// (waitroom.OutboxNamed).
func (o *outbox) tell(now time.Time, told *toldUsers) {
	o.named.NoShows += int64(len(told.noShow))
	o.named.Expired += int64(len(told.expired))
	o.named.Abandoned += int64(len(told.abandoned))
	for _, e := range []struct {
		typ   string
		users []string
	}{{waitroom.OutboxNoShow, told.noShow}, {waitroom.OutboxExpired, told.expired},
		{waitroom.OutboxAbandoned, told.abandoned}, {waitroom.OutboxAdmitted, told.admitted}} {
		for from := 0; from < len(e.users); from += waitroom.OutboxMaxUsers {
			users := e.users[from:min(from+waitroom.OutboxMaxUsers, len(e.users))]
			o.entries = append(o.entries, waitroom.OutboxEntry{ID: o.nextID(now), Type: e.typ, At: now.UTC(),
				Users: append([]string(nil), users...)})
		}
	}
	if over := len(o.entries) - waitroom.OutboxMaxEntries; over > 0 {
		// Sliced, not copied: the next growth of the slice drops what
		// lies before it.
		o.entries = o.entries[over:]
		o.lost += int64(over)
	}
}

// nextID is a stream id after the last one: now's ms, or the last ms
// with the next n when the clock has not moved past it.
func (o *outbox) nextID(now time.Time) string {
	if ms := now.UnixMilli(); ms > o.lastMS {
		o.lastMS, o.lastN = ms, 0
	} else {
		o.lastN++
	}
	return strconv.FormatInt(o.lastMS, 10) + "-" + strconv.FormatUint(o.lastN, 10)
}

// SetOutbox turns room's outbox on or off (waitroom.OutboxStore).
func (s *Store) SetOutbox(ctx context.Context, name string, on bool) error {
	r, err := s.lockedRoom(ctx, name)
	if err != nil {
		return err
	}
	defer r.mu.Unlock()
	r.out.on = on
	return nil
}

// ReadOutbox returns up to count of room's oldest outbox entries
// (waitroom.OutboxStore).
func (s *Store) ReadOutbox(ctx context.Context, name string, count int) (waitroom.OutboxRead, error) {
	if count < 1 {
		return waitroom.OutboxRead{}, waitroom.BadRequest("an outbox read takes at least 1 entry")
	}
	r, err := s.lockedRoom(ctx, name)
	if err != nil {
		return waitroom.OutboxRead{}, err
	}
	defer r.mu.Unlock()
	entries := r.out.entries[:min(count, len(r.out.entries))]
	read := waitroom.OutboxRead{Lost: r.out.lost, On: r.out.on, Named: r.out.named, Entries: make([]waitroom.OutboxEntry, len(entries))}
	for i, e := range entries {
		e.Users = append([]string(nil), e.Users...)
		read.Entries[i] = e
	}
	return read, nil
}

// TrimOutbox removes room's outbox entries up to and including id
// (waitroom.OutboxStore).
func (s *Store) TrimOutbox(ctx context.Context, name, id string) error {
	ms, n, ok := parseOutboxID(id)
	if !ok {
		return waitroom.BadRequest("an outbox id is ms-n")
	}
	r, err := s.lockedRoom(ctx, name)
	if err != nil {
		return err
	}
	defer r.mu.Unlock()
	i := 0
	for i < len(r.out.entries) {
		ems, en, _ := parseOutboxID(r.out.entries[i].ID)
		if ems > ms || (ems == ms && en > n) {
			break
		}
		i++
	}
	r.out.entries = r.out.entries[i:]
	return nil
}

func parseOutboxID(id string) (int64, uint64, bool) {
	a, b, ok := strings.Cut(id, "-")
	ms, err1 := strconv.ParseInt(a, 10, 64)
	n, err2 := strconv.ParseUint(b, 10, 64)
	return ms, n, ok && err1 == nil && err2 == nil
}
