package waitroom

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// RoomState says what a room lets happen.
type RoomState string

const (
	// RoomOpen accepts entries and admits users.
	RoomOpen RoomState = "open"
	// RoomPaused accepts entries but admits nobody.
	RoomPaused RoomState = "paused"
	// RoomClosed refuses new entries with ErrRoomClosed; users already
	// queued are still admitted and issued tokens stay valid.
	RoomClosed RoomState = "closed"
)

// Defaults of the fields of RoomConfig left zero.
const (
	DefaultRate     = 140.0 // 40 connections / 0.2 s × 0.7
	DefaultSlice    = 100 * time.Millisecond
	DefaultMaxQueue = 100_000
	DefaultTokenTTL = 300 * time.Second
	DefaultLease    = 30 * time.Second
	// DefaultAbandonAfter: a waiting user silent this long has left.
	DefaultAbandonAfter = 5 * time.Minute
	// DefaultFirstUseWithin: an admitted user who neither confirms nor
	// claims its token this soon is a no-show (capped at the token TTL).
	DefaultFirstUseWithin = 60 * time.Second
	// DefaultNotifiedFirstUseWithin: a buyer who asked to be told has this
	// long from the notice to come back (capped at the token TTL).
	DefaultNotifiedFirstUseWithin = 5 * time.Minute
	// DefaultUnitsPerOrder: a token buys one unit.
	DefaultUnitsPerOrder = 1
	// DefaultShards: a room lives on one shard (one hash tag).
	DefaultShards = 1
)

// Bounds on RoomConfig that keep one admission tick small enough for one
// store round trip.
const (
	MaxRate = 100_000.0
	// MinRate is one user an hour: below it an ETA is no longer a wait
	// anyone could sit out.
	MinRate      = 1.0 / 3600
	MaxTickQuota = 1_000 // one admission script holds Redis ~10 µs per user
	MinSlice     = 10 * time.Millisecond
	MaxSlice     = 10 * time.Second
	MaxMaxQueue  = 100_000_000
	// MaxMaxActive bounds the cap on live tokens like the queue: every
	// count must survive the store's numbers (Lua's doubles, exact to 2^53)
	// both ways, or the stored room cannot be read back.
	MaxMaxActive = 100_000_000
	MaxTokenTTL  = 24 * time.Hour
	MinTokenTTL  = time.Second
	MinLease     = 100 * time.Millisecond
	MaxLease     = 10 * time.Minute
	MaxStock     = 1_000_000_000
	// A waiting user's last call is kept to the second, and to tell its age
	// apart from a much older one it must be under about 12 days (see
	// redisstore); a day is far more than any sale waits.
	MinAbandonAfter   = time.Second
	MaxAbandonAfter   = 24 * time.Hour
	MinFirstUseWithin = time.Second
	// MaxUnitsPerOrder bounds what one token reserves: a basket, not a
	// wholesale lot; the order API's own limit may be lower.
	MaxUnitsPerOrder = 1_000
)

