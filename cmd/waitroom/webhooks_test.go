package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/webhook"
)

// TestServeWebhooks: serve with --webhook-url on Redis tells the shop,
// signed, that a user was admitted, that its token was spent, and that the
// operator paused the room; the admin API lists the flag's endpoint
// without its secret.
func TestServeWebhooks(t *testing.T) {
	t.Parallel()
	secret := webhook.NewSecret()
	var mu sync.Mutex
	var events []map[string]any
	hook := verifiedHook(t, secret, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var ev map[string]any
		require.NoError(t, json.Unmarshal(body, &ev))
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	told := func(typ string) map[string]any {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range events {
			if ev["type"] == typ {
				return ev
			}
		}
		return nil
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"order_id":"o1"}`)
	}))
	t.Cleanup(up.Close)

	const admin = "admin-token-for-the-webhook-test"
	m := startMain(t, []string{"--upstream", up.URL, "--admin-token", admin,
		"--webhook-url", hook.URL + "/hooks", "--webhook-secret", secret}, redisEnv(t, "wrtest-hooks"))
	base := "http://" + m.Addr()
	user := testenv.Unique("buyer-")
	body := call(t, "POST", base+"/queue/enter", user, "")
	require.Equal(t, "waiting", body["state"], body)
	var token string
	eventually(t, 10*time.Second, user+" admitted", func() bool {
		body = call(t, "GET", base+"/queue/position", user, "")
		token, _ = body["token"].(string)
		return body["state"] == "admitted"
	})
	eventually(t, 10*time.Second, "user.admitted told", func() bool { return told(webhook.UserAdmitted) != nil })
	ev := told(webhook.UserAdmitted)
	require.Equal(t, "default", ev["room"])
	require.Equal(t, map[string]any{"count": float64(1), "users": []any{user}}, ev["data"])
	require.NotContains(t, fmt.Sprint(ev), token, "the event carries the token")

	body = call(t, "POST", base+"/orders", user, token)
	require.Equal(t, "o1", body["order_id"], body)
	eventually(t, 10*time.Second, "token.spent told", func() bool { return told(webhook.TokenSpent) != nil })
	require.Equal(t, map[string]any{"count": float64(1), "tokens": []any{map[string]any{"user": user, "units": float64(1)}}}, told(webhook.TokenSpent)["data"])

	req, err := http.NewRequest("PATCH", base+"/admin/rooms/default", strings.NewReader(`{"state":"paused"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, _ := testenv.Do(t, http.DefaultClient, req)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	eventually(t, 10*time.Second, "room.paused told", func() bool { return told(webhook.RoomPaused) != nil })

	// Behind the admin token, like the rest of the operator API.
	resp, _ = testenv.Get(t, http.DefaultClient, base+"/admin/webhooks")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	req, err = http.NewRequest("GET", base+"/admin/webhooks", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, text := testenv.Do(t, http.DefaultClient, req)
	require.Equal(t, http.StatusOK, resp.StatusCode, text)
	require.Contains(t, text, hook.URL+"/hooks")
	require.Contains(t, text, `"rooms":[],"events":[]`, "the flags' endpoint takes every room and event")
	require.NotContains(t, text, secret)

	req, err = http.NewRequest("GET", base+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, text = testenv.Do(t, http.DefaultClient, req)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Regexp(t, `waitroom_webhook_deliveries_total\{endpoint="flag_[0-9a-f]+",outcome="delivered"\} [3-9]`, text)
	require.Contains(t, text, "waitroom_webhook_events_dropped_total 0")
	require.Contains(t, text, "waitroom_webhook_outbox_lost_total 0")
	require.Contains(t, text, "go_goroutines")
}

// TestServeWebhooksFailingReceiver: a receiver that refuses every
// message three times, then takes it, gets every admitted user exactly
// once and in admission order (the queue's, FIFO), from serve on Redis.
func TestServeWebhooksFailingReceiver(t *testing.T) {
	t.Parallel()
	secret := webhook.NewSecret()
	var mu sync.Mutex
	tries := map[string]int{} // webhook-id → attempts
	var taken []string        // users of user.admitted taken, in order
	hook := verifiedHook(t, secret, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var ev struct {
			Type string `json:"type"`
			Data struct {
				Users []string `json:"users"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(body, &ev))
		mu.Lock()
		defer mu.Unlock()
		id := r.Header.Get("webhook-id")
		if tries[id]++; tries[id] <= 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if ev.Type == webhook.UserAdmitted {
			taken = append(taken, ev.Data.Users...)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	m := startMain(t, []string{"--rate", "2000", "--webhook-url", hook.URL, "--webhook-secret", secret}, redisEnv(t, "wrtest-hookfail"))
	base := "http://" + m.Addr()
	var entered []string
	for i := range 40 {
		u := fmt.Sprintf("buyer-%03d", i)
		require.Equal(t, "waiting", call(t, "POST", base+"/queue/enter", u, "")["state"])
		entered = append(entered, u)
	}
	eventually(t, 90*time.Second, "every admission taken", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(taken) >= len(entered)
	})
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, entered, taken, "each admitted user once, in admission order")
}

// TestFaultWebhookInstanceKilledMidDelivery: a serve process is
// SIGKILLed while its receiver holds a request carrying admissions it
// had appended, and with later admissions perhaps not relayed yet. A
// second process on the same Redis takes the dead one's partitions once
// its lease lapses, claims the entries it was handed, relays the rooms'
// outboxes, and the receiver gets every admitted user, in messages it can
// verify.
func TestFaultWebhookInstanceKilledMidDelivery(t *testing.T) {
	t.Parallel()
	bin := buildWaitroom(t)
	secret := webhook.NewSecret()

	var mu sync.Mutex
	taken := map[string]bool{} // users in messages answered 2xx
	stuck := false
	var held sync.WaitGroup
	blocked := make(chan []string, 16) // users of each request held
	release := make(chan struct{})
	hook := verifiedHook(t, secret, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var ev struct {
			Type string `json:"type"`
			Data struct {
				Users []string `json:"users"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(body, &ev))
		if ev.Type != webhook.UserAdmitted {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		mu.Lock()
		hold := stuck
		mu.Unlock()
		if hold {
			held.Add(1)
			defer held.Done()
			blocked <- ev.Data.Users
			select { // held until its sender dies, then refused
			case <-r.Context().Done():
			case <-release:
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		mu.Lock()
		for _, u := range ev.Data.Users {
			taken[u] = true
		}
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	t.Cleanup(func() { close(release); held.Wait() })
	allTaken := func(users []string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, u := range users {
			if !taken[u] {
				return false
			}
		}
		return true
	}

	redisURL := testenv.RedisURL()
	prefix := testenv.Unique("wrtest-hookkill-")
	t.Cleanup(func() { deleteKeys(t, redisURL, prefix) })
	env := []string{"REDIS_URL=" + redisURL, "WAITROOM_REDIS_PREFIX=" + prefix, "DATABASE_URL=", "AMQP_URL=", "WAITROOM_UPSTREAM="}
	// A loaded machine can keep Redis past the 1 s default; the test is of
	// the deliveries, not of the failure policy.
	args := []string{"--rate", "2000", "--webhook-url", hook.URL, "--webhook-secret", secret, "--store-timeout", "20s"}
	first := startChild(t, bin, args, env)
	enter := func(base, wave string, n int) []string {
		var users []string
		for i := range n {
			u := fmt.Sprintf("%s-%03d", wave, i)
			r := mustDo(t, "POST", base+"/queue/enter", u, "", "")
			require.Equal(t, http.StatusOK, r.status, r.body)
			users = append(users, u)
		}
		return users
	}

	// Wave one reaches the receiver.
	one := enter("http://"+first.addr, "one", 50)
	eventually(t, 20*time.Second, "wave one taken", func() bool { return allTaken(one) })

	// Wave two is appended and handed to the first process, whose request
	// the receiver holds; then the process dies.
	mu.Lock()
	stuck = true
	mu.Unlock()
	two := enter("http://"+first.addr, "two", 50)
	select {
	case users := <-blocked:
		require.NotEmpty(t, users)
	case <-time.After(20 * time.Second):
		t.Fatal("no delivery of wave two reached the receiver")
	}
	// Killed at once: whatever of wave two was admitted but not relayed
	// yet waits in the room's outbox, written by the admission itself,
	// for the next process's watcher.
	first.kill(t)
	mu.Lock()
	stuck = false
	mu.Unlock()

	startChild(t, bin, args, env)
	eventually(t, 40*time.Second, "wave two taken after the kill", func() bool { return allTaken(two) })
	require.True(t, allTaken(one))
}

// verifiedHook is the shop's webhook endpoint: it checks each message's
// signature with the Standard Webhooks library (401 and a test error when
// it fails), then hands the message to handle.
func verifiedHook(t *testing.T, secret string, handle func(w http.ResponseWriter, r *http.Request, body []byte)) *httptest.Server {
	t.Helper()
	verifier, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := verifier.Verify(body, r.Header); err != nil {
			t.Errorf("signature: %v", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		handle(w, r, body)
	}))
	t.Cleanup(hook.Close)
	return hook
}
