package server

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/jsonhttp"
)

// Codes the server adds to the store's, all in one place: routing and the
// gate's upstream; the door (door.go); the operator API (admin.go);
// forward auth (fwdauth.go).
var (
	errNotFound            = &waitroom.Error{Code: "NOT_FOUND", Message: "no such endpoint", Status: http.StatusNotFound}
	errMethodNotAllowed    = &waitroom.Error{Code: "METHOD_NOT_ALLOWED", Message: "method not allowed", Status: http.StatusMethodNotAllowed}
	errNotConfigured       = &waitroom.Error{Code: "NOT_CONFIGURED", Message: "no protected service is configured", Status: http.StatusNotFound}
	errUpstreamUnavailable = &waitroom.Error{Code: "UPSTREAM_UNAVAILABLE", Message: "the protected service is unavailable; your entry token is kept", Status: http.StatusBadGateway}

	errRateLimited       = &waitroom.Error{Code: "RATE_LIMITED", Message: "too many requests; slow down (your place is kept)", Status: http.StatusTooManyRequests}
	errChallengeRequired = &waitroom.Error{Code: "CHALLENGE_REQUIRED", Message: "solve the join challenge first", Status: http.StatusPreconditionRequired}
	errCrossSiteJoin     = &waitroom.Error{Code: "CROSS_SITE_JOIN", Message: "joining is only possible from the waiting room's own page", Status: http.StatusForbidden}

	errUnauthorized = &waitroom.Error{Code: "UNAUTHORIZED", Message: "a valid admin bearer token is required", Status: http.StatusUnauthorized}
	errRoomExists   = &waitroom.Error{Code: "ROOM_EXISTS", Message: "the room exists already", Status: http.StatusConflict}

	// Too many wrong admin tokens from one address (adminauth.go); an
	// opening set in the past (admin.go).
	errAdminRateLimited = &waitroom.Error{Code: errRateLimited.Code, Message: "too many wrong admin tokens from this address; wait as Retry-After says", Status: http.StatusTooManyRequests}
	errOpensAtPast      = &waitroom.Error{Code: "OPENS_AT_PAST", Message: "opens_at is in the past, so the room would open at once; give a time to come (\"\" clears it)", Status: http.StatusBadRequest}

	errForwardAuthOff  = &waitroom.Error{Code: errNotConfigured.Code, Message: "forward auth is off: no settle secret is configured", Status: http.StatusNotFound}
	errSettleNoSecret  = &waitroom.Error{Code: "SETTLE_UNAUTHORIZED", Message: "the settle secret is missing: Authorization: Bearer SECRET", Status: http.StatusUnauthorized}
	errSettleBadSecret = &waitroom.Error{Code: "SETTLE_FORBIDDEN", Message: "the settle secret is wrong", Status: http.StatusForbidden}
	errHoldInvalid     = &waitroom.Error{Code: "HOLD_INVALID", Message: "the hold id is not one this room issued", Status: http.StatusBadRequest}
	errHoldMissing     = &waitroom.Error{Code: "HOLD_MISSING", Message: "the order carries no Waitroom-Hold: it did not pass the waiting room's forward auth", Status: http.StatusForbidden}
	errHoldMismatch    = &waitroom.Error{Code: "HOLD_MISMATCH", Message: "the order's user, Idempotency-Key or Waitroom-Units are not those its hold was given with", Status: http.StatusForbidden}
)

// classify is waitroom.Classify with the log line the error deserves: the
// cause of a bug at error level, a failure at warn, a refusal at debug. A
// store outage is logged when it starts and ends (waitroom.GuardedStore),
// not once per request.
func classify(log *slog.Logger, r *http.Request, err error) waitroom.Answer {
	a := waitroom.Classify(err)
	ctx := r.Context()
	switch {
	case !a.Known && ctx.Err() != nil:
		// The client went away mid-request; nobody reads the answer.
		log.DebugContext(ctx, "request cancelled", "method", r.Method, "path", r.URL.Path, "err", err)
	case !a.Known:
		log.ErrorContext(ctx, "internal error", "method", r.Method, "path", r.URL.Path, "err", err)
	case a.Status >= 500 && a.Code != waitroom.ErrStoreUnavailable.Code:
		log.WarnContext(ctx, "request failed", "method", r.Method, "path", r.URL.Path, "code", a.Code, "err", err)
	default:
		log.DebugContext(ctx, "request refused", "method", r.Method, "path", r.URL.Path, "code", a.Code, "err", err)
	}
	return a
}

// writeError answers err with its status and the standard body. The client
// sees the code and the safe message; the log gets the cause.
func writeError(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	a := classify(log, r, err)
	if a.RetryAfter > 0 {
		jsonhttp.RetryAfter(w, a.RetryAfter)
	}
	// The answer carries a challenge to solve; a stale solution gets a
	// fresh one the same way.
	var c *challengeRequired
	if a.Code == errChallengeRequired.Code && errors.As(err, &c) {
		jsonhttp.Write(w, a.Status, challengeBody{
			Error:      jsonhttp.ErrorDetail{Code: a.Code, Message: a.Message},
			Challenge:  c.challenge,
			Difficulty: c.difficulty,
		})
		return
	}
	jsonhttp.Error(w, a.Status, a.Code, a.Message)
}

// challengeBody is the 428 answer: the error and the challenge to solve.
type challengeBody struct {
	Error      jsonhttp.ErrorDetail `json:"error"`
	Challenge  string               `json:"challenge"`
	Difficulty int                  `json:"difficulty"`
}