// RoomConfig holds the live settings of one room. It is kept in the store so
// that every instance admits by the same numbers. The zero value of each
// field means its default.
type RoomConfig struct {
	// Rate is how many users per second the admitter lets through.
	Rate float64
	// Slice is the admission tick; at most ceil(Rate×Slice) users are
	// admitted per tick, so no burst hits the protected API.
	Slice time.Duration
	// MaxQueue bounds the queue; entries beyond it get ErrQueueFull.
	MaxQueue int
	// TokenTTL is how long an entry token lives once issued.
	TokenTTL time.Duration
	// Lease is how long a claimed token stays held before it becomes
	// usable again by itself (the holder died).
	Lease time.Duration
	// MaxActive caps live entry tokens; 0 means no cap.
	MaxActive int
	// AbandonAfter is how long a waiting user may stay silent (no enter,
	// no status) before it counts as gone: the admitter skips it at the
	// head, counts it abandoned and drops it; it takes no share of the rate.
	AbandonAfter time.Duration
	// FirstUseWithin is how soon after admission a token must be confirmed
	// (a status call after the one that told the user) or claimed; one that
	// is not expires then, as a no-show, and gives its slot back. At most
	// TokenTTL.
	FirstUseWithin time.Duration
	// NotifiedFirstUseWithin replaces FirstUseWithin for a buyer who asked
	// to be told (NoticeStore): its deadline starts when the notice is
	// sent, since the buyer was not watching. At most TokenTTL.
	NotifiedFirstUseWithin time.Duration
	// State is open, paused or closed; empty means open.
	State RoomState
	// Stock is how many units the room sells in all, sold ones included;
	// 0 means the room does not track stock. A live entry token reserves
	// UnitsPerOrder units, a completed order sells them, and the admitter
	// never lets live tokens × UnitsPerOrder + sold units exceed Stock: a
	// token is issued only while a whole order's units are left, so with
	// a stock that is no multiple of UnitsPerOrder the rest is never
	// reserved (and the room is sold out once fewer than UnitsPerOrder
	// are unsold). Raising it is a restock.
	Stock int
	// UnitsPerOrder is how many units one entry token reserves and one
	// completed order sells: the most one order may buy. The gate tells
	// the order API (header Waitroom-Units), which refuses an order for
	// more (the built-in shop: 422 QUANTITY_OVER_LIMIT). At most Stock
	// when stock is tracked.
	UnitsPerOrder int
	// OneOrderPerUser: once a user's order completed in the room, entering
	// again is ErrAlreadyOrdered, and the gate's Idempotency-Key names the
	// buyer in the room rather than the token, so the order API refuses a
	// second order even when the store forgot the first (a failover).
	// The store remembers buyers only while it is on.
	OneOrderPerUser bool
	// InviteOnly: only pass holders get in (Store.EnterWithPass); an
	// enter without a pass is ErrInviteOnly.
	InviteOnly bool
	// OpensAt schedules the opening (by the store's clock); zero: open at
	// once. Users who come before it are told "scheduled" and get places
	// 1..N at the opening, by PrequeueOrder; later arrivals queue behind
	// them. A room opens once: after its draw, OpensAt is history.
	OpensAt time.Time
	// PrequeueOrder places the early arrivals: random (a draw with a
	// committed seed; also when empty) or fifo.
	PrequeueOrder PrequeueOrder
	// ClosesAt, when set, refuses new entries from then on with
	// ErrRoomClosed; those queued are still admitted.
	ClosesAt time.Time
	// ShopURL is where the waiting page sends an admitted buyer on to,
	// and back to after the order: an absolute http or https URL; empty:
	// the page names no shop.
	ShopURL string
	// ShopName and ProductName tell the waiting page's buyers who is
	// selling and what (at most MaxNameBytes of one line of text each);
	// empty: the page says neither.
	ShopName    string
	ProductName string
	// Page is the version of the room's own waiting page (PageStore),
	// written only by PageStore.SetPage with the archive it names; empty:
	// the instance's page (--page-dir or the built-in one).
	Page string
	// Shards spreads the room's queue and tokens over this many Redis
	// Cluster shards, 1 to MaxShards (spread.go); 1: one hash tag, one
	// shard. Only a Redis Cluster store takes more than 1
	// (ShardsRefusal).
	Shards int
}

// Stored returns c as a store keeps it: with its defaults, and only if
// they are valid (Validate's error otherwise).
func (c RoomConfig) Stored() (RoomConfig, error) {
	c = c.WithDefaults()
	return c, c.Validate()
}

