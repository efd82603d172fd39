package waitroom

import "errors"

// Error is a waiting-room error a client may see: a stable code and a
// message safe to show. The server maps codes to HTTP statuses in one table.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// The sentinel errors every Store returns; compare with errors.Is.
var (
	ErrQueueFull      = &Error{"QUEUE_FULL", "the queue is full; try again later"}
	ErrRoomClosed     = &Error{"ROOM_CLOSED", "the room is closed"}
	ErrRoomNotFound   = &Error{"ROOM_NOT_FOUND", "no such room"}
	ErrRoomChanged    = &Error{"ROOM_CHANGED", "the room's settings changed meanwhile; read them again"}
	ErrNotInQueue     = &Error{"NOT_IN_QUEUE", "not in the queue"}
	ErrTokenNotFound  = &Error{"ENTRY_TOKEN_NOT_FOUND", "no live entry token"}
	ErrTokenInvalid   = &Error{"ENTRY_TOKEN_INVALID", "the entry token does not match"}
	ErrTokenInUse     = &Error{"TOKEN_IN_USE", "the entry token is being used by another request"}
	ErrSoldOut        = &Error{"SOLD_OUT", "everything is sold"}
	ErrAlreadyOrdered = &Error{"ALREADY_ORDERED", "you have ordered in this sale already; one order per buyer"}
	// Passes (pass.go).
	ErrPassInvalid      = &Error{"PASS_INVALID", "this pass is not valid here: unknown, revoked or expired"}
	ErrPassUsedUp       = &Error{"PASS_USED_UP", "this pass has been used as many times as it allows"}
	ErrInviteOnly       = &Error{"INVITE_ONLY", "this room lets in pass holders only"}
	ErrNoFreeSlot       = &Error{"NO_FREE_SLOT", "every entry slot is taken right now; try again shortly"}
	ErrTooManyPasses    = &Error{"TOO_MANY_PASSES", "the room keeps too many passes; revoke some first"}
	ErrBadRequest       = &Error{"BAD_REQUEST", "bad request"}
	ErrStoreUnavailable = &Error{"STORE_UNAVAILABLE", "the waiting room store is unavailable"}
)

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
		*p = &Error{Code: ErrBadRequest.Code, Message: b.msg}
		return true
	}
	return false
}
