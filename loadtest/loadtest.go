// Package loadtest drives a waiting room the way a flash crowd does: every
// virtual user enters the queue, polls its status no faster than the
// server's poll hint, orders once admitted (or leaves, or never orders), and
// the run ends with a report of latencies, admission pacing, ETA accuracy
// and the invariants that must hold (no oversold stock, no user admitted
// twice, no unexpected errors).
//
// It aims at a server on loopback by default: measuring a waiting room over
// a network measures the network, and aiming 100,000 users at someone
// else's host by mistake is worse.
package loadtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/waitroom/waitroom"
)

// Defaults of the Config fields left zero.
const (
	DefaultRoom           = "default"
	DefaultUsers          = 100_000
	DefaultDuration       = 30 * time.Minute
	DefaultConcurrency    = 256
	DefaultRequestTimeout = 10 * time.Second
)

// ErrViolations is wrapped by Run's error when the report lists invariant
// violations; the caller should exit non-zero.
var ErrViolations = errors.New("loadtest: invariants violated")

// Config describes one run. The zero value of each field means its default;
// URL is required, and so is ProductID unless nobody orders.
type Config struct {
	// URL is the waiting room's base URL, such as http://127.0.0.1:8080.
	URL string
	// Room is the room the users queue in; default "default". Its entry
	// tokens must open the server's POST /orders.
	Room string
	// Users is how many virtual users take part; default 100,000.
	Users int
	// Arrival spreads the users' entries evenly over this span; 0 sends
	// them all at once.
	Arrival time.Duration
	// NoOrderShare is the share, in [0, 1], of users who never order once
	// admitted.
	NoOrderShare float64
	// LeaveShare is the share, in [0, 1], of users who leave the queue
	// after their first status answer.
	LeaveShare float64
	// VanishShare is the share, in [0, 1], of users who stop polling
	// after their entry answer without leaving, as a closed tab does: the
	// room finds them gone at the head (abandon_after), or, admitted,
	// no-shows.
	VanishShare float64
	// ProductID is what users order: the body of POST /orders is
	// {"product_id": ProductID, "quantity": 1}.
	ProductID string
	// UserHeader names the header that carries the user id; default
	// X-User-Id.
	UserHeader string
	// Duration bounds the whole run; default 30 minutes. Users still on
	// their way then are reported as unfinished.
	Duration time.Duration
	// Concurrency caps requests in flight, so the run measures the server
	// rather than the client's ephemeral ports; default 256.
	Concurrency int
	// MaxConns caps connections to the server; default Concurrency.
	MaxConns int
	// RequestTimeout bounds one request; default 10 s.
	RequestTimeout time.Duration
	// Rate is the room's configured admission rate in users/s, to compare
	// the observed pacing with; 0 means unknown and skips the comparison.
	Rate float64
	// OpensIn says the room opens this long after the run starts (the
	// caller schedules it: opens_at); every user arrives before it, so
	// the run is a drop's opening: everyone told "scheduled", then placed
	// by the draw. The report gives the draw's figures.
	OpensIn time.Duration
	// Stock is the product's stock at the start, for the oversell check;
	// 0 means unknown and skips it.
	Stock int
	// CheckPositions asks to check that the positions given at entry are
	// exactly 1..N. It holds only when the queue starts empty and nobody
	// is admitted before everyone has entered (see OnAllEntered), so it
	// cannot be combined with LeaveShare.
	CheckPositions bool
	// OnAllEntered, if set, is called once when every user has had its
	// entry answer, from a user's goroutine: keep it short. An in-process
	// caller starts the admitter there for CheckPositions.
	OnAllEntered func()
	// Admissions, if set, tells when the server admitted users (fed by the
	// admitter's OnAdmit hook in process). Without it admission times are
	// the first "admitted" answer each user saw, which is late by up to
	// one poll interval.
	Admissions *AdmissionRecorder
	// AllowNonLoopback allows a URL whose host is not loopback
	// (127.0.0.0/8, ::1, localhost); by default such a URL is refused.
	AllowNonLoopback bool
	// Out receives one status line per second; nil prints nothing.
	Out io.Writer
	// Seed picks which users leave and which never order.
	Seed uint64
	// RunID names the run in user ids (lt-RUNID-N); default random, so
	// that a second run against the same room meets none of the first
	// run's users.
	RunID string
}

