package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/waitroom/waitroom"
)

// Delivery bounds.
const (
	// MaxAge is the retry budget of an entry, from its append: then it is
	// dead-lettered.
	MaxAge = 24 * time.Hour
	// FirstBackoff is the first retry's wait before jitter: the retry
	// comes 1 to 2 s after the failure. Each failure doubles it, up to
	// MaxBackoff; the jitter takes each wait from [w/2, w).
	FirstBackoff = 2 * time.Second
	MaxBackoff   = time.Hour
	// AttemptTimeout bounds one POST, answer included.
	AttemptTimeout = 10 * time.Second
	// Window is how many entries of one endpoint's partition a
	// dispatcher holds at once; the rest wait in the log.
	Window = 256
	// LeaseTTL: a dispatcher silent this long is taken for dead and its
	// partitions, with their pending entries, go to the others.
	LeaseTTL = 10 * time.Second
	// ClaimEvery: how often an owner claims its partitions' pending
	// entries again, for those another dispatcher was handed during a
	// handover.
	ClaimEvery = 10 * time.Second
	// DefaultEvery is Run's step.
	DefaultEvery = 100 * time.Millisecond
	// QuietRead: an endpoint's partition that had nothing to send is read
	// again after this, at most; the first event after a quiet spell waits
	// that much longer (the per-user ones are gathered for a second
	// anyway).
	QuietRead = 500 * time.Millisecond
	// roomsInFlight bounds the rooms of one partition delivered to at once.
	roomsInFlight = 8
	// maxRounds bounds the rounds of one step.
	maxRounds = 64
)

// Dispatcher delivers the log's entries to the endpoints. Every instance
// runs one; they split each endpoint's partitions among themselves by
// Owner over the live dispatchers (Log.Consumers), so a room's events go
// out from one dispatcher, in order: the next event of a room for an
// endpoint goes only once the one before it was taken (2xx) or
// dead-lettered. Failures are retried with backoff; a partition's other
// rooms go on meanwhile.
type Dispatcher struct {
	Log Log
	// ID names this dispatcher among those sharing the log; default a
	// random one.
	ID string
	// Static are the endpoints of the flags, beside the log's own.
	Static []Endpoint
	// Client posts the messages; default one with AttemptTimeout that
	// follows no redirect.
	Client *http.Client
	// Now is the clock of the retry budget, the backoff and the
	// timestamps signed; nil: time.Now.
	Now func() time.Time
	// Jitter returns a number in [0, 1); nil: math/rand/v2.
	Jitter func() float64
	// Every is Run's step; default DefaultEvery.
	Every time.Duration
	// Logger; default discards.
	Logger *slog.Logger
	// OnOutcome, if set, is told each attempt's end: "delivered",
	// "failed" (to be retried) or "dead".
	OnOutcome func(endpoint, outcome string)

	mu        sync.Mutex
	units     map[string]*unit // endpoint/partition → its work
	consumers atomic.Pointer[[]string]
	endpoints atomic.Pointer[[]Endpoint]
	grouped   map[string]bool
	failing   bool
}

// unit is one endpoint's partition owned by this dispatcher; only its
// worker touches pending.
type unit struct {
	endpoint  string
	partition int
	busy      atomic.Bool
	pending   []*held // by Seq
	claimNext time.Time
	// quietUntil: the last read of an empty window found nothing.
	quietUntil time.Time
}

type held struct {
	entry    Entry
	attempts int
	next     time.Time
	lastErr  string
}

func (d *Dispatcher) now() time.Time { return nowOf(d.Now) }

func (d *Dispatcher) logger() *slog.Logger { return loggerOf(d.Logger) }

func (d *Dispatcher) id() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ID == "" {
		d.ID = "dispatcher-" + waitroom.NewToken()
	}
	return d.ID
}

func (d *Dispatcher) client() *http.Client {
	if d.Client != nil {
		return d.Client
	}
	return defaultClient
}

var defaultClient = &http.Client{
	Timeout:       AttemptTimeout,
	Transport:     transport(),
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// transport keeps a connection per room in flight to a receiver open
// between steps (Go's default keeps 2 a host, so the rest would be dialled
// again at every step).
func transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = roomsInFlight * Partitions
	return t
}

// Active reports whether any endpoint is known (as of the last step):
// without one the Emitter appends nothing.
func (d *Dispatcher) Active() bool {
	if len(d.Static) > 0 {
		return true
	}
	eps := d.endpoints.Load()
	return eps != nil && len(*eps) > 0
}