// WithDefaults returns c with every zero field set to its default.
func (c RoomConfig) WithDefaults() RoomConfig {
	c.Rate = cmp.Or(c.Rate, DefaultRate)
	c.Slice = cmp.Or(c.Slice, DefaultSlice)
	c.MaxQueue = cmp.Or(c.MaxQueue, DefaultMaxQueue)
	c.TokenTTL = cmp.Or(c.TokenTTL, DefaultTokenTTL)
	c.Lease = cmp.Or(c.Lease, DefaultLease)
	c.State = cmp.Or(c.State, RoomOpen)
	c.UnitsPerOrder = cmp.Or(c.UnitsPerOrder, DefaultUnitsPerOrder)
	c.Shards = cmp.Or(c.Shards, DefaultShards)
	c.AbandonAfter = cmp.Or(c.AbandonAfter, DefaultAbandonAfter)
	c.FirstUseWithin = cmp.Or(c.FirstUseWithin, min(DefaultFirstUseWithin, c.TokenTTL))
	c.NotifiedFirstUseWithin = cmp.Or(c.NotifiedFirstUseWithin, min(DefaultNotifiedFirstUseWithin, c.TokenTTL))
	// Times as the store keeps them: UTC milliseconds.
	c.OpensAt = storeTime(c.OpensAt)
	c.ClosesAt = storeTime(c.ClosesAt)
	return c
}

