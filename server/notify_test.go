package server_test

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/i18n"
	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/notify"
	"github.com/waitroom/waitroom/server"
)

// device is one browser: its own cookie jar, redirects not followed.
type device struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newDevice(t *testing.T, base string) *device {
	jar, _ := cookiejar.New(nil)
	return &device{t: t, base: base, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (d *device) do(method, path, contentType, body string, header ...string) (int, string, http.Header) {
	d.t.Helper()
	req, err := http.NewRequest(method, d.base+path, strings.NewReader(body))
	require.NoError(d.t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := d.c.Do(req)
	require.NoError(d.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func bodyCode(t *testing.T, body string) string {
	t.Helper()
	var e struct{ Error struct{ Code string } }
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	return e.Error.Code
}

// The whole way of a buyer who is not watching: it asks to be told by
// email, goes silent past abandon_after, is admitted anyway, gets the
// notice in its language from a real SMTP server, and the link takes its
// place over on a second device, once; a preview spends nothing.
func TestNotifyReturnLinkOnASecondDevice(t *testing.T) {
	mp := testenv.StartMailpit(t)
	clock := memstore.NewManualClock(time.Unix(1_800_000_000, 0))
	store := memstore.New(memstore.Options{Now: clock.Now})
	ctx := context.Background()
	_, err := store.CreateRoom(ctx, "drop", waitroom.RoomConfig{Rate: 1000})
	require.NoError(t, err)
	_, err = store.CreateRoom(ctx, "other", waitroom.RoomConfig{Rate: 1000})
	require.NoError(t, err)
	mailer, err := notify.NewMailer(mp.SMTPURL, "queue@shop.example")
	require.NoError(t, err)
	linker := &notify.Linker{Key: []byte(strings.Repeat("s", 32)), Now: clock.Now}
	n := &notify.Notifier{Store: store, Linker: linker, Mailer: mailer}
	srvURL := startServer(t, store, n)
	n.PublicURL, _ = url.Parse(srvURL)
	admitter := &waitroom.Admitter{Store: store}
	_, err = admitter.Tick(ctx) // starts the bucket
	require.NoError(t, err)

	phone, laptop, stranger := newDevice(t, srvURL), newDevice(t, srvURL), newDevice(t, srvURL)
	status, body, _ := phone.do("POST", "/rooms/drop", "application/x-www-form-urlencoded", "", "Accept", "application/json")
	require.Equal(t, http.StatusOK, status, body)

	// Refusals, each with its code.
	for _, c := range []struct {
		dev       *device
		body      string
		status    int
		code      string
		extraHead []string
	}{
		{phone, `{"email":"not an address"}`, 400, "BAD_EMAIL", nil},
		{phone, `{"email":"a@b.c\r\nBcc: x@y.z"}`, 400, "BAD_EMAIL", nil},
		{phone, `{"push":{"endpoint":"https://push.example.net/1","keys":{"p256dh":"BAAA","auth":"AAAA"}}}`, 404, "CHANNEL_NOT_CONFIGURED", nil},
		{phone, `{"email":"a@b.cd","push":{}}`, 400, "BAD_REQUEST", nil},
		{phone, `{"email":"buyer@shop.example"}`, 403, "CROSS_SITE", []string{"Sec-Fetch-Site", "cross-site"}},
		{stranger, `{"email":"buyer@shop.example"}`, 400, "BAD_REQUEST", nil}, // no visitor
	} {
		status, body, _ := c.dev.do("POST", "/notify/drop", "application/json", c.body, c.extraHead...)
		require.Equal(t, c.status, status, c.body+" → "+body)
		require.Equal(t, c.code, bodyCode(t, body), c.body)
	}
	// The page's form, in French: saved, and back to the page.
	status, _, h := phone.do("POST", "/notify/drop", "application/x-www-form-urlencoded", "email=acheteur%40shop.example", "Accept-Language", "fr-FR,fr;q=0.9")
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, "/rooms/drop?notice=saved", h.Get("Location"))
	// A few channels, no more.
	for i, want := range []int{200, 200, 409} {
		status, body, _ := phone.do("POST", "/notify/drop", "application/json", `{"email":"b`+string(rune('0'+i))+`@shop.example"}`, "Accept-Language", "fr")
		require.Equal(t, want, status, body)
		if want == 409 {
			require.Equal(t, "TOO_MANY_CHANNELS", bodyCode(t, body))
		}
	}

	// Silent for twice abandon_after: not dropped, admitted.
	clock.Advance(2 * waitroom.DefaultAbandonAfter)
	adm, err := store.Admit(ctx, "drop")
	require.NoError(t, err)
	require.Len(t, adm, 1)
	require.NotNil(t, adm[0].Notice)
	n.OnAdmit("drop", adm)
	n.Wait()
	kept, err := store.Notice(ctx, "drop", adm[0].User)
	require.NoError(t, err)
	require.Empty(t, kept, "the addresses outlived the turn")

	msgs, err := mp.Messages(ctx)
	require.NoError(t, err)
	require.Len(t, msgs, notify.MaxChannels)
	fr := i18n.Find("fr")
	var link string
	for _, m := range msgs {
		require.Equal(t, fr.T("notice.subject"), m.Subject)
		require.Contains(t, m.Text, "Votre tour est arrivé dans la salle d'attente.")
		i := strings.Index(m.Text, srvURL+"/return/drop?l=")
		require.GreaterOrEqual(t, i, 0, m.Text)
		link = strings.TrimPrefix(strings.Fields(m.Text[i:])[0], srvURL)
	}
	u, _ := url.Parse(link)
	value := u.Query().Get("l")
	altered := value[:len(value)-1] + "A"
	if value[len(value)-1] == 'A' {
		altered = value[:len(value)-1] + "B"
	}

	// A preview (GET, twice) spends nothing: a page with the button.
	for range 2 {
		status, body, h := laptop.do("GET", link, "", "")
		require.Equal(t, http.StatusOK, status, body)
		require.Contains(t, body, `action="/return/drop"`)
		require.Equal(t, "no-referrer", h.Get("Referrer-Policy"))
	}
	// Another room's, a forged, an altered link: 403 with a code.
	for path, code := range map[string]string{
		"/return/other?l=" + url.QueryEscape(value): "RETURN_LINK_WRONG_ROOM",
		"/return/drop?l=" + url.QueryEscape((&notify.Linker{Key: []byte(strings.Repeat("x", 32))}).Sign(notify.Link{Room: "drop", User: adm[0].User, Nonce: "n", Expires: clock.Now().Add(time.Hour)})): "RETURN_LINK_INVALID",
		"/return/drop?l=" + url.QueryEscape(altered): "RETURN_LINK_INVALID",
	} {
		status, body, _ := laptop.do("GET", path, "", "", "Accept", "application/json")
		require.Equal(t, http.StatusForbidden, status, path)
		require.Equal(t, code, bodyCode(t, body), path)
		status, body, _ = laptop.do("GET", path, "", "")
		require.Equal(t, http.StatusForbidden, status, path)
		require.Contains(t, body, code, "the page names the code")
	}

	// The click: the laptop becomes the buyer and holds its token.
	form := "l=" + url.QueryEscape(value)
	status, _, h = laptop.do("POST", "/return/drop", "application/x-www-form-urlencoded", form)
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, "/rooms/drop", h.Get("Location"))
	status, body, _ = laptop.do("GET", "/rooms/drop/status", "", "", "Accept", "application/json")
	require.Equal(t, http.StatusOK, status, body)
	var st struct{ State, Token string }
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.Equal(t, "admitted", st.State)
	require.Equal(t, adm[0].Token, st.Token)

	// A replay, from any device, is refused.
	for _, d := range []*device{laptop, stranger} {
		status, body, _ = d.do("POST", "/return/drop", "application/x-www-form-urlencoded", form, "Accept", "application/json")
		require.Equal(t, http.StatusForbidden, status)
		require.Equal(t, "RETURN_LINK_USED", bodyCode(t, body))
	}
	// Past the token's end the link has expired with it.
	clock.Advance(waitroom.DefaultTokenTTL)
	status, body, _ = stranger.do("GET", link, "", "", "Accept", "application/json")
	require.Equal(t, http.StatusForbidden, status)
	require.Equal(t, "RETURN_LINK_EXPIRED", bodyCode(t, body))
}

func startServer(t *testing.T, store waitroom.Store, n *notify.Notifier) string {
	t.Helper()
	srv := httptest.NewServer(servertest.MustServer(t, server.Config{Store: store, DefaultRoom: "drop", CookieSecret: testSecret, Notifier: n}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestNotifyRoutesRefuse: without a notifier the routes are 404
// NOT_CONFIGURED; with one, a body past the bound, a link without a
// form and a store that keeps no notices are refused with their codes.
func TestNotifyRoutesRefuse(t *testing.T) {
	store := memstore.New(memstore.Options{})
	_, err := store.CreateRoom(context.Background(), "drop", waitroom.RoomConfig{})
	require.NoError(t, err)
	off := newDevice(t, startServer(t, store, nil))
	for _, r := range [][2]string{{"POST", "/notify/drop"}, {"GET", "/return/drop?l=x"}, {"POST", "/return/drop"}, {"GET", "/notify-sw.js"}} {
		status, body, _ := off.do(r[0], r[1], "application/json", `{"email":"a@b.cd"}`, "Accept", "application/json")
		require.Equal(t, http.StatusNotFound, status, r)
		require.Equal(t, "NOT_CONFIGURED", bodyCode(t, body), r)
	}

	n := &notify.Notifier{Store: store, Linker: &notify.Linker{Key: []byte(strings.Repeat("s", 32))}, Mailer: &notify.Mailer{}}
	on := newDevice(t, startServer(t, store, n))
	status, body, _ := on.do("POST", "/rooms/drop", "application/x-www-form-urlencoded", "", "Accept", "application/json")
	require.Equal(t, http.StatusOK, status, body)
	status, body, _ = on.do("POST", "/notify/drop", "application/json", `{"email":"`+strings.Repeat("a", 5000)+`@b.cd"}`)
	require.Equal(t, http.StatusBadRequest, status, body)
	status, body, _ = on.do("POST", "/notify/drop", "application/json", `{"email":`)
	require.Equal(t, http.StatusBadRequest, status, body)
	require.Equal(t, "BAD_REQUEST", bodyCode(t, body))
	status, body, _ = on.do("POST", "/return/drop", "application/x-www-form-urlencoded", "", "Accept", "application/json")
	require.Equal(t, http.StatusForbidden, status, body)
	require.Equal(t, "RETURN_LINK_INVALID", bodyCode(t, body))
	status, _, _ = on.do("GET", "/notify-sw.js", "", "")
	require.Equal(t, http.StatusNotFound, status, "no push, no service worker")

	// A store that keeps no notices: 501 with its code, and no opt-in.
	plain := newDevice(t, startServer(t, noNotices{store}, n))
	status, body, _ = plain.do("POST", "/rooms/drop", "application/x-www-form-urlencoded", "", "Accept", "application/json")
	require.Equal(t, http.StatusOK, status, body)
	status, body, _ = plain.do("POST", "/notify/drop", "application/json", `{"email":"a@b.cd"}`)
	require.Equal(t, http.StatusNotImplemented, status, body)
	require.Equal(t, "NOTICES_UNSUPPORTED", bodyCode(t, body))
	status, body, _ = plain.do("GET", "/rooms/drop", "", "")
	require.Equal(t, http.StatusOK, status)
	require.NotContains(t, body, `id="notify"`)
	status, body, _ = on.do("GET", "/rooms/drop", "", "")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `id="notify"`)
}

// noNotices is a Store without the NoticeStore methods, as redisstore is.
type noNotices struct{ waitroom.Store }

// TestNotifyByPushThroughTheServer: a subscription posted as the page's
// script posts it reaches a local push service at the buyer's turn,
// encrypted for the subscription's key, in the buyer's language.
func TestNotifyByPushThroughTheServer(t *testing.T) {
	ctx := context.Background()
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	require.NoError(t, err)
	auth := make([]byte, 16)
	_, _ = rand.Read(auth)
	got := make(chan []byte, 1)
	push := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		plain, err := testenv.DecryptPush(body, priv, auth)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		got <- plain
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(push.Close)
	vapid, err := notify.NewVAPID()
	require.NoError(t, err)

	clock := memstore.NewManualClock(time.Unix(1_800_000_000, 0))
	store := memstore.New(memstore.Options{Now: clock.Now})
	_, err = store.CreateRoom(ctx, "drop", waitroom.RoomConfig{Rate: 1000})
	require.NoError(t, err)
	n := &notify.Notifier{Store: store, Linker: &notify.Linker{Key: []byte(strings.Repeat("s", 32)), Now: clock.Now},
		Pusher: &notify.Pusher{Keys: vapid, Subject: "ops@shop.example", Client: push.Client()}}
	base := startServer(t, store, n)
	n.PublicURL, _ = url.Parse(base)
	_, err = store.Admit(ctx, "drop") // starts the bucket
	require.NoError(t, err)

	d := newDevice(t, base)
	status, body, _ := d.do("POST", "/rooms/drop", "application/x-www-form-urlencoded", "", "Accept", "application/json")
	require.Equal(t, http.StatusOK, status, body)
	status, body, _ = d.do("GET", "/rooms/drop", "", "", "Accept-Language", "ko")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, vapid.PublicKey, "the page's script gets the key to subscribe with")
	status, _, h := d.do("GET", "/notify-sw.js", "", "")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "text/javascript; charset=utf-8", h.Get("Content-Type"))

	sub, _ := json.Marshal(map[string]any{"push": notify.Push{Endpoint: push.URL + "/sub/1",
		Keys: notify.PushKeys{P256dh: base64.RawURLEncoding.EncodeToString(priv.PublicKey().Bytes()), Auth: base64.RawURLEncoding.EncodeToString(auth)}}})
	status, body, _ = d.do("POST", "/notify/drop", "application/json", string(sub), "Accept-Language", "ko")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"lang":"ko"`)

	clock.Advance(time.Second)
	adm, err := store.Admit(ctx, "drop")
	require.NoError(t, err)
	require.Len(t, adm, 1)
	n.OnAdmit("drop", adm)
	n.Wait()
	require.Len(t, got, 1, "one push")
	var msg struct{ Title, Body, URL, Lang string }
	require.NoError(t, json.Unmarshal(<-got, &msg))
	require.Equal(t, i18n.Find("ko").T("notice.subject"), msg.Title)
	require.True(t, strings.HasPrefix(msg.URL, base+"/return/drop?l="), msg.URL)
	status, _, _ = d.do("GET", strings.TrimPrefix(msg.URL, base), "", "")
	require.Equal(t, http.StatusOK, status, "the pushed link opens")
}
