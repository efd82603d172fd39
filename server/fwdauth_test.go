package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/server"
)

const (
	testSettleSecret = "settle-secret-of-at-least-32-bytes!"
	testCookieSecret = "cookie-secret-of-at-least-32-bytes!!"
)

var fwdRoomConfig = waitroom.RoomConfig{Rate: 1000, TokenTTL: time.Minute}

// fwdServer serves r's room with forward auth on, and no protected
// handler: the shop sits behind a proxy of its own.
func fwdServer(t *testing.T, r *unitsRoom, cfg server.Config) {
	t.Helper()
	cfg.Store, cfg.DefaultRoom = r.store, r.room
	if cfg.SettleSecret == "" {
		cfg.SettleSecret = testSettleSecret
	}
	if cfg.CookieSecret == nil {
		cfg.CookieSecret = []byte(testCookieSecret)
	}
	srv := httptest.NewServer(servertest.MustServer(t, cfg))
	t.Cleanup(srv.Close)
	r.url = srv.URL
}

// fwdAnswer is what a forward-auth or settle request got back.
type fwdAnswer struct {
	status int
	code   string // the body's error code
	header http.Header
}

func (a fwdAnswer) String() string { return fmt.Sprintf("%d %s", a.status, a.code) }

func call(t *testing.T, method, url string, header map[string]string, body string) fwdAnswer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(raw, &e) // a 200 of /gate/auth has no body
	return fwdAnswer{resp.StatusCode, e.Error.Code, resp.Header}
}

func gateAuth(t *testing.T, r *unitsRoom, user, token string) fwdAnswer {
	t.Helper()
	return call(t, "GET", r.url+"/gate/auth", map[string]string{"X-User-Id": user, "X-Entry-Token": token}, "")
}

func settleHold(t *testing.T, r *unitsRoom, secret, hold, outcome string) fwdAnswer {
	t.Helper()
	body, err := json.Marshal(map[string]string{"hold": hold, "outcome": outcome})
	require.NoError(t, err)
	return call(t, "POST", r.url+"/gate/settle", map[string]string{"Authorization": "Bearer " + secret}, string(body))
}

// requireRefused checks a forward-auth refusal: the status, and the code
// both in the body and in Waitroom-Error.
func requireRefused(t *testing.T, a fwdAnswer, status int, code string) {
	t.Helper()
	require.Equal(t, fmt.Sprintf("%d %s", status, code), a.String())
	require.Equal(t, code, a.header.Get(server.ErrorHeader))
}

func TestForwardAuthOneTokenFiftyRequestsThenSpent(t *testing.T) {
	roomOnEachStore(t, fwdRoomConfig, func(t *testing.T, r *unitsRoom) {
		var outcomesMu sync.Mutex
		outcomes := map[string]int{}
		fwdServer(t, r, server.Config{OnGateOutcome: func(room, outcome string) {
			outcomesMu.Lock()
			outcomes[room+" "+outcome]++
			outcomesMu.Unlock()
		}})
		token := r.admit("u1")

		const n = 50
		var mu sync.Mutex
		counts, holds := map[string]int{}, []string{}
		testenv.AtOnce(n, func(int) {
			a := gateAuth(t, r, "u1", token)
			mu.Lock()
			defer mu.Unlock()
			counts[a.String()]++
			if a.status == http.StatusOK {
				holds = append(holds, a.header.Get(server.HoldHeader))
				require.Equal(t, "u1", a.header.Get("X-User-Id"))
				require.Equal(t, waitroom.IdempotencyKey(r.room, token), a.header.Get("Idempotency-Key"))
				require.Equal(t, "1", a.header.Get("Waitroom-Units"))
				require.NotContains(t, a.header.Get(server.HoldHeader), token)
			} else {
				require.Equal(t, a.code, a.header.Get(server.ErrorHeader))
			}
		})
		require.Equal(t, map[string]int{"200 ": 1, "403 TOKEN_IN_USE": n - 1}, counts)

		require.Equal(t, "200 ", settleHold(t, r, testSettleSecret, holds[0], "spent").String())
		requireRefused(t, gateAuth(t, r, "u1", token), http.StatusForbidden, "ENTRY_TOKEN_NOT_FOUND")

		// A replayed settle is refused and sells nothing twice.
		replay := settleHold(t, r, testSettleSecret, holds[0], "spent")
		require.Equal(t, waitroom.ErrTokenNotFound.Code, replay.code)
		stats, err := r.store.Stats(t.Context(), r.room)
		require.NoError(t, err)
		require.EqualValues(t, 1, stats.Completed)
		require.EqualValues(t, 0, stats.Released)
		outcomesMu.Lock()
		defer outcomesMu.Unlock()
		require.Equal(t, map[string]int{r.room + " TOKEN_IN_USE": n - 1, r.room + " completed": 1, r.room + " ENTRY_TOKEN_NOT_FOUND": 1}, outcomes)
	})
}