// LoadEndpoints reads the log's endpoints, as each step does: so that
// Endpoints and Active know them before the first step.
func (d *Dispatcher) LoadEndpoints(ctx context.Context) error {
	stored, err := d.Log.Endpoints(ctx)
	if err != nil {
		return err
	}
	d.endpoints.Store(&stored)
	return nil
}

// Endpoints are the endpoints known as of the last step: the flags' and
// the log's.
func (d *Dispatcher) Endpoints() []Endpoint {
	out := slices.Clone(d.Static)
	if eps := d.endpoints.Load(); eps != nil {
		out = append(out, *eps...)
	}
	return out
}

// Owns reports whether this dispatcher is the one that watches room
// (Watcher), as of the last step: Owner over the live dispatchers.
func (d *Dispatcher) Owns(room string) bool {
	c := d.consumers.Load()
	return c != nil && waitroom.Owner(room, *c) == d.id()
}

// Sends reports whether this dispatcher is the one that sends endpoint's
// messages of partition, as of the last step.
func (d *Dispatcher) Sends(endpoint string, partition int) bool {
	c := d.consumers.Load()
	return c != nil && waitroom.Owner(unitKey(endpoint, partition), *c) == d.id()
}

func unitKey(endpoint string, partition int) string {
	return endpoint + "/" + strconv.Itoa(partition)
}

// Run steps every Every until ctx is done. A unit whose receiver is slow
// goes on in the background while the others take their next steps.
func (d *Dispatcher) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	return every(ctx, d.Every, DefaultEvery, func() {
		work, err := d.plan(ctx)
		d.note(err)
		for _, w := range work {
			if w.u.busy.CompareAndSwap(false, true) {
				wg.Go(func() {
					defer w.u.busy.Store(false)
					d.work(ctx, w.u, w.ep)
				})
			}
		}
	})
}

func (d *Dispatcher) note(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case err != nil && !d.failing:
		d.failing = true
		d.logger().Error("webhook dispatcher cannot read its log", "err", err)
	case err == nil && d.failing:
		d.failing = false
		d.logger().Info("webhook dispatcher reads its log again")
	}
}

// Step makes one step of every unit this dispatcher owns and returns once
// all are done: Run's step, whole, for tests driving it with a fake clock.
func (d *Dispatcher) Step(ctx context.Context) error {
	work, err := d.plan(ctx)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, w := range work {
		wg.Go(func() { d.work(ctx, w.u, w.ep) })
	}
	wg.Wait()
	return nil
}

type planned struct {
	u  *unit
	ep Endpoint
}

// plan renews this dispatcher's lease, reads the endpoints and returns
// the units it owns, dropping those it no longer does (their entries stay
// pending in the log for the new owner).
func (d *Dispatcher) plan(ctx context.Context) ([]planned, error) {
	id := d.id()
	consumers, err := d.Log.Consumers(ctx, id, d.now(), LeaseTTL)
	if err != nil {
		return nil, err
	}
	d.consumers.Store(&consumers)
	if err := d.LoadEndpoints(ctx); err != nil {
		return nil, err
	}
	eps := d.Endpoints()

	d.mu.Lock()
	defer d.mu.Unlock()
	if d.units == nil {
		d.units, d.grouped = map[string]*unit{}, map[string]bool{}
	}
	var errs []error
	var out []planned
	keep := map[string]bool{}
	for _, ep := range eps {
		if !d.grouped[ep.ID] {
			// The flags' endpoints get their groups here; the admin API
			// makes the others' (again here after a Redis that lost them).
			if err := d.Log.AddGroup(ctx, ep.ID); err != nil {
				errs = append(errs, err)
				continue
			}
			d.grouped[ep.ID] = true
		}
		for p := range Partitions {
			key := unitKey(ep.ID, p)
			if waitroom.Owner(key, consumers) != id {
				continue
			}
			keep[key] = true
			u := d.units[key]
			if u == nil {
				u = &unit{endpoint: ep.ID, partition: p}
				d.units[key] = u
			}
			out = append(out, planned{u: u, ep: ep})
		}
	}
	for key := range d.units {
		if !keep[key] {
			delete(d.units, key)
		}
	}
	return out, errors.Join(errs...)
}

