// Package rabbitmq relays the shop's outbox to RabbitMQ: each pass claims
// pending events, publishes them with publisher confirms and marks sent
// only what the broker confirmed. With the broker down, orders still
// succeed and their events wait in the outbox; none is lost.
//
// Delivery is at least once (a crash between the broker's confirm and the
// outbox commit publishes an event again): consumers deduplicate by the
// AMQP message id, which is the event id.
package rabbitmq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/waitroom/waitroom/shop"
)

// Defaults for zero Config fields.
const (
	DefaultExchange       = "waitroom.orders"
	DefaultBatchSize      = 100
	DefaultInterval       = 100 * time.Millisecond
	DefaultConfirmTimeout = 5 * time.Second
	DefaultDialTimeout    = 5 * time.Second
	DefaultMaxBackoff     = 10 * time.Second
)

// Config configures a Relay. URL is required; zero fields get defaults.
type Config struct {
	// URL is the broker, amqp://user:pass@host:5672/vhost.
	URL string
	// Exchange is declared as a durable topic exchange. Bind queues to it
	// before orders flow: unroutable messages are dropped by the broker.
	// Default DefaultExchange.
	Exchange string
	// RoutingKey of every event. Default shop.EventOrderPlaced.
	RoutingKey string
	// BatchSize bounds the events one pass claims. Default DefaultBatchSize.
	BatchSize int
	// Interval is the pause between passes when the outbox is drained: the
	// delivery lag is about half of it. Default DefaultInterval.
	Interval time.Duration
	// ConfirmTimeout bounds the wait for the broker's confirms, and so how
	// long a pass holds its claim. Default DefaultConfirmTimeout.
	ConfirmTimeout time.Duration
	// DialTimeout bounds one connection attempt. Default DefaultDialTimeout.
	DialTimeout time.Duration
	// MaxBackoff caps the growing pause after failed passes.
	// Default DefaultMaxBackoff.
	MaxBackoff time.Duration
	// Logger receives failures and reconnects. Default: discard.
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.URL == "" {
		return c, errors.New("rabbitmq: URL is required")
	}
	if _, err := amqp.ParseURI(c.URL); err != nil {
		return c, fmt.Errorf("rabbitmq: parse URL: %w", err)
	}
	if c.BatchSize < 0 || c.Interval < 0 || c.ConfirmTimeout < 0 || c.DialTimeout < 0 || c.MaxBackoff < 0 {
		return c, errors.New("rabbitmq: sizes and durations must not be negative")
	}
	c.Exchange = cmp.Or(c.Exchange, DefaultExchange)
	c.RoutingKey = cmp.Or(c.RoutingKey, shop.EventOrderPlaced)
	c.BatchSize = cmp.Or(c.BatchSize, DefaultBatchSize)
	c.Interval = cmp.Or(c.Interval, DefaultInterval)
	c.ConfirmTimeout = cmp.Or(c.ConfirmTimeout, DefaultConfirmTimeout)
	c.DialTimeout = cmp.Or(c.DialTimeout, DefaultDialTimeout)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, DefaultMaxBackoff)
	if c.MaxBackoff < c.Interval {
		c.MaxBackoff = c.Interval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c, nil
}

// Relay publishes an outbox to RabbitMQ. Several relays (one per instance)
// may drain one outbox: each pass claims a disjoint batch.
type Relay struct {
	outbox shop.Outbox
	cfg    Config
	log    *slog.Logger

	mu   sync.Mutex // one pass at a time; guards conn and ch
	conn *amqp.Connection
	ch   *amqp.Channel
}

// NewRelay returns a relay for outbox; it connects on its first pass.
func NewRelay(outbox shop.Outbox, cfg Config) (*Relay, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Relay{outbox: outbox, cfg: cfg, log: cfg.Logger}, nil
}