func TestForwardAuthReleasedKeepsTheRemainingTTL(t *testing.T) {
	roomOnEachStore(t, fwdRoomConfig, func(t *testing.T, r *unitsRoom) {
		fwdServer(t, r, server.Config{})
		token := r.admit("u1")
		before, err := r.store.Status(t.Context(), r.room, "u1")
		require.NoError(t, err)
		require.Positive(t, before.ExpiresIn)

		first := gateAuth(t, r, "u1", token)
		require.Equal(t, "200 ", first.String())
		r.advance(2 * time.Second)
		require.Equal(t, "200 ", settleHold(t, r, testSettleSecret, first.header.Get(server.HoldHeader), "released").String())

		after, err := r.store.Status(t.Context(), r.room, "u1")
		require.NoError(t, err)
		require.Equal(t, token, after.Token)
		// The TTL it had left, not a fresh one: at least the 2 s
		// advanced are gone (a fresh TTL would be the whole minute).
		require.LessOrEqual(t, after.ExpiresIn, before.ExpiresIn-2*time.Second+100*time.Millisecond)

		second := gateAuth(t, r, "u1", token)
		require.Equal(t, "200 ", second.String())
		require.Equal(t, first.header.Get("Idempotency-Key"), second.header.Get("Idempotency-Key"), "a retry is a replay upstream")
		// The first hold replayed cannot give back the second claim: a
		// release is idempotent (the store's Release of a hold it no
		// longer has is a no-op), so it answers 200 and changes nothing.
		require.Equal(t, "200 ", settleHold(t, r, testSettleSecret, first.header.Get(server.HoldHeader), "released").String())
		requireRefused(t, gateAuth(t, r, "u1", token), http.StatusForbidden, "TOKEN_IN_USE")
		stats, err := r.store.Stats(t.Context(), r.room)
		require.NoError(t, err)
		require.EqualValues(t, 1, stats.Released)
	})
}

func TestForwardAuthUserOnlyFromTrustedProxies(t *testing.T) {
	roomOnEachStore(t, fwdRoomConfig, func(t *testing.T, r *unitsRoom) {
		// Nobody is trusted: the user header is dropped, whoever names it.
		fwdServer(t, r, server.Config{TrustedProxies: []netip.Prefix{}})
		token := r.admit("u1")
		requireRefused(t, gateAuth(t, r, "u1", token), http.StatusForbidden, "BAD_REQUEST")
		status, err := r.store.Status(t.Context(), r.room, "u1")
		require.NoError(t, err)
		require.Equal(t, token, status.Token, "the refused request held nothing")
	})
	roomOnEachStore(t, fwdRoomConfig, func(t *testing.T, r *unitsRoom) {
		// A trusted proxy naming another user gets nothing for u1's token.
		fwdServer(t, r, server.Config{})
		token := r.admit("u1")
		a := gateAuth(t, r, "u2", token)
		require.Equal(t, http.StatusForbidden, a.status, a.String())
		require.Equal(t, a.code, a.header.Get(server.ErrorHeader))
		ok := gateAuth(t, r, "u1", token)
		require.Equal(t, "200 ", ok.String(), "the token is still u1's")
		require.Equal(t, "u1", ok.header.Get("X-User-Id"))
	})
}

