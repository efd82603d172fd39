// Package waitroom is a virtual waiting room for flash sales: a fair FIFO
// queue per room, an admitter that lets users through at the rate the
// protected API can serve, and single-use entry tokens guarded by a gate.
//
// The root package holds the domain: room settings, statuses, errors and the
// Store interface that redisstore (Redis) and memstore (in process) implement
// with the same semantics, checked by storetest.
package waitroom

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"math"
	"time"
)

// State is where a user stands in a room.
type State string

const (
	// StateWaiting: the user is in the queue.
	StateWaiting State = "waiting"
	// StateAdmitted: the user holds a live entry token.
	StateAdmitted State = "admitted"
	// StateScheduled: the user came before the room's opening and waits
	// for it; its place is drawn (or, fifo, kept) at the opening.
	StateScheduled State = "scheduled"
	// StateSoldOut: the user is queued in a room whose stock is all sold;
	// a restock puts it back in its place.
	StateSoldOut State = "sold_out"
)

// Status is a user's standing in a room.
type Status struct {
	State State
	// Position is 1-based; set when waiting, and when scheduled in a
	// fifo room (a random room's places are not drawn yet). In a room
	// spread over shards (RoomConfig.Shards) it is the user's ticket less
	// the head's and the tickets known gone between: exact but for users
	// ahead on other sub-shards who left a moment ago.
	Position int64
	// OpensIn is how long until the opening, by the store's clock; set
	// when scheduled (0 once the opening is being drawn).
	OpensIn time.Duration
	// UnitsLeft is set, with FewLeft, when the room tracks stock and the
	// units neither sold nor reserved are fewer than the orders up to this
	// user take (Position × UnitsPerOrder): not enough for everyone up to
	// it, unless some reservations come back.
	UnitsLeft int64
	FewLeft   bool
	// Token and ExpiresIn are set when admitted.
	Token     string
	ExpiresIn time.Duration
}

// Units says where a room's stock stands for a user at position (0: not
// waiting), given sold units and live tokens, each reserving
// UnitsPerOrder: sold out (fewer units unsold than one order takes; a
// restock may bring it back), or how many units are neither sold nor
// reserved when they are fewer than the orders up to position take. A
// room without stock is never sold out and never short.
func (c RoomConfig) Units(position, sold, live int64) (soldOut bool, left int64, few bool) {
	if c.Stock <= 0 {
		return false, 0, false
	}
	stock, per := int64(c.Stock), int64(max(c.UnitsPerOrder, 1))
	if stock-sold < per {
		return true, 0, false
	}
	left = max(0, stock-sold-live*per)
	return false, left, left < position*per
}

// TokensLeft is how many more tokens the stock lets live at once, given
// sold units and live tokens: one per whole order's units neither sold
// nor reserved. A room without stock has no such bound (-1).
func (c RoomConfig) TokensLeft(sold, live int64) int64 {
	if c.Stock <= 0 {
		return -1
	}
	per := int64(max(c.UnitsPerOrder, 1))
	return max(0, int64(c.Stock)-sold-live*per) / per
}

// Ahead is how many users wait in front of a waiting user.
func (s Status) Ahead() int64 {
	if s.Position < 1 {
		return 0
	}
	return s.Position - 1
}

// Admission is one user turned into a token holder by Admit.
type Admission struct {
	User  string
	Token string
	// Notice is what the user asked to be told by, when it did
	// (NoticeStore.SetNotice): the store forgets it with this admission.
	Notice []byte
}

// Hold is a claimed entry token: the gate holds it while the protected
// request runs, then completes or releases it. Lease identifies this claim,
// so that a claim whose lease ran out cannot release someone else's.
type Hold struct {
	Room  string
	User  string
	Token string
	Lease string
	// LeaseFor is how long the claim (or a Renew) holds the token: the
	// room's lease. A holder that needs longer renews before it runs out.
	LeaseFor time.Duration
	// OneOrderPerUser is the room's setting at the claim: the gate then
	// keys the order by the buyer, not the token (BuyerKey).
	OneOrderPerUser bool
	// Units is what the token reserves, the room's UnitsPerOrder at the
	// claim: the most this order may buy, which the gate tells the order
	// API (UnitsHeader), and what Complete sells. Zero counts as one.
	Units int
}

// SettleWindow is how long after its lease ran out a hold is still
// unsettled rather than abandoned: its token keeps its unit reserved, is
// not cleaned up as expired and cannot be claimed by another request, so
// a gate whose Complete met a store outage can still land it. The gate
// retries a settle for at most this long after the lease it last got
// (Gate); past it the hold is abandoned and its token lapses as any other.
const SettleWindow = 15 * time.Second