// Validate reports every setting out of range, each a *SettingError
// naming the setting as the admin API does (rate, max_queue, …), joined in
// a fixed order; errors.Is(err, ErrBadRequest) holds, and the client sees
// the first. Call it on the result of WithDefaults: a zero here is a value
// (rate 0 is refused, not taken for the default). It is the one place the
// settings' rules are written; the admin API and the flags use it.
func (c RoomConfig) Validate() error {
	var errs []error
	bad := func(format string, args ...any) string { return fmt.Sprintf(format, args...) }
	check := func(ok bool, field, reason string) {
		if !ok {
			errs = append(errs, &SettingError{Fields: []string{field}, Reason: reason})
		}
	}
	check(!math.IsNaN(c.Rate) && c.Rate >= MinRate && c.Rate <= MaxRate, "rate",
		bad("must be in [%g, %g] users/s, got %g", MinRate, MaxRate, c.Rate))
	check(c.Slice >= MinSlice && c.Slice <= MaxSlice, "slice",
		bad("must be in [%s, %s], got %s", MinSlice, MaxSlice, c.Slice))
	if len(errs) == 0 && c.TickQuota() > MaxTickQuota {
		errs = append(errs, &SettingError{Fields: []string{"rate", "slice"},
			Reason: bad("must admit at most %d users per slice, got %d", MaxTickQuota, c.TickQuota())})
	}
	check(c.MaxQueue >= 1 && c.MaxQueue <= MaxMaxQueue, "max_queue",
		bad("must be in [1, %d], got %d", MaxMaxQueue, c.MaxQueue))
	check(c.TokenTTL >= MinTokenTTL && c.TokenTTL <= MaxTokenTTL, "token_ttl",
		bad("must be in [%s, %s], got %s", MinTokenTTL, MaxTokenTTL, c.TokenTTL))
	check(c.Lease >= MinLease && c.Lease <= MaxLease, "lease",
		bad("must be in [%s, %s], got %s", MinLease, MaxLease, c.Lease))
	check(c.MaxActive >= 0 && c.MaxActive <= MaxMaxActive, "max_active",
		bad("must be in [0, %d] (0: no cap), got %d", MaxMaxActive, c.MaxActive))
	check(c.Stock >= 0 && c.Stock <= MaxStock, "stock",
		bad("must be in [0, %d] units (0: not tracked), got %d", MaxStock, c.Stock))
	if c.UnitsPerOrder < 1 || c.UnitsPerOrder > MaxUnitsPerOrder {
		check(false, "units_per_order", bad("must be in [1, %d] units, got %d", MaxUnitsPerOrder, c.UnitsPerOrder))
	} else {
		// A token that reserves more than the whole stock could never be
		// issued: a typo, not a sale.
		check(c.Stock <= 0 || c.UnitsPerOrder <= c.Stock, "units_per_order",
			bad("must be at most stock (%d units), got %d", c.Stock, c.UnitsPerOrder))
	}
	check(c.AbandonAfter >= MinAbandonAfter && c.AbandonAfter <= MaxAbandonAfter, "abandon_after",
		bad("must be in [%s, %s], got %s", MinAbandonAfter, MaxAbandonAfter, c.AbandonAfter))
	check(c.FirstUseWithin >= MinFirstUseWithin && c.FirstUseWithin <= c.TokenTTL, "first_use_within",
		bad("must be in [%s, token_ttl %s], got %s", MinFirstUseWithin, c.TokenTTL, c.FirstUseWithin))
	check(c.NotifiedFirstUseWithin >= MinFirstUseWithin && c.NotifiedFirstUseWithin <= c.TokenTTL, "notified_first_use_within",
		bad("must be in [%s, token_ttl %s], got %s", MinFirstUseWithin, c.TokenTTL, c.NotifiedFirstUseWithin))
	if !c.OpensAt.IsZero() && !c.ClosesAt.IsZero() && !c.ClosesAt.After(c.OpensAt) {
		errs = append(errs, &SettingError{Fields: []string{"closes_at"},
			Reason: bad("must be after opens_at (%s), got %s", c.OpensAt.Format(time.RFC3339), c.ClosesAt.Format(time.RFC3339))})
	}
	inYears := func(t time.Time) bool { return t.IsZero() || (t.Unix() >= 0 && t.Year() <= 9999) }
	check(inYears(c.OpensAt), "opens_at", "must be between 1970 and 9999")
	check(inYears(c.ClosesAt), "closes_at", "must be between 1970 and 9999")
	check(c.PrequeueOrder == "" || c.PrequeueOrder == PrequeueRandom || c.PrequeueOrder == PrequeueFIFO, "prequeue_order",
		bad("must be random or fifo, got %q", c.PrequeueOrder))
	check(c.State == RoomOpen || c.State == RoomPaused || c.State == RoomClosed, "state",
		bad("must be open, paused or closed, got %q", c.State))
	if err := CheckShopURL(c.ShopURL); err != nil {
		check(false, "shop_url", err.Error())
	}
	if err := CheckName(c.ShopName); err != nil {
		check(false, "shop_name", err.Error())
	}
	if err := CheckName(c.ProductName); err != nil {
		check(false, "product_name", err.Error())
	}
	if err := CheckPageVersion(c.Page); err != nil {
		check(false, "page", err.Error())
	}
	check(c.Shards >= 1 && c.Shards <= MaxShards, "shards",
		bad("must be in [1, %d], got %d", MaxShards, c.Shards))
	return errors.Join(errs...)
}

// MaxNameBytes bounds RoomConfig.ShopName and ProductName: a name on one
// line of the page, not a description.
const MaxNameBytes = 200

// CheckName reports why s cannot be a shop's or a product's name on the
// waiting page: it must be UTF-8 text of at most MaxNameBytes, without
// control characters (a line break, an escape or a bidirectional
// embedding, override or isolate would reach every buyer's page and the
// logs) and without space at its ends (which no one sees and a second copy
// of the name would differ by). The bidirectional marks (LRM, RLM, ALM)
// are allowed: they reorder nothing around the name, and an Arabic or
// Hebrew name with digits or Latin words may need them. Empty is none.
func CheckName(s string) error {
	if s == "" {
		return nil
	}
	if len(s) > MaxNameBytes {
		return fmt.Errorf("must be at most %d bytes, got %d", MaxNameBytes, len(s))
	}
	if !utf8.ValidString(s) {
		return errors.New("must be UTF-8 text")
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.In(r, unicode.Zl, unicode.Zp) || unicode.Is(unicode.Bidi_Control, r) && !bidiMark(r) {
			return fmt.Errorf("must be one line without control characters, got %q", s)
		}
	}
	if strings.TrimSpace(s) != s {
		return fmt.Errorf("must not begin or end with space, got %q", s)
	}
	return nil
}

