package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/i18n"
)

// maxSending bounds the notices in flight at once, so that a burst of
// admissions does not open thousands of SMTP connections.
const maxSending = 32

// Notifier tells admitted buyers who asked for it.
type Notifier struct {
	Store  waitroom.NoticeStore
	Linker *Linker
	Mailer *Mailer // nil: email is off
	Pusher *Pusher // nil: Web Push is off
	// PublicURL is where buyers reach the waiting room; return links are
	// PublicURL/return/{room}?l=….
	PublicURL *url.URL
	Logger    *slog.Logger
	// Timeout bounds one buyer's notice, all its channels; default 60 s.
	Timeout time.Duration
	// OnOutcome, if set, is told of each channel of each notice Tell
	// tried: channel "email" or "push", outcome "sent" or "failed"
	// (refused, unreachable, or no longer configured); and once, with
	// channel "", outcome "no_token", of a notice whose buyer's token was
	// gone before it could be sent (nothing is sent then).
	OnOutcome func(room, channel, outcome string)

	once    sync.Once
	sending chan struct{}
	wg      sync.WaitGroup
}

// OnAdmit sends, in the background, the notices of the admissions that
// carry one; it is the admitter's hook (waitroom.Admitter.OnAdmit).
func (n *Notifier) OnAdmit(room string, admitted []waitroom.Admission) {
	n.once.Do(func() { n.sending = make(chan struct{}, maxSending) })
	for _, a := range admitted {
		if a.Notice == nil {
			continue
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.sending <- struct{}{}
			defer func() { <-n.sending }()
			timeout := n.Timeout
			if timeout <= 0 {
				timeout = time.Minute
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			if err := n.Tell(ctx, room, a.User, a.Notice); err != nil {
				n.logger().Warn("notice not sent", "room", room, "err", err)
			}
		}()
	}
}

// Wait returns once every notice OnAdmit started is done.
func (n *Notifier) Wait() { n.wg.Wait() }

func (n *Notifier) logger() *slog.Logger {
	if n.Logger == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return n.Logger
}

// Tell sends user's notice now: it starts the buyer's first-use deadline
// (NoticeStore.Notified), then writes on every channel asked for. It
// fails only when no channel got the notice.
func (n *Notifier) Tell(ctx context.Context, room, user string, notice []byte) error {
	req, err := Parse(notice)
	if err != nil {
		return fmt.Errorf("notify: the kept request does not read: %w", err)
	}
	nonce := NewNonce()
	ttl, err := n.Store.Notified(ctx, room, user, nonce)
	if errors.Is(err, waitroom.ErrTokenNotFound) {
		n.outcome(room, "", "no_token")
	}
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	link := n.ReturnURL(room, n.Linker.Sign(Link{Room: room, User: user, Nonce: nonce, Expires: n.Linker.now().Add(ttl)}))
	lang := i18n.Find(req.Lang)
	if lang == nil {
		lang = i18n.English()
	}
	var errs []error
	sent := 0
	for _, c := range req.Channels {
		var err error
		channel := "email"
		if c.Push != nil {
			channel = "push"
		}
		switch {
		case c.Push != nil && n.Pusher != nil:
			payload, _ := json.Marshal(map[string]string{
				"title": lang.T("notice.subject"), "body": lang.T("notice.push_body"), "url": link, "lang": lang.Code})
			err = n.Pusher.Send(ctx, c.Push, payload, ttl)
		case c.Email != "" && n.Mailer != nil:
			err = n.Mailer.Send(ctx, c.Email, lang.T("notice.subject"), lang.T("notice.body", "Link", link))
		default:
			err = errors.New("channel no longer configured")
		}
		if err != nil {
			n.outcome(room, channel, "failed")
			errs = append(errs, err)
			continue
		}
		n.outcome(room, channel, "sent")
		sent++
	}
	n.logger().Info("notice sent", "room", room, "channels", sent, "failed", len(errs))
	if sent == 0 {
		return errors.Join(append(errs, errors.New("no channel took the notice"))...)
	}
	return nil
}

func (n *Notifier) outcome(room, channel, outcome string) {
	if n.OnOutcome != nil {
		n.OnOutcome(room, channel, outcome)
	}
}

// ReturnURL is the link that spends value in room.
func (n *Notifier) ReturnURL(room, value string) string {
	u := *n.PublicURL
	u.Path = singleSlash(u.Path) + "/return/" + room
	u.RawQuery = url.Values{"l": {value}}.Encode()
	return u.String()
}

func singleSlash(p string) string {
	for len(p) > 0 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	return p
}
