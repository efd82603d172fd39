package loadtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/jsonhttp"
	"github.com/waitroom/waitroom/loadtest"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/server"
	"github.com/waitroom/waitroom/shop"
	"github.com/waitroom/waitroom/shop/inmem"
)

const (
	room    = server.DefaultRoom // the room whose tokens open POST /orders
	product = "flash-1"
)

// fixture is the real thing in process: server.New on memstore, the
// admitter, and the reference shop (in memory) behind the gate.
type fixture struct {
	store      *memstore.Store
	shop       *inmem.Store
	srv        *httptest.Server
	admissions loadtest.AdmissionRecorder

	mu         sync.Mutex
	admitCount map[string]int // every admission the admitter reported, by user

	startOnce sync.Once
	running   sync.WaitGroup
	admitter  *waitroom.Admitter
	ctx       context.Context
}

type fixtureOptions struct {
	rate  float64
	stock int64
	// wrap, if set, wraps the whole server: a deliberately broken seam.
	wrap func(http.Handler) http.Handler
	// protected replaces the shop behind the gate.
	protected http.Handler
	// onAdmit, if set, replaces how admissions reach the recorder.
	onAdmit func(f *fixture, room string, admitted []waitroom.Admission)
}

func newFixture(t *testing.T, opts fixtureOptions) *fixture {
	t.Helper()
	ctx := t.Context()
	f := &fixture{
		store:      memstore.New(memstore.Options{}),
		shop:       inmem.New(),
		admitCount: make(map[string]int),
		ctx:        ctx,
	}
	_, err := f.store.CreateRoom(ctx, room, waitroom.RoomConfig{Rate: opts.rate, MaxQueue: 1_000_000})
	require.NoError(t, err)
	require.NoError(t, f.shop.CreateProduct(ctx, shop.Product{ID: product, Name: "Flash sale item", Stock: opts.stock}))

	protected := opts.protected
	if protected == nil {
		protected = shop.NewHandler(f.shop, shop.Options{})
	}
	// A long store timeout: these tests check the load test's figures, not
	// the failure policy, and a loaded machine can hold a call past 1 s.
	srv, err := server.New(server.Config{Store: f.store, Protected: protected, StoreTimeout: 30 * time.Second})
	require.NoError(t, err)
	var h http.Handler = srv
	if opts.wrap != nil {
		h = opts.wrap(h)
	}
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)

	onAdmit := opts.onAdmit
	if onAdmit == nil {
		onAdmit = func(f *fixture, room string, admitted []waitroom.Admission) { f.admissions.OnAdmit(room, admitted) }
	}
	f.admitter = &waitroom.Admitter{Store: f.store, OnAdmit: func(room string, admitted []waitroom.Admission) {
		f.mu.Lock()
		for _, a := range admitted {
			f.admitCount[a.User]++
		}
		f.mu.Unlock()
		onAdmit(f, room, admitted)
	}}
	// t.Context is cancelled before cleanups run, so this waits for the
	// admitter to stop.
	t.Cleanup(f.running.Wait)
	return f
}

// startAdmitter starts the admitter once; safe to call from OnAllEntered.
func (f *fixture) startAdmitter() {
	f.startOnce.Do(func() {
		f.running.Go(func() { _ = f.admitter.Run(f.ctx) })
	})
}

func (f *fixture) config() loadtest.Config {
	return loadtest.Config{
		URL:        f.srv.URL,
		Room:       room,
		ProductID:  product,
		Admissions: &f.admissions,
		Seed:       1,
	}
}

