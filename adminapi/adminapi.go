// Package adminapi holds the JSON of waitroom's operator API (/admin/…),
// the types the server's handlers write and the client (adminclient,
// 'waitroom admin') reads, so both sides decode one definition. The
// draw's public record is here too: GET /rooms/{room}/draw answers it and
// the operator's entrants carry it.
package adminapi

import (
	"time"

	"github.com/waitroom/waitroom"
)

// Room is the operator API's answer about a room: its settings, and on
// GET /admin/rooms/{room} its figures. 'waitroom admin' decodes it too.
type Room struct {
	Name      string             `json:"name"`
	State     waitroom.RoomState `json:"state"`
	Rate      float64            `json:"rate"`
	Slice     string             `json:"slice"`
	MaxQueue  int                `json:"max_queue"`
	TokenTTL  string             `json:"token_ttl"`
	Lease     string             `json:"lease"`
	MaxActive int                `json:"max_active"`
	// Stock is the units the room sells in all, sold ones included; 0:
	// not tracked. Raising it is a restock.
	Stock int `json:"stock"`
	// UnitsPerOrder is what one token reserves and one order may buy.
	UnitsPerOrder   int  `json:"units_per_order"`
	OneOrderPerUser bool `json:"one_order_per_user"`
	// InviteOnly: only pass holders get in.
	InviteOnly bool `json:"invite_only"`
	// AbandonAfter and FirstUseWithin as Go durations ("5m0s", "1m0s").
	AbandonAfter   string `json:"abandon_after"`
	FirstUseWithin string `json:"first_use_within"`
	// NotifiedFirstUseWithin: the same for a buyer who asked to be told.
	NotifiedFirstUseWithin string `json:"notified_first_use_within"`
	// OpensAt and ClosesAt are RFC 3339, "" when unset.
	OpensAt       string `json:"opens_at"`
	PrequeueOrder string `json:"prequeue_order"`
	ClosesAt      string `json:"closes_at"`
	ShopURL       string `json:"shop_url"`
	// ShopName and ProductName: who sells what, as the page says it.
	ShopName    string `json:"shop_name"`
	ProductName string `json:"product_name"`
	// Page is the version of the room's own page (PUT
	// /admin/rooms/{room}/page), "" when it shows the instance's.
	Page string `json:"page"`
	// Shards: the Redis Cluster shards the room is spread over (1: one).
	Shards  int      `json:"shards"`
	Figures *Figures `json:"figures,omitempty"`
}

// NewRoom is room name's answer from its settings, without figures.
func NewRoom(name string, cfg waitroom.RoomConfig) Room {
	return Room{
		Name:            name,
		State:           cfg.State,
		Rate:            cfg.Rate,
		Slice:           cfg.Slice.String(),
		MaxQueue:        cfg.MaxQueue,
		TokenTTL:        cfg.TokenTTL.String(),
		Lease:           cfg.Lease.String(),
		MaxActive:       cfg.MaxActive,
		Stock:           cfg.Stock,
		UnitsPerOrder:   cfg.UnitsPerOrder,
		OneOrderPerUser: cfg.OneOrderPerUser,
		InviteOnly:      cfg.InviteOnly,
		AbandonAfter:    cfg.AbandonAfter.String(),
		FirstUseWithin:  cfg.FirstUseWithin.String(),
		OpensAt:         formatTime(cfg.OpensAt),
		PrequeueOrder:   string(cfg.Order()),
		ClosesAt:        formatTime(cfg.ClosesAt),
		ShopURL:         cfg.ShopURL,
		ShopName:        cfg.ShopName,
		ProductName:     cfg.ProductName,
		Page:            cfg.Page,
		Shards:          cfg.Shards,
		// For buyers who asked to be told of their turn (server/notify.go).
		NotifiedFirstUseWithin: cfg.NotifiedFirstUseWithin.String(),
	}
}

// formatTime is t in RFC 3339, "" for the zero time.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339Nano)
}

// Figures is what a room is doing. The counters are the room's totals
// over every instance, as the store keeps them.
type Figures struct {
	Waiting    int64 `json:"waiting"`
	LiveTokens int64 `json:"live_tokens"`
	// AdmittedPerSecond is measured over Window from the store's counter;
	// null when the window is 0.
	AdmittedPerSecond *float64 `json:"admitted_per_second"`
	Window            string   `json:"window"`
	Entered           int64    `json:"entered"`
	QueueFull         int64    `json:"queue_full"`
	Admitted          int64    `json:"admitted"`
	Completed         int64    `json:"completed"`
	UnitsSold         int64    `json:"units_sold"`
	Released          int64    `json:"released"`
	Expired           int64    `json:"expired"`
	NoShows           int64    `json:"no_shows"`
	Abandoned         int64    `json:"abandoned"`
	// UnitsLeft are the units neither sold nor reserved by a live token
	// (each reserving units_per_order), and SoldOut says fewer than one
	// order's units are unsold; both only when the room tracks stock.
	UnitsLeft *int64 `json:"units_left,omitempty"`
	SoldOut   bool   `json:"sold_out,omitempty"`
}

