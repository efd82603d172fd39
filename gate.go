package waitroom

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Header names the gate reads and sets.
const (
	DefaultUserHeader    = "X-User-Id"
	EntryTokenHeader     = "X-Entry-Token"
	IdempotencyKeyHeader = "Idempotency-Key"
	// HoldHeader carries a forward-auth hold's id to the shop, which
	// settles with it. Only the forward-auth answer sets it; a client's
	// own is removed on every path, so no order API settles a hold the
	// client named.
	HoldHeader = "Waitroom-Hold"
	// UnitsHeader tells the order API how many units the order's token
	// reserved (Hold.Units): the most the order may buy. The gate cannot
	// read every order API's body; the order API refuses a larger
	// quantity before it touches its stock (the built-in shop: 422
	// QUANTITY_OVER_LIMIT), so the room never sells more than it reserved.
	UnitsHeader          = "Waitroom-Units"
	defaultSettleTimeout = 5 * time.Second
)

// Retrying a settle the store did not answer: the first retry soon, then
// backing off to settleMaxBackoff between attempts, for as long as the
// store keeps the hold unsettled (SettleWindow after the lease the gate
// last got) less settleMargin, so that the last attempt lands in time.
const (
	settleFirstBackoff = 50 * time.Millisecond
	settleMaxBackoff   = 2 * time.Second
	settleMargin       = SettleWindow / 10
)

// Outcomes of settles the gate retried (OnOutcome), besides "completed"
// and "released" once a retry lands.
const (
	// OutcomeSettleRetrying: a settle's first attempt got no answer; the
	// gate retries it in the background.
	OutcomeSettleRetrying = "settle_retrying"
	// OutcomeSettleAbandoned: no retry landed within the settle window;
	// the hold is abandoned and its unit may be admitted to another buyer.
	OutcomeSettleAbandoned = "settle_abandoned"
	// OutcomeClaimWithdrawn: a claim the store did not answer in time was
	// given back (or voided, should it land later), so that the buyer's
	// retry is not TOKEN_IN_USE for a whole lease.
	OutcomeClaimWithdrawn = "claim_withdrawn"
)

// Gate is net/http middleware that lets a request through only with a live
// entry token: it claims the token, runs the protected handler, then
// completes the token when the handler answered 2xx and releases it
// otherwise (an error status, a panic, a cancelled request), so a failed
// order costs the user nothing but time.
type Gate struct {
	Store Store
	// Room whose tokens the gate accepts.
	Room string
	// UserHeader names the header the shop's auth layer sets; default
	// X-User-Id.
	UserHeader string
	// Logger receives settle failures; default slog.Default().
	Logger *slog.Logger
	// OnOutcome, if set, is told each request's outcome: "completed",
	// "released", or the error code of a refused claim; and of the
	// settles it retried, OutcomeSettleRetrying when the retries start,
	// then how they ended (OutcomeSettleAbandoned among them), and
	// OutcomeClaimWithdrawn.
	OnOutcome func(room, outcome string)
	// OnServed, if set, is told how long each request the gate let
	// through took in the protected handler and what it answered: the
	// measured service time a RateTuner steers by.
	OnServed func(room string, took time.Duration, status int)
	// OnSettled, if set, is told each hold whose settle landed, with
	// OutcomeCompleted (the token is spent) or OutcomeReleased (given
	// back): the webhooks' token.spent and token.released. It runs on the
	// settling goroutine, so it must not block.
	OnSettled func(hold Hold, outcome string)
	// Reject writes a refusal; default writes the standard JSON error body
	// via the function the server supplies, or plain text.
	Reject func(w http.ResponseWriter, r *http.Request, err error)
	// StoreDown, if set, decides a request whose claim found the store
	// unavailable (ErrStoreUnavailable): true lets it through unclaimed,
	// still with its Idempotency-Key, so the order API dedupes retries (the
	// "open" failure policy; it must bound what it lets through, e.g. with a
	// token bucket); false refuses it with the store's error ("closed", also
	// the behaviour when nil). Every request tries the store first, so
	// recovery needs no reset.
	StoreDown func(r *http.Request) bool
	// LastConfig, if set, tells a request StoreDown lets through the
	// room's last known settings, so that it is keyed and limited upstream
	// as a claim would have done it (orderKey, UnitsHeader); nil or not
	// known: keyed by the token, one unit.
	LastConfig func(ctx context.Context) (RoomConfig, bool)

	// The settles being retried in the background, and Drain's signal.
	mu       sync.Mutex
	retrying sync.WaitGroup
	draining chan struct{}
}

