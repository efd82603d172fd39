package server_test

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/server"
)

// settledShop is an order API behind a Settler: it answers the status the
// request asks for in X-Answer (a panic for "panic"), and counts the
// requests it saw and the Waitroom-Hold headers left on them.
type settledShop struct {
	url       string
	served    atomic.Int64
	holdsSeen atomic.Int64
}

func newSettledShop(t *testing.T, s *server.Settler) *settledShop {
	t.Helper()
	shop := &settledShop{}
	web := httptest.NewServer(s.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		shop.served.Add(1)
		if r.Header.Get(server.HoldHeader) != "" {
			shop.holdsSeen.Add(1)
		}
		answer := r.Header.Get("X-Answer")
		if answer == "panic" {
			panic(http.ErrAbortHandler) // net/http drops the connection quietly
		}
		code, _ := strconv.Atoi(answer)
		w.WriteHeader(http.StatusEarlyHints) // an interim answer decides nothing
		w.WriteHeader(code)
	})))
	t.Cleanup(web.Close)
	shop.url = web.URL
	return shop
}

// orderWith sends an order carrying hold that the shop answers with answer.
func (s *settledShop) orderWith(t *testing.T, hold, answer string) (int, error) {
	t.Helper()
	req, err := http.NewRequest("POST", s.url+"/orders", nil)
	require.NoError(t, err)
	if hold != "" {
		req.Header.Set(server.HoldHeader, hold)
	}
	req.Header.Set("X-Answer", answer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

// TestSettlerSettlesByTheAnswer: the Settler settles the hold through POST
// /gate/settle by the order's final status, before that status reaches
// the buyer: a 2xx spends the token (the next auth is refused at once), a
// refusal or a panic releases it (the next auth is let through); an order
// without a hold never reaches the order API.
func TestSettlerSettlesByTheAnswer(t *testing.T) {
	t.Parallel()
	r := fwdMemRoom(t, nil)
	fwdServer(t, r, server.Config{})
	logs := &testenv.LogBuffer{}
	shop := newSettledShop(t, &server.Settler{URL: r.url + "/gate/settle", Secret: testSettleSecret, Logger: slog.New(slog.NewTextHandler(logs, nil))})

	for i, answer := range []string{"422", "500", "panic"} {
		user := "u" + strconv.Itoa(i)
		token := r.admit(user)
		a := gateAuth(t, r, user, token)
		require.Equal(t, "200 ", a.String())
		status, err := shop.orderWith(t, a.header.Get(server.HoldHeader), answer)
		if answer == "panic" {
			require.Error(t, err, "the connection is dropped")
		} else {
			require.NoError(t, err)
			require.Equal(t, answer, strconv.Itoa(status))
		}
		require.Equal(t, "200 ", gateAuth(t, r, user, token).String(), "%s released the token: claimed again", answer)
	}

	token := r.admit("buyer")
	a := gateAuth(t, r, "buyer", token)
	status, err := shop.orderWith(t, a.header.Get(server.HoldHeader), "201")
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, status)
	requireRefused(t, gateAuth(t, r, "buyer", token), http.StatusForbidden, "ENTRY_TOKEN_NOT_FOUND")

	before := shop.served.Load()
	status, err = shop.orderWith(t, "", "201")
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, status)
	require.Equal(t, before, shop.served.Load(), "an order without a hold never reaches the shop")
	require.Zero(t, shop.holdsSeen.Load(), "the hold is the settler's, not the shop's")
	require.NotContains(t, logs.String(), "settling the order's hold failed")
}

