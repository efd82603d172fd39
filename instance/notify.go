package instance

import (
	"crypto/rand"
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/notify"
	"github.com/waitroom/waitroom/server"
)

// newNotifier builds the notices' sender from the flags (nil when both
// channels are off), and returns the cookie secret the server signs
// with: the return links are signed with the same key (in a context of
// their own), so a server without --cookie-secret gets one random key
// for both.
func (in *Instance) newNotifier(store *waitroom.GuardedStore, log *slog.Logger) (*notify.Notifier, []byte, error) {
	secret := in.Config.CookieSecret
	c := in.Config
	if c.VAPIDKeyFile == "" && c.SMTPURL == "" {
		return nil, secret, nil
	}
	notices, ok := store.Notices()
	if !ok {
		// Both stores serve can open keep them (memstore, redisstore): only
		// a store of the Go API's own may not.
		return nil, nil, errors.New("--smtp-url and --vapid-key-file need a store that keeps notice requests (waitroom.NoticeStore)")
	}
	if len(secret) == 0 {
		secret = make([]byte, server.MinCookieSecret)
		_, _ = rand.Read(secret) // crypto/rand.Read never fails on supported platforms
	}
	sent := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "waitroom_notices_total",
		Help: "\"Your turn\" notices this instance tried, by room, channel (email, push) and outcome: sent, failed (refused, unreachable, or the channel no longer configured); channel=\"\" outcome=\"no_token\" counts notices whose buyer's token was gone before they could be sent."},
		[]string{"room", "channel", "outcome"})
	if err := in.registry.Register(sent); err != nil {
		return nil, nil, err
	}
	n := &notify.Notifier{Store: notices, Linker: &notify.Linker{Key: secret}, PublicURL: c.PublicURL, Logger: log,
		OnOutcome: func(room, channel, outcome string) { sent.WithLabelValues(room, channel, outcome).Inc() }}
	if c.SMTPURL != "" {
		m, err := notify.NewMailer(c.SMTPURL, c.MailFrom)
		if err != nil {
			return nil, nil, err
		}
		n.Mailer = m
	}
	if c.VAPIDKeyFile != "" {
		keys, err := notify.LoadOrCreateVAPID(c.VAPIDKeyFile)
		if err != nil {
			return nil, nil, err
		}
		// The push services reach the operator at the From address, else
		// at the waiting room's own https URL (Validate makes sure of one).
		subject := c.PublicURL.String()
		if c.MailFrom != "" {
			subject = c.MailFrom
		}
		n.Pusher = &notify.Pusher{Keys: keys, Subject: subject}
	}
	return n, secret, nil
}