// The outcomes of a settle that landed (OnOutcome, OnSettled).
const (
	OutcomeCompleted = "completed"
	OutcomeReleased  = "released"
)

// OutcomeStoreDown is the outcome of a request StoreDown let through.
const OutcomeStoreDown = "passed_store_down"

// IdempotencyKey derives the key passed upstream from a token: stable for
// the token, so a retry after a crash finds the first order, and one-way, so
// the order store never holds a usable token.
func IdempotencyKey(room, token string) string {
	sum := sha256.Sum256([]byte(room + "\x00" + token))
	return "wr1-" + base64.RawURLEncoding.EncodeToString(sum[:18])
}

// BuyerKey is the key passed upstream for an order in a room with one order
// per user: the same for every token the user is ever given in the room, so
// the order API's unique key refuses a second order even when the store
// lost the first one's record and admitted the buyer again.
func BuyerKey(room, user string) string {
	sum := sha256.Sum256([]byte(room + "\x01" + user))
	return "wr1b-" + base64.RawURLEncoding.EncodeToString(sum[:18])
}

// orderKey is the Idempotency-Key of a held token's order.
func orderKey(h Hold) string {
	if h.OneOrderPerUser {
		return BuyerKey(h.Room, h.User)
	}
	return IdempotencyKey(h.Room, h.Token)
}

// Wrap guards next.
func (g *Gate) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		userHeader := g.userHeader()
		claimed := time.Now()
		hold, err := g.claim(r, g.Room, claimed)
		if err != nil {
			if errors.Is(err, ErrStoreUnavailable) && g.StoreDown != nil && g.StoreDown(r) {
				g.passUnclaimed(w, r, userHeader, hold.User, hold.Token, next)
				return
			}
			g.reject(w, r, err)
			return
		}

		r = vouch(r, userHeader, hold)
		rec := NewStatusRecorder(w)
		completed := false
		stopRenewing := g.keepLease(r.Context(), hold, leaseEnd(claimed, hold))
		defer func() {
			until := stopRenewing()
			// Settle even when the request was cancelled: the hold must not
			// wait out its lease.
			if completed {
				g.settle(r.Context(), hold, "completed", until)
				return
			}
			g.settle(r.Context(), hold, "released", until)
		}()
		started := time.Now()
		next.ServeHTTP(rec, r)
		completed = rec.Status() >= 200 && rec.Status() < 300
		if g.OnServed != nil {
			g.OnServed(g.Room, time.Since(started), rec.Status())
		}
	})
}

// entryTokenError marks a refusal for a missing or malformed entry token,
// which the forward-auth endpoint answers 401 (NoEntryToken).
type entryTokenError struct{ err error }

func (e entryTokenError) Error() string { return e.err.Error() }
func (e entryTokenError) Unwrap() error { return e.err }

// NoEntryToken reports whether err refused a request because its entry
// token was missing or malformed, rather than for what the store said.
func NoEntryToken(err error) bool {
	var e entryTokenError
	return errors.As(err, &e)
}

func (g *Gate) userHeader() string {
	if g.UserHeader == "" {
		return DefaultUserHeader
	}
	return g.UserHeader
}

// claim checks r's user and entry token headers and claims the token in
// room at sent: the one check the middleware (Wrap) and the forward-auth
// endpoint (Admit) make. A claim the store did not answer is given back
// in the background. On a store error the hold still names room, user and
// token, for a StoreDown pass.
func (g *Gate) claim(r *http.Request, room string, sent time.Time) (Hold, error) {
	userHeader := g.userHeader()
	users, tokens := r.Header.Values(userHeader), r.Header.Values(EntryTokenHeader)
	switch {
	case len(users) > 1:
		// The upstream might read another of them than the one checked.
		return Hold{}, BadRequest("several " + userHeader + " headers")
	case len(tokens) > 1:
		return Hold{}, entryTokenError{BadRequest("several " + EntryTokenHeader + " headers")}
	case len(users) == 0 || !ValidUserID(users[0]):
		return Hold{}, BadRequest("missing or malformed " + userHeader + " header")
	case len(tokens) == 0 || tokens[0] == "":
		return Hold{}, entryTokenError{ErrTokenNotFound}
	case !ValidToken(tokens[0]):
		return Hold{}, entryTokenError{BadRequest("malformed " + EntryTokenHeader + " header")}
	}
	user, token := users[0], tokens[0]
	hold, err := g.Store.Claim(r.Context(), room, user, token)
	if err != nil {
		var unanswered *UnansweredClaimError
		if errors.As(err, &unanswered) {
			// The claim may yet land and hold the token under a lease
			// nobody here knows of: give it back, in the background,
			// since the store just did not answer.
			g.retry(r.Context(), unanswered.Hold, OutcomeClaimWithdrawn, leaseEnd(sent, unanswered.Hold), 1, 0)
		}
		return Hold{Room: room, User: user, Token: token}, err
	}
	return hold, nil
}

