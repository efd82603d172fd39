package server

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// Upstream transport bounds. The admitted crowd reaches the order API at
// the admission rate (140/s by default), so keep enough idle connections
// for it instead of net/http's 2 per host; an order API that does not answer
// within the header timeout is treated as down, and the gate releases the
// token.
const (
	upstreamMaxIdlePerHost  = 256
	upstreamDialTimeout     = 5 * time.Second
	upstreamResponseTimeout = 25 * time.Second
)

// NewUpstream returns a reverse proxy to target, the order API the gate
// guards. The request path is appended to target's path. When the upstream
// cannot be reached it answers 502 UPSTREAM_UNAVAILABLE, which the gate
// treats as a failure: the user's token is released, not spent.
func NewUpstream(target *url.URL, log *slog.Logger) (http.Handler, error) {
	if target == nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		return nil, fmt.Errorf("server: upstream %v must be an absolute http(s) URL", target)
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = (&net.Dialer{Timeout: upstreamDialTimeout, KeepAlive: 30 * time.Second}).DialContext
	transport.MaxIdleConnsPerHost = upstreamMaxIdlePerHost
	transport.MaxIdleConns = upstreamMaxIdlePerHost
	transport.ResponseHeaderTimeout = upstreamResponseTimeout
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
		},
		Transport: transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(log, w, r, fmt.Errorf("%w: %w", errUpstreamUnavailable, err))
		},
	}, nil
}
