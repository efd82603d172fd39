// Package webhook tells the shop what happens in its rooms: signed HTTP
// callbacks (Standard Webhooks: webhook-id, webhook-timestamp and
// webhook-signature over id.timestamp.body) delivered at least once from a
// durable log (Redis Streams with a consumer group per endpoint, or the
// instance's own log in process), in order per room, retried with
// exponential backoff and jitter for up to MaxAge, then dead-lettered.
//
// Emitter turns the waiting room's state changes into events and appends
// them off the request path; Watcher relays the per-user events the
// store's admission writes to each room's outbox (waitroom.OutboxStore)
// and tells what the store decides without telling Go; Dispatcher
// delivers them; Admin is the operator's API for endpoints and dead
// letters.
package webhook

import (
	"encoding/json"
	"hash/fnv"
	"log/slog"
	"slices"
	"time"

	"github.com/waitroom/waitroom"
)

// Event types: the names a receiver switches on.
const (
	RoomOpened       = "room.opened"
	RoomPaused       = "room.paused"
	RoomResumed      = "room.resumed"
	RoomClosed       = "room.closed"
	RoomSoldOut      = "room.sold_out"
	RoomRestocked    = "room.restocked"
	RoomDrawRevealed = "room.draw_revealed"
	UserAdmitted     = waitroom.OutboxAdmitted
	UserNoShow       = waitroom.OutboxNoShow
	UserAbandoned    = waitroom.OutboxAbandoned
	TokenSpent       = "token.spent"
	TokenReleased    = "token.released"
	TokenExpired     = waitroom.OutboxExpired
)

// OutboxTypes are the types the store's admission writes to a room's
// outbox, user by user: a room gets an outbox while an endpoint wants one
// of them there.
var OutboxTypes = []string{UserAdmitted, UserNoShow, UserAbandoned, TokenExpired}

// Types lists every event type, the names an endpoint's filter may use.
var Types = []string{
	RoomOpened, RoomPaused, RoomResumed, RoomClosed, RoomSoldOut, RoomRestocked, RoomDrawRevealed,
	UserAdmitted, UserNoShow, UserAbandoned, TokenSpent, TokenReleased, TokenExpired,
}

// KnownType reports whether t is one of Types.
func KnownType(t string) bool { return slices.Contains(Types, t) }

// Version is the body's schema version: a receiver may refuse a body of a
// version it does not know. Fields are only ever added within a version.
const Version = 1

// MaxBatchUsers bounds the users one per-user event carries: what
// OutboxEvents makes of a second's outbox entries of one type
// (user.admitted, user.no_show, user.abandoned, token.expired), or what
// the Emitter gathers of a room's token.spent and token.released for at
// most BatchWindow. So
// 100,000 buyers are at least 100 events of at most ~130 KB (user ids are
// at most 128 bytes; an admission call admits at most
// waitroom.MaxTickQuota, 1,000).
const MaxBatchUsers = waitroom.OutboxMaxUsers

// BatchWindow is how long the Emitter gathers a room's settled tokens
// into one event before appending it.
const BatchWindow = time.Second

// Event is one thing that happened in a room. Its body is what is sent;
// ID is the webhook-id, the same at every attempt and redelivery, for the
// receiver to drop duplicates by.
type Event struct {
	ID        string          `json:"-"`
	Version   int             `json:"version"`
	Type      string          `json:"type"`
	Room      string          `json:"room"`
	Timestamp time.Time       `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
}

// NewEvent builds an event of type typ in room at now, with data encoded
// as its data object and a fresh id.
func NewEvent(typ, room string, now time.Time, data any) Event {
	raw, err := json.Marshal(data)
	if err != nil {
		// Every data value is one of this package's own structs.
		panic("webhook: encoding event data: " + err.Error())
	}
	return Event{ID: "msg_" + waitroom.NewToken(), Version: Version, Type: typ, Room: room, Timestamp: now.UTC(), Data: raw}
}

// Body is the JSON body sent for e.
func (e Event) Body() []byte {
	b, err := json.Marshal(e)
	if err != nil {
		panic("webhook: encoding event: " + err.Error())
	}
	return b
}

// The data objects of the events.
type (
	// AdmittedData: user.admitted, the users a room's admissions let in
	// in one second, in admission order (across a room's events too);
	// never the tokens, which are the users' secrets.
	AdmittedData struct {
		Count int      `json:"count"`
		Users []string `json:"users"`
	}
	// CountData: user.no_show (tokens never used by their first-use
	// deadline), user.abandoned (users left the queue for silence) and
	// token.expired (confirmed tokens that ran out). With users: the
	// ones the room's admissions cleaned up or skipped in one second,
	// how many and who. Without (count only): how many were found
	// otherwise since the watcher's last look (a silent user dropped by
	// its own late poll, a token found run out by a claim, a release or
	// a pass), named in no event. Users was added within Version 1; a
	// receiver that knows only count goes on working, and one that adds
	// up both kinds counts each user once.
	CountData struct {
		Count int64    `json:"count"`
		Users []string `json:"users,omitempty"`
	}
	// TokensData: token.spent (orders succeeded) and token.released
	// (orders failed; the tokens are usable again), in settle order.
	TokensData struct {
		Count  int         `json:"count"`
		Tokens []TokenData `json:"tokens"`
	}
	// TokenData is one settled token: its holder and the units it
	// reserved.
	TokenData struct {
		User  string `json:"user"`
		Units int    `json:"units"`
	}
	// RoomData: room.opened, room.paused, room.resumed, room.closed.
	RoomData struct {
		State string `json:"state"`
	}
	// StockData: room.sold_out, room.restocked.
	StockData struct {
		Stock         int   `json:"stock"`
		PreviousStock int   `json:"previous_stock,omitempty"`
		Sold          int64 `json:"sold,omitempty"`
	}
	// DrawData: room.draw_revealed, the scheduled opening's seed against
	// its published commitment.
	DrawData struct {
		Commitment string `json:"commitment"`
		Seed       string `json:"seed"`
		Entrants   int64  `json:"entrants"`
	}
)

// Partitions is how many streams the log is split into. A room's events
// are all in one partition, in order; each endpoint's partitions are
// shared among the live dispatchers, one owner each.
const Partitions = 8

// Partition is the partition of room's events.
func Partition(room string) int {
	h := fnv.New32a()
	h.Write([]byte(room))
	return int(h.Sum32() % Partitions)
}

// nowOf reads now, or the real clock when nil.
func nowOf(now func() time.Time) time.Time {
	if now != nil {
		return now()
	}
	return time.Now()
}

// loggerOf is l, or a logger that discards when nil.
func loggerOf(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}
