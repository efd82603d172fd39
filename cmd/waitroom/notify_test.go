package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/instance"
	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/internal/testenv"
)

// TestServeNotifiesByMail: serve with the notice flags mails a waiting
// buyer at its turn through a real SMTP server, with a return link to
// --public-url, and makes the VAPID key file it was given.
func TestServeNotifiesByMail(t *testing.T) {
	t.Parallel()
	mp := testenv.StartMailpit(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"order_id":"o1"}`)
	}))
	t.Cleanup(up.Close)
	keyFile := filepath.Join(t.TempDir(), "vapid.json")
	// One live token at a time: the buyer waits until the first orders.
	m := startMain(t, []string{"--upstream", up.URL, "--max-active", "1", "--smtp-url", mp.SMTPURL, "--mail-from", "queue@shop.example",
		"--public-url", "https://queue.shop.example/", "--vapid-key-file", keyFile, "--admin-token", servertest.AdminToken}, envOf())
	_, err := os.Stat(keyFile)
	require.NoError(t, err, "the VAPID key file is made at the start")
	base := "http://" + m.Addr()
	first, buyer := fmt.Sprintf("first-%d", time.Now().UnixNano()), fmt.Sprintf("buyer-%d", time.Now().UnixNano())

	call(t, "POST", base+"/queue/enter", first, "")
	var token string
	eventually(t, 10*time.Second, first+" admitted", func() bool {
		body := call(t, "GET", base+"/queue/position", first, "")
		token, _ = body["token"].(string)
		return body["state"] == "admitted"
	})
	body := call(t, "POST", base+"/queue/enter", buyer, "")
	require.Equal(t, "waiting", body["state"], body)
	req, _ := http.NewRequest("POST", base+"/notify/default", strings.NewReader(`{"email":"buyer@shop.example"}`))
	req.Header.Set("X-User-Id", buyer)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept-Language", "es")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))

	body = call(t, "POST", base+"/orders", first, token) // frees the one slot
	require.Equal(t, "o1", body["order_id"], body)
	var text string
	eventually(t, 10*time.Second, "the notice arrives", func() bool {
		msgs, err := mp.Messages(t.Context())
		require.NoError(t, err)
		if len(msgs) == 0 {
			return false
		}
		require.Len(t, msgs, 1)
		require.Equal(t, "Es tu turno", msgs[0].Subject)
		text = msgs[0].Text
		return true
	})
	i := strings.Index(text, "https://queue.shop.example/return/default?l=")
	require.GreaterOrEqual(t, i, 0, text)
	link := strings.TrimPrefix(strings.Fields(text[i:])[0], "https://queue.shop.example")
	resp, err = http.Get(base + link)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the link is this server's")

	// The sender says the notice went (once Send has returned, a moment
	// after the message reached the SMTP server).
	eventually(t, 10*time.Second, "the notice is counted", func() bool {
		v, ok := servertest.Scrape(t, base).Lookup("waitroom_notices_total", "room", "default", "channel", "email", "outcome", "sent")
		return ok && v == 1
	})
	_, failed := servertest.Scrape(t, base).Lookup("waitroom_notices_total", "room", "default", "channel", "email", "outcome", "failed")
	require.False(t, failed, "nothing failed")
}

// TestServeRefusesNoticesOnRedis: redisstore keeps no notice requests
// yet, so serve says so instead of starting an opt-in that would drop
// the buyer for silence.
func TestServeRefusesNoticesOnRedis(t *testing.T) {
	t.Parallel()
	cfg, err := parseServe([]string{"--addr", "127.0.0.1:0", "--smtp-url", "smtp://127.0.0.1:25", "--mail-from", "q@shop.example",
		"--public-url", "https://q.example"}, redisEnv(t, "wrtest-notify"))
	require.NoError(t, err)
	m := &instance.Instance{Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	err = m.Run(t.Context())
	_ = m.Close()
	require.ErrorContains(t, err, "need a store that keeps notice requests")
}