// Admit claims r's entry token in room for a forward-auth answer, with
// Wrap's checks and claim: the proxy in front copies Vouched(hold) onto
// the request to the shop, and the shop settles the hold (Store.Complete
// or Store.Release) or lets it lapse with its lease and the settle
// window. A store that is down refuses: no StoreDown pass, since nothing
// would settle it.
func (g *Gate) Admit(r *http.Request, room string) (Hold, error) {
	hold, err := g.claim(r, room, time.Now())
	if err != nil {
		if g.OnOutcome != nil {
			// A refusal in another room than g.Room is told without
			// the name, which a client may have made up: a metric's
			// labels stay bounded.
			label := ""
			if room == g.Room {
				label = room
			}
			g.OnOutcome(label, ErrorCode(err))
		}
		return Hold{}, err
	}
	return hold, nil
}

// Vouched is what the gate vouches for on a request with hold, as headers
// for the upstream: the user the token was claimed for, the
// Idempotency-Key and Waitroom-Units; never the token.
func (g *Gate) Vouched(hold Hold) http.Header {
	v := vouchedFor(g.userHeader(), hold)
	h := http.Header{}
	h.Set(v.userHeader, v.user)
	h.Set(IdempotencyKeyHeader, v.idempotencyKey)
	h.Set(UnitsHeader, v.units)
	return h
}

// leaseEnd is when, by this process's clock, a lease the store granted
// for hold to a call sent at sent ends at the earliest: the store counts
// it from when the call reached it, later.
func leaseEnd(sent time.Time, hold Hold) time.Time {
	if hold.LeaseFor <= 0 {
		return sent.Add(DefaultLease) // a store that did not say: the default
	}
	return sent.Add(hold.LeaseFor)
}

// keepLease renews hold's lease while the protected handler works, well
// before each lease runs out, so a slow order keeps its token held and a
// second request with it gets TOKEN_IN_USE; the lease then frees only the
// tokens of a process that died. The returned func stops renewing, waits
// until it has, and tells when the last lease granted ends (from ends,
// the claim's).
func (g *Gate) keepLease(ctx context.Context, hold Hold, ends time.Time) (stop func() time.Time) {
	every := hold.LeaseFor / 3
	if every <= 0 {
		every = DefaultLease / 3 // a store that did not say: the default
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rctx, rcancel := context.WithTimeout(ctx, every)
			sent := time.Now()
			err := g.Store.Renew(rctx, hold)
			rcancel()
			switch {
			case err == nil:
				ends = leaseEnd(sent, hold)
			case ctx.Err() != nil:
			case errors.Is(err, ErrTokenNotFound):
				// Lost (the store missed renewals while down): nothing
				// left to keep; settling will find it lost too.
				g.logger().WarnContext(ctx, "entry token lease lost while the order ran", "room", g.Room, "user", hold.User)
				return
			default:
				g.logger().WarnContext(ctx, "renewing entry token lease failed; retrying", "room", g.Room, "err", err)
			}
		}
	}()
	return func() time.Time {
		cancel()
		<-done
		return ends
	}
}

// gateHeaders is what the gate vouches for on a request it let through.
type gateHeaders struct {
	userHeader, user, idempotencyKey, units string
}

type gateHeadersKey struct{}

// vouchedFor is what the gate vouches for on a request with h.
func vouchedFor(userHeader string, h Hold) gateHeaders {
	return gateHeaders{userHeader, h.User, orderKey(h), strconv.Itoa(max(h.Units, 1))}
}

