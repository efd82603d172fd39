package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/jsonhttp"
)

// endpoint is one of the API calls a user makes.
type endpoint int

const (
	endpointEnter endpoint = iota
	endpointStatus
	endpointLeave
	endpointOrder
	numEndpoints
)

var endpointNames = [numEndpoints]string{"enter", "status", "leave", "order"}

// Codes the journey tells apart. The client adds a few of its own for
// answers that never reached a JSON error body.
var (
	codeQueueFull     = waitroom.ErrQueueFull.Code
	codeRoomClosed    = waitroom.ErrRoomClosed.Code
	codeTokenNotFound = waitroom.ErrTokenNotFound.Code
	codeTokenInvalid  = waitroom.ErrTokenInvalid.Code
	codeTokenInUse    = waitroom.ErrTokenInUse.Code
	codeNotInQueue    = waitroom.ErrNotInQueue.Code
)

const (
	codeSoldOut     = "SOLD_OUT"
	codeRateLimited = "RATE_LIMITED"
	codeTransport   = "TRANSPORT_ERROR" // no answer: refused, reset, …
	codeTimeout     = "TIMEOUT"         // no answer within RequestTimeout
	codeBadAnswer   = "BAD_ANSWER"      // a 2xx whose body is not the documented shape
	stateWaiting    = string(waitroom.StateWaiting)
	stateAdmitted   = string(waitroom.StateAdmitted)
	stateScheduled  = string(waitroom.StateScheduled)
	stateSoldOut    = string(waitroom.StateSoldOut)
	defaultPollHint = waitroom.MinPoll // a waiting answer without a hint
)

// expectedCodes are the refusals that are answers, not errors: a full or
// closed room turns a user away, a sold-out product is the end of the
// sale. Every other refusal, and every 5xx, is reported as a violation.
// A user dropped from the queue (silent past abandon_after, or a token
// that expired unconfirmed) hears NOT_IN_QUEUE and enters again; a client
// asking too fast hears RATE_LIMITED and waits its Retry-After.
var expectedCodes = [numEndpoints]map[string]bool{
	endpointEnter:  {codeQueueFull: true, codeRoomClosed: true, codeRateLimited: true, codeSoldOut: true},
	endpointStatus: {codeNotInQueue: true, codeRateLimited: true},
	endpointLeave:  {codeRateLimited: true},
	endpointOrder:  {codeSoldOut: true, codeRateLimited: true},
}

// result is what one request got.
type result struct {
	status     int
	code       string // "" for a 2xx; the error code otherwise
	body       []byte
	retryAfter time.Duration // the answer's Retry-After; 0 without one
	at         time.Duration // since the start: when the answer arrived
	aborted    bool          // the run stopped first; not counted anywhere
}

func (res result) retryable() bool {
	return res.status == 0 || res.status >= 500 || res.code == codeTokenInUse || res.code == codeRateLimited
}

// maxRetryAfter bounds how long a user honours a Retry-After: a bad header
// must not park it for the rest of the run.
const maxRetryAfter = time.Minute

// wait is how long to wait before trying again after res: its Retry-After
// when it has one (honoured: trying sooner is what the header forbids),
// else fallback.
func (res result) wait(fallback time.Duration) time.Duration {
	if res.retryAfter > 0 {
		return max(res.retryAfter, fallback)
	}
	return fallback
}

// queueAnswer is the body of an enter or status answer.
type queueAnswer struct {
	State       string  `json:"state"`
	Position    int64   `json:"position"`
	ETASeconds  float64 `json:"eta_seconds"`
	PollAfterMS int64   `json:"poll_after_ms"`
	Token       string  `json:"token"`

	ETALowSeconds  float64 `json:"eta_low_seconds"`
	ETAHighSeconds float64 `json:"eta_high_seconds"`
}

// pollAfter is the server's hint, honoured as given: never polling faster
// is the point of the hint.
func (a queueAnswer) pollAfter() time.Duration {
	if a.PollAfterMS <= 0 {
		return defaultPollHint
	}
	return time.Duration(a.PollAfterMS) * time.Millisecond
}