// work makes one step of u for ep: claims what others left pending (when
// due), then reads new entries into the window and delivers each room's
// first entry whose time has come, again while a round delivered
// something (at most maxRounds), so a backlog drains at the receiver's
// pace rather than one message a room per step.
func (d *Dispatcher) work(ctx context.Context, u *unit, ep Endpoint) {
	now := d.now()
	log := d.logger().With("endpoint", ep.ID, "partition", u.partition)
	if !now.Before(u.claimNext) {
		u.claimNext = now.Add(ClaimEvery)
		for cursor := ""; len(u.pending) < Window; {
			entries, next, err := d.Log.Claim(ctx, ep.ID, u.partition, d.id(), cursor, Window-len(u.pending))
			if err != nil {
				log.Warn("claiming pending webhook entries failed", "err", err)
				break
			}
			u.merge(entries)
			if cursor = next; cursor == "" {
				break
			}
		}
	}
	for range maxRounds {
		// The endpoint as known now: a secret rotated, or a filter
		// changed, since the step began counts from this round on.
		if fresh, ok := d.endpoint(ep.ID); ok {
			ep = fresh
		}
		if !d.round(ctx, u, ep, d.now(), log) || ctx.Err() != nil {
			return
		}
	}
}

// endpoint is the endpoint id as known now (Endpoints); false when it is
// not known any more.
func (d *Dispatcher) endpoint(id string) (Endpoint, bool) {
	for _, e := range d.Static {
		if e.ID == id {
			return e, true
		}
	}
	if eps := d.endpoints.Load(); eps != nil {
		for _, e := range *eps {
			if e.ID == id {
				return e, true
			}
		}
	}
	return Endpoint{}, false
}

// round reads new entries into u's window and delivers each room's first
// entry whose time has come; it reports whether any entry was done with
// (taken, dead-lettered or not wanted).
func (d *Dispatcher) round(ctx context.Context, u *unit, ep Endpoint, now time.Time, log *slog.Logger) bool {
	// An empty window whose last read found nothing reads again only
	// after QuietRead: idle endpoints cost a few reads a second.
	if n := Window - len(u.pending); n > 0 && (len(u.pending) > 0 || !now.Before(u.quietUntil)) {
		entries, err := d.Log.Read(ctx, ep.ID, u.partition, d.id(), n)
		if err == nil && len(entries) == 0 && len(u.pending) == 0 {
			u.quietUntil = now.Add(QuietRead)
		}
		if err != nil {
			log.Warn("reading webhook entries failed", "err", err)
			if strings.Contains(err.Error(), "NOGROUP") {
				// A Redis that lost its data lost the groups too: the next
				// plan makes them again.
				d.mu.Lock()
				delete(d.grouped, ep.ID)
				d.mu.Unlock()
			}
		}
		u.merge(entries)
	}

	// Each room's first entry, if its time has come; entries ep does not
	// want are acked on the way.
	var due []*held
	var skip []string
	seen := map[string]bool{}
	for _, h := range u.pending {
		room := h.entry.Event.Room
		if seen[room] {
			continue
		}
		if (h.entry.Only != "" && h.entry.Only != ep.ID) || !ep.Wants(h.entry.Event.Type, room) {
			skip = append(skip, h.entry.Seq)
			continue
		}
		seen[room] = true
		if !now.Before(h.next) {
			due = append(due, h)
		}
	}
	done := map[string]bool{}
	for _, seq := range skip {
		done[seq] = true
	}

	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, roomsInFlight)
	for _, h := range due {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			err := d.attempt(ctx, ep, h.entry, now)
			mu.Lock()
			defer mu.Unlock()
			h.attempts++
			switch {
			case err == nil:
				done[h.entry.Seq] = true
				d.outcome(ep.ID, "delivered")
			case ctx.Err() != nil:
				// Stopping: the entry stays pending for the next owner.
			case !now.Before(h.entry.Since.Add(MaxAge)):
				h.lastErr = err.Error()
				if d.bury(ctx, ep, h, now) {
					done[h.entry.Seq] = true
				}
			default:
				h.lastErr = err.Error()
				h.next = now.Add(d.backoff(h.attempts))
				d.outcome(ep.ID, "failed")
				log.Debug("webhook delivery failed; retrying", "event", h.entry.Event.ID, "attempts", h.attempts, "next", h.next, "err", err)
			}
		})
	}
	wg.Wait()

	if len(done) == 0 {
		return false
	}
	acks := make([]string, 0, len(done))
	for seq := range done {
		acks = append(acks, seq)
	}
	if err := d.Log.Ack(ctx, ep.ID, u.partition, acks...); err != nil {
		// They stay pending in the log: claimed again, delivered again.
		log.Warn("acking webhook entries failed", "err", err)
	}
	u.pending = slices.DeleteFunc(u.pending, func(h *held) bool { return done[h.entry.Seq] })
	return true
}