// vouch sets the headers the upstream relies on (the user the token was
// claimed for, exactly once; the idempotency key; the units the token
// reserved; never the token) and keeps them in r's context, so that a
// reverse proxy sets them again on its outgoing request after hop-by-hop
// handling (SetGateHeaders): a client naming them in Connection cannot
// strip them.
func vouch(r *http.Request, userHeader string, h Hold) *http.Request {
	v := vouchedFor(userHeader, h)
	r.Header.Del(EntryTokenHeader)
	r.Header.Set(IdempotencyKeyHeader, v.idempotencyKey)
	r.Header.Set(UnitsHeader, v.units)
	r.Header.Set(userHeader, v.user)
	return r.WithContext(context.WithValue(r.Context(), gateHeadersKey{}, v))
}

// SetGateHeaders sets on h, the headers of a request on its way upstream,
// what the gate vouched for on the request whose context is ctx: the user,
// the Idempotency-Key and Waitroom-Units, each exactly once, and no entry
// token. A proxy calls it last, after its own header handling
// (httputil.ReverseProxy's Rewrite). Without a gate in front it removes
// those headers, so nothing a client sent passes for what the gate vouches.
func SetGateHeaders(ctx context.Context, h http.Header) {
	v, ok := ctx.Value(gateHeadersKey{}).(gateHeaders)
	delSpellings(h, EntryTokenHeader, IdempotencyKeyHeader, UnitsHeader, HoldHeader, v.userHeader)
	if !ok {
		return
	}
	h.Set(v.userHeader, v.user)
	h.Set(IdempotencyKeyHeader, v.idempotencyKey)
	h.Set(UnitsHeader, v.units)
}

// delSpellings removes from h every header that is one of names to a
// CGI-style server (PHP, WSGI, Rack), which reads '_' as '-' and ignores
// case: X_User_Id would be a second X-User-Id there.
func delSpellings(h http.Header, names ...string) {
	for key := range h {
		for _, name := range names {
			if name != "" && strings.EqualFold(strings.ReplaceAll(key, "_", "-"), name) {
				delete(h, key)
			}
		}
	}
}

// passUnclaimed serves a request StoreDown let through. There is no hold to
// settle: the token stays as the store last had it, and a retry with it
// after the store is back reaches the same order by its Idempotency-Key.
func (g *Gate) passUnclaimed(w http.ResponseWriter, r *http.Request, userHeader, user, token string, next http.Handler) {
	h := Hold{Room: g.Room, User: user, Token: token}
	if g.LastConfig != nil {
		if cfg, ok := g.LastConfig(r.Context()); ok {
			h.OneOrderPerUser, h.Units = cfg.OneOrderPerUser, cfg.UnitsPerOrder
		}
	}
	r = vouch(r, userHeader, h)
	if g.OnOutcome != nil {
		g.OnOutcome(g.Room, OutcomeStoreDown)
	}
	rec := NewStatusRecorder(w)
	started := time.Now()
	next.ServeHTTP(rec, r)
	if g.OnServed != nil {
		g.OnServed(g.Room, time.Since(started), rec.Status())
	}
}

// settle settles hold as outcome: "completed" spends the token,
// "released" and OutcomeClaimWithdrawn give it back. An attempt the store
// did not answer is retried in the background until one lands or until,
// less a margin, the store stops keeping the hold unsettled
// (SettleWindow after leaseEnds), so that a 2xx the gate passed on ends as
// a sold unit and a recorded buyer through a store stall, and the request
// does not wait for it. Not tied to ctx's cancel: a client that hung up
// still settles.
func (g *Gate) settle(ctx context.Context, hold Hold, outcome string, leaseEnds time.Time) {
	ctx = context.WithoutCancel(ctx)
	until := leaseEnds.Add(SettleWindow - settleMargin)
	err := g.settleOnce(ctx, hold, outcome)
	if err == nil || !unanswered(err) {
		g.settled(ctx, hold, outcome, err, 1)
		return
	}
	g.logger().WarnContext(ctx, "settling entry token got no answer; retrying in the background",
		"room", g.Room, "user", hold.User, "outcome", outcome, "until", until, "err", err)
	g.count(OutcomeSettleRetrying)
	g.retry(ctx, hold, outcome, leaseEnds, 2, settleFirstBackoff)
}