func TestForwardAuthRefusals(t *testing.T) {
	roomOnEachStore(t, fwdRoomConfig, func(t *testing.T, r *unitsRoom) {
		var labelsMu sync.Mutex
		labels := map[string]bool{}
		fwdServer(t, r, server.Config{OnGateOutcome: func(room, _ string) {
			labelsMu.Lock()
			labels[room] = true
			labelsMu.Unlock()
		}})
		token := r.admit("u1")
		requireRefused(t, gateAuth(t, r, "u1", ""), http.StatusUnauthorized, "ENTRY_TOKEN_NOT_FOUND")
		requireRefused(t, gateAuth(t, r, "u1", "not a token"), http.StatusUnauthorized, "BAD_REQUEST")
		requireRefused(t, gateAuth(t, r, "u1", strings.Repeat("A", 22)), http.StatusForbidden, "ENTRY_TOKEN_INVALID")
		requireRefused(t, call(t, "GET", r.url+"/gate/auth?room=no%20such", map[string]string{"X-User-Id": "u1", "X-Entry-Token": token}, ""),
			http.StatusForbidden, "BAD_REQUEST")
		requireRefused(t, call(t, "GET", r.url+"/gate/auth?room="+r.room+"&room=x", map[string]string{"X-User-Id": "u1", "X-Entry-Token": token}, ""),
			http.StatusForbidden, "BAD_REQUEST")
		made := call(t, "GET", r.url+"/gate/auth?room=made-up", map[string]string{"X-User-Id": "u1", "X-Entry-Token": token}, "")
		require.Equal(t, http.StatusForbidden, made.status, made.String())
		require.Equal(t, made.code, made.header.Get(server.ErrorHeader))
		labelsMu.Lock()
		require.Equal(t, map[string]bool{r.room: true, "": true}, labels, "a made-up room is no metric label")
		labelsMu.Unlock()

		// Any method the proxy sends, the room named explicitly.
		a := call(t, "POST", r.url+"/gate/auth?room="+r.room, map[string]string{"X-User-Id": "u1", "X-Entry-Token": token}, "{}")
		require.Equal(t, "200 ", a.String())
		hold := a.header.Get(server.HoldHeader)

		// Settles that must change nothing.
		require.Equal(t, "401 SETTLE_UNAUTHORIZED", call(t, "POST", r.url+"/gate/settle", nil, `{"hold":"`+hold+`","outcome":"spent"}`).String())
		require.Equal(t, "403 SETTLE_FORBIDDEN", settleHold(t, r, testSettleSecret+"x", hold, "spent").String())
		require.Equal(t, "400 HOLD_INVALID", settleHold(t, r, testSettleSecret, "forged", "spent").String())
		require.Equal(t, "400 HOLD_INVALID", settleHold(t, r, testSettleSecret, "", "spent").String())
		require.Equal(t, "400 HOLD_INVALID", settleHold(t, r, testSettleSecret, tamper(hold), "spent").String())
		require.Equal(t, "400 HOLD_INVALID", settleHold(t, r, testSettleSecret, strings.Repeat("A", 5000), "spent").String())
		require.Equal(t, "400 BAD_REQUEST", settleHold(t, r, testSettleSecret, hold, "sold").String())
		for _, body := range []string{"", "{", `{"hold":"` + hold + `","outcome":"spent","x":1}`, `{"hold":1}`, strings.Repeat(" ", 1<<20) + "{}"} {
			got := call(t, "POST", r.url+"/gate/settle", map[string]string{"Authorization": "Bearer " + testSettleSecret}, body)
			require.Equal(t, "400 BAD_REQUEST", got.String(), "body %.40q", body)
		}
		requireRefused(t, gateAuth(t, r, "u1", token), http.StatusForbidden, "TOKEN_IN_USE")
		stats, err := r.store.Stats(t.Context(), r.room)
		require.NoError(t, err)
		require.Zero(t, stats.Completed+stats.Released)

		require.Equal(t, "200 ", settleHold(t, r, testSettleSecret, hold, "spent").String())
	})
}