// Stats are a room's figures.
type Stats struct {
	Waiting   int64 // users in the queue now
	Active    int64 // live entry tokens now
	Entered   int64 // enters that took a new place
	Full      int64 // enters refused with QUEUE_FULL
	Admitted  int64 // tokens issued
	Completed int64 // tokens spent by a successful order
	Sold      int64 // units sold: each completed order's Hold.Units
	Released  int64 // tokens given back by a failed order
	Expired   int64 // confirmed tokens that ran out unused
	// NoShows are tokens that expired at the first-use deadline, neither
	// confirmed nor claimed (not counted in Expired).
	NoShows int64
	// Abandoned are waiting users the admitter skipped (or a later call of
	// theirs found) silent for longer than AbandonAfter.
	Abandoned int64
	// Pace is how admissions have really gone lately: the ETA's input.
	Pace Pace
}

// Store keeps rooms, queues and tokens. Every method is one atomic step in
// the store (in Redis one Lua script), safe for concurrent use by many
// goroutines and, for shared stores, by many processes. Time decisions use
// the store's clock.
type Store interface {
	// CreateRoom stores cfg (with defaults applied) unless the room exists;
	// it reports whether it created it.
	CreateRoom(ctx context.Context, room string, cfg RoomConfig) (created bool, err error)
	// UpdateRoom replaces the live settings of an existing room with to,
	// if they are still from (compare and set): ErrRoomChanged when
	// another writer changed them since from was read, so two operators,
	// or an operator and the rate tuner, never silently undo each other.
	// ErrRoomNotFound when the room does not exist. ErrDrawPublished when
	// to changes the prequeue order of a room whose draw commitment is
	// published (scheduled), ErrQueueNotEmpty when it sets an opening time
	// while users are queued. ChangeRoom wraps the read, change and retry.
	UpdateRoom(ctx context.Context, room string, from, to RoomConfig) error
	// RoomConfig returns a room's live settings.
	RoomConfig(ctx context.Context, room string) (RoomConfig, error)
	// Rooms lists the names of all rooms.
	Rooms(ctx context.Context) ([]string, error)
	// RoomVersions returns, for each of rooms, the version of its
	// settings: a value that changes at every CreateRoom that creates it
	// and every UpdateRoom, and "" for a room that does not exist (or was
	// made by a version of waitroom that kept none: CreateRoom gives it
	// one). One round trip for all rooms, a few commands in all: the room
	// keeper asks it every second, and reads a room's settings only when
	// its version changed, or re-creates it when it is gone.
	RoomVersions(ctx context.Context, rooms []string) ([]string, error)

	// Enter queues user, or returns the standing it already has: its own
	// live token, or its place. ErrRoomClosed, ErrSoldOut, ErrQueueFull,
	// ErrAlreadyOrdered (nothing written), ErrRoomNotFound; ErrInviteOnly
	// for a user without a place in an InviteOnly room.
	Enter(ctx context.Context, room, user string) (Status, error)
	// Status returns the user's standing, ErrNotInQueue, or
	// ErrRoomNotFound.
	Status(ctx context.Context, room, user string) (Status, error)
	// Leave removes user from the queue; leaving when not queued is no error.
	Leave(ctx context.Context, room, user string) error

	// Admit turns the head of the queue into token holders, as many as the
	// room's token bucket allows since the last admission by any instance,
	// at most RoomConfig.TickQuota, and within MaxActive. It returns them
	// in arrival order.
	Admit(ctx context.Context, room string) ([]Admission, error)

	// Claim holds user's token for the room's lease. Exactly one of
	// concurrent claims succeeds; the others get ErrTokenInUse. Missing or
	// expired: ErrTokenNotFound; another value: ErrTokenInvalid.
	Claim(ctx context.Context, room, user, token string) (Hold, error)
	// Complete spends the token: the order succeeded. With
	// OneOrderPerUser the user is remembered as a buyer: Enter and Status
	// answer ErrAlreadyOrdered from then on, and Admit skips the user.
	Complete(ctx context.Context, h Hold) error
	// Release makes the token usable again with the TTL it had left. A
	// hold whose lease was lost is not released (no error).
	Release(ctx context.Context, h Hold) error
	// Renew extends h's lease to the room's lease from now, so an order
	// that runs longer than one lease keeps its token held; the lease
	// then frees only tokens whose holder died. ErrTokenNotFound when h
	// no longer holds the token (spent, gone, or claimed again after its
	// lease ran out).
	Renew(ctx context.Context, h Hold) error

	// Work tells, for each of rooms, what it holds for the admitter:
	// WorkQueue when users wait, WorkTokens when only entry tokens are
	// held (live, or past their time and not yet cleaned up by Admit),
	// WorkNone otherwise, also for a room that does not exist. It is one
	// round trip for all rooms and cheap per room: the admitter asks it
	// instead of ticking rooms whose ticks admit nobody.
	Work(ctx context.Context, rooms []string) ([]Work, error)
	// Admitters records that the admitter id is alive for ttl by the
	// store's clock, and returns the ids of all admitters alive now, id
	// among them, sorted. Admitters split the rooms among themselves by
	// this list (Owner), so that several instances do not multiply a
	// room's ticks, and take over a silent one's rooms once its ttl ran
	// out. The bucket stays in the store, so a handover keeps the rate.
	Admitters(ctx context.Context, id string, ttl time.Duration) ([]string, error)
	// Wakes delivers the name of each room a user entered while nobody
	// waited in it, until ctx ends; then the channel is closed. It lets
	// the admitter leave an empty room alone instead of probing it every
	// slice. Best effort: a wake is lost while the store is unreachable or
	// when the reader falls behind, so the admitter still probes empty
	// rooms about once a second.
	Wakes(ctx context.Context) <-chan string

	// CreatePass stores a new pass to room (ErrRoomNotFound; at most
	// MaxPasses per room, else ErrTooManyPasses).
	CreatePass(ctx context.Context, room string, p Pass) error
	// RevokePass ends a pass at once; ErrPassInvalid when the room has no
	// such pass.
	RevokePass(ctx context.Context, room, id string) error
	// Passes lists a room's passes, oldest first.
	Passes(ctx context.Context, room string) ([]Pass, error)
	// EnterWithPass lets user in with pass id, in one atomic step: a user
	// who holds a live token gets it back and the pass is not used;
	// otherwise a pass that is unknown, revoked or expired (by the store's
	// clock) is ErrPassInvalid, one with no use left ErrPassUsedUp; a
	// closed room ErrRoomClosed, a sold-out one ErrSoldOut, and one whose
	// live tokens are at MaxActive or at the unsold stock ErrNoFreeSlot
	// (the pass is kept); a user whose expired token an order still holds
	// within the settle window ErrTokenInUse (the pass is kept: the
	// order may yet sell that token's unit). Else one use is taken, the
	// user leaves the queue if queued, and gets a fresh entry token
	// (counted as admitted) at once, in open, paused and invite-only rooms
	// alike.
	EnterWithPass(ctx context.Context, room, user, id string) (Status, error)
	// Draw returns a scheduled room's draw record: before the opening the
	// commitment to its seed, after it the seed. ErrNoDraw for a room
	// without an opening time. Admit makes the draw, once, at the opening.
	// The commitment is the one stored when the room was scheduled: a seed
	// that no longer matches it is ErrDrawSeedMismatch, from Draw, Entrants
	// and Admit's draw alike.
	Draw(ctx context.Context, room string) (Draw, error)
	// Entrants returns the early arrivals with the places the draw gave
	// them, in place order; ErrDrawPending before the draw.
	Entrants(ctx context.Context, room string) ([]Entrant, error)

	// Stats returns a room's figures.
	Stats(ctx context.Context, room string) (Stats, error)
	// Ping reports whether the store is reachable.
	Ping(ctx context.Context) error
}

