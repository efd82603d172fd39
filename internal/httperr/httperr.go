// Package httperr answers an error the one way every HTTP part of waitroom
// does: its code, safe message, status and Retry-After from
// waitroom.Classify, the standard JSON body, and the log line the error
// deserves. The crowd's server, the operator API and the reverse proxy
// share it, so an error reads the same whichever part answered it.
package httperr

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/jsonhttp"
)

// ErrNotFound is the answer for a path no route serves.
var ErrNotFound = &waitroom.Error{Code: "NOT_FOUND", Message: "no such endpoint", Status: http.StatusNotFound}

// Classify is waitroom.Classify with the log line the error deserves: the
// cause of a bug at error level, a failure at warn, a refusal at debug. A
// store outage is logged when it starts and ends (waitroom.GuardedStore),
// not once per request.
func Classify(log *slog.Logger, r *http.Request, err error) waitroom.Answer {
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

// Write answers err with its status and the standard body. The client
// sees the code and the safe message; the log gets the cause.
func Write(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	Answer(w, Classify(log, r, err))
}

// Answer writes a classified error: its Retry-After and the standard body.
func Answer(w http.ResponseWriter, a waitroom.Answer) {
	RetryAfter(w, a)
	jsonhttp.Error(w, a.Status, a.Code, a.Message)
}

// RetryAfter sets the Retry-After header a's answer carries, if any.
func RetryAfter(w http.ResponseWriter, a waitroom.Answer) {
	if a.RetryAfter > 0 {
		jsonhttp.RetryAfter(w, a.RetryAfter)
	}
}

// Serve adapts a handler that returns an error: the error is answered by
// answer (Write, or a part's own that builds on it).
func Serve(answer func(http.ResponseWriter, *http.Request, error), fn func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := fn(w, r); err != nil {
			answer(w, r, err)
		}
	})
}

// Handle registers h on mux, turning ServeMux's panic on a bad or
// conflicting pattern into an error.
func Handle(mux *http.ServeMux, pattern string, h http.Handler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("route %q: %v", pattern, p)
		}
	}()
	mux.Handle(pattern, h)
	return nil
}
