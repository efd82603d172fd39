package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/internal/testenv"
)

// TestServeNotifiesByMail: serve with the notice flags mails a waiting
// buyer at its turn through a real SMTP server, with a return link to
// --public-url that works once, and makes the VAPID key file it was given.
func TestServeNotifiesByMail(t *testing.T) {
	t.Parallel()
	notifiesByMail(t, envOf())
}

// TestServeNotifiesByMailOnRedis: the same with --redis-url (the test
// Redis, a prefix of its own): redisstore keeps the buyer's request with
// its place, Admit hands it to the sender, and the link spends once.
func TestServeNotifiesByMailOnRedis(t *testing.T) {
	t.Parallel()
	notifiesByMail(t, redisEnv(t, "wrtest-notify"))
}

// notifiesByMail runs serve on the store getenv names: a buyer who asked
// for a mail gets it at its turn, and its return link restores it once.
func notifiesByMail(t *testing.T, getenv func(string) string) {
	mp := testenv.StartMailpit(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"order_id":"o1"}`)
	}))
	t.Cleanup(up.Close)
	keyFile := filepath.Join(t.TempDir(), "vapid.json")
	// One live token at a time: the buyer waits until the first orders.
	m := startMain(t, []string{"--upstream", up.URL, "--max-active", "1", "--smtp-url", mp.SMTPURL, "--mail-from", "queue@shop.example",
		"--public-url", "https://queue.shop.example/", "--vapid-key-file", keyFile, "--admin-token", servertest.AdminToken}, getenv)
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

	// The click spends the link: the buyer holds its token; a second is refused.
	u, err := url.Parse(link)
	require.NoError(t, err)
	form := url.Values{"l": {u.Query().Get("l")}}.Encode()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	spend := func() (int, string) {
		req, _ := http.NewRequest("POST", base+"/return/default", strings.NewReader(form))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		resp, err := noRedirect.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	status, answer := spend()
	require.Equal(t, http.StatusSeeOther, status, answer)
	body = call(t, "GET", base+"/queue/position", buyer, "")
	require.Equal(t, "admitted", body["state"], body)
	status, answer = spend()
	require.Equal(t, http.StatusForbidden, status)
	require.Contains(t, answer, "RETURN_LINK_USED")

	// The sender says the notice went (once Send has returned, a moment
	// after the message reached the SMTP server).
	eventually(t, 10*time.Second, "the notice is counted", func() bool {
		v, ok := servertest.Scrape(t, base).Lookup("waitroom_notices_total", "room", "default", "channel", "email", "outcome", "sent")
		return ok && v == 1
	})
	_, failed := servertest.Scrape(t, base).Lookup("waitroom_notices_total", "room", "default", "channel", "email", "outcome", "failed")
	require.False(t, failed, "nothing failed")
}