// retry settles hold as outcome in the background, from attempt number
// attempt after wait, backing off, until one lands, until (SettleWindow
// after leaseEnds, less a margin) passes, or Drain: then with one last
// attempt at once. Once Drain has begun there is no background left: the
// one attempt is made here.
func (g *Gate) retry(ctx context.Context, hold Hold, outcome string, leaseEnds time.Time, attempt int, wait time.Duration) {
	ctx = context.WithoutCancel(ctx)
	until := leaseEnds.Add(SettleWindow - settleMargin)
	g.mu.Lock()
	drain := g.drainSignal()
	if isClosed(drain) {
		g.mu.Unlock()
		g.settled(ctx, hold, outcome, g.settleOnce(ctx, hold, outcome), attempt)
		return
	}
	g.retrying.Add(1)
	g.mu.Unlock()
	go func() {
		defer g.retrying.Done()
		for ; ; attempt++ {
			select {
			case <-drain: // one last attempt, now
			case <-time.After(min(wait, time.Until(until))):
			}
			err := g.settleOnce(ctx, hold, outcome)
			if err == nil || !unanswered(err) || !time.Now().Before(until) || isClosed(drain) {
				g.settled(ctx, hold, outcome, err, attempt)
				return
			}
			wait = min(2*max(wait, settleFirstBackoff), settleMaxBackoff)
		}
	}()
}

// settleOnce makes one attempt at settling hold as outcome, bounded by
// defaultSettleTimeout. A late attempt does no harm (a Complete spends
// only this token, a Release gives back only this hold): until bounds the
// retries, not an attempt.
func (g *Gate) settleOnce(ctx context.Context, hold Hold, outcome string) error {
	ctx, cancel := context.WithTimeout(ctx, defaultSettleTimeout)
	defer cancel()
	if outcome == "completed" {
		return g.Store.Complete(ctx, hold)
	}
	return g.Store.Release(ctx, hold)
}

// unanswered reports whether a settle's error leaves its outcome open:
// anything but the store's word that the token is gone or another.
func unanswered(err error) bool {
	return !errors.Is(err, ErrTokenNotFound) && !errors.Is(err, ErrTokenInvalid)
}

// settled logs and counts how the settle of hold as outcome ended after
// attempts attempts, the last with err.
func (g *Gate) settled(ctx context.Context, hold Hold, outcome string, err error, attempts int) {
	log := g.logger().With("room", g.Room, "user", hold.User, "outcome", outcome, "attempts", attempts)
	switch {
	case err == nil && attempts > 1:
		log.InfoContext(ctx, "entry token settled after retrying")
	case err == nil:
	case attempts > 1 && outcome == "completed" && errors.Is(err, ErrTokenNotFound):
		// Within the settle window nothing but a Complete removes a held
		// token: an earlier attempt landed and its answer was lost.
		log.InfoContext(ctx, "entry token settled after retrying: an earlier attempt had landed")
	case unanswered(err):
		log.ErrorContext(ctx, "settling entry token abandoned: no attempt landed within the settle window; "+
			"its unit may be admitted to another buyer (the order API's idempotency key and stock still hold)", "err", err)
		outcome = OutcomeSettleAbandoned
	default:
		log.ErrorContext(ctx, "settling entry token failed", "err", err)
		outcome = "settle_failed"
	}
	if landed := outcome == OutcomeCompleted || outcome == OutcomeReleased; landed && g.OnSettled != nil {
		g.OnSettled(hold, outcome)
	}
	g.count(outcome)
}

// Drain ends the settles being retried in the background: each makes one
// last attempt now, and Drain returns once all have ended. Settles that
// start afterwards make their attempts at once. Called on shutdown, after
// the protected handlers have returned.
func (g *Gate) Drain() {
	g.mu.Lock()
	drain := g.drainSignal()
	if !isClosed(drain) {
		close(drain)
	}
	g.mu.Unlock()
	g.retrying.Wait()
}

// drainSignal is Drain's channel; g.mu is held.
func (g *Gate) drainSignal() chan struct{} {
	if g.draining == nil {
		g.draining = make(chan struct{})
	}
	return g.draining
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (g *Gate) count(outcome string) {
	if g.OnOutcome != nil {
		g.OnOutcome(g.Room, outcome)
	}
}

func (g *Gate) reject(w http.ResponseWriter, r *http.Request, err error) {
	g.count(ErrorCode(err))
	if g.Reject != nil {
		g.Reject(w, r, err)
		return
	}
	a := Classify(err)
	http.Error(w, a.Code+": "+a.Message, a.Status)
}

func (g *Gate) logger() *slog.Logger {
	if g.Logger != nil {
		return g.Logger
	}
	return slog.Default()
}
