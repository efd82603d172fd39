package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	"github.com/waitroom/waitroom/internal/testenv"
)

// admitted enters user and waits for the real admitter to let it through,
// returning its entry token.
func admitted(t *testing.T, base, user string) string {
	t.Helper()
	body := call(t, "POST", base+"/queue/enter", user, "")
	require.Contains(t, []any{"waiting", "admitted"}, body["state"], body)
	deadline := time.Now().Add(10 * time.Second)
	for {
		body = call(t, "GET", base+"/queue/position", user, "")
		if body["state"] == "admitted" {
			token, _ := body["token"].(string)
			return token
		}
		require.True(t, time.Now().Before(deadline), "%s not admitted within 10s: %v", user, body)
		time.Sleep(pollEvery)
	}
}

func order(t *testing.T, base, user, token string) (int, map[string]any) {
	t.Helper()
	return testenv.Request(t, "POST", base+"/orders", user, token, `{"product_id":"drop"}`)
}

// TestServeBuiltinShopSellsTheStock: without any URL, serve runs the whole
// drop in process: a product seeded by flag, the gate, and sold out as an
// answer that gives the token back.
func TestServeBuiltinShopSellsTheStock(t *testing.T) {
	t.Parallel()
	m := startMain(t, []string{"--products", "drop:2", "--rate", "1000"}, envOf())
	base := "http://" + m.Addr()
	statuses := map[int]int{}
	var firstOrder map[string]any
	for i := range 3 {
		user := fmt.Sprintf("buyer-%d", i)
		status, body := order(t, base, user, admitted(t, base, user))
		statuses[status]++
		if i == 0 {
			firstOrder = body
		}
		if status == http.StatusConflict {
			require.Equal(t, "SOLD_OUT", body["error"].(map[string]any)["code"])
			// Sold out released the token: the buyer still holds it.
			require.Equal(t, "admitted", call(t, "GET", base+"/queue/position", user, "")["state"])
		}
	}
	require.Equal(t, map[int]int{http.StatusCreated: 2, http.StatusConflict: 1}, statuses)

	// The owner reads the order without a token; nobody else can.
	id := firstOrder["id"].(string)
	require.Equal(t, id, call(t, "GET", base+"/orders/"+id, "buyer-0", "")["id"])
	require.Equal(t, "ORDER_NOT_FOUND", call(t, "GET", base+"/orders/"+id, "buyer-1", "")["error"].(map[string]any)["code"])
}

// TestServeBuiltinShopOnPostgresAndRabbitMQ: with --database-url and
// --amqp-url the order is committed in PostgreSQL and its event reaches
// RabbitMQ through the outbox relay. Missing services fail the test.
func TestServeBuiltinShopOnPostgresAndRabbitMQ(t *testing.T) {
	t.Parallel()
	conn, dbURL, schema := testSchema(t, "cmd")
	amqpURL := testenv.AMQPURL()
	deliveries := listenOrderEvents(t, amqpURL)
	env := envOf("DATABASE_URL", viaProxy(t, dbURL, hostOf(t, dbURL, "5432"), schema), "AMQP_URL", amqpURL)
	m := startMain(t, []string{"--products", "drop:5", "--rate", "1000", "--db-pool", "4"}, env)
	base := "http://" + m.Addr()
	status, body := order(t, base, "carol", admitted(t, base, "carol"))
	require.Equal(t, http.StatusCreated, status, body)
	orderID := body["id"].(string)

	var stock int
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT stock FROM "+schema+".products WHERE id = 'drop'").Scan(&stock))
	require.Equal(t, 4, stock)

	timeout := time.After(15 * time.Second)
	for {
		select {
		case d := <-deliveries:
			// The body is the order; the message id is the event's id.
			var placed struct {
				ID string `json:"id"`
			}
			require.NoError(t, json.Unmarshal(d.Body, &placed))
			if placed.ID != orderID {
				continue // another test's order on the shared exchange
			}
			require.NotEmpty(t, d.MessageId)
			return
		case <-timeout:
			t.Fatal("the order's event did not arrive within 15 s")
		}
	}
}

// TestServeShopAdminBehindToken: products and coupons are created through
// the admin API, which needs the bearer token; without it nothing changes.
func TestServeShopAdminBehindToken(t *testing.T) {
	t.Parallel()
	const token = "operator-secret-0123456789"
	m := startMain(t, []string{"--admin-token", token}, envOf())
	base := "http://" + m.Addr()
	create := func(bearer string) int {
		req, err := http.NewRequestWithContext(t.Context(), "POST", base+"/admin/products",
			strings.NewReader(`{"id":"drop","name":"Drop","stock":3}`))
		require.NoError(t, err)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusUnauthorized, create(""))
	require.Equal(t, http.StatusUnauthorized, create("wrong-token-0123456789"))
	status, body := order(t, base, "erin", admitted(t, base, "erin"))
	require.Equal(t, http.StatusNotFound, status, "no product was created by the refused calls")
	require.Equal(t, "PRODUCT_NOT_FOUND", body["error"].(map[string]any)["code"])

	require.Equal(t, http.StatusCreated, create(token))
	status, body = order(t, base, "erin", admitted(t, base, "erin"))
	require.Equal(t, http.StatusCreated, status, body)
}

// listenOrderEvents binds a private queue to the shop's order events before
// any order is placed (the relay publishes to a topic exchange, which drops
// what no queue is bound for) and returns its deliveries.
func listenOrderEvents(t *testing.T, amqpURL string) <-chan amqp.Delivery {
	t.Helper()
	broker, err := amqp.Dial(amqpURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = broker.Close() })
	ch, err := broker.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.ExchangeDeclare("waitroom.orders", "topic", true, false, false, false, nil))
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind(q.Name, "order.placed", "waitroom.orders", false, nil))
	deliveries, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	require.NoError(t, err)
	return deliveries
}