// TestSettlerRefusedSettle: a settle the waiting room refuses is not
// retried, is told as a *SettleError with the code, and the order's own
// answer still reaches the buyer, logged.
func TestSettlerRefusedSettle(t *testing.T) {
	t.Parallel()
	r := fwdMemRoom(t, nil)
	fwdServer(t, r, server.Config{})
	wrong := &server.Settler{URL: r.url + "/gate/settle", Secret: "not-the-settle-secret-at-all-no-no"}
	err := wrong.Settle(t.Context(), "whatever", server.OutcomeSpent)
	var se *server.SettleError
	require.True(t, errors.As(err, &se), "%v", err)
	require.Equal(t, server.SettleError{Status: http.StatusForbidden, Code: "SETTLE_FORBIDDEN"}, *se)

	good := &server.Settler{URL: r.url + "/gate/settle", Secret: testSettleSecret}
	err = good.Settle(t.Context(), "forged-hold", server.OutcomeSpent)
	require.True(t, errors.As(err, &se), "%v", err)
	require.Equal(t, "HOLD_INVALID", se.Code)

	logs := &testenv.LogBuffer{}
	wrong.Logger = slog.New(slog.NewTextHandler(logs, nil))
	shop := newSettledShop(t, wrong)
	token := r.admit("u1")
	a := gateAuth(t, r, "u1", token)
	status, err := shop.orderWith(t, a.header.Get(server.HoldHeader), "201")
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, status, "the order is what it is")
	require.Contains(t, logs.String(), "settling the order's hold failed")
	requireRefused(t, gateAuth(t, r, "u1", token), http.StatusForbidden, "TOKEN_IN_USE")
}

// TestSettlerCheckHold: with Server.CheckHold as its check, the Settler
// lets an order through only with a hold the server sealed and exactly
// the headers the gate gave with it; a forged hold, another user, another
// Idempotency-Key or more Waitroom-Units never reach the order API, and
// the token stays held for the real order.
func TestSettlerCheckHold(t *testing.T) {
	t.Parallel()
	r := fwdMemRoom(t, nil)
	srv := servertest.MustServer(t, server.Config{Store: r.store, DefaultRoom: r.room, SettleSecret: testSettleSecret, CookieSecret: []byte(testCookieSecret)})
	web := httptest.NewServer(srv)
	t.Cleanup(web.Close)
	r.url = web.URL
	var served atomic.Int64
	shop := httptest.NewServer((&server.Settler{URL: r.url + "/gate/settle", Secret: testSettleSecret, Check: srv.CheckHold}).Wrap(
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			served.Add(1)
			w.WriteHeader(http.StatusCreated)
		})))
	t.Cleanup(shop.Close)

	token := r.admit("u1")
	a := gateAuth(t, r, "u1", token)
	require.Equal(t, "200 ", a.String())
	vouched := map[string]string{server.HoldHeader: a.header.Get(server.HoldHeader)}
	for _, k := range []string{"X-User-Id", "Idempotency-Key", "Waitroom-Units"} {
		vouched[k] = a.header.Get(k)
	}
	with := func(k, v string) map[string]string {
		h := map[string]string{}
		for hk, hv := range vouched {
			h[hk] = hv
		}
		h[k] = v
		return h
	}
	for _, c := range []struct {
		header map[string]string
		want   string
	}{
		{with(server.HoldHeader, tamper(vouched[server.HoldHeader])), "400 HOLD_INVALID"},
		{with("X-User-Id", "u2"), "403 HOLD_MISMATCH"},
		{with("Idempotency-Key", "forged"), "403 HOLD_MISMATCH"},
		{with("Waitroom-Units", "10"), "403 HOLD_MISMATCH"},
	} {
		require.Equal(t, c.want, call(t, "POST", shop.URL+"/orders", c.header, "").String(), "%v", c.header)
	}
	require.Zero(t, served.Load(), "no refused order reached the order API")
	requireRefused(t, gateAuth(t, r, "u1", token), http.StatusForbidden, "TOKEN_IN_USE")

	require.Equal(t, http.StatusCreated, call(t, "POST", shop.URL+"/orders", vouched, "").status)
	require.EqualValues(t, 1, served.Load())
	requireRefused(t, gateAuth(t, r, "u1", token), http.StatusForbidden, "ENTRY_TOKEN_NOT_FOUND")
}
