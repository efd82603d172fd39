package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/webhook"
)

// TestAdminWebhooks drives 'waitroom admin webhooks …' against a running
// server: the secret create prints verifies what the receiver gets, a
// rotation signs with both secrets during the overlap, delete ends the
// deliveries, and the flag's endpoint cannot be changed from here.
func TestAdminWebhooks(t *testing.T) {
	t.Parallel()
	type message struct {
		header http.Header
		body   []byte
	}
	got := make(chan message, 64)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- message{r.Header.Clone(), body}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hook.Close)
	static := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(static.Close)

	m := startMain(t, []string{"--admin-token", testAdminToken, "--webhook-url", static.URL, "--webhook-secret", webhook.NewSecret()}, envOf())
	env := envOf("WAITROOM_ADMIN_TOKEN", testAdminToken, "WAITROOM_ADMIN_URL", "http://"+m.Addr())
	admin := func(args ...string) string {
		t.Helper()
		code, out, errOut := runCmd(t, env, append([]string{"admin"}, args...)...)
		require.Equal(t, exitOK, code, "%v: %s", args, errOut)
		return out
	}
	// waitFor returns the next message of type typ, skipping others.
	waitFor := func(typ string) message {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case msg := <-got:
				var ev struct{ Type string }
				require.NoError(t, json.Unmarshal(msg.body, &ev))
				if ev.Type == typ {
					return msg
				}
			case <-timeout:
				t.Fatalf("no %s message", typ)
			}
		}
	}
	created := regexp.MustCompile(`^webhook endpoint (ep_[\w-]+): (\S+)\nsecret \(shown only now\): (whsec_\S+)\n$`)

	out := admin("webhooks", "create", "--endpoint", hook.URL+"/hooks", "--rooms", "default", "--events", "room.paused, room.resumed")
	parts := created.FindStringSubmatch(out)
	require.NotNil(t, parts, out)
	id, first := parts[1], parts[3]
	require.Equal(t, hook.URL+"/hooks", parts[2])

	rows := strings.Split(strings.TrimSpace(admin("webhooks", "list")), "\n")
	require.Len(t, rows, 3, rows)
	require.Equal(t, []string{"ID", "URL", "ROOMS", "EVENTS", "SECRETS", "FROM"}, strings.Fields(rows[0]))
	var ours, flags []string
	for _, r := range rows[1:] {
		if f := strings.Fields(r); f[0] == id {
			ours = f
		} else {
			flags = f
		}
	}
	require.Equal(t, []string{id, hook.URL + "/hooks", "default", "room.paused,room.resumed", "1", "admin", "API"}, ours)
	require.Equal(t, []string{static.URL, "all", "all", "1", "--webhook-url"}, flags[1:])
	require.NotContains(t, strings.Join(rows, "\n"), first, "list shows no secret")

	admin("rooms", "set", "default", "--state", "paused")
	msg := waitFor(webhook.RoomPaused)
	v1, err := standardwebhooks.NewWebhook(first)
	require.NoError(t, err)
	require.NoError(t, v1.Verify(msg.body, msg.header), "signed with the secret create printed")

	out = admin("webhooks", "rotate", id, "--overlap", "1h")
	parts = created.FindStringSubmatch(out)
	require.NotNil(t, parts, out)
	second := parts[3]
	require.NotEqual(t, first, second)
	admin("rooms", "set", "default", "--state", "open")
	msg = waitFor(webhook.RoomResumed)
	v2, err := standardwebhooks.NewWebhook(second)
	require.NoError(t, err)
	require.NoError(t, v2.Verify(msg.body, msg.header), "signed with the new secret")
	require.NoError(t, v1.Verify(msg.body, msg.header), "and with the old one during the overlap")
	require.Len(t, strings.Fields(msg.header.Get("webhook-signature")), 2)

	require.Equal(t, "ID  ENDPOINT  EVENT  ROOM  ATTEMPTS  AT  LAST ERROR\n", admin("webhooks", "dead"))
	var answer map[string]any
	require.NoError(t, json.Unmarshal([]byte(admin("webhooks", "dead", "--limit", "5", "--json")), &answer))
	require.Equal(t, map[string]any{"dead": []any{}}, answer)

	require.Equal(t, "webhook endpoint "+id+" deleted\n", admin("webhooks", "delete", id))
	require.NotContains(t, admin("webhooks", "list"), id)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"webhooks", "delete", id}, "404 WEBHOOK_NOT_FOUND"},
		{[]string{"webhooks", "delete", flags[0]}, "409 WEBHOOK_STATIC"},
		{[]string{"webhooks", "redeliver", "1-0"}, "404 DEAD_LETTER_NOT_FOUND"},
		{[]string{"webhooks", "create", "--endpoint", hook.URL, "--events", "user.teleported"}, "400 WEBHOOK_EVENT_UNKNOWN"},
	} {
		code, _, errOut := runCmd(t, env, append([]string{"admin"}, tc.args...)...)
		require.Equal(t, exitFailure, code, tc.args)
		require.Contains(t, errOut, tc.want, tc.args)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"webhooks"}, "needs a command"},
		{[]string{"webhooks", "add"}, "unknown command"},
		{[]string{"webhooks", "create"}, "--endpoint"},
		{[]string{"webhooks", "create", "--endpoint", "ftp://shop.test/h"}, "WEBHOOK_URL_INVALID"},
		{[]string{"webhooks", "create", "--endpoint", hook.URL, "extra"}, "no arguments"},
		{[]string{"webhooks", "list", "--events", "room.paused"}, "for webhooks create"},
		{[]string{"webhooks", "rotate"}, "exactly one id"},
		{[]string{"webhooks", "rotate", "x", "--overlap", "forever"}, "--overlap"},
		{[]string{"webhooks", "rotate", "x", "--overlap", "720h"}, "--overlap"},
		{[]string{"webhooks", "dead", "--limit", "0"}, "--limit"},
		{[]string{"webhooks", "dead", "--overlap", "1h"}, "for webhooks rotate"},
		{[]string{"webhooks", "redeliver"}, "exactly one id"},
	} {
		code, _, errOut := runCmd(t, env, append([]string{"admin"}, tc.args...)...)
		require.Equal(t, exitUsage, code, "%v: %s", tc.args, errOut)
		require.Contains(t, errOut, tc.want, tc.args)
	}
}

