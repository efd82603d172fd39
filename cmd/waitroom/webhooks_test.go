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
	verifier, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	var mu sync.Mutex
	var events []map[string]any
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := verifier.Verify(body, r.Header); err != nil {
			t.Errorf("signature: %v", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var ev map[string]any
		require.NoError(t, json.Unmarshal(body, &ev))
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hook.Close)
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
	require.Contains(t, text, "go_goroutines")
}
