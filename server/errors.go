package server

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/jsonhttp"
)

// Codes the server adds to the store's.
var (
	errNotFound            = &waitroom.Error{Code: "NOT_FOUND", Message: "no such endpoint"}
	errMethodNotAllowed    = &waitroom.Error{Code: "METHOD_NOT_ALLOWED", Message: "method not allowed"}
	errNotConfigured       = &waitroom.Error{Code: "NOT_CONFIGURED", Message: "no protected service is configured"}
	errUpstreamUnavailable = &waitroom.Error{Code: "UPSTREAM_UNAVAILABLE", Message: "the protected service is unavailable; your entry token is kept"}
)

// statusByCode is the one table that maps error codes to HTTP statuses.
// A code missing here is answered as 500 INTERNAL with its cause logged.
var statusByCode = map[string]int{
	waitroom.ErrQueueFull.Code:        http.StatusTooManyRequests,
	waitroom.ErrRoomClosed.Code:       http.StatusForbidden,
	waitroom.ErrRoomNotFound.Code:     http.StatusNotFound,
	waitroom.ErrRoomChanged.Code:      http.StatusConflict,
	waitroom.ErrNotInQueue.Code:       http.StatusNotFound,
	waitroom.ErrTokenNotFound.Code:    http.StatusForbidden,
	waitroom.ErrTokenInvalid.Code:     http.StatusForbidden,
	waitroom.ErrTokenInUse.Code:       http.StatusConflict,
	waitroom.ErrSoldOut.Code:          http.StatusConflict,
	waitroom.ErrAlreadyOrdered.Code:   http.StatusConflict,
	waitroom.ErrBadRequest.Code:       http.StatusBadRequest,
	waitroom.ErrStoreUnavailable.Code: http.StatusServiceUnavailable,
	errNotFound.Code:                  http.StatusNotFound,
	errMethodNotAllowed.Code:          http.StatusMethodNotAllowed,
	errNotConfigured.Code:             http.StatusNotFound,
	errUpstreamUnavailable.Code:       http.StatusBadGateway,
	errUnauthorized.Code:              http.StatusUnauthorized,
	errRoomExists.Code:                http.StatusConflict,
	errRateLimited.Code:               http.StatusTooManyRequests,
	errChallengeRequired.Code:         http.StatusPreconditionRequired,
}

// Retry-After hints. A full queue drains slowly, so the crowd it turns away
// is told to come back later and spread out (jitter) instead of retrying in
// lockstep; a store outage is usually short.
const (
	queueFullRetryAfter   = 30 * time.Second
	unavailableRetryAfter = 5 * time.Second
)

// writeError answers err with the status of its code and the standard body.
// The client sees the code and the safe message; the log gets the cause.
func writeError(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.DeadlineExceeded) && waitroom.ErrorCode(err) == "INTERNAL" {
		// A store call that timed out: the store is too slow to answer.
		err = errors.Join(waitroom.ErrStoreUnavailable, err)
	}
	code, message := waitroom.ErrorCode(err), waitroom.ErrorMessage(err)
	status, known := statusByCode[code]
	ctx := r.Context()
	switch {
	case !known && ctx.Err() != nil:
		// The client went away mid-request; nobody reads the answer.
		log.DebugContext(ctx, "request cancelled", "method", r.Method, "path", r.URL.Path, "err", err)
		code, message, status = "INTERNAL", "internal error", http.StatusInternalServerError
	case !known:
		log.ErrorContext(ctx, "internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		code, message, status = "INTERNAL", "internal error", http.StatusInternalServerError
	case status >= 500 && code != waitroom.ErrStoreUnavailable.Code:
		// A store outage is logged when it starts and ends (GuardedStore),
		// not once per request.
		log.WarnContext(ctx, "request failed", "method", r.Method, "path", r.URL.Path, "code", code, "err", err)
	default:
		log.DebugContext(ctx, "request refused", "method", r.Method, "path", r.URL.Path, "code", code, "err", err)
	}
	switch code {
	case waitroom.ErrQueueFull.Code:
		jsonhttp.RetryAfter(w, queueFullRetryAfter+rand.N(queueFullRetryAfter/2))
	case waitroom.ErrStoreUnavailable.Code:
		jsonhttp.RetryAfter(w, unavailableRetryAfter)
	case errRateLimited.Code:
		var rl *rateLimited
		if errors.As(err, &rl) {
			jsonhttp.RetryAfter(w, rl.wait)
		}
	case errChallengeRequired.Code:
		// The answer carries a challenge to solve; a stale solution gets a
		// fresh one the same way.
		var c *challengeRequired
		if errors.As(err, &c) {
			jsonhttp.Write(w, status, challengeBody{
				Error:      jsonhttp.ErrorDetail{Code: code, Message: message},
				Challenge:  c.challenge,
				Difficulty: c.difficulty,
			})
			return
		}
	}
	jsonhttp.Error(w, status, code, message)
}

// challengeBody is the 428 answer: the error and the challenge to solve.
type challengeBody struct {
	Error      jsonhttp.ErrorDetail `json:"error"`
	Challenge  string               `json:"challenge"`
	Difficulty int                  `json:"difficulty"`
}
