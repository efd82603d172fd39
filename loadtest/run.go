package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// role is what a virtual user means to do.
type role uint8

const (
	roleOrder   role = iota
	roleNoOrder      // admitted, never orders
	roleLeave        // leaves after its first status answer
	roleVanish       // stops polling after its entry answer, without leaving
)

// outcome is how a user's journey ended.
type outcome uint8

const (
	outcomeUnfinished outcome = iota // the run stopped first
	outcomeOrdered
	outcomeSoldOut
	outcomeNoOrder
	outcomeLeft
	outcomeTurnedAway // QUEUE_FULL or ROOM_CLOSED at entry
	outcomeFailed     // gave up after an unexpected answer
	outcomeAbandoned  // stopped polling without leaving (VanishShare)
	outcomeToldSold   // told sold_out: in the queue, or SOLD_OUT at entry
)

// waits reports whether an answer keeps the user polling: in the queue, or
// an early arrival waiting for the opening.
func waits(state string) bool { return state == stateWaiting || state == stateScheduled }

// stateGone is the journey's name for a NOT_IN_QUEUE status answer: the
// room dropped the user (silent too long, or a token left unconfirmed).
const stateGone = "gone"

// user is one virtual user's record. Only its own goroutine writes it
// while the run lasts; the report reads it afterwards.
type user struct {
	id      string
	role    role
	outcome outcome

	entered    bool
	enteredAt  time.Duration // since the start: the entry answer arrived
	entryPos   int64         // position at entry; 0 if admitted at entry
	entryETA   time.Duration // the ETA and its range in the first answer
	entryLow   time.Duration
	entryHigh  time.Duration
	reentries  int // entered again after NOT_IN_QUEUE
	orderedAt  time.Duration
	maxPos     int64
	admitted   bool
	admittedAt time.Duration // the first "admitted" answer arrived
	token      string        // the first token seen
	otherToken string        // a different token seen later: admitted twice
	created    bool          // an order was placed (2xx)
	leftAt     time.Duration // the leave answer arrived; 0 if the user did not leave the queue
}

// Journey bounds: a client retries a failed status poll or order a few
// times before giving up, as a real page would.
const (
	maxAttempts     = 3
	orderRetryAfter = time.Second
	maxAnswerBytes  = 64 << 10
)

type runner struct {
	cfg       Config
	base      string
	client    *http.Client
	transport *http.Transport
	slots     chan struct{} // one per request in flight
	orderBody []byte

	start time.Time
	users []user

	endpoints  [numEndpoints]*latencyRecorder
	clientWait *latencyRecorder

	// Live counters for the status line.
	entered, waiting, admitted, ordered, left atomic.Int64
	unexpected, requests                      atomic.Int64

	// firstAdmission is when the run's first admission was (report).
	firstAdmission time.Duration

	enterAnswers atomic.Int64
	allEnteredAt atomic.Int64 // ns since start; 0 until every user had its entry answer
}

func newRunner(cfg Config) *runner {
	transport := &http.Transport{
		Proxy:               nil, // loopback: a proxy from the environment would measure itself
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        cfg.MaxConns,
		MaxIdleConnsPerHost: cfg.MaxConns,
		MaxConnsPerHost:     cfg.MaxConns,
		IdleConnTimeout:     90 * time.Second,
	}
	orderBody, _ := json.Marshal(struct {
		ProductID string `json:"product_id"`
		Quantity  int    `json:"quantity"`
	}{cfg.ProductID, 1})
	r := &runner{
		cfg:        cfg,
		base:       strings.TrimRight(cfg.URL, "/"),
		client:     &http.Client{Transport: transport},
		transport:  transport,
		slots:      make(chan struct{}, cfg.Concurrency),
		orderBody:  orderBody,
		users:      make([]user, cfg.Users),
		clientWait: newLatencyRecorder(cfg.Duration),
	}
	for i := range r.endpoints {
		r.endpoints[i] = newLatencyRecorder(cfg.RequestTimeout)
	}
	for i, ro := range assignRoles(cfg) {
		r.users[i] = user{id: userID(cfg.RunID, i+1), role: ro}
	}
	return r
}

func (r *runner) close() { r.transport.CloseIdleConnections() }

// assignRoles gives exact shares rather than a coin per user, so that a
// small run has the mix it asked for; the seed decides who gets which.
func assignRoles(cfg Config) []role {
	roles := make([]role, cfg.Users)
	leavers := int(math.Round(cfg.LeaveShare * float64(cfg.Users)))
	vanish := min(int(math.Round(cfg.VanishShare*float64(cfg.Users))), cfg.Users-leavers)
	noOrder := int(math.Round(cfg.NoOrderShare * float64(cfg.Users-leavers-vanish)))
	for i := range leavers {
		roles[i] = roleLeave
	}
	for i := leavers; i < leavers+vanish; i++ {
		roles[i] = roleVanish
	}
	for i := leavers + vanish; i < leavers+vanish+noOrder; i++ {
		roles[i] = roleNoOrder
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6c6f6164)) // second word: any constant
	rng.Shuffle(len(roles), func(i, j int) { roles[i], roles[j] = roles[j], roles[i] })
	return roles
}

