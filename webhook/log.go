package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Log is the durable log events are delivered from, with what the
// dispatchers share: one stream per Partition, a consumer group per
// endpoint on each (its own read position and pending entries), the
// dispatchers' liveness, the endpoints made by the admin API and the dead
// letters. RedisLog keeps it in Redis for every instance; MemLog in this
// process.
type Log interface {
	// Append adds entries to their rooms' partitions, in order.
	Append(ctx context.Context, entries []Entry) error
	// AppendOnce is Append for entries whose event ids say what they are
	// (a room's outbox entry): one whose id an AppendOnce appended within
	// Retention is left out, so relays that race, or one that replays
	// after a crash, append each once. It returns how many it appended.
	AppendOnce(ctx context.Context, entries []Entry) (int, error)
	// AddGroup makes endpoint's consumer group on every partition, reading
	// from the next entry appended; one that exists keeps its position.
	AddGroup(ctx context.Context, endpoint string) error
	// RemoveGroup drops endpoint's groups and their pending entries.
	RemoveGroup(ctx context.Context, endpoint string) error
	// Read hands consumer up to count entries of partition that
	// endpoint's group has not been handed yet; they stay pending until
	// Ack.
	Read(ctx context.Context, endpoint string, partition int, consumer string, count int) ([]Entry, error)
	// Claim hands consumer the pending entries of endpoint's group on
	// partition, whichever consumer they were handed to (one that died
	// left them there), oldest first, up to count from after (""
	// from the start), and the cursor to go on from ("" at the end).
	Claim(ctx context.Context, endpoint string, partition int, consumer, after string, count int) ([]Entry, string, error)
	// Ack ends entries: delivered, dead-lettered or not wanted.
	Ack(ctx context.Context, endpoint string, partition int, ids ...string) error

	// Consumers records that consumer id lives until now+ttl and returns
	// the live ones, id among them, sorted.
	Consumers(ctx context.Context, id string, now time.Time, ttl time.Duration) ([]string, error)

	// PutEndpoint stores e (a new one or a rotation of its secrets).
	PutEndpoint(ctx context.Context, e Endpoint) error
	// Endpoints lists the stored endpoints.
	Endpoints(ctx context.Context) ([]Endpoint, error)
	// DeleteEndpoint removes one; ErrNotFound if there is none.
	DeleteEndpoint(ctx context.Context, id string) error

	// AddDead keeps d, at most MaxDead of them (the oldest go first).
	AddDead(ctx context.Context, d DeadLetter) error
	// Dead lists dead letters, newest first, at most limit.
	Dead(ctx context.Context, limit int) ([]DeadLetter, error)
	// TakeDead removes dead letter id and returns it; ErrNotFound.
	TakeDead(ctx context.Context, id string) (DeadLetter, error)

	// Advance moves counter name to total and returns how much it grew
	// since the last Advance (0 the first time, or when total is not
	// above it): so that of the instances watching one room's counters,
	// each growth is told once.
	Advance(ctx context.Context, name string, total int64) (int64, error)
}

// ErrNotFound: no such endpoint or dead letter.
var ErrNotFound = errors.New("webhook: not found")

// MaxDead bounds the dead letters kept.
const MaxDead = 10_000

// Entry is one event in the log.
type Entry struct {
	// Seq is the log's own id of the entry (a stream id), "" before Append.
	Seq   string
	Event Event
	// Body is the event's JSON body, as sent.
	Body []byte
	// Since is when the entry was appended: the retry budget runs from it,
	// so a redelivered dead letter gets a fresh one.
	Since time.Time
	// Only, if set, is the one endpoint the entry is for (a redelivery).
	Only string
}

// NewEntry is the entry of e appended at now.
func NewEntry(e Event, now time.Time) Entry {
	return Entry{Event: e, Body: e.Body(), Since: now}
}

// DeadLetter is an entry an endpoint did not take within its retry
// budget.
type DeadLetter struct {
	ID        string          `json:"id"`
	Endpoint  string          `json:"endpoint"`
	EventID   string          `json:"event_id"`
	Type      string          `json:"type"`
	Room      string          `json:"room"`
	Body      json.RawMessage `json:"body"`
	Attempts  int             `json:"attempts"`
	LastError string          `json:"last_error"`
	At        time.Time       `json:"at"`
}
