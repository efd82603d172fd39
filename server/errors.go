package server

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/httperr"
	"github.com/waitroom/waitroom/jsonhttp"
)

// Codes the server adds to the store's, all in one place: routing; the
// door (door.go); forward auth (fwdauth.go). The operator API's are in
// package admin.
var (
	errNotFound         = httperr.ErrNotFound
	errMethodNotAllowed = &waitroom.Error{Code: "METHOD_NOT_ALLOWED", Message: "method not allowed", Status: http.StatusMethodNotAllowed}
	errNotConfigured    = &waitroom.Error{Code: "NOT_CONFIGURED", Message: "no protected service is configured", Status: http.StatusNotFound}

	errRateLimited       = &waitroom.Error{Code: "RATE_LIMITED", Message: "too many requests; slow down (your place is kept)", Status: http.StatusTooManyRequests}
	errChallengeRequired = &waitroom.Error{Code: "CHALLENGE_REQUIRED", Message: "solve the join challenge first", Status: http.StatusPreconditionRequired}
	errCrossSiteJoin     = &waitroom.Error{Code: "CROSS_SITE_JOIN", Message: "joining is only possible from the waiting room's own page", Status: http.StatusForbidden}

	errForwardAuthOff  = &waitroom.Error{Code: errNotConfigured.Code, Message: "forward auth is off: no settle secret is configured", Status: http.StatusNotFound}
	errSettleNoSecret  = &waitroom.Error{Code: "SETTLE_UNAUTHORIZED", Message: "the settle secret is missing: Authorization: Bearer SECRET", Status: http.StatusUnauthorized}
	errSettleBadSecret = &waitroom.Error{Code: "SETTLE_FORBIDDEN", Message: "the settle secret is wrong", Status: http.StatusForbidden}
	errHoldInvalid     = &waitroom.Error{Code: "HOLD_INVALID", Message: "the hold id is not one this room issued", Status: http.StatusBadRequest}
	errHoldMissing     = &waitroom.Error{Code: "HOLD_MISSING", Message: "the order carries no Waitroom-Hold: it did not pass the waiting room's forward auth", Status: http.StatusForbidden}
	errHoldMismatch    = &waitroom.Error{Code: "HOLD_MISMATCH", Message: "the order's user, Idempotency-Key or Waitroom-Units are not those its hold was given with", Status: http.StatusForbidden}
)

// classify is httperr.Classify: waitroom.Classify with the log line the
// error deserves.
func classify(log *slog.Logger, r *http.Request, err error) waitroom.Answer {
	return httperr.Classify(log, r, err)
}

// writeError answers err with its status and the standard body
// (httperr.Write); a join challenge's refusal carries the challenge to
// solve, and a stale solution gets a fresh one the same way.
func writeError(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	a := classify(log, r, err)
	var c *challengeRequired
	if a.Code == errChallengeRequired.Code && errors.As(err, &c) {
		httperr.RetryAfter(w, a)
		jsonhttp.Write(w, a.Status, challengeBody{
			Error:      jsonhttp.ErrorDetail{Code: a.Code, Message: a.Message},
			Challenge:  c.challenge,
			Difficulty: c.difficulty,
		})
		return
	}
	httperr.Answer(w, a)
}

// challengeBody is the 428 answer: the error and the challenge to solve.
type challengeBody struct {
	Error      jsonhttp.ErrorDetail `json:"error"`
	Challenge  string               `json:"challenge"`
	Difficulty int                  `json:"difficulty"`
}
