package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/waitroom/waitroom"
)

// webhookFigures are one store's slices with webhooks on and off:
// requests per second of each side, one value per round, and what the
// receiver was sent.
type webhookFigures struct {
	store                                  string
	enterOff, enterOn, statusOff, statusOn []float64
	// attempts: the requests the receiver got during each round's
	// slices with webhooks on; admitted: how many of all it got were
	// user.admitted, relayed from the rooms' outboxes.
	attempts []int64
	admitted int64
	// errorsOff, errorsOn: non-2xx answers of each side.
	errorsOff, errorsOn int64
	// firstAttempt: from the webhooks' start to the receiver's first
	// request, before the first slice.
	firstAttempt time.Duration
}

// firstAttemptLimit bounds the wait for the receiver's first request:
// the admitter's first admissions reach it within a few seconds (the
// watcher tells a second's admissions once that second is over).
const firstAttemptLimit = 30 * time.Second

// measureWebhooks measures ENTER and STATUS on store (fresh, for this
// alone) with webhooks on and, with cfg.WebhooksOff, off, in alternating
// slices of the same rounds, on one server from cfg.ServeWebhooks: its
// admitter runs (so the rooms' admissions write their outboxes while
// the webhooks are on), and its webhooks tell every event of every room
// to a receiver that never answers, or answers after cfg.SlowReceiver.
// Off stops them and turns the outboxes off.
func (b *Result) measureWebhooks(ctx context.Context, name string, store waitroom.Store) error {
	if err := b.createRooms(ctx, name, store); err != nil {
		return err
	}
	b.progress("%s, webhooks: filling %s with %d waiting users", name, benchStatusRoom, b.cfg.Waiting)
	if err := fill(ctx, store, benchStatusRoom, "w", b.cfg.Waiting, b.cfg.Clients); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	receiver, err := newReceiver(b.cfg.SlowReceiver)
	if err != nil {
		return err
	}
	defer receiver.close()
	base, setWebhooks, stop, err := b.cfg.ServeWebhooks(ctx, store, receiver.url())
	if err != nil {
		return err
	}
	defer stop()

	// The webhooks on until a delivery reaches the receiver: from then on
	// every slice with them on has the dispatcher at work on it.
	started := time.Now()
	if err := setWebhooks(ctx, true); err != nil {
		return fmt.Errorf("%s: starting the webhooks: %w", name, err)
	}
	if err := receiver.waitFirst(ctx, firstAttemptLimit); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	f := webhookFigures{store: name, firstAttempt: time.Since(started)}
	b.progress("%s, webhooks: the receiver's first request came %s after their start", name, f.firstAttempt.Round(time.Millisecond))

	client := b.loadClient(1)
	defer client.CloseIdleConnections()
	var entered atomic.Int64
	type side struct {
		name string
		on   bool
		into *[]float64
		req  func() (*http.Request, error)
	}
	enter, status := b.enterRequests(base, &entered), b.statusRequests(base)
	var sides []side
	if b.cfg.WebhooksOff {
		sides = append(sides, side{"enter, webhooks off", false, &f.enterOff, enter}, side{"status, webhooks off", false, &f.statusOff, status})
	}
	sides = append(sides, side{"enter, webhooks on", true, &f.enterOn, enter}, side{"status, webhooks on", true, &f.statusOn, status})
	on := true
	set := func(want bool) error {
		if want == on {
			return nil
		}
		on = want
		if err := setWebhooks(ctx, want); err != nil {
			return fmt.Errorf("%s: turning the webhooks %s: %w", name, onOff(want), err)
		}
		return nil
	}
	for _, s := range sides {
		if err := set(s.on); err != nil {
			return err
		}
		if _, _, err := b.slice(ctx, client, s.req, b.cfg.Slice/4); err != nil {
			return fmt.Errorf("%s, %s: %w", name, s.name, err)
		}
	}
	for round := range b.cfg.Rounds {
		f.attempts = append(f.attempts, 0)
		for i := range sides {
			s := sides[(i+round)%len(sides)]
			if err := set(s.on); err != nil {
				return err
			}
			before := receiver.requests.Load()
			n, errs, err := b.slice(ctx, client, s.req, b.cfg.Slice)
			if err != nil {
				return fmt.Errorf("%s, %s: %w", name, s.name, err)
			}
			if s.on {
				f.attempts[round] += receiver.requests.Load() - before
			}
			if s.on {
				f.errorsOn += errs
			} else {
				f.errorsOff += errs
			}
			*s.into = append(*s.into, n/b.cfg.Slice.Seconds())
		}
		b.progress("%s, webhooks round %d/%d (requests/s): enter off %s, on %.0f; status off %s, on %.0f; %d requests to the receiver",
			name, round+1, b.cfg.Rounds, plainAt(f.enterOff, round), f.enterOn[round], plainAt(f.statusOff, round), f.statusOn[round], f.attempts[round])
	}
	f.admitted = receiver.admitted.Load()
	b.webhooks = append(b.webhooks, f)
	return nil
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// receiver is the webhook endpoint of the measurement, on loopback.
// With no delay it is the worst receiver for the dispatcher: it accepts
// every connection, reads the request and never answers, so each
// delivery holds its room's messages and a connection for the
// dispatcher's whole attempt timeout before it counts as failed (a
// refused port fails at once and is then left to the backoff, which
// costs the dispatcher less). With a delay it is a slow receiver that
// takes every message, answering 204 after the delay.
type receiver struct {
	ln       net.Listener
	delay    time.Duration // 0: never answers
	requests atomic.Int64  // requests read
	admitted atomic.Int64  // of them, user.admitted: the outboxes' relay
	first    chan struct{}
	once     sync.Once

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
	done   sync.WaitGroup
}

func newReceiver(delay time.Duration) (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("the webhook receiver: %w", err)
	}
	r := &receiver{ln: ln, delay: delay, first: make(chan struct{}), conns: map[net.Conn]bool{}}
	r.done.Go(r.accept)
	return r, nil
}