func (c Config) withDefaults() Config {
	if c.Room == "" {
		c.Room = DefaultRoom
	}
	if c.Users == 0 {
		c.Users = DefaultUsers
	}
	if c.UserHeader == "" {
		c.UserHeader = waitroom.DefaultUserHeader
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.MaxConns == 0 {
		c.MaxConns = c.Concurrency
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.RunID == "" {
		c.RunID = strings.ToLower(rand.Text()[:8])
	}
	return c
}

func (c Config) validate() error {
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		return errors.New("loadtest: URL is required")
	case err != nil:
		return fmt.Errorf("loadtest: URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return fmt.Errorf("loadtest: URL %q must be an absolute http(s) URL", c.URL)
	case !c.AllowNonLoopback && !IsLoopback(u.Hostname()):
		return fmt.Errorf("loadtest: refusing to load-test %q: its host is not loopback (127.0.0.0/8, ::1, localhost); allow other hosts explicitly (AllowNonLoopback) if you mean it", u.Host)
	case !waitroom.ValidRoomName(c.Room):
		return fmt.Errorf("loadtest: room %q is not a valid room name", c.Room)
	case c.Users < 1:
		return fmt.Errorf("loadtest: users must be ≥ 1, got %d", c.Users)
	case !isShare(c.NoOrderShare):
		return fmt.Errorf("loadtest: no-order share must be in [0, 1], got %g", c.NoOrderShare)
	case !isShare(c.LeaveShare):
		return fmt.Errorf("loadtest: leave share must be in [0, 1], got %g", c.LeaveShare)
	case !isShare(c.VanishShare) || c.LeaveShare+c.VanishShare > 1:
		return fmt.Errorf("loadtest: vanish share must be in [0, 1 − leave share], got %g", c.VanishShare)
	case c.ProductID == "" && c.NoOrderShare < 1 && c.LeaveShare < 1:
		return errors.New("loadtest: ProductID is required unless nobody orders")
	case c.OpensIn < 0 || c.OpensIn > 0 && c.Arrival >= c.OpensIn:
		return fmt.Errorf("loadtest: with an opening (OpensIn %s) every user arrives before it: the arrival span must be shorter, got %s", c.OpensIn, c.Arrival)
	case c.OpensIn > 0 && c.CheckPositions:
		return errors.New("loadtest: positions at entry are drawn at the opening: CheckPositions cannot go with OpensIn")
	case c.Arrival < 0 || c.Duration < 0 || c.RequestTimeout < 0:
		return errors.New("loadtest: arrival, duration and request timeout must not be negative")
	case c.Concurrency < 1 || c.MaxConns < 1:
		return errors.New("loadtest: concurrency and max conns must be ≥ 1")
	case math.IsNaN(c.Rate) || c.Rate < 0:
		return fmt.Errorf("loadtest: rate must be ≥ 0, got %g", c.Rate)
	case c.Stock < 0:
		return fmt.Errorf("loadtest: stock must be ≥ 0, got %d", c.Stock)
	case c.CheckPositions && (c.LeaveShare > 0 || c.VanishShare > 0):
		return errors.New("loadtest: CheckPositions needs LeaveShare and VanishShare 0: a user leaving before everyone entered shifts the positions of those after")
	case !waitroom.ValidUserID(userID(c.RunID, c.Users)):
		return fmt.Errorf("loadtest: run id %q does not make valid user ids", c.RunID)
	}
	return nil
}

func isShare(f float64) bool { return f >= 0 && f <= 1 } // false for NaN

// IsLoopback reports whether host (without port) names this machine.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func userID(runID string, n int) string {
	return fmt.Sprintf("lt-%s-%d", runID, n)
}

// Run drives cfg.Users virtual users through the waiting room and returns
// the report. The error is non-nil when the config is invalid (no report),
// when the report lists violations (wrapping ErrViolations), or when the
// run was stopped by ctx or Duration before every user finished.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := newRunner(cfg)
	defer r.close()
	return r.run(ctx)
}
