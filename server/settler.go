package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/waitroom/waitroom/jsonhttp"
)

// Settle outcomes of POST /gate/settle.
const (
	OutcomeSpent    = "spent"
	OutcomeReleased = "released"
)

// settleAttempts bounds the tries of one settle: a 503 (the store
// stalled) or a lost connection is tried again, a refusal is not.
const settleAttempts = 3

// settleTimeout bounds one settle attempt.
const settleTimeout = 5 * time.Second

// Settler is an order API's side of forward auth: it settles the hold a
// proxy's /gate/auth answer put on the order (Waitroom-Hold) through POST
// /gate/settle, spent when the order answered 2xx and released otherwise,
// before the answer goes out, so that the buyer's next request finds the
// token settled. The built-in shop behind a proxy (--shop-addr) is
// wrapped in one; a Go order API of your own can be too.
type Settler struct {
	// URL is the waiting room's POST /gate/settle endpoint.
	URL string
	// Secret is its --settle-secret.
	Secret string
	// Client sends the settles; nil: http.DefaultClient. Each attempt is
	// bounded by settleTimeout.
	Client *http.Client
	// Check, if set, vets the hold and the headers an order came with
	// before the order API sees it (Server.CheckHold, for an order API in
	// the waiting room's process); a refusal is answered with its code.
	Check func(hold string, h http.Header) error
	// Logger receives the settles that failed. Default: discard.
	Logger *slog.Logger
	// retryAfter is the pause before a retry; tests shorten it.
	retryAfter time.Duration
}

// SettleError is a settle the waiting room refused or did not answer.
type SettleError struct {
	Status int    // 0: no answer
	Code   string // the refusal's code, "" without one
	Err    error  // the transport's error, nil with an answer
}

func (e *SettleError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("settle: no answer: %v", e.Err)
	}
	return fmt.Sprintf("settle: %d %s", e.Status, e.Code)
}

func (e *SettleError) Unwrap() error { return e.Err }

// Settle settles hold with outcome (OutcomeSpent or OutcomeReleased),
// trying again on a 5xx or a lost connection, at most settleAttempts
// times.
func (s *Settler) Settle(ctx context.Context, hold, outcome string) error {
	body, _ := json.Marshal(settleRequest{Hold: hold, Outcome: outcome})
	var err error
	for attempt := range settleAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return errors.Join(err, ctx.Err())
			case <-time.After(cmp.Or(s.retryAfter, 200*time.Millisecond) * time.Duration(attempt)):
			}
		}
		var retry bool
		if retry, err = s.settleOnce(ctx, body); err == nil || !retry {
			return err
		}
	}
	return err
}

// settleOnce sends one settle; retry says whether another may land.
func (s *Settler) settleOnce(ctx context.Context, body []byte) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return false, &SettleError{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.Secret)
	client := s.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return true, &SettleError{Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<10))
		return false, nil
	}
	var refused jsonhttp.ErrorBody
	_ = json.NewDecoder(io.LimitReader(resp.Body, 16<<10)).Decode(&refused)
	return resp.StatusCode >= 500, &SettleError{Status: resp.StatusCode, Code: refused.Error.Code}
}

// Wrap settles every request next serves: a request without exactly one
// Waitroom-Hold is refused 403 HOLD_MISSING before next sees it (and one
// that Check refuses, with Check's code); the
// hold is settled when next answers its final status (2xx: spent; any
// other, or a panic: released) and before that status goes out. A settle
// that fails is logged and the answer still goes out: the order is what
// it is, and an unsettled hold lapses after the room's lease.
func (s *Settler) Wrap(next http.Handler) http.Handler {
	log := s.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		holds := r.Header.Values(HoldHeader)
		if len(holds) != 1 || holds[0] == "" {
			writeError(log, w, r, errHoldMissing)
			return
		}
		hold := holds[0]
		if s.Check != nil {
			if err := s.Check(hold, r.Header); err != nil {
				writeError(log, w, r, err)
				return
			}
		}
		r.Header.Del(HoldHeader) // the order API has no use for it
		// The settle outlives a buyer who hung up: the order ran.
		ctx := context.WithoutCancel(r.Context())
		settle := func(status int) {
			outcome := OutcomeReleased
			if status >= 200 && status < 300 {
				outcome = OutcomeSpent
			}
			if err := s.Settle(ctx, hold, outcome); err != nil {
				log.ErrorContext(ctx, "settling the order's hold failed; it lapses after the room's lease",
					"outcome", outcome, "status", status, "err", err)
			}
		}
		sw := &settlingWriter{ResponseWriter: w, settle: settle}
		defer func() {
			if !sw.settled {
				// A panic before any answer, or none at all (net/http
				// answers 200 for a handler that wrote nothing).
				status := http.StatusOK
				p := recover()
				if p != nil {
					status = http.StatusInternalServerError
				}
				sw.settle(status)
				sw.settled = true
				if p != nil {
					panic(p)
				}
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

// settlingWriter settles when the first final status is written, before
// it goes out; an interim 1xx passes through.
type settlingWriter struct {
	http.ResponseWriter
	settle  func(status int)
	settled bool
}

func (w *settlingWriter) WriteHeader(code int) {
	if !w.settled && code >= 200 {
		w.settled = true
		w.settle(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *settlingWriter) Write(b []byte) (int, error) {
	if !w.settled {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *settlingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