// bidiMark reports whether r is one of the bidirectional marks, which
// only set the direction of the characters next to them.
func bidiMark(r rune) bool { return r == '\u200e' || r == '\u200f' || r == '\u061c' }

// MaxShopURL bounds RoomConfig.ShopURL: a link, not a document.
const MaxShopURL = 2048

// CheckShopURL reports why u cannot be the shop's link on the waiting
// page: only an absolute http or https URL with a host is one (no
// javascript:, data: or relative link a page would follow), in printable
// ASCII without spaces (so it needs no escaping to be read back as
// given) and with no credentials in it (the page shows it to everyone).
// Empty is no shop.
func CheckShopURL(u string) error {
	if u == "" {
		return nil
	}
	if len(u) > MaxShopURL {
		return fmt.Errorf("must be at most %d bytes, got %d", MaxShopURL, len(u))
	}
	for i := 0; i < len(u); i++ {
		if u[i] <= ' ' || u[i] >= 0x7f {
			return errors.New("must be printable ASCII without spaces (percent-encode the rest)")
		}
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return errors.New("is not a URL")
	}
	// Named without any password it carries, as every error is.
	shown := parsed.Redacted()
	switch {
	case parsed.Scheme != "http" && parsed.Scheme != "https":
		return fmt.Errorf("must be an absolute http or https URL (such as https://shop.example/), got %q", shown)
	case parsed.Host == "" || parsed.Hostname() == "" || parsed.Opaque != "":
		return fmt.Errorf("must name a host (such as https://shop.example/), got %q", shown)
	case parsed.User != nil:
		return fmt.Errorf("must not carry a user or password, got %q", shown)
	}
	return nil
}

// SettingError is a room setting out of range. Fields names it as the admin
// API does (rate, slice, max_queue, …), or the settings a rule ties
// together (rate × slice); cmd names the flags instead. The client sees
// "field: reason"; errors.Is(err, ErrBadRequest) holds.
type SettingError struct {
	Fields []string
	Reason string
}

func (e *SettingError) message() string { return strings.Join(e.Fields, " × ") + ": " + e.Reason }

func (e *SettingError) Error() string        { return "BAD_REQUEST: " + e.message() }
func (e *SettingError) Is(target error) bool { return target == ErrBadRequest }
func (e *SettingError) As(target any) bool {
	if p, ok := target.(**Error); ok {
		*p = &Error{ErrBadRequest.Code, e.message(), ErrBadRequest.Status}
		return true
	}
	return false
}

// PollAfter is PollAfter(position, rate), never more than a third of
// AbandonAfter: a page that follows the hint, even in a background tab that
// the browser throttles, is never taken for gone.
func (c RoomConfig) PollAfter(position int64, rate float64) time.Duration {
	return min(PollAfter(position, rate), c.AbandonAfter/3)
}

// storeTime is t in UTC, to the millisecond; zero stays zero.
func storeTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}

// Order is the room's prequeue order, random when unset.
func (c RoomConfig) Order() PrequeueOrder {
	if c.PrequeueOrder == "" {
		return PrequeueRandom
	}
	return c.PrequeueOrder
}

// TickQuota is the most users one admission tick may let through: one
// slice's share of the rate, rounded up.
func (c RoomConfig) TickQuota() int {
	return int(math.Ceil(c.Rate * c.Slice.Seconds()))
}