// TestServeSealsWebhookSecrets: on Redis with --cookie-secret, an
// endpoint made through the admin API is stored without its secret in
// the clear; an instance with the same cookie secret reads it, one with
// another says the secret is unreadable.
func TestServeSealsWebhookSecrets(t *testing.T) {
	t.Parallel()
	env := redisEnv(t, "wrtest-hookseal")
	start := func(cookieSecret string) func(string) string {
		m := startMain(t, []string{"--admin-token", testAdminToken, "--cookie-secret", cookieSecret}, env)
		return envOf("WAITROOM_ADMIN_TOKEN", testAdminToken, "WAITROOM_ADMIN_URL", "http://"+m.Addr())
	}
	admin := func(env func(string) string, args ...string) string {
		t.Helper()
		code, out, errOut := runCmd(t, env, append([]string{"admin"}, args...)...)
		require.Equal(t, exitOK, code, "%v: %s", args, errOut)
		return out
	}
	first := start(strings.Repeat("a", 32))
	out := admin(first, "webhooks", "create", "--endpoint", "http://127.0.0.1:9/hooks")
	secret := regexp.MustCompile(`whsec_\S+`).FindString(out)
	require.NotEmpty(t, secret, out)

	client, err := redisstore.Open(testenv.RedisURL())
	require.NoError(t, err)
	defer client.Close()
	stored, err := client.HGetAll(t.Context(), env("WAITROOM_REDIS_PREFIX")+":{wh}:endpoints").Result()
	require.NoError(t, err)
	require.Len(t, stored, 1)
	for _, raw := range stored {
		require.NotContains(t, raw, "whsec_")
		require.NotContains(t, raw, strings.TrimPrefix(secret, "whsec_"))
	}

	secrets := func(env func(string) string) string {
		rows := strings.Split(strings.TrimSpace(admin(env, "webhooks", "list")), "\n")
		require.Len(t, rows, 2, rows)
		return strings.Join(strings.Fields(rows[1])[4:len(strings.Fields(rows[1]))-2], " ")
	}
	require.Equal(t, "1", secrets(start(strings.Repeat("a", 32))))
	require.Equal(t, "1 (1 unreadable)", secrets(start(strings.Repeat("b", 32))))
}
