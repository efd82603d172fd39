package waitroom

import (
	"errors"
	"math/rand/v2"
	"net/http"
	"time"
)

// Error is a waiting-room error a client may see: a stable code, a message
// safe to show and the HTTP status it is answered with, declared together
// so that one classification (Classify) serves the JSON answers, the
// waiting page and the gate. A Status of 0 is answered as 500 INTERNAL.
type Error struct {
	Code    string
	Message string
	Status  int
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// The sentinel errors every Store returns; compare with errors.Is.
var (
	ErrQueueFull      = &Error{"QUEUE_FULL", "the queue is full; try again later", http.StatusTooManyRequests}
	ErrRoomClosed     = &Error{"ROOM_CLOSED", "the room is closed", http.StatusForbidden}
	ErrRoomNotFound   = &Error{"ROOM_NOT_FOUND", "no such room", http.StatusNotFound}
	ErrRoomChanged    = &Error{"ROOM_CHANGED", "the room's settings changed meanwhile; read them again", http.StatusConflict}
	ErrNotInQueue     = &Error{"NOT_IN_QUEUE", "not in the queue", http.StatusNotFound}
	ErrTokenNotFound  = &Error{"ENTRY_TOKEN_NOT_FOUND", "no live entry token", http.StatusForbidden}
	ErrTokenInvalid   = &Error{"ENTRY_TOKEN_INVALID", "the entry token does not match", http.StatusForbidden}
	ErrTokenInUse     = &Error{"TOKEN_IN_USE", "the entry token is being used by another request", http.StatusConflict}
	ErrSoldOut        = &Error{"SOLD_OUT", "everything is sold", http.StatusConflict}
	ErrNoDraw         = &Error{"NO_DRAW", "this room has no scheduled opening", http.StatusNotFound}
	ErrDrawPending    = &Error{"DRAW_PENDING", "the opening has not been drawn yet", http.StatusConflict}
	ErrAlreadyOrdered = &Error{"ALREADY_ORDERED", "you have ordered in this sale already; one order per buyer", http.StatusConflict}
	// The draw's record (drop.go).
	ErrDrawPublished    = &Error{"DRAW_PUBLISHED", "prequeue_order cannot change once the draw's commitment is published (the room is scheduled)", http.StatusConflict}
	ErrQueueNotEmpty    = &Error{"QUEUE_NOT_EMPTY", "opens_at cannot be set while people wait in the queue: early arrivals would be placed ahead of them", http.StatusConflict}
	ErrDrawSeedMismatch = &Error{"DRAW_SEED_MISMATCH", "the draw's seed no longer matches its published commitment; the draw is refused", http.StatusInternalServerError}
	// Passes (pass.go).
	ErrPassInvalid   = &Error{"PASS_INVALID", "this pass is not valid here: unknown, revoked or expired", http.StatusForbidden}
	ErrPassUsedUp    = &Error{"PASS_USED_UP", "this pass has been used as many times as it allows", http.StatusForbidden}
	ErrInviteOnly    = &Error{"INVITE_ONLY", "this room lets in pass holders only", http.StatusForbidden}
	ErrNoFreeSlot    = &Error{"NO_FREE_SLOT", "every entry slot is taken right now; try again shortly", http.StatusTooManyRequests}
	ErrTooManyPasses = &Error{"TOO_MANY_PASSES", "the room keeps too many passes; revoke some first", http.StatusConflict}
	// A room spread over shards (spread.go).
	ErrShardsNeedCluster = &Error{"SHARDS_NEED_CLUSTER", "shards above 1 need a Redis Cluster store", http.StatusBadRequest}
	ErrShardsNotEmpty    = &Error{"SHARDS_NOT_EMPTY", "shards cannot change while anyone waits or holds a token in the room", http.StatusConflict}
	ErrBadRequest        = &Error{"BAD_REQUEST", "bad request", http.StatusBadRequest}
	ErrStoreUnavailable  = &Error{"STORE_UNAVAILABLE", "the waiting room store is unavailable", http.StatusServiceUnavailable}
)

// UnansweredClaimError is a Claim whose call got no answer (a timeout, a
// lost connection): the store may still make it, holding the token under
// Hold's lease, which nobody would then settle. Releasing Hold gives that
// hold back, or, when the claim has not landed yet, voids it should it
// land later. It answers as Err does.
type UnansweredClaimError struct {
	Hold Hold
	Err  error
}

func (e *UnansweredClaimError) Error() string { return e.Err.Error() }
func (e *UnansweredClaimError) Unwrap() error { return e.Err }

// ErrorCode returns the code of the first *Error in err's chain, or
// "INTERNAL" when there is none.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return "INTERNAL"
}

// ErrorMessage returns the client-safe message of the first *Error in err's
// chain; other errors hide their cause behind a generic message.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// BadRequest returns an error with code BAD_REQUEST and the given message;
// errors.Is(err, ErrBadRequest) holds.
func BadRequest(message string) error {
	return &badRequest{msg: message}
}

type badRequest struct{ msg string }

func (b *badRequest) Error() string        { return "BAD_REQUEST: " + b.msg }
func (b *badRequest) Is(target error) bool { return target == ErrBadRequest }
func (b *badRequest) As(target any) bool {
	if p, ok := target.(**Error); ok {
		*p = &Error{ErrBadRequest.Code, b.msg, ErrBadRequest.Status}
		return true
	}
	return false
}

// Answer is how an error is answered over HTTP: the one classification
// behind the JSON error body, the waiting page and the gate.
type Answer struct {
	Code    string
	Message string // safe to show; a cause without a code is hidden
	Status  int
	// RetryAfter, if not zero, is the Retry-After the answer carries.
	RetryAfter time.Duration
	// Known is false for an error without a code or status: a bug, answered
	// 500 INTERNAL, whose cause belongs in the log.
	Known bool
}

// Retry-After hints. A full queue drains slowly, so the crowd it turns away
// is told to come back later and spread out (jitter) instead of retrying in
// lockstep; a store outage is usually short.
const (
	QueueFullRetryAfter   = 30 * time.Second
	UnavailableRetryAfter = 5 * time.Second
)

// Classify returns how err is answered. An error in the chain with a
// RetryAfter() method (a rate limit) sets its own Retry-After.
func Classify(err error) Answer {
	var e *Error
	if !errors.As(err, &e) || e.Status == 0 {
		return Answer{Code: "INTERNAL", Message: "internal error", Status: http.StatusInternalServerError}
	}
	a := Answer{Code: e.Code, Message: e.Message, Status: e.Status, Known: true}
	var waiter interface{ RetryAfter() time.Duration }
	switch {
	case errors.As(err, &waiter):
		a.RetryAfter = waiter.RetryAfter()
	case e.Code == ErrQueueFull.Code:
		a.RetryAfter = QueueFullRetryAfter + rand.N(QueueFullRetryAfter/2)
	case e.Code == ErrStoreUnavailable.Code, e.Code == ErrNoFreeSlot.Code:
		a.RetryAfter = UnavailableRetryAfter
	}
	return a
}
