package rabbitmq

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/shop/inmem"
)

func TestNewRelayValidates(t *testing.T) {
	t.Parallel()
	_, err := NewRelay(inmem.New(), Config{})
	require.Error(t, err)
	_, err = NewRelay(inmem.New(), Config{URL: "http://not-amqp"})
	require.Error(t, err)
	_, err = NewRelay(inmem.New(), Config{URL: testenv.AMQPURL(), BatchSize: -1})
	require.Error(t, err)
	r, err := NewRelay(inmem.New(), Config{URL: testenv.AMQPURL()})
	require.NoError(t, err)
	require.Equal(t, DefaultExchange, r.cfg.Exchange)
	require.Equal(t, DefaultBatchSize, r.cfg.BatchSize)
}

// TestDeliversEveryOrder: every committed order's event reaches a
// consumer exactly once, from either store.
func TestDeliversEveryOrder(t *testing.T) {
	t.Parallel()
	for name, newStore := range map[string]func(t *testing.T) store{
		"postgres": func(t *testing.T) store { return newPostgres(t, 8) },
		"inmem":    func(*testing.T) store { return inmem.New() },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			b := newBroker(t)
			orders := placeOrders(t, s, "every", 300, 200)

			r, err := NewRelay(s, Config{URL: testenv.AMQPURL(), Exchange: b.exchange, BatchSize: 32})
			require.NoError(t, err)
			t.Cleanup(func() { _ = r.Close() })
			require.Equal(t, len(orders), drainOutbox(t, r))
			pending, err := s.PendingEvents(t.Context())
			require.NoError(t, err)
			require.Zero(t, pending)
			requireExactlyOnce(t, b.drain(t), orders)
		})
	}
}

// TestBrokerDown: with the broker unreachable orders still succeed and
// their events wait; pointed at a live broker, all of them are delivered.
func TestBrokerDown(t *testing.T) {
	t.Parallel()
	s := newPostgres(t, 8)
	b := newBroker(t)

	down, err := NewRelay(s, Config{URL: "amqp://guest:guest@127.0.0.1:1/", Exchange: b.exchange, DialTimeout: time.Second})
	require.NoError(t, err)
	orders := placeOrders(t, s, "first", 20, 20)
	n, err := down.runOnce(t.Context())
	require.Error(t, err)
	require.Zero(t, n)
	for id, o := range placeOrders(t, s, "second", 10, 10) { // still taking orders
		orders[id] = o
	}
	n, err = down.runOnce(t.Context())
	require.Error(t, err)
	require.Zero(t, n)
	pending, err := s.PendingEvents(t.Context())
	require.NoError(t, err)
	require.Equal(t, 30, pending, "events wait in the outbox")

	up, err := NewRelay(s, Config{URL: testenv.AMQPURL(), Exchange: b.exchange})
	require.NoError(t, err)
	t.Cleanup(func() { _ = up.Close() })
	require.Equal(t, 30, drainOutbox(t, up))
	requireExactlyOnce(t, b.drain(t), orders)
}

// TestConcurrentRelays: two relays drain one outbox at once, in small
// batches; no event is published twice and none is missed.
func TestConcurrentRelays(t *testing.T) {
	t.Parallel()
	s := newPostgres(t, 8)
	b := newBroker(t)
	orders := placeOrders(t, s, "two", 200, 200)

	start := make(chan struct{})
	published := make([]int, 2)
	passes := make([]int, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		r, err := NewRelay(s, Config{URL: testenv.AMQPURL(), Exchange: b.exchange, BatchSize: 7})
		require.NoError(t, err)
		t.Cleanup(func() { _ = r.Close() })
		// Connect first, so that both relays race for rows, not for the broker.
		r.mu.Lock()
		_, err = r.channel(t.Context())
		r.mu.Unlock()
		require.NoError(t, err)
		wg.Go(func() {
			<-start
			for {
				n, err := r.runOnce(t.Context())
				passes[i]++
				if err != nil {
					errs[i] = err
					return
				}
				if n == 0 {
					return
				}
				published[i] += n
			}
		})
	}
	close(start)
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Equal(t, len(orders), published[0]+published[1])
	require.NotZero(t, published[0], "both relays took part")
	require.NotZero(t, published[1], "both relays took part")
	t.Logf("relay passes: %v, events published: %v", passes, published)
	requireExactlyOnce(t, b.drain(t), orders)
}

// TestReconnects: Run keeps delivering across a dropped connection.
func TestReconnects(t *testing.T) {
	t.Parallel()
	s := inmem.New()
	b := newBroker(t)
	p, url := newProxy(t)
	r, err := NewRelay(s, Config{URL: url, Exchange: b.exchange, Interval: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, ConfirmTimeout: 2 * time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	orders := placeOrders(t, s, "before", 10, 10)
	for range 10 {
		b.next(t)
	}
	requireDrained(t, s)

	p.drop()
	for id, o := range placeOrders(t, s, "after", 10, 10) {
		orders[id] = o
	}
	requireDrained(t, s)
	require.GreaterOrEqual(t, p.accepted.Load(), int32(2), "the relay reconnected")
	cancel()
	require.NoError(t, <-done)

	rest := b.drain(t)
	require.Len(t, rest, 10, "only the orders placed after the drop remain")
}

// requireDrained waits until the running relay has sent everything.
func requireDrained(t *testing.T, s interface {
	PendingEvents(context.Context) (int, error)
}) {
	t.Helper()
	require.Eventually(t, func() bool {
		n, err := s.PendingEvents(t.Context())
		return err == nil && n == 0
	}, 30*time.Second, 5*time.Millisecond)
}