// Work is what a room holds for its admitter (Store.Work).
type Work int

const (
	// WorkNone: nobody waits and no token is held; a tick would do
	// nothing.
	WorkNone Work = iota
	// WorkTokens: nobody waits, but entry tokens are held; Admit cleans
	// them up once they are past their time.
	WorkTokens
	// WorkQueue: users wait.
	WorkQueue
)

// WakesBuffer is how many wakes a reader of Store.Wakes may fall behind
// before the next ones are lost (Wakes is best effort).
const WakesBuffer = 1024

// Bounds of Store.Admitters' arguments.
const (
	MaxAdmitterIDLen  = 128
	MinAdmitterTTL    = time.Millisecond
	MaxAdmitterTTL    = time.Minute
	MaxWorkRoomsBatch = 10_000
)

// CheckAdmitter validates Store.Admitters' arguments: id is 1–128
// printable ASCII characters without spaces, ttl within
// [MinAdmitterTTL, MaxAdmitterTTL].
func CheckAdmitter(id string, ttl time.Duration) error {
	if !ValidUserID(id) {
		return BadRequest("admitter ids are 1–128 printable ASCII characters without spaces")
	}
	if ttl < MinAdmitterTTL || ttl > MaxAdmitterTTL {
		return BadRequest(fmt.Sprintf("admitter ttl must be in [%s, %s], got %s", MinAdmitterTTL, MaxAdmitterTTL, ttl))
	}
	return nil
}

