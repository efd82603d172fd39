package rabbitmq

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/shop"
	"github.com/waitroom/waitroom/shop/postgres"
)

// newPostgres opens a store in a fresh schema dropped after the test.
func newPostgres(tb testing.TB, maxConns int32) *postgres.Store {
	tb.Helper()
	schema := testenv.Schema(tb, "relaytest")
	s, err := postgres.Open(context.Background(), postgres.Config{URL: testenv.DatabaseURL(), MaxConns: maxConns, Schema: schema})
	require.NoError(tb, err)
	tb.Cleanup(s.Close)
	return s
}

// store is what the relay tests drive: orders in, events out.
type store interface {
	shop.Store
	shop.Outbox
}

// placeOrders places n orders at once for stock units and returns the
// created ones; the others must be sold out.
func placeOrders(tb testing.TB, s store, prefix string, n int, units int64) map[string]shop.Order {
	tb.Helper()
	ctx := context.Background()
	product := prefix + "-product"
	require.NoError(tb, s.CreateProduct(ctx, shop.Product{ID: product, Name: "Hot " + prefix, Stock: units}))
	outs := make([]struct {
		o   shop.Order
		err error
	}, n)
	testenv.AtOnce(n, func(i int) {
		o, created, err := s.PlaceOrder(ctx, shop.PlaceOrder{
			User: fmt.Sprintf("user-%d", i), IdempotencyKey: fmt.Sprintf("%s-key-%d", prefix, i), ProductID: product, Quantity: 1,
		})
		if err == nil && !created {
			err = fmt.Errorf("order %d replayed", i)
		}
		outs[i].o, outs[i].err = o, err
	})
	orders := make(map[string]shop.Order)
	soldOut := 0
	for _, out := range outs {
		if out.err != nil {
			require.ErrorIs(tb, out.err, shop.ErrSoldOut)
			soldOut++
			continue
		}
		orders[out.o.ID] = out.o
	}
	require.Len(tb, orders, int(min(int64(n), units)))
	require.Equal(tb, n-len(orders), soldOut)
	return orders
}

// broker is one test's exchange with one queue bound to it.
type broker struct {
	exchange string
	ch       *amqp.Channel
	msgs     <-chan amqp.Delivery
}

const markerKey = "test.marker"

func newBroker(tb testing.TB) *broker {
	tb.Helper()
	conn, err := amqp.Dial(testenv.AMQPURL())
	require.NoError(tb, err, "RabbitMQ at AMQP_URL must be running")
	tb.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	require.NoError(tb, err)
	exchange := "shoptest." + strings.ToLower(rand.Text())
	// Same arguments as the relay's declaration, which must agree.
	require.NoError(tb, ch.ExchangeDeclare(exchange, "topic", true, false, false, false, nil))
	tb.Cleanup(func() { _ = ch.ExchangeDelete(exchange, false, false) })
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	require.NoError(tb, err)
	require.NoError(tb, ch.QueueBind(q.Name, shop.EventOrderPlaced, exchange, false, nil))
	require.NoError(tb, ch.QueueBind(q.Name, markerKey, exchange, false, nil))
	msgs, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	require.NoError(tb, err)
	return &broker{exchange: exchange, ch: ch, msgs: msgs}
}

// next returns the next message; the guard only stops a hung test.
func (b *broker) next(tb testing.TB) amqp.Delivery {
	tb.Helper()
	select {
	case m, ok := <-b.msgs:
		require.True(tb, ok, "consumer closed")
		return m
	case <-time.After(30 * time.Second):
		require.FailNow(tb, "no message from the broker")
		return amqp.Delivery{}
	}
}

// drain returns every message in the queue now. It publishes a marker
// after the relay's confirmed messages and reads up to it: whatever the
// relay confirmed is queued before the marker.
func (b *broker) drain(tb testing.TB) []amqp.Delivery {
	tb.Helper()
	require.NoError(tb, b.ch.PublishWithContext(context.Background(), b.exchange, markerKey, false, false, amqp.Publishing{Body: []byte("end")}))
	var got []amqp.Delivery
	for {
		m := b.next(tb)
		if m.RoutingKey == markerKey {
			return got
		}
		got = append(got, m)
	}
}

// requireExactlyOnce checks that msgs are the orders' events, each once.
func requireExactlyOnce(tb testing.TB, msgs []amqp.Delivery, orders map[string]shop.Order) {
	tb.Helper()
	eventIDs := make(map[string]bool)
	orderIDs := make(map[string]bool)
	for _, m := range msgs {
		require.NotEmpty(tb, m.MessageId)
		require.False(tb, eventIDs[m.MessageId], "event %s delivered twice", m.MessageId)
		eventIDs[m.MessageId] = true
		require.Equal(tb, amqp.Persistent, m.DeliveryMode)
		require.Equal(tb, "application/json", m.ContentType)
		require.Equal(tb, shop.EventOrderPlaced, m.Type)
		require.Equal(tb, shop.EventOrderPlaced, m.RoutingKey)
		var o shop.Order
		require.NoError(tb, json.Unmarshal(m.Body, &o))
		_, known := orders[o.ID]
		require.True(tb, known, "event for unknown order %s", o.ID)
		require.False(tb, orderIDs[o.ID], "order %s has two events", o.ID)
		orderIDs[o.ID] = true
	}
	require.Len(tb, orderIDs, len(orders), "every order's event is delivered")
}

// drainOutbox runs passes until one publishes nothing.
func drainOutbox(tb testing.TB, r *Relay) int {
	tb.Helper()
	total := 0
	for {
		n, err := r.runOnce(context.Background())
		require.NoError(tb, err)
		if n == 0 {
			return total
		}
		total += n
	}
}

// proxy forwards TCP to the broker and can cut every connection at once,
// as a broker restart or a network failure would.
type proxy struct {
	ln       net.Listener
	target   string
	accepted atomic.Int32
	mu       sync.Mutex
	conns    []net.Conn
}

func newProxy(tb testing.TB) (*proxy, string) {
	tb.Helper()
	uri, err := amqp.ParseURI(testenv.AMQPURL())
	require.NoError(tb, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	p := &proxy{ln: ln, target: net.JoinHostPort(uri.Host, fmt.Sprint(uri.Port))}
	tb.Cleanup(func() { _ = ln.Close(); p.drop() })
	go p.serve()
	uri.Host = "127.0.0.1"
	uri.Port = ln.Addr().(*net.TCPAddr).Port
	return p, uri.String()
}

func (p *proxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(server, client); _ = server.Close() }()
		go func() { _, _ = io.Copy(client, server); _ = client.Close() }()
	}
}

// drop cuts every forwarded connection.
func (p *proxy) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}
