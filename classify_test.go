package waitroom_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

type waitFor time.Duration

func (w waitFor) Error() string             { return "slow down" }
func (w waitFor) RetryAfter() time.Duration { return time.Duration(w) }
func (w waitFor) Unwrap() error             { return tooFast }

var tooFast = &waitroom.Error{Code: "RATE_LIMITED", Message: "slow down", Status: http.StatusTooManyRequests}

// TestClassify: the one answer of an error, wrapped or not: its code, safe
// message, status and Retry-After; anything without a code or a status is
// 500 INTERNAL with its cause hidden.
func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err    error
		code   string
		status int
		retry  time.Duration
	}{
		{waitroom.ErrQueueFull, "QUEUE_FULL", 429, -1},
		{fmt.Errorf("enter: %w", waitroom.ErrRoomClosed), "ROOM_CLOSED", 403, 0},
		{waitroom.ErrNotInQueue, "NOT_IN_QUEUE", 404, 0},
		{waitroom.ErrTokenInUse, "TOKEN_IN_USE", 409, 0},
		{waitroom.ErrTokenNotFound, "ENTRY_TOKEN_NOT_FOUND", 403, 0},
		{waitroom.BadRequest("rate: must be > 0"), "BAD_REQUEST", 400, 0},
		{fmt.Errorf("%w: dial: refused", waitroom.ErrStoreUnavailable), "STORE_UNAVAILABLE", 503, waitroom.UnavailableRetryAfter},
		{waitFor(7 * time.Second), "RATE_LIMITED", 429, 7 * time.Second},
		{errors.New("nil map"), "INTERNAL", 500, 0},
		{&waitroom.Error{Code: "NEW_CODE", Message: "no status given"}, "INTERNAL", 500, 0},
	} {
		a := waitroom.Classify(tt.err)
		require.Equal(t, tt.code, a.Code, "%v", tt.err)
		require.Equal(t, tt.status, a.Status, "%v", tt.err)
		require.Equal(t, tt.code != "INTERNAL", a.Known, "%v", tt.err)
		switch {
		case tt.retry < 0: // a full queue spreads its crowd over [30 s, 45 s)
			require.GreaterOrEqual(t, a.RetryAfter, waitroom.QueueFullRetryAfter)
			require.Less(t, a.RetryAfter, waitroom.QueueFullRetryAfter*3/2)
		default:
			require.Equal(t, tt.retry, a.RetryAfter, "%v", tt.err)
		}
		if !a.Known {
			require.Equal(t, "internal error", a.Message, "the cause is hidden")
		}
	}
	require.Equal(t, "rate: must be > 0", waitroom.Classify(waitroom.BadRequest("rate: must be > 0")).Message)
}
