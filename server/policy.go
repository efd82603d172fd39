package server

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/jsonhttp"
)

// Policy is what a room does while the store cannot be reached or answers
// too slowly.
type Policy string

const (
	// PolicyClosed refuses: enter, status and the gate answer 503
	// STORE_UNAVAILABLE with Retry-After. Nothing passes unchecked.
	PolicyClosed Policy = "closed"
	// PolicyOpen lets gated requests through unclaimed, at most a share of
	// the room's last known rate per instance; the rest get 503. Enter and
	// status still answer 503: there is no queue to show without the store.
	PolicyOpen Policy = "open"
)

// Defaults of FailurePolicy and Config fields left zero.
const (
	DefaultOpenShare    = 0.5
	DefaultStoreTimeout = waitroom.DefaultStoreTimeout
	// openSlice spreads the open policy's bound like the admitter spreads
	// admissions: at most a tenth of a second's share at once.
	openSlice = 100 * time.Millisecond
)

// FailurePolicy declares, per room, what happens while the store is down.
// It is local configuration, not kept in the store, because it must be
// known exactly when the store cannot be asked. The zero value is closed
// for every room.
type FailurePolicy struct {
	// Default applies to rooms without their own entry; empty: closed.
	Default Policy
	// Rooms overrides Default per room.
	Rooms map[string]Policy
	// OpenShare is the share of a room's last known admission rate that
	// one instance lets through while failing open; default 0.5.
	OpenShare float64
	// Instances is how many instances serve the room; the share is divided
	// by it, so that together they stay within OpenShare of the rate.
	// Default 1.
	Instances int
	// DeclaredRate is the rate assumed for a room until this process has read
	// its settings from the store (what the flags declared), so a store that
	// is down from the start still has a bound. Zero: nothing passes
	// before a rate is known.
	DeclaredRate float64
}

// ParseFailurePolicy reads "closed", "open", or per room
// "default=open,sale=closed", where default names every room without an
// entry of its own (the room called "default" included).
func ParseFailurePolicy(s string) (FailurePolicy, error) {
	var p FailurePolicy
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		room, value, perRoom := strings.Cut(part, "=")
		if !perRoom {
			room, value = "default", part
		}
		room, value = strings.TrimSpace(room), strings.TrimSpace(value)
		pol := Policy(value)
		if pol != PolicyClosed && pol != PolicyOpen {
			return FailurePolicy{}, fmt.Errorf("%q: the policy must be closed or open", part)
		}
		if room == "default" {
			if p.Default != "" {
				return FailurePolicy{}, fmt.Errorf("%q: the default policy is given twice", part)
			}
			p.Default = pol
			continue
		}
		if !waitroom.ValidRoomName(room) {
			return FailurePolicy{}, fmt.Errorf("%q: %q is not a room name", part, room)
		}
		if _, dup := p.Rooms[room]; dup {
			return FailurePolicy{}, fmt.Errorf("%q: room %s is given twice", part, room)
		}
		if p.Rooms == nil {
			p.Rooms = map[string]Policy{}
		}
		p.Rooms[room] = pol
	}
	return p, nil
}

// For returns room's policy.
func (p FailurePolicy) For(room string) Policy {
	if pol, ok := p.Rooms[room]; ok {
		return pol
	}
	return p.fallback()
}

// fallback is the policy of rooms without their own entry.
func (p FailurePolicy) fallback() Policy {
	if p.Default == "" {
		return PolicyClosed
	}
	return p.Default
}

// String is the form ParseFailurePolicy reads, rooms in name order.
func (p FailurePolicy) String() string {
	parts := []string{"default=" + string(p.fallback())}
	for _, room := range slices.Sorted(maps.Keys(p.Rooms)) {
		parts = append(parts, room+"="+string(p.Rooms[room]))
	}
	return strings.Join(parts, ",")
}

// asMap is the policy as /readyz shows it.
func (p FailurePolicy) asMap() map[string]Policy {
	m := map[string]Policy{"default": p.fallback()}
	for room, pol := range p.Rooms {
		m[room] = pol
	}
	return m
}

func (p FailurePolicy) validate() error {
	for _, pol := range append([]Policy{p.Default}, slices.Collect(maps.Values(p.Rooms))...) {
		if pol != "" && pol != PolicyClosed && pol != PolicyOpen {
			return fmt.Errorf("server: FailurePolicy: %q is neither closed nor open", pol)
		}
	}
	switch {
	case math.IsNaN(p.OpenShare) || p.OpenShare < 0 || p.OpenShare > 1:
		return fmt.Errorf("server: FailurePolicy.OpenShare must be in (0, 1], got %g", p.OpenShare)
	case p.Instances < 0:
		return fmt.Errorf("server: FailurePolicy.Instances must be ≥ 1, got %d", p.Instances)
	case math.IsNaN(p.DeclaredRate) || p.DeclaredRate < 0:
		return fmt.Errorf("server: FailurePolicy.DeclaredRate must be ≥ 0, got %g", p.DeclaredRate)
	}
	return nil
}

