// Package upstream is the reverse proxy to the order API that the gate
// guards (waitroom serve --upstream): bounded dials, answers and bodies,
// the gate's headers set on the way out, and an unreachable upstream
// answered as 502 UPSTREAM_UNAVAILABLE so the gate releases the token.
package upstream

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/httperr"
)

// Defaults of Options. The admitted crowd reaches the order API at
// the admission rate (140/s by default), so keep enough idle connections
// for it instead of net/http's 2 per host; an order API that does not answer
// within the response timeout is treated as down, and the gate releases the
// token.
const (
	maxIdlePerHost         = 256
	DefaultDialTimeout     = 5 * time.Second
	DefaultResponseTimeout = 25 * time.Second
	DefaultMaxBody         = 1 << 20
)

// Options bounds the reverse proxy to the order API. Zero fields
// take the defaults above.
type Options struct {
	Logger *slog.Logger
	// DialTimeout bounds connecting to the upstream.
	DialTimeout time.Duration
	// ResponseTimeout bounds the wait for the upstream's answer (its
	// headers) once the request is sent.
	ResponseTimeout time.Duration
	// MaxBody bounds the answer's body in bytes: a larger one is refused
	// with 502 when its length is announced, and cut (the connection
	// aborted) when it is not.
	MaxBody int64
}

// New returns a reverse proxy to target, the order API the gate
// guards. The request path is appended to target's path. When the upstream
// cannot be reached it answers 502 UPSTREAM_UNAVAILABLE, which the gate
// treats as a failure: the user's token is released, not spent. The gate's
// headers (the user, Idempotency-Key) are set on the outgoing request after
// hop-by-hop handling, so a client cannot strip them with Connection.
func New(target *url.URL, opts Options) (http.Handler, error) {
	if target == nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		return nil, fmt.Errorf("upstream: %v must be an absolute http(s) URL", target)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	if opts.ResponseTimeout <= 0 {
		opts.ResponseTimeout = DefaultResponseTimeout
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = (&net.Dialer{Timeout: opts.DialTimeout, KeepAlive: 30 * time.Second}).DialContext
	transport.TLSHandshakeTimeout = opts.DialTimeout
	transport.MaxIdleConnsPerHost = maxIdlePerHost
	transport.MaxIdleConns = maxIdlePerHost
	transport.ResponseHeaderTimeout = opts.ResponseTimeout
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
			// Last: Out's hop-by-hop headers are gone by now.
			waitroom.SetGateHeaders(pr.In.Context(), pr.Out.Header)
		},
		Transport: transport,
		ModifyResponse: func(res *http.Response) error {
			if res.ContentLength > opts.MaxBody {
				return fmt.Errorf("upstream answer of %d bytes is larger than %d", res.ContentLength, opts.MaxBody)
			}
			res.Body = &boundedBody{ReadCloser: res.Body, left: opts.MaxBody}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			httperr.Write(log, w, r, fmt.Errorf("%w: %w", errUnavailable, err))
		},
	}, nil
}

// errUnavailable is the answer when the order API cannot be reached or
// answered out of bounds: a failed order, so the gate keeps the token.
var errUnavailable = &waitroom.Error{Code: "UPSTREAM_UNAVAILABLE", Message: "the protected service is unavailable; your entry token is kept", Status: http.StatusBadGateway}

// errBodyTooLarge cuts an upstream answer that outgrows its bound.
var errBodyTooLarge = errors.New("upstream answer larger than its bound")

// boundedBody reads at most left bytes, then fails.
type boundedBody struct {
	io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One more byte tells a body of exactly the bound from a longer one.
		var one [1]byte
		if n, err := b.ReadCloser.Read(one[:]); n == 0 {
			return 0, err
		}
		return 0, errBodyTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