// CheckWorkRooms validates Store.Work's and Store.RoomVersions' argument: at most
// MaxWorkRoomsBatch valid room names.
func CheckWorkRooms(rooms []string) error { return checkRoomBatch(rooms, MaxWorkRoomsBatch) }

// checkRoomBatch validates a batch of at most limit valid room names.
func checkRoomBatch(rooms []string, limit int) error {
	if len(rooms) > limit {
		return BadRequest(fmt.Sprintf("at most %d rooms per call, got %d", limit, len(rooms)))
	}
	for _, room := range rooms {
		if !ValidRoomName(room) {
			return BadRequest(fmt.Sprintf("bad room name %q", room))
		}
	}
	return nil
}

// Owner returns which of the live admitters ticks room: rendezvous
// hashing, so that every instance with the same list agrees, and an
// admitter joining or leaving moves only the rooms it takes or had.
// "" when admitters is empty.
func Owner(room string, admitters []string) string {
	var owner string
	var best uint64
	for _, id := range admitters {
		h := fnv.New64a()
		h.Write([]byte(id))
		h.Write([]byte{0})
		h.Write([]byte(room))
		// FNV's low bits mix poorly for similar inputs; a final avalanche
		// spreads rooms evenly over admitters.
		if v := mix64(h.Sum64()); owner == "" || v > best {
			owner, best = id, v
		}
	}
	return owner
}

// mix64 is the finalizer of SplitMix64.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// MaxSkipsPerAdmit bounds how many abandoned users one Admit call skips at
// the head, so that one call stays short after a crowd has left; the next
// call goes on where it stopped.
const MaxSkipsPerAdmit = 2000

// NewToken returns a fresh entry token: 128 bits from crypto/rand,
// base64url without padding (22 characters).
func NewToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// ValidToken reports whether s has the shape NewToken gives.
func ValidToken(s string) bool {
	if len(s) != 22 {
		return false
	}
	// The decoder skips CR and LF, so it alone would pass fewer than 128
	// bits; every character must be of the alphabet.
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	_, err := base64.RawURLEncoding.Strict().DecodeString(s)
	return err == nil
}

// RoomNameRule says which names ValidRoomName accepts, for messages.
const RoomNameRule = "1–64 characters of a–z, 0–9, '-' and '_', starting with a letter or digit"

// ValidRoomName reports whether name is 1–64 characters of a–z, 0–9, '-'
// and '_', starting with a letter or digit.
func ValidRoomName(name string) bool {
	if len(name) < 1 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '-' || c == '_') && i > 0:
		default:
			return false
		}
	}
	return true
}

// MaxUserIDLen bounds user ids; they become part of store keys.
const MaxUserIDLen = 128

