package waitroom

import (
	"context"
	"net/http"
	"time"
)

// Telling a buyer who is not watching that it is their turn (package
// notify sends the notices). The store keeps what a buyer asked for with
// its place, so that whichever instance admits the buyer can tell them.

// MaxNoticeBytes bounds the channels a buyer may leave with its place:
// a few addresses and push subscriptions, never a payload.
const MaxNoticeBytes = 4 << 10

// MaxNoticeSilence is how long a buyer who asked to be told may stay
// silent in the queue (AbandonAfter does not apply to them): a day, as
// long as any wait is allowed to be silent (MaxAbandonAfter).
const MaxNoticeSilence = MaxAbandonAfter

// Errors of the return link (NoticeStore.UseReturnLink, package notify).
var (
	ErrNoticesOff     = &Error{"NOTICES_UNSUPPORTED", "this waiting room's store cannot keep notice requests", http.StatusNotImplemented}
	ErrReturnLinkUsed = &Error{"RETURN_LINK_USED", "this return link has been used already", http.StatusForbidden}
)

// NoticeStore is a Store that keeps buyers' requests to be told when it is
// their turn. memstore and redisstore implement it; a store that does
// not answers the notify routes with ErrNoticesOff.
type NoticeStore interface {
	// SetNotice keeps channels (opaque to the store, at most
	// MaxNoticeBytes) with user's place in room, replacing what it kept:
	// ErrNotInQueue when the user is not waiting there. From then on the
	// user is not dropped for silence after AbandonAfter but only after
	// MaxNoticeSilence. Admit hands the channels back once, in
	// Admission.Notice, and forgets them; leaving or a drop forgets them.
	SetNotice(ctx context.Context, room, user string, channels []byte) error
	// Notice returns the channels kept with user's place (nil: none).
	Notice(ctx context.Context, room, user string) ([]byte, error)
	// Notified starts the first-use deadline of user's unconfirmed token
	// now, NotifiedFirstUseWithin long (never past its TTL), when the
	// token came with a notice (a watching user's is left as it is), and keeps
	// nonce as the one return link that may restore it. It returns how
	// long the token lives. ErrTokenNotFound without a live token.
	Notified(ctx context.Context, room, user, nonce string) (time.Duration, error)
	// UseReturnLink spends the return link nonce of user: exactly one of
	// any number of calls succeeds, the others are ErrReturnLinkUsed, as
	// is a nonce that is not the user's. Once the token is gone it is
	// ErrTokenNotFound, which the server tells as an expired link.
	UseReturnLink(ctx context.Context, room, user, nonce string) error
}

// Notices returns the store's NoticeStore, guarded like every other call;
// ok is false when the store keeps no notice requests.
func (g *GuardedStore) Notices() (NoticeStore, bool) {
	if _, ok := g.store.(NoticeStore); !ok {
		return nil, false
	}
	return guardedNotices{g}, true
}

type guardedNotices struct{ g *GuardedStore }

func (n guardedNotices) inner() NoticeStore { return n.g.store.(NoticeStore) }

func (n guardedNotices) SetNotice(ctx context.Context, room, user string, channels []byte) error {
	return guardedErr(ctx, n.g, room, func(ctx context.Context) error { return n.inner().SetNotice(ctx, room, user, channels) })
}

func (n guardedNotices) Notice(ctx context.Context, room, user string) ([]byte, error) {
	return guarded(ctx, n.g, room, func(ctx context.Context) ([]byte, error) { return n.inner().Notice(ctx, room, user) })
}

func (n guardedNotices) Notified(ctx context.Context, room, user, nonce string) (time.Duration, error) {
	return guarded(ctx, n.g, room, func(ctx context.Context) (time.Duration, error) { return n.inner().Notified(ctx, room, user, nonce) })
}

func (n guardedNotices) UseReturnLink(ctx context.Context, room, user, nonce string) error {
	return guardedErr(ctx, n.g, room, func(ctx context.Context) error { return n.inner().UseReturnLink(ctx, room, user, nonce) })
}
