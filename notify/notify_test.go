package notify_test

import (
	"context"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/i18n"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/notify"
)

var b64 = base64.RawURLEncoding

func mustB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := b64.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// RFC 8291 Appendix A: the RFC's keys and message decrypt to its text,
// so testenv.DecryptPush (which the push tests trust) is RFC 8291's.
func TestDecryptRFC8291Example(t *testing.T) {
	ua, err := ecdh.P256().NewPrivateKey(mustB64(t, "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"))
	if err != nil {
		t.Fatal(err)
	}
	if got := b64.EncodeToString(ua.PublicKey().Bytes()); got != "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4" {
		t.Fatalf("ua_public = %s", got)
	}
	body := mustB64(t, "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN")
	plain, err := testenv.DecryptPush(body, ua, mustB64(t, "BTBZMqHH6r4Tts7J_aSIgg"))
	if err != nil {
		t.Fatal(err)
	}
	if string(plain) != "When I grow up, I want to be a watermelon" {
		t.Fatalf("plaintext %q", plain)
	}
	// One bit flipped in the ciphertext: refused, not garbage.
	body[len(body)-1] ^= 1
	if _, err := testenv.DecryptPush(body, ua, mustB64(t, "BTBZMqHH6r4Tts7J_aSIgg")); err == nil {
		t.Fatal("a flipped bit decrypted")
	}
	// And the RFC's subscription is one CheckPush accepts.
	if err := notify.CheckPush(&notify.Push{Endpoint: "https://push.example.net/x",
		Keys: notify.PushKeys{P256dh: "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4", Auth: "BTBZMqHH6r4Tts7J_aSIgg"}}); err != nil {
		t.Fatal(err)
	}
}

// subscriber is a browser's push subscription: its keys.
type subscriber struct {
	priv *ecdh.PrivateKey
	auth []byte
}

func newSubscriber(t *testing.T) subscriber {
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	_, _ = rand.Read(auth)
	return subscriber{priv, auth}
}

func (s subscriber) push(endpoint string) *notify.Push {
	return &notify.Push{Endpoint: endpoint, Keys: notify.PushKeys{P256dh: b64.EncodeToString(s.priv.PublicKey().Bytes()), Auth: b64.EncodeToString(s.auth)}}
}

// pushService is a local push endpoint: it checks the VAPID signature and
// decrypts each message with the subscription's key.
type pushService struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    [][]byte
	errs   []error
	status int
}

func newPushService(t *testing.T, sub subscriber, vapid notify.VAPID) *pushService {
	p := &pushService{status: http.StatusCreated}
	p.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		err := checkVAPID(r, vapid, "https://"+r.Host)
		var plain []byte
		if err == nil && r.Header.Get("Content-Encoding") != "aes128gcm" {
			err = fmt.Errorf("Content-Encoding %q", r.Header.Get("Content-Encoding"))
		}
		if err == nil && r.Header.Get("TTL") == "" {
			err = errors.New("no TTL")
		}
		if err == nil {
			plain, err = testenv.DecryptPush(body, sub.priv, sub.auth)
		}
		p.mu.Lock()
		p.got, p.errs = append(p.got, plain), append(p.errs, err)
		status := p.status
		p.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// received returns what the service decrypted and each message's error.
func (p *pushService) received() ([][]byte, []error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.got...), append([]error(nil), p.errs...)
}

func (p *pushService) answer(status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status = status
}

// checkVAPID verifies RFC 8292's Authorization: vapid t=JWT, k=key.
func checkVAPID(r *http.Request, v notify.VAPID, aud string) error {
	h, ok := strings.CutPrefix(r.Header.Get("Authorization"), "vapid t=")
	if !ok {
		return errors.New("no vapid authorization")
	}
	jwt, k, ok := strings.Cut(h, ", k=")
	if !ok || k != v.PublicKey {
		return fmt.Errorf("k=%q is not the server's key", k)
	}
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return errors.New("not a JWT")
	}
	pub, _ := b64.DecodeString(k)
	x, y := elliptic.Unmarshal(elliptic.P256(), pub) //nolint:staticcheck // a raw point, as the header has it
	sig, err := b64.DecodeString(parts[2])
	if err != nil || len(sig) != 64 || x == nil {
		return errors.New("bad signature encoding")
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(&ecdsa.PublicKey{Curve: elliptic.P256(), X: x, Y: y}, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return errors.New("the JWT's signature does not verify")
	}
	claims, _ := b64.DecodeString(parts[1])
	var c struct {
		Aud string `json:"aud"`
		Sub string `json:"sub"`
		Exp int64  `json:"exp"`
	}
	if err := json.Unmarshal(claims, &c); err != nil || c.Aud != aud || c.Sub != "mailto:ops@shop.example" || c.Exp == 0 {
		return fmt.Errorf("claims %s (want aud %s)", claims, aud)
	}
	return nil
}