// tamper flips one bit in the middle of a hold id.
func tamper(id string) string {
	b := []byte(id)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

func TestForwardAuthHoldOfAnotherSecretIsRefused(t *testing.T) {
	r := fwdMemRoom(t, nil)
	fwdServer(t, r, server.Config{CookieSecret: []byte(strings.Repeat("o", 32))})
	hold := gateAuth(t, r, "u1", r.admit("u1")).header.Get(server.HoldHeader)
	require.NotEmpty(t, hold)
	fwdServer(t, r, server.Config{})
	require.Equal(t, "400 HOLD_INVALID", settleHold(t, r, testSettleSecret, hold, "spent").String())
}

func TestForwardAuthOffWithoutASettleSecret(t *testing.T) {
	srv := httptest.NewServer(servertest.MustServer(t, server.Config{Store: memstore.New(memstore.Options{})}))
	t.Cleanup(srv.Close)
	for _, path := range []string{"/gate/auth", "/gate/settle"} {
		require.Equal(t, "404 NOT_CONFIGURED", call(t, "POST", srv.URL+path, nil, "").String())
	}
	_, err := server.New(server.Config{Store: memstore.New(memstore.Options{}), SettleSecret: "short"})
	require.ErrorContains(t, err, "SettleSecret")
}

func TestForwardAuthStoreDownIs403WithRetryAfter(t *testing.T) {
	fault := &testenv.FaultStore{}
	r := fwdMemRoom(t, func(s waitroom.Store) waitroom.Store { fault.Store = s; return fault })
	fwdServer(t, r, server.Config{})
	token := r.admit("u1")
	fault.SetFault(func(_ context.Context, method string) error {
		if method == "Claim" {
			return waitroom.ErrStoreUnavailable
		}
		return nil
	})
	a := gateAuth(t, r, "u1", token)
	requireRefused(t, a, http.StatusForbidden, waitroom.ErrStoreUnavailable.Code)
	require.NotEmpty(t, a.header.Get("Retry-After"))
}

func TestForwardAuthTokenCookie(t *testing.T) {
	roomOnEachStore(t, fwdRoomConfig, func(t *testing.T, r *unitsRoom) {
		fwdServer(t, r, server.Config{TokenCookieDomain: "shop.example"})
		token := r.admit("u1")
		resp := call(t, "GET", r.url+"/rooms/"+r.room+"/status", map[string]string{"X-User-Id": "u1"}, "")
		require.Equal(t, http.StatusOK, resp.status)
		cookies := (&http.Response{Header: resp.header}).Cookies()
		require.Len(t, cookies, 1)
		c := cookies[0]
		require.Equal(t, server.TokenCookie, c.Name)
		require.Equal(t, token, c.Value)
		require.Equal(t, "shop.example", c.Domain)
		require.True(t, c.HttpOnly && c.Secure)
		require.Equal(t, http.SameSiteLaxMode, c.SameSite)
		require.Positive(t, c.MaxAge)

		auth := func(cookie string) fwdAnswer {
			return call(t, "GET", r.url+"/gate/auth", map[string]string{"X-User-Id": "u1", "Cookie": cookie}, "")
		}
		// Two token cookies (say, one per domain level): which is meant
		// is unknown.
		requireRefused(t, auth(server.TokenCookie+"="+token+"; "+server.TokenCookie+"="+strings.Repeat("A", 22)), http.StatusUnauthorized, "BAD_REQUEST")
		ok := auth(server.TokenCookie + "=" + token)
		require.Equal(t, "200 ", ok.String())
		require.Equal(t, "200 ", settleHold(t, r, testSettleSecret, ok.header.Get(server.HoldHeader), "released").String())
		// The header, when sent, is the token: the cookie is not read.
		requireRefused(t, call(t, "GET", r.url+"/gate/auth", map[string]string{"X-User-Id": "u1", "X-Entry-Token": strings.Repeat("A", 22),
			"Cookie": server.TokenCookie + "=" + token}, ""), http.StatusForbidden, "ENTRY_TOKEN_INVALID")
	})
}

func TestForwardAuthTokenCookieOffByDefault(t *testing.T) {
	r := fwdMemRoom(t, nil)
	fwdServer(t, r, server.Config{})
	token := r.admit("u1")
	resp := call(t, "GET", r.url+"/rooms/"+r.room+"/status", map[string]string{"X-User-Id": "u1"}, "")
	require.Empty(t, (&http.Response{Header: resp.header}).Cookies())
	requireRefused(t, call(t, "GET", r.url+"/gate/auth", map[string]string{"X-User-Id": "u1", "Cookie": server.TokenCookie + "=" + token}, ""),
		http.StatusUnauthorized, "ENTRY_TOKEN_NOT_FOUND")

	for _, bad := range []string{"shop example", "-shop.example", "shop..example", ".", strings.Repeat("a", 64) + ".example", "shop.example;x=1"} {
		_, err := server.New(server.Config{Store: r.store, TokenCookieDomain: bad})
		require.ErrorContains(t, err, "TokenCookieDomain", bad)
	}
}

// fwdMemRoom is a room with fwdRoomConfig in a memstore on a manual clock,
// through wrap if not nil.
func fwdMemRoom(t *testing.T, wrap func(waitroom.Store) waitroom.Store) *unitsRoom {
	t.Helper()
	clock := memstore.NewManualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	var store waitroom.Store = memstore.New(memstore.Options{Now: clock.Now})
	if wrap != nil {
		store = wrap(store)
	}
	r := &unitsRoom{t: t, store: store, room: servertest.UniqueRoom(t), advance: clock.Advance}
	_, err := store.CreateRoom(t.Context(), r.room, fwdRoomConfig)
	require.NoError(t, err)
	return r
}