// bury dead-letters h for ep; it reports whether the letter was kept.
func (d *Dispatcher) bury(ctx context.Context, ep Endpoint, h *held, now time.Time) bool {
	dl := DeadLetter{ID: "dl_" + waitroom.NewToken(), Endpoint: ep.ID, EventID: h.entry.Event.ID,
		Type: h.entry.Event.Type, Room: h.entry.Event.Room, Body: h.entry.Body,
		Attempts: h.attempts, LastError: h.lastErr, At: now.UTC()}
	if err := d.Log.AddDead(ctx, dl); err != nil {
		d.logger().Warn("keeping a webhook dead letter failed; retrying", "endpoint", ep.ID, "event", dl.EventID, "err", err)
		h.next = now.Add(FirstBackoff)
		return false
	}
	d.outcome(ep.ID, "dead")
	d.logger().Warn("webhook event dead-lettered after its retry budget", "endpoint", ep.ID, "event", dl.EventID,
		"type", dl.Type, "room", dl.Room, "attempts", dl.Attempts, "err", dl.LastError)
	return true
}

func (d *Dispatcher) outcome(endpoint, outcome string) {
	if d.OnOutcome != nil {
		d.OnOutcome(endpoint, outcome)
	}
}

// backoff is the wait after the attempts-th failure: FirstBackoff
// doubled per failure up to MaxBackoff, jittered into [w/2, w).
func (d *Dispatcher) backoff(attempts int) time.Duration {
	w := MaxBackoff
	if attempts < 32 {
		w = min(FirstBackoff<<(attempts-1), MaxBackoff)
	}
	j := rand.Float64
	if d.Jitter != nil {
		j = d.Jitter
	}
	return w/2 + time.Duration(j()*float64(w/2))
}

// merge adds entries not held yet, keeping the window in log order.
func (u *unit) merge(entries []Entry) {
	if len(entries) == 0 {
		return
	}
	have := make(map[string]bool, len(u.pending))
	for _, h := range u.pending {
		have[h.entry.Seq] = true
	}
	for _, e := range entries {
		if !have[e.Seq] {
			have[e.Seq] = true
			u.pending = append(u.pending, &held{entry: e})
		}
	}
	slices.SortStableFunc(u.pending, func(a, b *held) int { return compareSeq(a.entry.Seq, b.entry.Seq) })
}

// compareSeq orders log ids: Redis stream ids ("ms-n") or MemLog's
// numbers.
func compareSeq(a, b string) int {
	am, an, _ := strings.Cut(a, "-")
	bm, bn, _ := strings.Cut(b, "-")
	if c := compareNum(am, bm); c != 0 {
		return c
	}
	return compareNum(an, bn)
}

func compareNum(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// errNoSigningKey: none of an endpoint's secrets opens here. A message is
// never sent unsigned; it waits, as for a receiver that is down, until
// the secret is rotated.
var errNoSigningKey = errors.New("webhook: no secret of this endpoint opens with this instance's --cookie-secret (changed since it was stored?); rotate the endpoint's secret")

// attempt posts e to ep once, signed at now.
func (d *Dispatcher) attempt(ctx context.Context, ep Endpoint, e Entry, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(e.Body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "waitroom-webhooks/1")
	req.Header.Set("webhook-id", e.Event.ID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	keys := ep.keys(now)
	if len(keys) == 0 {
		return errNoSigningKey
	}
	req.Header.Set("webhook-signature", Sign(e.Event.ID, now, e.Body, keys))
	resp, err := d.client().Do(req)
	if err != nil {
		// Not the URL again: the endpoint is known, and a token in its
		// query would go into the dead letter and the logs.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			return fmt.Errorf("%s: %w", ue.Op, ue.Err)
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil
	}
	// The start of what the receiver said tells the operator why (its
	// "database down"), beside the status.
	head := make([]byte, answerExcerpt+1)
	n, _ := io.ReadFull(resp.Body, head)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if said := excerpt(head[:min(n, answerExcerpt)], n > answerExcerpt); said != "" {
		return fmt.Errorf("answered %d: %s", resp.StatusCode, said)
	}
	return fmt.Errorf("answered %d", resp.StatusCode)
}

// answerExcerpt bounds the bytes of a refusal's body kept in its error.
const answerExcerpt = 200

// excerpt is the start of a receiver's answer, b, as one line of valid
// UTF-8 without control characters (it goes into a terminal's table and
// the logs as it is), with "…" if the answer went on (cut).
func excerpt(b []byte, cut bool) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if cut {
		s = strings.TrimRight(s, "\uFFFD") // a rune split at the bound
	}
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	if cut && s != "" {
		s += "…"
	}
	return s
}
