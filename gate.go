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
	"time"
)

// Header names the gate reads and sets.
const (
	DefaultUserHeader    = "X-User-Id"
	EntryTokenHeader     = "X-Entry-Token"
	IdempotencyKeyHeader = "Idempotency-Key"
	// UnitsHeader tells the order API how many units the order's token
	// reserved (Hold.Units): the most the order may buy. The gate cannot
	// read every order API's body; the order API refuses a larger
	// quantity before it touches its stock (the built-in shop: 422
	// QUANTITY_OVER_LIMIT), so the room never sells more than it reserved.
	UnitsHeader          = "Waitroom-Units"
	defaultSettleTimeout = 5 * time.Second
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
	// "released", or the error code of a refused claim.
	OnOutcome func(room, outcome string)
	// OnServed, if set, is told how long each request the gate let
	// through took in the protected handler and what it answered: the
	// measured service time a RateTuner steers by.
	OnServed func(room string, took time.Duration, status int)
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
}

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
		userHeader := g.UserHeader
		if userHeader == "" {
			userHeader = DefaultUserHeader
		}
		users, tokens := r.Header.Values(userHeader), r.Header.Values(EntryTokenHeader)
		switch {
		case len(users) > 1:
			// The upstream might read another of them than the one checked.
			g.reject(w, r, BadRequest("several "+userHeader+" headers"))
			return
		case len(tokens) > 1:
			g.reject(w, r, BadRequest("several "+EntryTokenHeader+" headers"))
			return
		case len(users) == 0 || !ValidUserID(users[0]):
			g.reject(w, r, BadRequest("missing or malformed "+userHeader+" header"))
			return
		case len(tokens) == 0 || tokens[0] == "":
			g.reject(w, r, ErrTokenNotFound)
			return
		case !ValidToken(tokens[0]):
			g.reject(w, r, BadRequest("malformed "+EntryTokenHeader+" header"))
			return
		}
		user, token := users[0], tokens[0]
		hold, err := g.Store.Claim(r.Context(), g.Room, user, token)
		if err != nil {
			if errors.Is(err, ErrStoreUnavailable) && g.StoreDown != nil && g.StoreDown(r) {
				g.passUnclaimed(w, r, userHeader, user, token, next)
				return
			}
			g.reject(w, r, err)
			return
		}

		r = vouch(r, userHeader, hold)
		rec := NewStatusRecorder(w)
		completed := false
		stopRenewing := g.keepLease(r.Context(), hold)
		defer func() {
			stopRenewing()
			// Settle even when the request was cancelled: the hold must not
			// wait out its lease.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), defaultSettleTimeout)
			defer cancel()
			if completed {
				g.settle(ctx, "completed", g.Store.Complete(ctx, hold))
				return
			}
			g.settle(ctx, "released", g.Store.Release(ctx, hold))
		}()
		started := time.Now()
		next.ServeHTTP(rec, r)
		completed = rec.Status() >= 200 && rec.Status() < 300
		if g.OnServed != nil {
			g.OnServed(g.Room, time.Since(started), rec.Status())
		}
	})
}

// keepLease renews hold's lease while the protected handler works, well
// before each lease runs out, so a slow order keeps its token held and a
// second request with it gets TOKEN_IN_USE; the lease then frees only the
// tokens of a process that died. The returned func stops renewing and
// waits until it has.
func (g *Gate) keepLease(ctx context.Context, hold Hold) (stop func()) {
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
			err := g.Store.Renew(rctx, hold)
			rcancel()
			switch {
			case err == nil, ctx.Err() != nil:
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
	return func() {
		cancel()
		<-done
	}
}

// gateHeaders is what the gate vouches for on a request it let through.
type gateHeaders struct {
	userHeader, user, idempotencyKey, units string
}

type gateHeadersKey struct{}

// vouch sets the headers the upstream relies on (the user the token was
// claimed for, exactly once; the idempotency key; the units the token
// reserved; never the token) and keeps them in r's context, so that a
// reverse proxy sets them again on its outgoing request after hop-by-hop
// handling (SetGateHeaders): a client naming them in Connection cannot
// strip them.
func vouch(r *http.Request, userHeader string, h Hold) *http.Request {
	v := gateHeaders{userHeader, h.User, orderKey(h), strconv.Itoa(max(h.Units, 1))}
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
	delSpellings(h, EntryTokenHeader, IdempotencyKeyHeader, UnitsHeader, v.userHeader)
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

func (g *Gate) settle(ctx context.Context, outcome string, err error) {
	if err != nil {
		g.logger().ErrorContext(ctx, "settling entry token failed", "room", g.Room, "outcome", outcome, "err", err)
		outcome = "settle_failed"
	}
	if g.OnOutcome != nil {
		g.OnOutcome(g.Room, outcome)
	}
}

func (g *Gate) reject(w http.ResponseWriter, r *http.Request, err error) {
	if g.OnOutcome != nil {
		g.OnOutcome(g.Room, ErrorCode(err))
	}
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