func TestPushReachesTheSubscriptionDecrypted(t *testing.T) {
	vapid, err := notify.NewVAPID()
	if err != nil {
		t.Fatal(err)
	}
	sub := newSubscriber(t)
	svc := newPushService(t, sub, vapid)
	p := &notify.Pusher{Keys: vapid, Subject: "ops@shop.example", Client: svc.srv.Client()}
	if err := p.Send(context.Background(), sub.push(svc.srv.URL+"/push/abc"), []byte(`{"title":"hi"}`), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, errs := svc.received(); len(got) != 1 || errs[0] != nil || string(got[0]) != `{"title":"hi"}` {
		t.Fatalf("push service got %q, errors %v", got, errs)
	}
	// A subscription the browser dropped: 410 says so.
	svc.answer(http.StatusGone)
	if err := p.Send(context.Background(), sub.push(svc.srv.URL+"/push/abc"), []byte(`x`), time.Minute); !errors.Is(err, notify.ErrSubscriptionGone) {
		t.Fatalf("410: %v", err)
	}
	// The default client posts to public addresses only: loopback is
	// refused at connect time.
	p.Client = nil
	if err := p.Send(context.Background(), sub.push(svc.srv.URL+"/push/abc"), []byte(`x`), time.Minute); !errors.Is(err, notify.ErrEndpointRefused) {
		t.Fatalf("loopback endpoint: %v", err)
	}
	if got, _ := svc.received(); len(got) != 2 {
		t.Fatalf("the refused push reached the service: %d", len(got))
	}
}

func TestCheckRefusesBadChannels(t *testing.T) {
	sub := newSubscriber(t)
	good := sub.push("https://push.example.net/abc")
	for _, email := range []string{"", "a", "a@b", "a@b.", "a@.b", "<a@b.c>", "A <a@b.c>", "a@b.c, d@e.f", "a@b.c\r\nBcc: x@y.z", "a b@c.d",
		strings.Repeat("a", 250) + "@b.cd", "a@[127.0.0.1]"} {
		if err := notify.CheckEmail(email); !errors.Is(err, notify.ErrBadEmail) {
			t.Errorf("email %q: %v", email, err)
		}
	}
	if err := notify.CheckEmail("buyer+sale@shop.example"); err != nil {
		t.Error(err)
	}
	bad := []*notify.Push{nil,
		{Endpoint: "http://push.example.net/abc", Keys: good.Keys},
		{Endpoint: "https:///abc", Keys: good.Keys},
		{Endpoint: "https://u:p@push.example.net/abc", Keys: good.Keys},
		{Endpoint: "https://push.example.net/" + strings.Repeat("a", 1100), Keys: good.Keys},
		{Endpoint: good.Endpoint, Keys: notify.PushKeys{P256dh: good.Keys.P256dh, Auth: "AAAA"}},
		{Endpoint: good.Endpoint, Keys: notify.PushKeys{P256dh: "BAAA" + good.Keys.P256dh[4:], Auth: good.Keys.Auth}}, // off the curve
		{Endpoint: good.Endpoint, Keys: notify.PushKeys{P256dh: "not base64!", Auth: good.Keys.Auth}},
	}
	for i, p := range bad {
		if err := notify.CheckPush(p); !errors.Is(err, notify.ErrBadSubscription) {
			t.Errorf("subscription %d: %v", i, err)
		}
	}
	// A few channels per buyer; the same one again replaces itself.
	var kept []byte
	for i := range notify.MaxChannels {
		b, _, err := notify.Add(kept, notify.Channel{Email: fmt.Sprintf("b%d@shop.example", i)}, i18n.English())
		if err != nil {
			t.Fatal(err)
		}
		kept = b
	}
	if _, req, err := notify.Add(kept, notify.Channel{Email: "B0@shop.example"}, i18n.Find("de")); err != nil || len(req.Channels) != notify.MaxChannels || req.Lang != "de" {
		t.Fatalf("the same address again: %v %+v", err, req)
	}
	if _, _, err := notify.Add(kept, notify.Channel{Push: good}, i18n.English()); !errors.Is(err, notify.ErrTooManyChannels) {
		t.Fatalf("one channel too many: %v", err)
	}
	if _, _, err := notify.Add(nil, notify.Channel{Email: "a@b.cd", Push: good}, i18n.English()); err == nil {
		t.Fatal("two kinds in one channel were taken")
	}
}

func TestLinks(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	k := &notify.Linker{Key: []byte(strings.Repeat("k", 32)), Now: func() time.Time { return now }}
	l := notify.Link{Room: "drop", User: "visitor-abc", Nonce: notify.NewNonce(), Expires: now.Add(time.Minute)}
	v := k.Sign(l)
	got, err := k.Open(v, "drop")
	if err != nil || got.User != l.User || got.Nonce != l.Nonce || !got.Expires.Equal(l.Expires) {
		t.Fatalf("open: %+v %v", got, err)
	}
	other := &notify.Linker{Key: []byte(strings.Repeat("x", 32)), Now: k.Now}
	for name, c := range map[string]struct {
		value, room string
		want        error
	}{
		"forged":       {other.Sign(l), "drop", notify.ErrLinkInvalid},
		"altered":      {"A" + v[1:], "drop", notify.ErrLinkInvalid},
		"truncated":    {v[:len(v)-2], "drop", notify.ErrLinkInvalid},
		"empty":        {"", "drop", notify.ErrLinkInvalid},
		"garbage":      {"x.y", "drop", notify.ErrLinkInvalid},
		"another room": {v, "other", notify.ErrLinkWrongRoom},
		"expired":      {k.Sign(notify.Link{Room: "drop", User: "u", Nonce: "n", Expires: now}), "drop", notify.ErrLinkExpired},
	} {
		if _, err := k.Open(c.value, c.room); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}

func TestVAPIDKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vapid.json")
	a, err := notify.LoadOrCreateVAPID(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	b, err := notify.LoadOrCreateVAPID(path)
	if err != nil || a != b {
		t.Fatalf("read back %v: %v", b, err)
	}
	c, _ := notify.NewVAPID()
	mixed, _ := json.Marshal(notify.VAPID{PublicKey: c.PublicKey, PrivateKey: a.PrivateKey})
	_ = os.WriteFile(path, mixed, 0o600)
	if _, err := notify.LoadOrCreateVAPID(path); err == nil {
		t.Fatal("a key file whose halves do not match was taken")
	}
	_ = os.WriteFile(path, []byte("{"), 0o600)
	if _, err := notify.LoadOrCreateVAPID(path); err == nil {
		t.Fatal("a broken key file was taken")
	}
}

// newRoom is a memstore room with user admitted after asking to be told.
func newRoom(t *testing.T, kept []byte) (*memstore.Store, string) {
	clock := memstore.NewManualClock(time.Unix(1_700_000_000, 0))
	s := memstore.New(memstore.Options{Now: clock.Now})
	ctx := context.Background()
	if _, err := s.CreateRoom(ctx, "drop", waitroom.RoomConfig{Rate: 1000}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Enter(ctx, "drop", "visitor-a"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetNotice(ctx, "drop", "visitor-a", kept); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Admit(ctx, "drop"); err != nil { // starts the bucket
		t.Fatal(err)
	}
	clock.Advance(time.Second) // the bucket lets one in
	return s, "visitor-a"
}

func TestNoticeByMailInTheBuyersLanguage(t *testing.T) {
	mp := testenv.StartMailpit(t)
	ctx := context.Background()
	kept, _, err := notify.Add(nil, notify.Channel{Email: "kaeufer@shop.example"}, i18n.Find("de"))
	if err != nil {
		t.Fatal(err)
	}
	store, user := newRoom(t, kept)
	adm, err := store.Admit(ctx, "drop")
	if err != nil || len(adm) != 1 || string(adm[0].Notice) != string(kept) {
		t.Fatalf("admit: %+v %v", adm, err)
	}
	mailer, err := notify.NewMailer(mp.SMTPURL, "queue@shop.example")
	if err != nil {
		t.Fatal(err)
	}
	linker := &notify.Linker{Key: []byte(strings.Repeat("k", 32))}
	n := &notify.Notifier{Store: store, Linker: linker, Mailer: mailer, PublicURL: &url.URL{Scheme: "https", Host: "queue.shop.example"}}
	n.OnAdmit("drop", adm)
	n.Wait()
	msgs, err := mp.Messages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	m := msgs[0]
	de := i18n.Find("de")
	if m.Subject != de.T("notice.subject") || len(m.To) != 1 || m.To[0].Address != "kaeufer@shop.example" {
		t.Fatalf("message %q to %v", m.Subject, m.To)
	}
	if !strings.Contains(m.Text, "Sie sind im Warteraum an der Reihe.") {
		t.Fatalf("not in German:\n%s", m.Text)
	}
	i := strings.Index(m.Text, "https://queue.shop.example/return/drop?l=")
	if i < 0 {
		t.Fatalf("no return link:\n%s", m.Text)
	}
	u, err := url.Parse(strings.Fields(m.Text[i:])[0])
	if err != nil {
		t.Fatal(err)
	}
	l, err := linker.Open(u.Query().Get("l"), "drop")
	if err != nil || l.User != user {
		t.Fatalf("the mailed link: %+v %v", l, err)
	}
	// The link is the store's one: it spends once.
	if err := store.UseReturnLink(ctx, "drop", user, l.Nonce); err != nil {
		t.Fatal(err)
	}
	if err := store.UseReturnLink(ctx, "drop", user, l.Nonce); !errors.Is(err, waitroom.ErrReturnLinkUsed) {
		t.Fatalf("replay: %v", err)
	}
}

func TestNoticeByPush(t *testing.T) {
	ctx := context.Background()
	vapid, _ := notify.NewVAPID()
	sub := newSubscriber(t)
	svc := newPushService(t, sub, vapid)
	kept, _, err := notify.Add(nil, notify.Channel{Push: sub.push(svc.srv.URL + "/push/1")}, i18n.Find("ja"))
	if err != nil {
		t.Fatal(err)
	}
	store, _ := newRoom(t, kept)
	adm, _ := store.Admit(ctx, "drop")
	n := &notify.Notifier{Store: store, Linker: &notify.Linker{Key: []byte(strings.Repeat("k", 32))},
		Pusher:    &notify.Pusher{Keys: vapid, Subject: "ops@shop.example", Client: svc.srv.Client()},
		PublicURL: &url.URL{Scheme: "https", Host: "q.example"}}
	if err := n.Tell(ctx, "drop", adm[0].User, adm[0].Notice); err != nil {
		t.Fatal(err)
	}
	got, errs := svc.received()
	if len(got) != 1 || errs[0] != nil {
		t.Fatalf("push: %v", errs)
	}
	var msg struct{ Title, Body, URL, Lang string }
	if err := json.Unmarshal(got[0], &msg); err != nil {
		t.Fatal(err)
	}
	if msg.Title != i18n.Find("ja").T("notice.subject") || msg.Lang != "ja" || !strings.HasPrefix(msg.URL, "https://q.example/return/drop?l=") {
		t.Fatalf("payload %+v", msg)
	}
}

// TestNoticeOutcomes: the sender tells each channel's outcome: a mail
// server that does not answer and a channel no longer configured
// (push, without a Pusher) both fail, and Tell fails with them; a buyer
// whose token is gone is told once as no_token, with no channel tried.
func TestNoticeOutcomes(t *testing.T) {
	ctx := context.Background()
	kept, _, err := notify.Add(nil, notify.Channel{Email: "b@shop.example"}, i18n.English())
	if err != nil {
		t.Fatal(err)
	}
	if kept, _, err = notify.Add(kept, notify.Channel{Push: newSubscriber(t).push("https://push.example/1")}, i18n.English()); err != nil {
		t.Fatal(err)
	}
	store, user := newRoom(t, kept)
	adm, err := store.Admit(ctx, "drop")
	if err != nil || len(adm) != 1 {
		t.Fatalf("admit: %+v %v", adm, err)
	}
	dead, err := url.Parse(testenv.UnreachableURL(t))
	if err != nil {
		t.Fatal(err)
	}
	mailer, err := notify.NewMailer("smtp://"+dead.Host, "queue@shop.example")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	n := &notify.Notifier{Store: store, Linker: &notify.Linker{Key: []byte(strings.Repeat("k", 32))}, Mailer: mailer,
		PublicURL: &url.URL{Scheme: "https", Host: "q.example"},
		OnOutcome: func(room, channel, outcome string) { got = append(got, room+"/"+channel+"/"+outcome) }}
	if err := n.Tell(ctx, "drop", user, adm[0].Notice); err == nil {
		t.Fatal("no channel took the notice, yet Tell succeeded")
	}
	if want := []string{"drop/email/failed", "drop/push/failed"}; !slices.Equal(got, want) {
		t.Fatalf("outcomes %q, want %q", got, want)
	}
	got = nil
	if err := n.Tell(ctx, "drop", "visitor-never-admitted", adm[0].Notice); !errors.Is(err, waitroom.ErrTokenNotFound) {
		t.Fatalf("a buyer without a token: %v", err)
	}
	if want := []string{"drop//no_token"}; !slices.Equal(got, want) {
		t.Fatalf("outcomes %q, want %q", got, want)
	}
}