// Run delivers events until ctx ends, then closes the broker connection
// and returns nil. A failed pass (broker or database down) is logged and
// retried after a growing, bounded, jittered pause; the connection is
// re-established as needed.
func (r *Relay) Run(ctx context.Context) error {
	defer r.Close()
	failures := 0
	for {
		n, err := r.runOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var wait time.Duration
		switch {
		case err != nil:
			failures++
			wait = r.backoff(failures)
			r.log.WarnContext(ctx, "outbox relay pass failed",
				slog.Int("published", n), slog.Int("failures", failures),
				slog.Duration("retry_in", wait), slog.Any("err", err))
		case n == r.cfg.BatchSize:
			failures = 0 // a full batch: more may be waiting, go on at once
		default:
			if failures > 0 {
				r.log.InfoContext(ctx, "outbox relay recovered", slog.Int("failures", failures))
			}
			failures = 0
			wait = r.cfg.Interval
		}
		if wait == 0 {
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// backoff doubles the interval per consecutive failure up to MaxBackoff,
// with jitter so that instances do not reconnect in step.
func (r *Relay) backoff(failures int) time.Duration {
	d := r.cfg.MaxBackoff
	if failures < 20 {
		d = min(r.cfg.Interval<<failures, r.cfg.MaxBackoff)
	}
	return d/2 + rand.N(d/2+1)
}

// runOnce is one pass: make sure a confirming channel is open, then deliver
// one batch. It returns how many events were marked sent.
func (r *Relay) runOnce(ctx context.Context) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Connect before claiming, so an unreachable broker never holds
	// outbox rows locked.
	ch, err := r.channel(ctx)
	if err != nil {
		return 0, err
	}
	n, err := r.outbox.DeliverEvents(ctx, r.cfg.BatchSize, func(ctx context.Context, events []shop.Event) ([]string, error) {
		return r.publish(ctx, ch, events)
	})
	if err != nil {
		return n, fmt.Errorf("rabbitmq relay: %w", err)
	}
	return n, nil
}

// publish sends every event, then waits for the confirms. It returns the
// ids the broker acknowledged; on any failure the connection is dropped
// so that the next pass starts on a fresh one.
func (r *Relay) publish(ctx context.Context, ch *amqp.Channel, events []shop.Event) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ConfirmTimeout)
	defer cancel()

	pending := make([]*amqp.DeferredConfirmation, 0, len(events))
	var errs []error
	for _, e := range events {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, r.cfg.Exchange, r.cfg.RoutingKey, false, false, amqp.Publishing{
			ContentType:  "application/json",
			DeliveryMode: amqp.Persistent,
			MessageId:    e.EventID,
			Type:         e.Type,
			Timestamp:    e.CreatedAt,
			AppId:        "waitroom-shop",
			Body:         e.Payload,
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("publish event %s: %w", e.EventID, err))
			break // the channel is unusable; the rest wait for the next pass
		}
		pending = append(pending, dc)
	}

	confirmed := make([]string, 0, len(pending))
	for i, dc := range pending {
		acked, err := dc.WaitContext(ctx)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("confirm event %s: %w", events[i].EventID, err))
		case !acked:
			errs = append(errs, fmt.Errorf("broker refused event %s", events[i].EventID))
		default:
			confirmed = append(confirmed, events[i].EventID)
		}
	}
	if len(errs) > 0 {
		r.reset()
	}
	return confirmed, errors.Join(errs...)
}

// channel returns the open confirming channel, connecting if needed.
func (r *Relay) channel(ctx context.Context) (*amqp.Channel, error) {
	if r.conn != nil && !r.conn.IsClosed() && r.ch != nil && !r.ch.IsClosed() {
		return r.ch, nil
	}
	r.reset()
	if err := ctx.Err(); err != nil {
		return nil, err // amqp dials without a context: check it first
	}
	conn, err := amqp.DialConfig(r.cfg.URL, amqp.Config{
		Dial:       amqp.DefaultDial(r.cfg.DialTimeout),
		Properties: amqp.Table{"connection_name": "waitroom shop outbox relay"},
	})
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: connect: %w", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("rabbitmq: open channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("rabbitmq: enable confirms: %w", err)
	}
	if err := ch.ExchangeDeclare(r.cfg.Exchange, "topic", true, false, false, false, nil); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("rabbitmq: declare exchange %s: %w", r.cfg.Exchange, err)
	}
	r.conn, r.ch = conn, ch
	r.log.InfoContext(ctx, "outbox relay connected", slog.String("exchange", r.cfg.Exchange))
	return ch, nil
}

// reset drops the connection; closing it also closes the channel.
func (r *Relay) reset() {
	if r.conn != nil {
		// A deadline, because a half-dead peer never answers close-ok.
		_ = r.conn.CloseDeadline(time.Now().Add(time.Second))
	}
	r.conn, r.ch = nil, nil
}

// Close closes the broker connection. Run calls it when it returns.
func (r *Relay) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reset()
	return nil
}