func (r *receiver) url() string { return "http://" + r.ln.Addr().String() + "/hooks" }

// receiverKind names the receiver answering after delay in the report.
func receiverKind(delay time.Duration) string {
	if delay == 0 {
		return "a dead receiver, a loopback listener that reads each request and never answers, so every delivery waits out the dispatcher's timeout"
	}
	return fmt.Sprintf("a slow receiver, a loopback listener that takes every message, answering 204 after %s", delay)
}

func (r *receiver) accept() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return // closed
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			_ = c.Close()
			return
		}
		r.conns[c] = true
		r.mu.Unlock()
		r.done.Go(func() { r.serve(c) })
	}
}

// serve reads c's requests until the dispatcher closes it, answering
// each after the delay, or never.
func (r *receiver) serve(c net.Conn) {
	defer func() {
		r.mu.Lock()
		delete(r.conns, c)
		r.mu.Unlock()
		_ = c.Close()
	}()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		_, _ = io.Copy(io.Discard, req.Body)
		if bytes.Contains(body, []byte(`"type":"user.admitted"`)) {
			r.admitted.Add(1)
		}
		r.requests.Add(1)
		r.once.Do(func() { close(r.first) })
		if r.delay == 0 {
			continue // the next read waits until the dispatcher gives up
		}
		time.Sleep(r.delay) // the slow receiver under measure
		if _, err := io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n"); err != nil {
			return
		}
	}
}

// waitFirst waits until the receiver got its first request, at most
// limit: the webhooks are not on if none comes.
func (r *receiver) waitFirst(ctx context.Context, limit time.Duration) error {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-r.first:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("the webhook receiver got no request within %s of the webhooks' start: they are not on", limit)
	}
}

func (r *receiver) close() {
	_ = r.ln.Close()
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.done.Wait()
}

// writeWebhooks prints the webhook measurement: each side's median, the
// medians of the rounds' own ratios on ÷ off, and every round.
func (b *Result) writeWebhooks(w io.Writer) {
	if len(b.webhooks) == 0 {
		return
	}
	fmt.Fprintf(w, "\n### ENTER and STATUS with webhooks on and off\n\n")
	fmt.Fprintf(w, "Each store's own server and rooms (STATUS: %d waiting), its admitter running at the rooms' rate (%g/s). "+
		"On: its webhooks tell every event of every room (`user.admitted` too, so the admissions write the rooms' outboxes) to %s. "+
		"Off: the same server with its webhooks' emitter, dispatcher and watcher stopped and the outboxes off. "+
		"Requests/s, median over the rounds; a ratio is the median of the rounds' own ratios.\n\n", b.cfg.Waiting, b.cfg.Rate, receiverKind(b.cfg.SlowReceiver))
	fmt.Fprintf(w, "| store | ENTER/s off | ENTER/s on | ENTER on ÷ off | STATUS/s off | STATUS/s on | STATUS on ÷ off | non-2xx off, on | requests to the receiver |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, f := range b.webhooks {
		var sent int64
		for _, n := range f.attempts {
			sent += n
		}
		fmt.Fprintf(w, "| %s | %s | %.0f | %s | %s | %.0f | %s | %d, %d | %d in the slices; %d `user.admitted` in all; the first %s after the start |\n", f.store,
			medianOrDash(f.enterOff), median(f.enterOn), spread(ratios(f.enterOn, f.enterOff), "**"),
			medianOrDash(f.statusOff), median(f.statusOn), spread(ratios(f.statusOn, f.statusOff), "**"),
			f.errorsOff, f.errorsOn, sent, f.admitted, f.firstAttempt.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "\nEvery round, in the order run (requests/s):\n\n")
	fmt.Fprintf(w, "| store | round | ENTER off | ENTER on | on ÷ off | STATUS off | STATUS on | on ÷ off | requests to the receiver |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, f := range b.webhooks {
		for i := range f.enterOn {
			fmt.Fprintf(w, "| %s | %d | %s | %.0f | %s | %s | %.0f | %s | %d |\n", f.store, i+1,
				plainAt(f.enterOff, i), f.enterOn[i], ratioAt(f.enterOn, f.enterOff, i),
				plainAt(f.statusOff, i), f.statusOn[i], ratioAt(f.statusOn, f.statusOff, i), f.attempts[i])
		}
	}
}

// medianOrDash is v's median, or "–" for a side not measured.
func medianOrDash(v []float64) string {
	if len(v) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", median(v))
}

// plainAt is round i's figure of v, or "–" for a side not measured.
func plainAt(v []float64, i int) string {
	if i >= len(v) {
		return "–"
	}
	return fmt.Sprintf("%.0f", v[i])
}

// ratioAt is round i's a ÷ b, or "n/a" without b's figure.
func ratioAt(a, b []float64, i int) string {
	if i >= len(a) || i >= len(b) || b[i] <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", a[i]/b[i])
}