func TestRunAgainstTheRealServer(t *testing.T) {
	t.Parallel()
	const (
		users = 2000
		rate  = 1000
		stock = 1500
	)
	f := newFixture(t, fixtureOptions{rate: rate, stock: stock})
	var out bytes.Buffer
	cfg := f.config()
	cfg.Users = users
	cfg.NoOrderShare = 0.1
	cfg.Rate = rate
	cfg.Stock = stock
	cfg.CheckPositions = true
	// Admitting only once everyone has entered keeps the positions at
	// entry exactly 1..N.
	cfg.OnAllEntered = f.startAdmitter
	cfg.Out = &out // Run stops writing before it returns

	rep, err := loadtest.Run(t.Context(), cfg)
	require.NoError(t, err)
	require.Empty(t, rep.Violations)
	require.True(t, rep.Complete)

	// Every user admitted exactly once, by the admitter's own account.
	f.mu.Lock()
	require.Len(t, f.admitCount, users)
	for user, n := range f.admitCount {
		require.Equal(t, 1, n, "user %s admitted %d times", user, n)
	}
	f.mu.Unlock()

	o := rep.Outcomes
	require.Equal(t, loadtest.Outcomes{Ordered: stock, SoldOut: 1800 - stock, NoOrder: 200}, o)
	require.Equal(t, users, o.Total())

	// The shop agrees: its stock is gone, and no more.
	p, err := f.shop.Product(t.Context(), product)
	require.NoError(t, err)
	require.Zero(t, p.Stock)
	require.Positive(t, rep.Orders.PerSecond)
	rep.Orders.PerSecond = 0
	require.Equal(t, loadtest.OrderStats{Created: stock, SoldOut: 1800 - stock, AdmittedWithoutStock: 1800 - stock, Stock: stock}, rep.Orders)

	e := rep.Endpoints
	require.EqualValues(t, users, e.Enter.Requests)
	require.GreaterOrEqual(t, e.Status.Requests, int64(users), "every user polls at least once")
	require.Zero(t, e.Leave.Requests)
	require.EqualValues(t, 1800, e.Order.Requests)
	require.Equal(t, map[string]int{"SOLD_OUT": 1800 - stock}, e.Order.Refusals)
	require.Empty(t, e.Order.Unexpected)
	for _, s := range []loadtest.EndpointStats{e.Enter, e.Status, e.Order} {
		requireOrdered(t, s.Latency)
		require.Positive(t, s.PerSecond)
	}

	q := rep.Queue
	require.Equal(t, users, q.Entered)
	require.Positive(t, q.AllEnteredSeconds)
	require.EqualValues(t, users, q.PeakPosition)
	require.True(t, q.PositionsChecked)
	require.True(t, q.PositionsOK)

	a := rep.Admissions
	require.Equal(t, "server", a.Source)
	require.Equal(t, users, a.Admitted)
	require.Positive(t, a.PerSliceMax)
	// Slices, not bursts. A late tick is made up by the next, and a
	// starved admitter reports several ticks at once, so a 100 ms window
	// may hold a few ticks' worth; a burst would be a second's worth.
	require.LessOrEqual(t, a.PerSliceMax, rate/2, "the admitter admits in slices, not bursts")
	require.Positive(t, a.PerSecondMean)
	require.Positive(t, a.PerSecondRatio)
	// The store's token bucket never lets the rate through faster; the
	// slack is for the first batch being reported late, which shortens
	// the span the rate is measured over.
	require.LessOrEqual(t, a.PerSecondRatio, 1.15)
	require.Equal(t, users, a.ETAUsers)
	require.Positive(t, a.WaitP50S)
	require.LessOrEqual(t, a.WaitP50S, a.WaitP99S)
	require.LessOrEqual(t, a.WaitP99S, a.WaitMaxS)

	var text bytes.Buffer
	require.NoError(t, rep.WriteText(&text))
	require.Contains(t, text.String(), "violations: none")
	require.Contains(t, text.String(), "positions at entry: a permutation of 1..N")
	raw, err := json.Marshal(rep)
	require.NoError(t, err)
	var back loadtest.Report
	require.NoError(t, json.Unmarshal(raw, &back))
	require.Equal(t, rep.Outcomes, back.Outcomes)
	require.Equal(t, rep.Admissions, back.Admissions)

	require.Contains(t, out.String(), "entered 2000/2000", "the last status line shows everyone entered")
	for line := range strings.Lines(out.String()) {
		require.True(t, strings.HasPrefix(line, "loadtest "), "status line %q", line)
		require.NotContains(t, line, "\r")
	}
	t.Logf("\n%s", text.String())
}

func TestRunWithLeaversAndClientObservedAdmissions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{rate: 1000, stock: 1000})
	f.startAdmitter()
	cfg := f.config()
	cfg.Admissions = nil // as against a remote server
	cfg.Users = 500
	cfg.Arrival = 500 * time.Millisecond // spread, not all at once
	cfg.LeaveShare = 0.2
	cfg.NoOrderShare = 0.25

	rep, err := loadtest.Run(t.Context(), cfg)
	require.NoError(t, err)
	require.Empty(t, rep.Violations)
	require.Equal(t, loadtest.Outcomes{Ordered: 300, NoOrder: 100, Left: 100}, rep.Outcomes)
	require.EqualValues(t, 100, rep.Endpoints.Leave.Requests)
	require.Equal(t, "client", rep.Admissions.Source)
	require.Zero(t, rep.Admissions.PerSecondRatio, "the rate was not given")
	require.Equal(t, 300, rep.Orders.Created)
	notes := strings.Join(rep.Notes, "\n")
	require.Contains(t, notes, "late by up to one poll interval")
	require.Contains(t, notes, "rate is unknown")
	require.Contains(t, notes, "stock is unknown")
}