// do sends one request, holding a slot for it, and records its latency and
// its code.
func (r *runner) do(ctx context.Context, ep endpoint, method, path, userID, token string, body []byte) result {
	waitStart := time.Now()
	select {
	case r.slots <- struct{}{}:
	case <-ctx.Done():
		return result{aborted: true}
	}
	defer func() { <-r.slots }()
	r.clientWait.record(time.Since(waitStart))

	reqCtx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	var rd io.Reader = http.NoBody
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(reqCtx, method, r.base+path, rd)
	if err != nil {
		// Only a malformed URL does this, and validate rules that out.
		panic(fmt.Sprintf("loadtest: building a request: %v", err))
	}
	req.Header.Set(r.cfg.UserHeader, userID)
	if token != "" {
		req.Header.Set(waitroom.EntryTokenHeader, token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}

	start := time.Now()
	res := result{}
	resp, err := r.client.Do(req)
	if err == nil {
		res.status = resp.StatusCode
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			res.retryAfter = min(time.Duration(secs)*time.Second, maxRetryAfter)
		}
		res.body, err = io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
		_, _ = io.Copy(io.Discard, resp.Body) // drain, so the connection is reused
		resp.Body.Close()
	}
	latency := time.Since(start)
	res.at = time.Since(r.start)
	switch {
	case err != nil && ctx.Err() != nil:
		return result{aborted: true}
	case err != nil && errors.Is(err, context.DeadlineExceeded):
		res.status, res.code = 0, codeTimeout
	case err != nil:
		res.status, res.code = 0, codeTransport
	case res.status < 200 || res.status > 299:
		res.code = errorCode(res.status, res.body)
	}
	r.requests.Add(1)
	r.endpoints[ep].record(latency)
	if res.code != "" {
		r.count(ep, res.code, !expected(ep, res))
	}
	return res
}

// expected reports whether a refusal is one of the endpoint's answers.
func expected(ep endpoint, res result) bool {
	return res.status < 500 && expectedCodes[ep][res.code]
}

// errorCode reads the code of an error body, or names the status when the
// body is not the documented shape (a proxy's page, a panic).
func errorCode(status int, body []byte) string {
	var e jsonhttp.ErrorBody
	if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
		return e.Error.Code
	}
	return fmt.Sprintf("HTTP_%d", status)
}

// decodeQueueAnswer decodes a 2xx enter or status answer. A body of another
// shape is recorded as BAD_ANSWER against the endpoint.
func (r *runner) decodeQueueAnswer(ep endpoint, res result) (queueAnswer, result) {
	var ans queueAnswer
	err := json.Unmarshal(res.body, &ans)
	ok := err == nil && (ans.State == stateWaiting && ans.Position >= 1 ||
		ans.State == stateAdmitted && ans.Token != "" ||
		ans.State == stateScheduled || ans.State == stateSoldOut)
	if !ok {
		res.code = codeBadAnswer
		r.count(ep, codeBadAnswer, true)
	}
	return ans, res
}

func (r *runner) count(ep endpoint, code string, unexpected bool) {
	r.endpoints[ep].count(code, unexpected)
	if unexpected {
		r.unexpected.Add(1)
	}
}

// latencyRecorder keeps one endpoint's latencies in µs and the count of
// each code other than 2xx. HdrHistogram is not safe for concurrent use,
// hence the mutex; a recording is a few array writes, never held long.
type latencyRecorder struct {
	mu         sync.Mutex
	hist       *hdrhistogram.Histogram
	codes      map[string]int // every refusal, by code
	unexpected map[string]int // the refusals that are errors, by code
}

func newLatencyRecorder(highest time.Duration) *latencyRecorder {
	return &latencyRecorder{
		hist:       hdrhistogram.New(1, max(highest, time.Minute).Microseconds()*2, 3),
		codes:      make(map[string]int),
		unexpected: make(map[string]int),
	}
}

func (l *latencyRecorder) record(d time.Duration) {
	us := max(d.Microseconds(), 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	// Beyond the highest trackable value it counts as the highest.
	if l.hist.RecordValue(us) != nil {
		_ = l.hist.RecordValue(l.hist.HighestTrackableValue())
	}
}

func (l *latencyRecorder) count(code string, unexpected bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.codes[code]++
	if unexpected {
		l.unexpected[code]++
	}
}
