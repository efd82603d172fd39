package notify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	webpush "github.com/SherClockHolmes/webpush-go"
)

// ErrEndpointRefused is a push endpoint whose address is not on the
// public internet: a subscription is the buyer's to write, and the server
// must not be made to post into its own network.
var ErrEndpointRefused = errors.New("push endpoint refused: not a public address")

// ErrSubscriptionGone is a push service's 404 or 410: the browser
// dropped the subscription.
var ErrSubscriptionGone = errors.New("push subscription gone")

// Pusher sends Web Push messages.
type Pusher struct {
	Keys VAPID
	// Subject is where the push services can reach the operator (VAPID's
	// "sub"): an email address (sent as mailto:) or an https: URL.
	Subject string
	// Client posts to the push services; nil: one whose dialer refuses
	// every address that is not public (PublicOnly).
	Client *http.Client
}

// PublicOnly is the dialer check of the default client: loopback,
// private, link-local and unspecified addresses are refused at connect
// time, after name resolution, so a DNS name cannot smuggle them in.
func PublicOnly(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return ErrEndpointRefused
	}
	a := ap.Addr().Unmap()
	if !a.IsGlobalUnicast() || a.IsPrivate() || a.IsLoopback() {
		return ErrEndpointRefused
	}
	return nil
}

var publicClient = &http.Client{
	Timeout: 30 * time.Second,
	Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, Control: PublicOnly}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 4,
	},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// Send encrypts payload for p (aes128gcm, RFC 8291) and posts it, to live
// ttl at the push service.
func (s *Pusher) Send(ctx context.Context, p *Push, payload []byte, ttl time.Duration) error {
	client := s.Client
	if client == nil {
		client = publicClient
	}
	resp, err := webpush.SendNotificationWithContext(ctx, payload,
		&webpush.Subscription{Endpoint: p.Endpoint, Keys: webpush.Keys{P256dh: p.Keys.P256dh, Auth: p.Keys.Auth}},
		&webpush.Options{
			HTTPClient:      client,
			Subscriber:      s.Subject,
			TTL:             max(1, int(ttl.Seconds())),
			Urgency:         webpush.UrgencyHigh,
			VAPIDPublicKey:  s.Keys.PublicKey,
			VAPIDPrivateKey: s.Keys.PrivateKey,
			// Shorter records than the library's 4096: the payload is a
			// few hundred bytes and the padding only costs bandwidth.
			RecordSize: 1024,
		})
	if err != nil {
		return fmt.Errorf("web push: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return ErrSubscriptionGone
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("web push: the push service answered %s", resp.Status)
	}
	return nil
}