// RateFromCapacity derives the admission rate from what the protected API
// can serve: pool connections, each busy for serviceTime per order, with a
// safety margin in (0, 1]. 40 connections, 200 ms, 0.7 → 140 users/s.
func RateFromCapacity(pool int, serviceTime time.Duration, margin float64) (float64, error) {
	switch {
	case pool < 1:
		return 0, BadRequest(fmt.Sprintf("pool must be ≥ 1, got %d", pool))
	case serviceTime <= 0:
		return 0, BadRequest(fmt.Sprintf("service time must be > 0, got %s", serviceTime))
	case math.IsNaN(margin) || margin <= 0 || margin > 1:
		return 0, BadRequest(fmt.Sprintf("margin must be in (0, 1], got %g", margin))
	}
	return float64(pool) / serviceTime.Seconds() * margin, nil
}

// FieldChange is one setting in which two RoomConfigs differ.
type FieldChange struct {
	Field    string // as in the admin API: rate, slice, max_queue, …
	From, To any
}

// Changes lists the settings in which to differs from c, in a fixed order:
// for logs that say what an update or a restart with other flags changed.
func (c RoomConfig) Changes(to RoomConfig) []FieldChange {
	var out []FieldChange
	add := func(field string, from, to any) {
		if from != to {
			out = append(out, FieldChange{field, from, to})
		}
	}
	add("state", c.State, to.State)
	add("rate", c.Rate, to.Rate)
	add("slice", c.Slice, to.Slice)
	add("max_queue", c.MaxQueue, to.MaxQueue)
	add("token_ttl", c.TokenTTL, to.TokenTTL)
	add("lease", c.Lease, to.Lease)
	add("max_active", c.MaxActive, to.MaxActive)
	add("stock", c.Stock, to.Stock)
	add("units_per_order", c.UnitsPerOrder, to.UnitsPerOrder)
	add("one_order_per_user", c.OneOrderPerUser, to.OneOrderPerUser)
	add("abandon_after", c.AbandonAfter, to.AbandonAfter)
	add("first_use_within", c.FirstUseWithin, to.FirstUseWithin)
	add("notified_first_use_within", c.NotifiedFirstUseWithin, to.NotifiedFirstUseWithin)
	add("invite_only", c.InviteOnly, to.InviteOnly)
	add("opens_at", c.OpensAt, to.OpensAt)
	add("prequeue_order", c.PrequeueOrder, to.PrequeueOrder)
	add("closes_at", c.ClosesAt, to.ClosesAt)
	add("shop_url", c.ShopURL, to.ShopURL)
	add("shop_name", c.ShopName, to.ShopName)
	add("product_name", c.ProductName, to.ProductName)
	add("shards", c.Shards, to.Shards)
	// Page is not a setting the flags or PATCH give: SetPage logs its own.
	return out
}

// changeRoomTries bounds ChangeRoom's retries: settings change rarely, so
// losing several races in a row means something is writing in a loop.
const changeRoomTries = 5

// ChangeRoom reads room's live settings, applies change to them and writes
// the result only if nobody changed the room in between, reading and
// trying again when someone did. It returns the settings written (with
// defaults applied). change may refuse by returning an error, which
// ChangeRoom returns as is.
func ChangeRoom(ctx context.Context, s Store, room string, change func(*RoomConfig) error) (RoomConfig, error) {
	var err error
	for range changeRoomTries {
		var from RoomConfig
		if from, err = s.RoomConfig(ctx, room); err != nil {
			return RoomConfig{}, err
		}
		to := from
		if err := change(&to); err != nil {
			return RoomConfig{}, err
		}
		to = to.WithDefaults()
		if err = s.UpdateRoom(ctx, room, from, to); !errors.Is(err, ErrRoomChanged) {
			if err != nil {
				return RoomConfig{}, err
			}
			return to, nil
		}
	}
	return RoomConfig{}, err
}

// ClosedAt reports whether the room refuses entries at now: closed by its
// state, or past its closes_at.
func (c RoomConfig) ClosedAt(now time.Time) bool {
	return c.State == RoomClosed || (!c.ClosesAt.IsZero() && !now.Before(c.ClosesAt))
}