func (r *runner) run(parent context.Context) (*Report, error) {
	ctx, cancel := context.WithTimeout(parent, r.cfg.Duration)
	defer cancel()

	r.start = time.Now()
	stopStatus := r.startStatusLine()

	var wg sync.WaitGroup
	n := len(r.users)
launch:
	for i := range r.users {
		if r.cfg.Arrival > 0 {
			due := r.start.Add(time.Duration(float64(r.cfg.Arrival) * float64(i) / float64(n)))
			if !sleepUntil(ctx, due) {
				break launch
			}
		}
		u := &r.users[i]
		wg.Go(func() { r.journey(ctx, u) })
	}
	wg.Wait()
	end := time.Now()
	stopStatus()

	rep := r.report(end)
	var errs []error
	if len(rep.Violations) > 0 {
		errs = append(errs, fmt.Errorf("%w: %s", ErrViolations, strings.Join(rep.Violations, "; ")))
	}
	if rep.Outcomes.Unfinished > 0 {
		cause := ctx.Err()
		if parent.Err() == nil && errors.Is(cause, context.DeadlineExceeded) {
			cause = fmt.Errorf("the run reached its bound of %s", r.cfg.Duration)
		}
		errs = append(errs, fmt.Errorf("loadtest: %d of %d users unfinished: %w", rep.Outcomes.Unfinished, n, cause))
	}
	return rep, errors.Join(errs...)
}

// journey is one user's way through the room: enter, poll at the server's
// pace, then order, leave or walk away.
func (r *runner) journey(ctx context.Context, u *user) {
	ans, res := r.enter(ctx, u)
	if res.aborted {
		return
	}
	if r.enterAnswers.Add(1) == int64(len(r.users)) {
		r.allEnteredAt.Store(int64(max(time.Since(r.start), 1)))
		if r.cfg.OnAllEntered != nil {
			r.cfg.OnAllEntered()
		}
	}
	switch {
	case res.code == codeQueueFull || res.code == codeRoomClosed:
		u.outcome = outcomeTurnedAway
		return
	case res.code == codeSoldOut:
		u.outcome = outcomeToldSold
		return
	case res.code != "":
		u.outcome = outcomeFailed
		return
	}

	if u.role == roleVanish {
		// Closes the tab: no more polls, no leave. The room finds it
		// gone (abandon_after) or, admitted, a no-show.
		u.outcome = outcomeAbandoned
		return
	}
	if waits(ans.State) {
		r.waiting.Add(1)
	}
	polled := false
	for waits(ans.State) {
		next, ok := r.poll(ctx, u, ans)
		if ok && next.State == stateGone {
			// Dropped by the room: a person enters again, at the back.
			u.reentries++
			var res result
			next, res = r.enter(ctx, u)
			ok = !res.aborted && res.code == ""
			if !res.aborted && res.code != "" {
				u.outcome = outcomeFailed
			}
		}
		if !ok {
			r.waiting.Add(-1)
			return
		}
		ans = next
		if !waits(ans.State) {
			r.waiting.Add(-1)
		}
		if u.role == roleLeave && !polled {
			if waits(ans.State) {
				r.waiting.Add(-1)
			}
			r.leave(ctx, u)
			return
		}
		polled = true
	}

	if ans.State == stateSoldOut {
		// Told at a poll, before any order: nothing to buy.
		u.outcome = outcomeToldSold
		return
	}
	switch u.role {
	case roleLeave:
		// Admitted at entry, so there was no queue to leave: the user
		// simply goes away.
		u.outcome = outcomeLeft
		r.left.Add(1)
	case roleNoOrder:
		// A no-show: told of its turn, never back to confirm or order.
		u.outcome = outcomeNoOrder
	default:
		// An API client confirms its token by asking once more after
		// admission (a page does it as it shows "your turn"), then orders.
		if _, ok := r.poll(ctx, u, queueAnswer{PollAfterMS: 1}); !ok {
			return
		}
		r.order(ctx, u)
	}
}

func (r *runner) enter(ctx context.Context, u *user) (queueAnswer, result) {
	var res result
	for attempt := 1; ; attempt++ {
		res = r.do(ctx, endpointEnter, http.MethodPost, "/rooms/"+r.cfg.Room+"/enter", u.id, "", nil)
		if res.aborted || !res.retryable() || attempt == maxAttempts {
			break
		}
		if !sleepFor(ctx, res.wait(time.Second)) {
			return queueAnswer{}, result{aborted: true}
		}
	}
	if res.aborted || res.code != "" {
		return queueAnswer{}, res
	}
	ans, res := r.decodeQueueAnswer(endpointEnter, res)
	if res.code != "" {
		return ans, res
	}
	if !u.entered { // the first answer: the ETA is judged from here
		u.entered, u.enteredAt = true, res.at
		r.entered.Add(1)
		if ans.State == stateWaiting {
			u.entryPos = ans.Position
			u.entryETA = secondsOf(ans.ETASeconds)
			u.entryLow, u.entryHigh = secondsOf(ans.ETALowSeconds), secondsOf(ans.ETAHighSeconds)
		}
	}
	r.observe(u, ans, res.at)
	return ans, res
}