// policyEnforcer carries out a FailurePolicy: it keeps the open policy's
// per-room limiters, at a share of each room's last rate the store told
// (lastRate, the guarded store's LastRate).
type policyEnforcer struct {
	policy FailurePolicy
	now    func() time.Time
	log    func(ctx context.Context, msg string, args ...any)

	lastRate func(room string) (float64, bool)

	mu     sync.Mutex
	limits map[string]*limiter
}

func newPolicyEnforcer(p FailurePolicy, lastRate func(room string) (float64, bool), log func(ctx context.Context, msg string, args ...any)) *policyEnforcer {
	if p.OpenShare == 0 {
		p.OpenShare = DefaultOpenShare
	}
	if p.Instances == 0 {
		p.Instances = 1
	}
	return &policyEnforcer{policy: p, now: time.Now, log: log, lastRate: lastRate, limits: map[string]*limiter{}}
}

// openRate is how many gated requests per second this instance lets
// through for room while the store is down.
func (f *policyEnforcer) openRate(room string) float64 {
	rate, ok := f.lastRate(room)
	if !ok {
		rate = f.policy.DeclaredRate
	}
	return rate * f.policy.OpenShare / float64(f.policy.Instances)
}

// storeDown is the gate's StoreDown for room: nil when the room fails
// closed.
func (f *policyEnforcer) storeDown(room string) func(r *http.Request) bool {
	if f.policy.For(room) != PolicyOpen {
		return nil
	}
	return func(r *http.Request) bool { return f.allow(r.Context(), room) }
}

// allow takes one pass from room's limiter.
func (f *policyEnforcer) allow(ctx context.Context, room string) bool {
	rate := f.openRate(room)
	now := f.now()
	f.mu.Lock()
	l := f.limits[room]
	if l == nil {
		l = &limiter{}
		f.limits[room] = l
	}
	quiet := now.Sub(l.lastPass) > time.Minute
	ok := l.allow(now, rate, openBurst(rate))
	if ok {
		l.lastPass = now
	}
	f.mu.Unlock()
	if ok && quiet {
		// One line per outage, not one per order.
		f.log(ctx, "store unavailable; failing open: gated orders pass unclaimed within the bound",
			"room", room, "per_second", rate)
	}
	return ok
}

// openBurst is one slice's share of rate, at least one request.
func openBurst(rate float64) int {
	return max(1, int(math.Ceil(rate*openSlice.Seconds())))
}

// limiter is a token bucket kept as a theoretical arrival time (GCRA): a
// request passes when the bucket's schedule is less than burst intervals
// ahead of now, and moves the schedule one interval on. Integer time, so
// the bound is exact: over any window T at most burst + T×rate pass.
type limiter struct {
	tat      time.Time // when the bucket would be full again
	lastPass time.Time
}

func (l *limiter) allow(now time.Time, rate float64, burst int) bool {
	if rate <= 0 || math.IsNaN(rate) {
		return false
	}
	interval := time.Duration(float64(time.Second) / rate)
	if interval <= 0 {
		interval = 1
	}
	tat := l.tat
	if tat.Before(now) {
		tat = now
	}
	// The schedule may run ahead of now by at most burst-1 intervals.
	if tat.Sub(now) > time.Duration(burst-1)*interval {
		return false
	}
	l.tat = tat.Add(interval)
	return true
}

// readyBody is /readyz's answer. While the store is down an instance whose
// gated room fails open is still ready (it serves bounded orders); one that
// fails closed is not, so a load balancer sends its traffic elsewhere.
type readyBody struct {
	Status string            `json:"status"`
	Policy map[string]Policy `json:"policy"`
	Error  *errorBody        `json:"error,omitempty"`
}

type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// writeReady answers /readyz for the store's ping result.
func (s *Server) writeReady(w http.ResponseWriter, r *http.Request, pingErr error) {
	body := readyBody{Status: "ok", Policy: s.policy.policy.asMap()}
	if pingErr == nil {
		// Keep the gated room's rate fresh for the open policy: the load
		// balancer asks this often, and the settings are cached.
		if s.policy.policy.For(s.defaultRoom) == PolicyOpen {
			_, _ = s.roomConfig(r.Context(), s.defaultRoom)
		}
		jsonhttp.Write(w, http.StatusOK, body)
		return
	}
	body.Status = "store_unavailable"
	if s.policy.policy.For(s.defaultRoom) == PolicyOpen {
		jsonhttp.Write(w, http.StatusOK, body)
		return
	}
	body.Error = &errorBody{Code: waitroom.ErrStoreUnavailable.Code, Message: waitroom.ErrStoreUnavailable.Message}
	jsonhttp.RetryAfter(w, waitroom.UnavailableRetryAfter)
	jsonhttp.Write(w, http.StatusServiceUnavailable, body)
}