func TestRunStopsAtItsBound(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{rate: 1000, stock: 10})
	require.NoError(t, f.store.UpdateRoom(t.Context(), room, testenv.RoomConfig(t, f.store, room), waitroom.RoomConfig{Rate: 1000, MaxQueue: 1_000_000, State: waitroom.RoomPaused}))
	f.startAdmitter() // admits nobody: the room is paused
	cfg := f.config()
	cfg.Users = 10
	cfg.Duration = 1500 * time.Millisecond

	rep, err := loadtest.Run(t.Context(), cfg)
	require.ErrorContains(t, err, "10 of 10 users unfinished: the run reached its bound of 1.5s")
	require.NotErrorIs(t, err, loadtest.ErrViolations)
	require.False(t, rep.Complete)
	require.Equal(t, loadtest.Outcomes{Unfinished: 10}, rep.Outcomes)
	require.Equal(t, 10, rep.Queue.Entered)
	require.Empty(t, rep.Violations)
}

func TestRunRefusesNonLoopbackHosts(t *testing.T) {
	t.Parallel()
	for _, url := range []string{
		"http://example.com",
		"http://10.1.2.3:8080",
		"https://[2001:db8::1]:443/",
		"http://127.0.0.1.nip.io",
		"http://0.0.0.0:8080",
	} {
		rep, err := loadtest.Run(t.Context(), loadtest.Config{URL: url, ProductID: product})
		require.ErrorContains(t, err, "not loopback", url)
		require.Nil(t, rep)
	}
}

func TestRunAcceptsLoopbackHosts(t *testing.T) {
	t.Parallel()
	// A port nobody listens on: the run is allowed, and every user fails
	// with a transport error, which is a violation.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	for _, host := range []string{"127.0.0.1", "localhost"} {
		rep, err := loadtest.Run(t.Context(), loadtest.Config{
			URL:       "http://" + net.JoinHostPort(host, strconv.Itoa(port)),
			Users:     3,
			ProductID: product,
		})
		require.ErrorIs(t, err, loadtest.ErrViolations, host)
		require.Equal(t, loadtest.Outcomes{Failed: 3}, rep.Outcomes)
		require.Equal(t, map[string]int{"TRANSPORT_ERROR": 3 * 3}, rep.Endpoints.Enter.Unexpected, "each user tries three times")
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]loadtest.Config{
		"no URL":                {ProductID: product},
		"no product":            {URL: "http://127.0.0.1:1"},
		"share out of range":    {URL: "http://127.0.0.1:1", ProductID: product, NoOrderShare: 1.5},
		"positions and leavers": {URL: "http://127.0.0.1:1", ProductID: product, CheckPositions: true, LeaveShare: 0.1},
		"bad room":              {URL: "http://127.0.0.1:1", ProductID: product, Room: "Bad Room"},
	} {
		rep, err := loadtest.Run(t.Context(), cfg)
		require.Error(t, err, name)
		require.Nil(t, rep, name)
	}
}

// TestRunReportsViolations breaks one seam of the real system at a time
// and checks that the report says so and Run fails.
func TestRunReportsViolations(t *testing.T) {
	t.Parallel()
	const users = 20
	cases := map[string]struct {
		opts   fixtureOptions
		config func(*loadtest.Config)
		want   []string
	}{
		"a user shown two tokens": {
			// The first "admitted" answer each user gets carries a token
			// the store never issued; the real token shows up when the
			// user asks again after the gate refused the first.
			opts: fixtureOptions{wrap: swapFirstToken},
			want: []string{
				"20 users admitted twice",
				"unexpected answer: order ENTRY_TOKEN_INVALID ×20",
			},
		},
		"the admitter admits a user twice": {
			opts: fixtureOptions{onAdmit: func(f *fixture, room string, admitted []waitroom.Admission) {
				f.admissions.OnAdmit(room, admitted)
				f.admissions.OnAdmit(room, admitted[:1])
			}},
			want: []string{"users admitted twice"},
		},
		"more orders than stock": {
			config: func(c *loadtest.Config) { c.Stock = 5 }, // the shop holds 100
			want:   []string{"oversold: 20 orders placed for a stock of 5"},
		},
		"the order API fails": {
			opts: fixtureOptions{protected: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "boom", http.StatusInternalServerError)
			})},
			want: []string{"unexpected answer: order HTTP_500 ×60"}, // three attempts each
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tc.opts.rate, tc.opts.stock = 1000, 100
			f := newFixture(t, tc.opts)
			f.startAdmitter()
			cfg := f.config()
			cfg.Users = users
			if tc.config != nil {
				tc.config(&cfg)
			}
			rep, err := loadtest.Run(t.Context(), cfg)
			require.ErrorIs(t, err, loadtest.ErrViolations)
			require.NotNil(t, rep)
			require.Equal(t, users, rep.Outcomes.Total())
			violations := strings.Join(rep.Violations, "\n")
			for _, want := range tc.want {
				require.Contains(t, violations, want)
			}
			var text bytes.Buffer
			require.NoError(t, rep.WriteText(&text))
			require.Contains(t, text.String(), "VIOLATIONS")
		})
	}
}

