// Package notify tells a buyer who is not watching the waiting page that
// it is their turn: by Web Push (RFC 8030, encrypted by RFC 8291, signed
// by VAPID, RFC 8292) and by email over SMTP, in the buyer's language,
// with a signed single-use return link that restores the buyer's place on
// any device. The store keeps what a buyer asked for with its place
// (waitroom.NoticeStore) until the buyer's turn; the Notifier sends when
// the admitter lets the buyer in.
package notify

import (
	"crypto/ecdh"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/mail"
	"net/url"
	"strings"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/i18n"
)

// MaxChannels is how many channels one buyer may ask to be told by.
const MaxChannels = 3

// Bounds on what a buyer may give: an address as SMTP allows it (RFC
// 5321's path), a push endpoint as long as browsers' real ones are with
// room to spare.
const (
	maxEmail    = 254
	maxEndpoint = 1024
)

// Refusals of a notice request, each with its code.
var (
	ErrBadEmail         = &waitroom.Error{Code: "BAD_EMAIL", Message: "that is not an email address we can write to (name@domain, nothing else)", Status: http.StatusBadRequest}
	ErrBadSubscription  = &waitroom.Error{Code: "BAD_SUBSCRIPTION", Message: "that is not a Web Push subscription: an https endpoint with p256dh (a P-256 point) and auth (16 bytes) keys", Status: http.StatusBadRequest}
	ErrTooManyChannels  = &waitroom.Error{Code: "TOO_MANY_CHANNELS", Message: fmt.Sprintf("at most %d ways to be told per buyer", MaxChannels), Status: http.StatusConflict}
	ErrChannelOff       = &waitroom.Error{Code: "CHANNEL_NOT_CONFIGURED", Message: "this waiting room does not send that kind of notice", Status: http.StatusNotFound}
	ErrNoChannelInQuery = &waitroom.Error{Code: "BAD_REQUEST", Message: `give "email" or "push", exactly one`, Status: http.StatusBadRequest}
)

// Push is a browser's PushSubscription as its toJSON() gives it.
type Push struct {
	Endpoint string   `json:"endpoint"`
	Keys     PushKeys `json:"keys"`
}

// PushKeys are the subscription's keys, base64url.
type PushKeys struct {
	P256dh string `json:"p256dh"`
	Auth   string `json:"auth"`
}

// Channel is one way to tell a buyer: an email address or a push
// subscription.
type Channel struct {
	Email string `json:"email,omitempty"`
	Push  *Push  `json:"push,omitempty"`
}

// Request is what a buyer asked for, as the store keeps it: its
// channels and the language to write in.
type Request struct {
	Lang     string    `json:"lang"`
	Channels []Channel `json:"channels"`
}

// CheckEmail accepts a bare address (name@domain) and nothing that could
// smuggle a header or a second recipient.
func CheckEmail(s string) error {
	if s == "" || len(s) > maxEmail || strings.ContainsAny(s, "\r\n<>,;\" ") {
		return ErrBadEmail
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || a.Name != "" {
		return ErrBadEmail
	}
	local, domain, ok := strings.Cut(s, "@")
	if !ok || local == "" || !strings.Contains(domain, ".") || strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") || strings.HasPrefix(domain, "[") {
		return ErrBadEmail
	}
	return nil
}

// CheckPush accepts a subscription whose keys would encrypt (RFC 8291:
// p256dh an uncompressed P-256 point, auth 16 bytes) to an https endpoint
// with a host name.
func CheckPush(p *Push) error {
	if p == nil || len(p.Endpoint) > maxEndpoint {
		return ErrBadSubscription
	}
	u, err := url.Parse(p.Endpoint)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" || u.User != nil || u.Fragment != "" {
		return ErrBadSubscription
	}
	dh, err1 := decodeKey(p.Keys.P256dh)
	auth, err2 := decodeKey(p.Keys.Auth)
	if err1 != nil || err2 != nil || len(auth) != 16 {
		return ErrBadSubscription
	}
	if _, err := ecdh.P256().NewPublicKey(dh); err != nil {
		return ErrBadSubscription
	}
	return nil
}

// decodeKey reads a key as browsers write it, base64url, with or without
// padding.
func decodeKey(s string) ([]byte, error) {
	return base64.RawURLEncoding.Strict().DecodeString(strings.TrimRight(s, "="))
}

// check validates c: exactly one of its kinds, well formed.
func (c Channel) check() error {
	switch {
	case (c.Email == "") == (c.Push == nil):
		return ErrNoChannelInQuery
	case c.Push != nil:
		return CheckPush(c.Push)
	default:
		return CheckEmail(c.Email)
	}
}

func (c Channel) same(o Channel) bool {
	if c.Push != nil || o.Push != nil {
		return c.Push != nil && o.Push != nil && c.Push.Endpoint == o.Push.Endpoint
	}
	return strings.EqualFold(c.Email, o.Email)
}

// Add returns the request kept (old, nil for none) with c added in lang:
// a channel given again replaces its old self; beyond MaxChannels is
// ErrTooManyChannels.
func Add(old []byte, c Channel, lang *i18n.Lang) ([]byte, Request, error) {
	if err := c.check(); err != nil {
		return nil, Request{}, err
	}
	var req Request
	if len(old) > 0 {
		if err := json.Unmarshal(old, &req); err != nil {
			return nil, Request{}, fmt.Errorf("notify: the kept request does not read: %w", err)
		}
	}
	req.Lang = lang.Code
	kept := req.Channels[:0]
	for _, k := range req.Channels {
		if !k.same(c) {
			kept = append(kept, k)
		}
	}
	if len(kept) >= MaxChannels {
		return nil, Request{}, ErrTooManyChannels
	}
	req.Channels = append(kept, c)
	b, err := json.Marshal(req)
	if err != nil {
		return nil, Request{}, err
	}
	if len(b) > waitroom.MaxNoticeBytes {
		return nil, Request{}, ErrTooManyChannels
	}
	return b, req, nil
}

// Parse reads a kept request.
func Parse(b []byte) (Request, error) {
	var req Request
	err := json.Unmarshal(b, &req)
	return req, err
}