// NewFigures is a room's figures from its settings and counters;
// perSecond (nil: not measured) was measured over window.
func NewFigures(cfg waitroom.RoomConfig, st waitroom.Stats, perSecond *float64, window time.Duration) *Figures {
	f := &Figures{
		Waiting:           st.Waiting,
		LiveTokens:        st.Active,
		AdmittedPerSecond: perSecond,
		Window:            window.String(),
		Entered:           st.Entered,
		QueueFull:         st.Full,
		Admitted:          st.Admitted,
		Completed:         st.Completed,
		UnitsSold:         st.Sold,
		Released:          st.Released,
		Expired:           st.Expired,
		NoShows:           st.NoShows,
		Abandoned:         st.Abandoned,
	}
	if soldOut, left, _ := cfg.Units(0, st.Sold, st.Active); cfg.Stock > 0 {
		f.SoldOut, f.UnitsLeft = soldOut, &left
	}
	return f
}

// Pass is a pass as the operator API shows it.
type Pass struct {
	ID        string    `json:"id"`
	Uses      int       `json:"uses"`
	Left      int       `json:"left"`
	ExpiresAt time.Time `json:"expires_at"`
	Revoked   bool      `json:"revoked"`
	// Code and Link are what the holder is given: the code alone for an
	// app, the link (a path on this server) for a browser.
	Code string `json:"code"`
	Link string `json:"link"`
}

// State says whether the pass still lets anyone in at now.
func (p Pass) State(now time.Time) string {
	switch {
	case p.Revoked:
		return "revoked"
	case !p.ExpiresAt.After(now):
		return "expired"
	case p.Left == 0:
		return "used up"
	}
	return "valid"
}

// Entrants is the answer of GET /admin/rooms/{room}/entrants: the
// draw's public record and every entrant with its place, all 'waitroom
// draw verify' needs to recompute the draw.
type Entrants struct {
	Draw     DrawRecord         `json:"draw"`
	Entrants []waitroom.Entrant `json:"entrants"`
}

// Dashboard is GET /admin/dashboard's answer.
type Dashboard struct {
	// SampledAt is when the figures were read (unix milliseconds).
	SampledAt int64 `json:"sampled_at"`
	// EveryMS is the sampling period: polling faster returns the same
	// sample.
	EveryMS int64 `json:"every_ms"`
	// Error is set when the last sample failed; the rooms are then those
	// of the last sample that worked.
	Error *DashboardError `json:"error,omitempty"`
	Rooms []DashboardRoom `json:"rooms"`
}

// DashboardError is why the last sample failed, as the error body says it.
type DashboardError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// DashboardRoom is one room on the dashboard: its settings and figures as
// GET /admin/rooms/{room} gives them (admitted per second measured between
// the last two samples), the wait of the last place, and the samples after
// ?since=.
type DashboardRoom struct {
	Room
	// ETALastSeconds is how long the last user in the queue waits at the
	// room's rate; null while the room is paused (nobody is admitted).
	ETALastSeconds *float64         `json:"eta_last_seconds"`
	Series         []DashboardPoint `json:"series"`
}

// DashboardPoint is one sample of a room.
type DashboardPoint struct {
	T int64 `json:"t"` // unix milliseconds
	// AdmittedPerSecond is the admitted counter's growth since the
	// previous sample; null for the first sample after a gap, 0 on the
	// points that draw a quiet room's gap flat.
	AdmittedPerSecond *float64 `json:"admitted_per_second"`
	Rate              float64  `json:"rate"`
	Waiting           int64    `json:"waiting"`
	LiveTokens        int64    `json:"live_tokens"`
}

// DrawRecord is the public record of a scheduled room's draw, as GET
// /rooms/{room}/draw answers it. Entrants and Digest (of the entrant list,
// see drawHow) are taken at the draw.
type DrawRecord struct {
	Room       string `json:"room"`
	Order      string `json:"prequeue_order"`
	OpensAt    string `json:"opens_at,omitempty"`
	State      string `json:"state"`
	Commitment string `json:"commitment"`
	Seed       string `json:"seed,omitempty"`
	Entrants   *int64 `json:"entrants,omitempty"`
	Digest     string `json:"entrants_digest,omitempty"`
	DrawnAt    string `json:"drawn_at,omitempty"`
	DrawMS     *int64 `json:"draw_ms,omitempty"`
	// How is how anyone checks a place with the revealed seed.
	How string `json:"how"`
}

const drawHow = "commitment = SHA-256(seed bytes), published before the opening; each user's value = HMAC-SHA256(key = seed bytes, message = user id); places 1..N go by ascending value (fifo rooms: by arrival); entrants_digest = SHA-256 of the values in place order, taken at the draw"

// NewDrawRecord is room's public draw record: the seed, count and digest
// only once the draw is done.
func NewDrawRecord(room string, d waitroom.Draw) DrawRecord {
	b := DrawRecord{Room: room, Order: string(d.Order), State: string(d.State), Commitment: d.Commitment, How: drawHow}
	if !d.OpensAt.IsZero() {
		b.OpensAt = d.OpensAt.Format(time.RFC3339)
	}
	if d.State == waitroom.DrawDone {
		b.Seed = d.Seed
		b.Entrants, b.Digest = &d.Entrants, d.Digest
		b.DrawnAt = d.DrawnAt.Format(time.RFC3339Nano)
		ms := d.Took.Milliseconds()
		b.DrawMS = &ms
	}
	return b
}