// swapFirstToken is a broken server: it hands each user a second token by
// replacing the one in the user's first "admitted" status answer.
func swapFirstToken(next http.Handler) http.Handler {
	var mu sync.Mutex
	swapped := make(map[string]bool)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/status") {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		var ans map[string]any
		user := r.Header.Get(waitroom.DefaultUserHeader)
		if json.Unmarshal(body, &ans) == nil && ans["state"] == "admitted" {
			mu.Lock()
			if !swapped[user] {
				swapped[user] = true
				ans["token"] = waitroom.NewToken()
				body, _ = json.Marshal(ans)
			}
			mu.Unlock()
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	})
}

func requireOrdered(t *testing.T, l loadtest.Latency) {
	t.Helper()
	require.Positive(t, l.P50MS)
	require.LessOrEqual(t, l.P50MS, l.P90MS)
	require.LessOrEqual(t, l.P90MS, l.P99MS)
	require.LessOrEqual(t, l.P99MS, l.MaxMS)
}

// TestUsersBehaveLikePeople: a room that drops every user at its first
// status call (NOT_IN_QUEUE, as after a silence) and refuses every first
// entry with 429 RATE_LIMITED and Retry-After: the users wait the
// Retry-After, enter again after NOT_IN_QUEUE (counted apart) and still
// order; a fifth of them close the tab after entering and are counted
// abandoned, never polling again.
func TestUsersBehaveLikePeople(t *testing.T) {
	t.Parallel()
	const users = 50
	var (
		mu        sync.Mutex
		entries   = map[string][]time.Time{}
		dropped   = map[string]bool{}
		statuses  = map[string]int{}
		storeRef  *memstore.Store
		retryWait = time.Second
	)
	f := newFixture(t, fixtureOptions{rate: 1000, stock: users, wrap: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			user := r.Header.Get(waitroom.DefaultUserHeader)
			mu.Lock()
			switch {
			case strings.HasSuffix(r.URL.Path, "/enter"):
				entries[user] = append(entries[user], time.Now())
				if len(entries[user]) == 1 {
					mu.Unlock()
					w.Header().Set("Retry-After", strconv.Itoa(int(retryWait.Seconds())))
					jsonhttp.Error(w, http.StatusTooManyRequests, "RATE_LIMITED", "slow down")
					return
				}
			case strings.HasSuffix(r.URL.Path, "/status"):
				statuses[user]++
				if !dropped[user] {
					dropped[user] = true
					mu.Unlock()
					if err := storeRef.Leave(r.Context(), room, user); err != nil {
						t.Error(err)
					}
					jsonhttp.Error(w, http.StatusNotFound, "NOT_IN_QUEUE", "not in the queue")
					return
				}
			}
			mu.Unlock()
			next.ServeHTTP(w, r)
		})
	}})
	storeRef = f.store
	f.startAdmitter()
	cfg := f.config()
	cfg.Users, cfg.Stock, cfg.VanishShare = users, users, 0.2
	// Entries are held in the queue until everyone is in: the first
	// status comes before any admission.
	require.NoError(t, f.store.UpdateRoom(t.Context(), room, testenv.RoomConfig(t, f.store, room), waitroom.RoomConfig{Rate: 1000, MaxQueue: 1_000_000, State: waitroom.RoomPaused}))
	cfg.OnAllEntered = func() {
		_ = f.store.UpdateRoom(f.ctx, room, testenv.RoomConfig(t, f.store, room), waitroom.RoomConfig{Rate: 1000, MaxQueue: 1_000_000})
	}
	rep, err := loadtest.Run(t.Context(), cfg)
	require.NoError(t, err, "%v", rep.Violations)

	const vanished = users / 5
	require.Equal(t, loadtest.Outcomes{Ordered: users - vanished, Abandoned: vanished}, rep.Outcomes)
	require.Equal(t, users-vanished, rep.Queue.Reentries, "every poller was dropped once and entered again")
	mu.Lock()
	defer mu.Unlock()
	for user, times := range entries {
		require.GreaterOrEqual(t, len(times), 2, user)
		require.GreaterOrEqual(t, times[1].Sub(times[0]), retryWait, "%s honoured Retry-After", user)
	}
	silent := 0
	for _, u := range slices.Collect(maps.Keys(entries)) {
		if statuses[u] == 0 {
			silent++
		}
	}
	require.Equal(t, vanished, silent, "the vanished never asked for their status")
}