// ValidUserID reports whether id is 1–128 printable ASCII characters
// without spaces.
func ValidUserID(id string) bool {
	if len(id) < 1 || len(id) > MaxUserIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// CheckUserID is ValidUserID as the error a store answers a bad id with.
func CheckUserID(id string) error {
	if !ValidUserID(id) {
		return BadRequest("user ids are 1–128 printable ASCII characters without spaces")
	}
	return nil
}

// LastPlaceWait is how long the last of waiting users waits at the room's
// rate; none while the room is paused, when nobody is admitted.
func LastPlaceWait(cfg RoomConfig, waiting int64) (time.Duration, bool) {
	if cfg.State == RoomPaused {
		return 0, false
	}
	return ETA(waiting, cfg.Rate), true
}

// ETA estimates how long a user at position waits at rate users/s.
func ETA(position int64, rate float64) time.Duration {
	if position < 1 || rate <= 0 {
		return 0
	}
	// Saturate: at the far end of the queue and the slowest rate the wait
	// is beyond a Duration, and an overflow would read as "now".
	d := float64(position) / rate * float64(time.Second)
	if d >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(d)
}

// Poll hints. Near the front users ask every second; further back the
// answer barely changes, so they ask less often: at most every NearPoll
// within NearPoll × FarPolls places of the front (300,000), and beyond that
// every position ÷ FarPolls seconds, at most MaxPoll. A queue's users
// between position p and 2p then ask about FarPolls × ln 2 times a second
// in all, whatever p up to MaxPoll × FarPolls (3,000,000): each doubling
// of a long queue adds ~3,500 polls/s rather than doubling them; past that
// each user asks every MaxPoll. 10,000,000 waiting at 140/s ask ~31,000
// polls/s (at 1,000/s ~45,000, most of them from the front), where a
// NearPoll ceiling for everyone would ask ~170,000/s, more than one Redis
// shard answers (OPERATIONS.md, "The biggest single room").
const (
	MinPoll  = time.Second
	NearPoll = 60 * time.Second
	MaxPoll  = 10 * time.Minute
	FarPolls = 5_000 // far back, the ceiling grows one second per FarPolls places
)

// PollAfter is how long a user at position should wait before asking for its
// status again: a quarter of its expected wait, at least MinPoll and at most
// the ceiling of its distance from the front (NearPoll, or position ÷
// FarPolls seconds far back, at most MaxPoll), spread ±10% by position so
// that a crowd that entered together does not poll in lockstep. At 100,000
// waiting and 140 users/s this asks for about 4,000 polls/s in total
// (PollLoad).
func PollAfter(position int64, rate float64) time.Duration {
	d := ETA(position, rate) / 4
	d = min(max(d, MinPoll), pollCeiling(position))
	// Golden-ratio spread: neighbours get different offsets.
	frac := math.Mod(float64(position)*0.6180339887, 1)
	return time.Duration(float64(d) * (0.9 + 0.2*frac)).Round(time.Millisecond)
}

// pollCeiling is the longest hint at position: NearPoll near the front,
// position ÷ FarPolls seconds far back, never more than MaxPoll.
func pollCeiling(position int64) time.Duration {
	return spanForPolls(position, FarPolls, NearPoll)
}

// spanForPolls is how long n users take to ask once each when they may ask
// perSecond times a second in all, at least floor and at most MaxPoll.
func spanForPolls(n, perSecond int64, floor time.Duration) time.Duration {
	step := time.Second / time.Duration(perSecond)
	if n >= int64(MaxPoll/step) {
		return MaxPoll
	}
	return max(floor, time.Duration(n)*step)
}

// OpeningPollAfter is how long an early arrival, one of early, should
// wait before asking again, opensIn before the opening: half the time left
// while that is long (at most the ceiling of a queue of early, as
// PollAfter's far back), and near the opening a moment after it, spread
// over the FirstPollsSpread(early) after it by spread (in [0, 1), e.g. a
// hash of the user), so that a crowd waiting for the same second does not
// poll in it.
func OpeningPollAfter(opensIn time.Duration, spread float64, early int64) time.Duration {
	span := FirstPollsSpread(early)
	if opensIn > 2*span {
		return min(opensIn/2, pollCeiling(early)).Round(time.Millisecond)
	}
	return (opensIn + MinPoll + time.Duration(spread*float64(span-MinPoll))).Round(time.Millisecond)
}

// OpeningSpread is the least span after an opening over which the early
// arrivals' first polls are spread: 100,000 of them ask about 11,000 times
// a second, not 100,000 times in the first.
const OpeningSpread = 10 * time.Second

// OpeningPolls bounds the early arrivals' first polls after an opening:
// beyond OpeningSpread × OpeningPolls of them (300,000) their spread grows
// with their number, so that they ask at most OpeningPolls times a second.
const OpeningPolls = 30_000

// FirstPollsSpread is the span after an opening over which its early
// arrivals, early of them, make their first polls: OpeningSpread, longer
// for more than OpeningSpread × OpeningPolls of them, at most MaxPoll. A
// token issued within it counts its first-use time and its TTL from the
// span's end (TokenStart), since its holder may learn of it only then.
func FirstPollsSpread(early int64) time.Duration {
	return spanForPolls(early, OpeningPolls, OpeningSpread)
}

// TokenStart is when a token issued at now starts its clock, its
// first-use deadline and its TTL: now, or, in a room with an opening at
// opensAt and early arrivals, the end of their first polls' spread when
// now is within it.
func TokenStart(now, opensAt time.Time, early int64) time.Time {
	if opensAt.IsZero() || now.Before(opensAt) {
		return now
	}
	if end := opensAt.Add(FirstPollsSpread(early)); now.Before(end) {
		return end
	}
	return now
}

// PollLoad is the status requests per second that waiting users 1..waiting
// generate when each follows PollAfter.
func PollLoad(waiting int64, rate float64) float64 {
	var load float64
	for p := int64(1); p <= waiting; p++ {
		load += float64(time.Second) / float64(PollAfter(p, rate))
	}
	return load
}