func secondsOf(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// poll waits the hint of the last answer, then asks for the status; it
// retries a failed poll after the same hint. ok is false when the journey
// ends here (the outcome is set).
func (r *runner) poll(ctx context.Context, u *user, last queueAnswer) (queueAnswer, bool) {
	delay := last.pollAfter()
	for attempt := 1; ; attempt++ {
		if !sleepFor(ctx, delay) {
			return queueAnswer{}, false
		}
		res := r.do(ctx, endpointStatus, http.MethodGet, "/rooms/"+r.cfg.Room+"/status", u.id, "", nil)
		if res.aborted {
			return queueAnswer{}, false
		}
		var ans queueAnswer
		if res.code == "" {
			ans, res = r.decodeQueueAnswer(endpointStatus, res)
		}
		switch {
		case res.code == "":
			r.observe(u, ans, res.at)
			return ans, true
		case res.code == codeNotInQueue:
			return queueAnswer{State: stateGone}, true
		case !res.retryable() || attempt == maxAttempts:
			u.outcome = outcomeFailed
			return queueAnswer{}, false
		}
		delay = res.wait(last.pollAfter())
	}
}

func (r *runner) leave(ctx context.Context, u *user) {
	res := r.do(ctx, endpointLeave, http.MethodDelete, "/rooms/"+r.cfg.Room+"/queue", u.id, "", nil)
	switch {
	case res.aborted:
	case res.code != "":
		u.outcome = outcomeFailed
	default:
		u.outcome = outcomeLeft
		u.leftAt = time.Since(r.start)
		r.left.Add(1)
	}
}

// order places the user's order with its entry token. A refused token
// makes the user ask for its status again, as a page would; a different
// token there is a second admission, which the report flags.
func (r *runner) order(ctx context.Context, u *user) {
	token := u.token
	for attempt := 1; ; attempt++ {
		res := r.do(ctx, endpointOrder, http.MethodPost, "/orders", u.id, token, r.orderBody)
		switch {
		case res.aborted:
			return
		case res.code == "":
			u.created, u.orderedAt = true, res.at
			u.outcome = outcomeOrdered
			r.ordered.Add(1)
			return
		case res.code == codeSoldOut:
			u.outcome = outcomeSoldOut
			return
		case attempt == maxAttempts:
			u.outcome = outcomeFailed
			return
		case res.code == codeTokenNotFound || res.code == codeTokenInvalid:
			ans, ok := r.poll(ctx, u, queueAnswer{PollAfterMS: orderRetryAfter.Milliseconds()})
			if !ok {
				return
			}
			if ans.State != stateAdmitted {
				u.outcome = outcomeFailed
				return
			}
			token = ans.Token
		case res.retryable():
			if !sleepFor(ctx, res.wait(orderRetryAfter)) {
				return
			}
		default:
			u.outcome = outcomeFailed
			return
		}
	}
}

// observe notes what an answer tells about the user: its place, and the
// token it was given.
func (r *runner) observe(u *user, ans queueAnswer, at time.Duration) {
	switch ans.State {
	case stateWaiting:
		u.maxPos = max(u.maxPos, ans.Position)
	case stateAdmitted:
		switch {
		case !u.admitted:
			u.admitted, u.admittedAt, u.token = true, at, ans.Token
			r.admitted.Add(1)
		case ans.Token != u.token && u.otherToken == "":
			u.otherToken = ans.Token
		}
	}
}

func sleepFor(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	return sleepFor(ctx, d)
}

// startStatusLine prints one line per second to cfg.Out until the returned
// function is called, which prints the last one. Plain lines, no carriage
// returns: they read the same in a terminal and in a CI log.
func (r *runner) startStatusLine() (stop func()) {
	if r.cfg.Out == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		ticker := time.NewTicker(time.Second)
		defer ticker.Stop()
		lastRequests, last := int64(0), r.start
		for {
			var now time.Time
			select {
			case <-done:
				r.printStatus(time.Now(), &lastRequests, &last)
				return
			case now = <-ticker.C:
			}
			r.printStatus(now, &lastRequests, &last)
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

func (r *runner) printStatus(now time.Time, lastRequests *int64, last *time.Time) {
	requests := r.requests.Load()
	var perSecond float64
	if d := now.Sub(*last).Seconds(); d > 0 {
		perSecond = float64(requests-*lastRequests) / d
	}
	*lastRequests, *last = requests, now
	fmt.Fprintf(r.cfg.Out, "loadtest %6.1fs  entered %d/%d  waiting %d  admitted %d  ordered %d  left %d  errors %d  %.0f req/s\n",
		now.Sub(r.start).Seconds(), r.entered.Load(), len(r.users), r.waiting.Load(),
		r.admitted.Load(), r.ordered.Load(), r.left.Load(), r.unexpected.Load(), perSecond)
}
