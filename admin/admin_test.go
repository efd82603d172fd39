package admin_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/admin"
	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/server"
)

func TestAdminOffWithoutToken(t *testing.T) {
	t.Parallel()
	store := servertest.MemRoom(t, "default", waitroom.RoomConfig{})
	var shopCalls atomic.Int64
	srv := httptest.NewServer(servertest.MustServer(t, server.Config{
		Store: store,
		AdminRoutes: map[string]http.Handler{"GET /admin/products": http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			shopCalls.Add(1)
		})},
	}))
	t.Cleanup(srv.Close)
	for _, req := range []struct{ method, path, body string }{
		{"GET", "/admin/rooms", ""},
		{"POST", "/admin/rooms", `{"name":"new-room"}`},
		{"GET", "/admin/rooms/default", ""},
		{"PATCH", "/admin/rooms/default", `{"state":"closed"}`},
		{"GET", "/admin/products", ""},
	} {
		for _, auth := range []string{"", "Bearer ", "Bearer anything"} {
			r, err := http.NewRequest(req.method, srv.URL+req.path, strings.NewReader(req.body))
			require.NoError(t, err)
			if auth != "" {
				r.Header.Set("Authorization", auth)
			}
			a := servertest.Send(t, srv.Client(), r)
			a.RequireError(t, http.StatusNotFound, "NOT_FOUND", "%s %s %q", req.method, req.path, auth)
		}
	}
	cfg, err := store.RoomConfig(t.Context(), "default")
	require.NoError(t, err)
	require.Equal(t, waitroom.RoomOpen, cfg.State)
	rooms, err := store.Rooms(t.Context())
	require.NoError(t, err)
	require.Equal(t, []string{"default"}, rooms)
	require.Zero(t, shopCalls.Load())
}

func TestAdminRefusesWithoutTheToken(t *testing.T) {
	t.Parallel()
	f := servertest.NewAdminFixture(t, servertest.FixtureOptions{})
	before, err := f.Store.RoomConfig(t.Context(), f.Room)
	require.NoError(t, err)
	requests := []struct{ method, path, body string }{
		{"GET", "/admin/rooms", ""},
		{"POST", "/admin/rooms", `{"name":"intruder"}`},
		{"GET", "/admin/rooms/" + f.Room + "?window=0", ""},
		{"PATCH", "/admin/rooms/" + f.Room, `{"state":"closed","rate":1,"max_queue":1}`},
		{"GET", "/admin/products", ""},
		{"GET", "/admin/no-such-thing", ""},
		{"DELETE", "/admin/rooms/" + f.Room, ""},
	}
	auths := []string{
		"",
		"Bearer",
		"Bearer ",
		"Bearer wrong",
		"Bearer " + servertest.AdminToken + "x",
		"Bearer " + servertest.AdminToken[:len(servertest.AdminToken)-1],
		"Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+servertest.AdminToken)),
		servertest.AdminToken,
		"Token " + servertest.AdminToken,
	}
	// Each from an address of its own (told by the trusted loopback
	// proxy), so that the limit of failed attempts stays out of the way.
	client := 0
	for _, req := range requests {
		for _, auth := range auths {
			client++
			headers := []string{"X-Forwarded-For", fmt.Sprintf("192.0.2.%d", client)}
			if auth != "" {
				headers = append(headers, "Authorization", auth)
			}
			a := f.Do(req.method, req.path, req.body, headers...)
			a.RequireError(t, http.StatusUnauthorized, "UNAUTHORIZED", "%s %s %q", req.method, req.path, auth)
			require.True(t, strings.HasPrefix(a.Header.Get("WWW-Authenticate"), "Bearer"), a.Header.Get("WWW-Authenticate"))
		}
	}

	after, err := f.Store.RoomConfig(t.Context(), f.Room)
	require.NoError(t, err)
	require.Equal(t, before, after, "a refused request changes nothing")
	rooms, err := f.Store.Rooms(t.Context())
	require.NoError(t, err)
	require.Equal(t, []string{f.Room}, rooms)
	require.Zero(t, f.ShopCalls.Load(), "the shop's admin handler is behind the same check")
	require.Equal(t, 1, strings.Count(f.Logs.String(), "admin request refused"), "refusals are logged once a minute, not per request")

	// The scheme is case-insensitive (RFC 9110); the right token opens
	// every route.
	a := f.Do("GET", "/admin/products", "", "Authorization", "bearer "+servertest.AdminToken)
	require.Equal(t, http.StatusOK, a.Status)
	require.EqualValues(t, 1, f.ShopCalls.Load())
	a = f.Admin("GET", "/admin/no-such-thing", "")
	a.RequireError(t, http.StatusNotFound, "NOT_FOUND")
}

func TestAdminRooms(t *testing.T) {
	t.Parallel()
	f := servertest.NewAdminFixture(t, servertest.FixtureOptions{})
	name := servertest.UniqueRoom(t)

	a := f.Admin("POST", "/admin/rooms", `{"name":"`+name+`","rate":50,"token_ttl":"2m","state":"paused"}`)
	require.Equal(t, http.StatusCreated, a.Status, a.Body)
	require.Equal(t, map[string]any{
		"name": name, "state": "paused", "rate": 50.0, "slice": "100ms", "max_queue": 100000.0,
		"token_ttl": "2m0s", "lease": "30s", "max_active": 0.0, "stock": 0.0, "units_per_order": 1.0, "one_order_per_user": false, "invite_only": false,
		"abandon_after": "5m0s", "first_use_within": "1m0s", "notified_first_use_within": "2m0s",
		"opens_at": "", "prequeue_order": "random", "closes_at": "", "shop_url": "", "shop_name": "", "product_name": "", "page": "", "shards": 1.0,
	}, a.Body)
	cfg, err := f.Store.RoomConfig(t.Context(), name)
	require.NoError(t, err)
	require.Equal(t, waitroom.RoomConfig{Rate: 50, Slice: 100 * time.Millisecond, MaxQueue: 100_000,
		TokenTTL: 2 * time.Minute, Lease: 30 * time.Second, State: waitroom.RoomPaused, UnitsPerOrder: 1,
		AbandonAfter: 5 * time.Minute, FirstUseWithin: time.Minute, NotifiedFirstUseWithin: 2 * time.Minute, Shards: 1}, cfg)
	require.Contains(t, f.Logs.String(), `msg="room created" room=`+name+" by=admin")

	a = f.Admin("POST", "/admin/rooms", `{"name":"`+name+`","rate":70}`)
	a.RequireError(t, http.StatusConflict, "ROOM_EXISTS")
	cfg, err = f.Store.RoomConfig(t.Context(), name)
	require.NoError(t, err)
	require.InDelta(t, 50.0, cfg.Rate, 0, "an existing room keeps its settings")

	a = f.Admin("GET", "/admin/rooms", "")
	require.Equal(t, http.StatusOK, a.Status)
	rooms := a.Body["rooms"].([]any)
	require.Len(t, rooms, 2)
	byName := map[string]map[string]any{}
	for _, r := range rooms {
		byName[r.(map[string]any)["name"].(string)] = r.(map[string]any)
	}
	require.Equal(t, "paused", byName[name]["state"])
	require.Equal(t, "open", byName[f.Room]["state"])
	require.Equal(t, 140.0, byName[f.Room]["rate"])

	// A partial update changes only what it names.
	a = f.Admin("PATCH", "/admin/rooms/"+name, `{"max_queue":10,"lease":"45s","abandon_after":"90s","first_use_within":"20s","units_per_order":4}`)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	require.Equal(t, 10.0, a.Body["max_queue"])
	require.Equal(t, 4.0, a.Body["units_per_order"])
	require.Equal(t, "45s", a.Body["lease"])
	require.Equal(t, 50.0, a.Body["rate"])
	require.Equal(t, "paused", a.Body["state"])
	cfg, err = f.Store.RoomConfig(t.Context(), name)
	require.NoError(t, err)
	require.Equal(t, "1m30s", a.Body["abandon_after"])
	require.Equal(t, "20s", a.Body["first_use_within"])
	require.Equal(t, waitroom.RoomConfig{Rate: 50, Slice: 100 * time.Millisecond, MaxQueue: 10,
		TokenTTL: 2 * time.Minute, Lease: 45 * time.Second, State: waitroom.RoomPaused, UnitsPerOrder: 4,
		AbandonAfter: 90 * time.Second, FirstUseWithin: 20 * time.Second, NotifiedFirstUseWithin: 2 * time.Minute, Shards: 1}, cfg)
	require.Contains(t, f.Logs.String(), `msg="room updated" room=`+name+" by=admin")
	require.Contains(t, f.Logs.String(), "max_queue.old=100000 max_queue.new=10")

	// Figures, without the wait that measures admissions per second.
	require.Equal(t, http.StatusOK, f.Enter("u1").Status)
	a = f.Admin("GET", "/admin/rooms/"+f.Room+"?window=0", "")
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	require.Equal(t, map[string]any{
		"waiting": 1.0, "live_tokens": 0.0, "admitted_per_second": nil, "window": "0s",
		"entered": 1.0, "queue_full": 0.0, "admitted": 0.0, "completed": 0.0, "units_sold": 0.0, "released": 0.0, "expired": 0.0,
		"no_shows": 0.0, "abandoned": 0.0,
	}, a.Body["figures"])
	require.Equal(t, "open", a.Body["state"])
}

func TestAdminRejectsBadInput(t *testing.T) {
	t.Parallel()
	f := servertest.NewAdminFixture(t, servertest.FixtureOptions{})
	before, err := f.Store.RoomConfig(t.Context(), f.Room)
	require.NoError(t, err)
	path := "/admin/rooms/" + f.Room
	for _, tc := range []struct {
		method, path, body string
		status             int
		code, mentions     string
	}{
		{"PATCH", path, `{"rate":-1}`, 400, "BAD_REQUEST", "rate"},
		{"PATCH", path, `{"rate":0}`, 400, "BAD_REQUEST", "rate"},
		{"PATCH", path, `{"rate":"fast"}`, 400, "BAD_REQUEST", "rate"},
		{"PATCH", path, `{"rate":1000000}`, 400, "BAD_REQUEST", "rate"},
		{"PATCH", path, `{"token_ttl":"soon"}`, 400, "BAD_REQUEST", "token_ttl"},
		{"PATCH", path, `{"token_ttl":300}`, 400, "BAD_REQUEST", "token_ttl"},
		{"PATCH", path, `{"token_ttl":"100ms"}`, 400, "BAD_REQUEST", "token_ttl"},
		{"PATCH", path, `{"lease":"1h"}`, 400, "BAD_REQUEST", "lease"},
		{"PATCH", path, `{"slice":"1ms"}`, 400, "BAD_REQUEST", "slice"},
		{"PATCH", path, `{"max_queue":0}`, 400, "BAD_REQUEST", "max_queue"},
		{"PATCH", path, `{"max_active":-1}`, 400, "BAD_REQUEST", "max_active"},
		{"PATCH", path, `{"stock":-1}`, 400, "BAD_REQUEST", "stock"},
		{"PATCH", path, `{"stock":2000000000}`, 400, "BAD_REQUEST", "stock"},
		{"PATCH", path, `{"stock":1.5}`, 400, "BAD_REQUEST", "stock"},
		{"PATCH", path, `{"units_per_order":0}`, 400, "BAD_REQUEST", "units_per_order"},
		{"PATCH", path, `{"units_per_order":1001}`, 400, "BAD_REQUEST", "units_per_order"},
		{"PATCH", path, `{"units_per_order":2.5}`, 400, "BAD_REQUEST", "units_per_order"},
		{"PATCH", path, `{"units_per_order":"3"}`, 400, "BAD_REQUEST", "units_per_order"},
		{"PATCH", path, `{"stock":5,"units_per_order":6}`, 400, "BAD_REQUEST", "units_per_order: must be at most stock"},
		{"PATCH", path, `{"one_order_per_user":"yes"}`, 400, "BAD_REQUEST", "one_order_per_user"},
		{"PATCH", path, `{"shards":2}`, 400, "SHARDS_NEED_CLUSTER", "Redis Cluster"},
		{"PATCH", path, `{"shards":17}`, 400, "BAD_REQUEST", "shards"},
		{"PATCH", path, `{"shards":0.5}`, 400, "BAD_REQUEST", "shards"},
		{"POST", "/admin/rooms", `{"name":"fresh","shards":3}`, 400, "SHARDS_NEED_CLUSTER", "Redis Cluster"},
		{"PATCH", path, `{"state":"half-open"}`, 400, "BAD_REQUEST", "state"},
		{"PATCH", path, `{"abandon_after":"500ms"}`, 400, "BAD_REQUEST", "abandon_after"},
		{"PATCH", path, `{"abandon_after":"48h"}`, 400, "BAD_REQUEST", "abandon_after"},
		{"PATCH", path, `{"abandon_after":"a while"}`, 400, "BAD_REQUEST", "abandon_after"},
		{"PATCH", path, `{"first_use_within":"10m"}`, 400, "BAD_REQUEST", "first_use_within"},
		{"PATCH", path, `{"first_use_within":"0s"}`, 400, "BAD_REQUEST", "first_use_within"},
		{"PATCH", path, `{"token_ttl":"30s"}`, 400, "BAD_REQUEST", "first_use_within"},
		{"PATCH", path, `{"state":"paused","ratee":5}`, 400, "BAD_REQUEST", "unknown field"},
		{"PATCH", path, `{"rate":5} {"rate":6}`, 400, "BAD_REQUEST", "after the object"},
		{"PATCH", path, `[]`, 400, "BAD_REQUEST", "JSON"},
		{"PATCH", path, ``, 400, "BAD_REQUEST", "empty body"},
		{"PATCH", "/admin/rooms/no-such-room", `{"rate":5}`, 404, "ROOM_NOT_FOUND", ""},
		{"PATCH", "/admin/rooms/Bad!", `{"rate":5}`, 400, "BAD_REQUEST", "room names"},
		{"GET", path + "?window=forever", "", 400, "BAD_REQUEST", "window"},
		{"GET", path + "?window=1m", "", 400, "BAD_REQUEST", "window"},
		{"GET", "/admin/rooms/no-such-room?window=0", "", 404, "ROOM_NOT_FOUND", ""},
		{"POST", "/admin/rooms", `{"name":"Bad Name"}`, 400, "BAD_REQUEST", "name"},
		{"POST", "/admin/rooms", `{"rate":5}`, 400, "BAD_REQUEST", "name"},
		{"POST", "/admin/rooms", `{"name":"fresh","state":"closing"}`, 400, "BAD_REQUEST", "state"},
		{"POST", "/admin/rooms", `{"name":"fresh","colour":"red"}`, 400, "BAD_REQUEST", "unknown field"},
	} {
		a := f.Admin(tc.method, tc.path, tc.body)
		require.Equal(t, tc.status, a.Status, "%s %s %s: %v", tc.method, tc.path, tc.body, a.Body)
		require.Equal(t, tc.code, a.Code(), tc.body)
		msg := a.Body["error"].(map[string]any)["message"].(string)
		require.Contains(t, msg, tc.mentions, tc.body)
	}
	after, err := f.Store.RoomConfig(t.Context(), f.Room)
	require.NoError(t, err)
	require.Equal(t, before, after)
	rooms, err := f.Store.Rooms(t.Context())
	require.NoError(t, err)
	require.Equal(t, []string{f.Room}, rooms, "no bad create made a room")
}

// TestAdminPauseAndResume: pausing stops admissions from the next slice on,
// saves nothing up, and resuming admits at the rate, not in a burst.
func TestAdminPauseAndResume(t *testing.T) {
	t.Parallel()
	const slice = 100 * time.Millisecond
	f := servertest.NewAdminFixture(t, servertest.FixtureOptions{Room: waitroom.RoomConfig{Rate: 100, Slice: slice}})
	for i := range 200 {
		_, err := f.Store.Enter(t.Context(), f.Room, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
	}
	require.Zero(t, f.Tick(slice), "the first tick starts the bucket")
	for range 3 {
		require.Equal(t, 10, f.Tick(slice))
	}

	a := f.Admin("PATCH", "/admin/rooms/"+f.Room, `{"state":"paused"}`)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	for range 10 {
		require.Zero(t, f.Tick(slice), "paused: nobody is admitted from the next slice on")
	}
	a = f.Enter("late")
	require.Equal(t, http.StatusOK, a.Status, "a paused room still takes entries")
	require.Equal(t, true, a.Body["paused"], "this instance's hints follow at once")

	a = f.Admin("PATCH", "/admin/rooms/"+f.Room, `{"state":"open"}`)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	for range 5 {
		require.Equal(t, 10, f.Tick(slice), "resumed at the rate: no burst from the pause")
	}
	st, err := f.Store.Stats(t.Context(), f.Room)
	require.NoError(t, err)
	require.EqualValues(t, 80, st.Admitted)
}

// TestAdminCloseKeepsTokens: a closed room refuses new entries, but issued
// tokens stay valid and the queued keep their places and are admitted.
func TestAdminCloseKeepsTokens(t *testing.T) {
	t.Parallel()
	up := servertest.NewUpstream(t)
	f := servertest.NewAdminFixture(t, servertest.FixtureOptions{Protected: servertest.ProxyTo(t, up.Srv.URL)})
	token := f.Admit("holder")
	require.Equal(t, http.StatusOK, f.Enter("queued").Status)

	a := f.Admin("PATCH", "/admin/rooms/"+f.Room, `{"state":"closed"}`)
	require.Equal(t, http.StatusOK, a.Status, a.Body)

	a = f.Enter("newcomer")
	a.RequireError(t, http.StatusForbidden, "ROOM_CLOSED")
	a = f.Enter("queued")
	require.Equal(t, http.StatusOK, a.Status, "the queued keep their places")
	require.EqualValues(t, 1, a.Num("position"))
	a = f.Enter("holder")
	require.Equal(t, http.StatusOK, a.Status)
	require.Equal(t, token, a.Str("token"))

	a = f.Order("holder", token)
	require.Equal(t, http.StatusCreated, a.Status, "an issued token still buys: %v", a.Body)
	require.EqualValues(t, 1, up.Calls.Load())

	f.Clock.Advance(time.Second)
	admitted, err := f.Store.Admit(t.Context(), f.Room)
	require.NoError(t, err)
	require.Len(t, admitted, 1)
	require.Equal(t, "queued", admitted[0].User, "a closed room still admits its queue")
}

// TestAdminShowMeasuresAdmissionRate measures admissions per second on the
// real clock with a running admitter.
func TestAdminShowMeasuresAdmissionRate(t *testing.T) {
	t.Parallel()
	room := servertest.UniqueRoom(t)
	store := servertest.MemRoom(t, room, waitroom.RoomConfig{Rate: 200})
	for i := range 2000 {
		_, err := store.Enter(t.Context(), room, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
	}
	srv := httptest.NewServer(servertest.MustServer(t, server.Config{Store: store, DefaultRoom: room, AdminToken: servertest.AdminToken}))
	t.Cleanup(srv.Close)
	admitter := &waitroom.Admitter{Store: store}
	done := make(chan error, 1)
	go func() { done <- admitter.Run(t.Context()) }()
	t.Cleanup(func() { <-done })
	require.Eventually(t, func() bool {
		st, err := store.Stats(t.Context(), room)
		return err == nil && st.Admitted > 0
	}, 5*time.Second, 10*time.Millisecond, "admissions start")

	req, err := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/admin/rooms/"+room+"?window=1s", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+servertest.AdminToken)
	a := servertest.Send(t, srv.Client(), req)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	fig := a.Body["figures"].(map[string]any)
	require.Equal(t, "1s", fig["window"])
	// The figure is the store's counter over a real second: never more
	// than the rate (plus a tick's quota at the window's edges), and on a
	// loaded machine late ticks may cost some of it.
	perSecond := fig["admitted_per_second"].(float64)
	require.LessOrEqual(t, perSecond, 200.0*1.1+20, fig)
	require.GreaterOrEqual(t, perSecond, 100.0, fig)
}

func TestNewRejectsBadAdminConfig(t *testing.T) {
	t.Parallel()
	store := memstore.New(memstore.Options{})
	h := http.NotFoundHandler()
	for name, cfg := range map[string]server.Config{
		"admin route outside /admin/": {Store: store, AdminToken: servertest.AdminToken, AdminRoutes: map[string]http.Handler{"GET /products": h}},
		"admin route clash":           {Store: store, AdminToken: servertest.AdminToken, AdminRoutes: map[string]http.Handler{"GET /admin/rooms": h}},
		"admin route clashes with routes": {Store: store, AdminToken: servertest.AdminToken,
			Routes: map[string]http.Handler{"GET /admin/products": h}, AdminRoutes: map[string]http.Handler{"GET /admin/products": h}},
	} {
		_, err := server.New(cfg)
		require.Error(t, err, name)
	}
}

// TestAdminChangeReachesOtherInstances runs two servers, each with its own
// Redis client, on one real Redis (REDIS_URL, default the loopback one; a
// missing Redis fails the test): a change made through instance A governs
// what instance B's admitter admits and what B answers to entries.
func TestAdminChangeReachesOtherInstances(t *testing.T) {
	t.Parallel()
	redisURL := testenv.RedisURL()
	prefix := fmt.Sprintf("wrtest-admin-%d", time.Now().UnixNano())
	t.Cleanup(func() {
		client, err := redisstore.Open(redisURL)
		require.NoError(t, err)
		defer client.Close()
		require.NoError(t, redisstore.DeletePrefix(context.Background(), client, prefix))
	})
	newInstance := func() (*redisstore.Store, *server.Server, *httptest.Server) {
		client, err := redisstore.Open(redisURL)
		require.NoError(t, err)
		t.Cleanup(func() { _ = client.Close() })
		store := redisstore.New(client, redisstore.Options{Prefix: prefix})
		require.NoError(t, store.Ping(t.Context()), "Redis at %s", redisURL)
		s := servertest.MustServer(t, server.Config{Store: store, AdminToken: servertest.AdminToken})
		srv := httptest.NewServer(s)
		t.Cleanup(srv.Close)
		return store, s, srv
	}
	_, _, srvA := newInstance()
	storeB, serverB, srvB := newInstance()
	adminA := func(method, path, body string) servertest.Answer {
		req, err := http.NewRequestWithContext(t.Context(), method, srvA.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+servertest.AdminToken)
		return servertest.Send(t, srvA.Client(), req)
	}
	enterB := func(user string) servertest.Answer {
		req, err := http.NewRequestWithContext(t.Context(), "POST", srvB.URL+"/rooms/sale/enter", nil)
		require.NoError(t, err)
		req.Header.Set("X-User-Id", user)
		return servertest.Send(t, srvB.Client(), req)
	}

	a := adminA("POST", "/admin/rooms", `{"name":"sale","rate":20}`)
	require.Equal(t, http.StatusCreated, a.Status, a.Body)
	require.Equal(t, http.StatusOK, enterB("first").Status)
	for i := range 400 {
		_, err := storeB.Enter(t.Context(), "sale", fmt.Sprintf("u%03d", i))
		require.NoError(t, err)
	}
	admitterB := &waitroom.Admitter{Store: storeB, OnAdmit: serverB.OnAdmit}
	// admitFor ticks B's admitter every 100 ms for d and returns how many
	// it admitted.
	admitFor := func(d time.Duration) int {
		total := 0
		ticker := time.NewTicker(100 * time.Millisecond)
		defer ticker.Stop()
		for deadline := time.Now().Add(d); time.Now().Before(deadline); <-ticker.C {
			n, err := admitterB.Tick(t.Context())
			require.NoError(t, err)
			total += n
		}
		return total
	}

	admitFor(300 * time.Millisecond) // start the bucket
	before := admitFor(time.Second)
	// Real ticks on two loaded cores run late and the per-tick cap drops
	// what a late tick cannot carry, so the counts are bounds: never above
	// the rate, and far apart before and after the change.
	require.LessOrEqual(t, before, 20*11/10+2+2, "B admits at most 20/s (+ carry and a quota)")

	a = adminA("PATCH", "/admin/rooms/sale", `{"rate":200}`)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	after := admitFor(time.Second)
	require.LessOrEqual(t, after, 200*11/10+20+20, "B admits at most the rate set through A")
	require.GreaterOrEqual(t, after, 3*(20*11/10+2+2), "B admits at the rate set through A, not the old one")

	// Paused through A: B's very next tick admits nobody.
	a = adminA("PATCH", "/admin/rooms/sale", `{"state":"paused"}`)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	n, err := admitterB.Tick(t.Context())
	require.NoError(t, err)
	require.Zero(t, n)

	// Closed through A: B refuses the next entry at once (the store
	// decides, not B's settings cache).
	a = adminA("PATCH", "/admin/rooms/sale", `{"state":"closed"}`)
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	a = enterB("newcomer")
	a.RequireError(t, http.StatusForbidden, "ROOM_CLOSED")
}

// TestAdminLimitsFailedAttempts: 300 wrong tokens at once from one address
// get exactly the limit's burst of 401s and 429 RATE_LIMITED with
// Retry-After for the rest; meanwhile the right token from that address is
// refused too (a guess then tells nothing), from another address it is
// not; once Retry-After has passed, the address may try again.
func TestAdminLimitsFailedAttempts(t *testing.T) {
	t.Parallel()
	f := servertest.NewAdminFixture(t, servertest.FixtureOptions{})
	const guesses = 300
	burst := admin.DefaultAuthLimit.Burst
	statuses, codes, retries := make([]int, guesses), make([]string, guesses), make([]string, guesses)
	testenv.AtOnce(guesses, func(i int) {
		a := f.Do("GET", "/admin/rooms", "", "Authorization", fmt.Sprintf("Bearer wrong-guess-%04d-of-some-length", i))
		statuses[i], codes[i], retries[i] = a.Status, a.Code(), a.Header.Get("Retry-After")
	})
	counts := map[string]int{}
	for i := range guesses {
		counts[fmt.Sprintf("%d %s Retry-After=%q", statuses[i], codes[i], retries[i])]++
	}
	// The fake clock stands still: the wait is exactly one interval, 6 s.
	require.Equal(t, map[string]int{
		`401 UNAUTHORIZED Retry-After=""`:  burst,
		`429 RATE_LIMITED Retry-After="6"`: guesses - burst,
	}, counts)

	limited := f.Admin("GET", "/admin/rooms", "")
	limited.RequireError(t, http.StatusTooManyRequests, "RATE_LIMITED")
	require.Contains(t, limited.Raw, "admin tokens")
	require.Equal(t, http.StatusOK, f.Do("GET", "/admin/rooms", "", "Authorization", "Bearer "+servertest.AdminToken,
		"X-Forwarded-For", "192.0.2.7").Status, "another address is not slowed")

	f.Clock.Advance(6 * time.Second)
	require.Equal(t, http.StatusOK, f.Admin("GET", "/admin/rooms", "").Status)
	require.Equal(t, http.StatusOK, f.Admin("GET", "/admin/rooms", "").Status, "a right token is not counted")
	f.Do("GET", "/admin/rooms", "", "Authorization", "Bearer wrong").RequireError(t, http.StatusUnauthorized, "UNAUTHORIZED")
	f.Do("GET", "/admin/rooms", "", "Authorization", "Bearer wrong").RequireError(t, http.StatusTooManyRequests, "RATE_LIMITED")
	require.Equal(t, 1, strings.Count(f.Logs.String(), "admin request refused"), "refusals are logged once a minute")
}

// TestAdminAttemptsCountPerAddress: the failed attempts count per IPv4
// address and per IPv6 /64 (any address and zone in it), of the client
// the trusted proxies name; from anyone else X-Forwarded-For is not
// believed, so a guesser cannot pick a fresh address per guess.
func TestAdminAttemptsCountPerAddress(t *testing.T) {
	t.Parallel()
	burst := admin.DefaultAuthLimit.Burst
	guess := func(f *servertest.AdminFixture, client string) int {
		return f.Do("GET", "/admin/rooms", "", "Authorization", "Bearer wrong", "X-Forwarded-For", client).Status
	}
	behindProxy := servertest.NewAdminFixture(t, servertest.FixtureOptions{})
	for i := range burst {
		require.Equal(t, http.StatusUnauthorized, guess(behindProxy, fmt.Sprintf("2001:db8:1:2:%x::%x", i, i+1)))
	}
	require.Equal(t, http.StatusTooManyRequests, guess(behindProxy, "2001:db8:1:2:ffff::1"), "the same /64")
	require.Equal(t, http.StatusUnauthorized, guess(behindProxy, "2001:db8:1:3::1"), "the next /64 is another client")
	for i := range burst {
		require.Equal(t, http.StatusUnauthorized, guess(behindProxy, fmt.Sprintf("fe80::%x%%eth%d", i+1, i)))
	}
	require.Equal(t, http.StatusTooManyRequests, guess(behindProxy, "fe80::99%eth9"), "a zone is no new client")
	require.Equal(t, http.StatusUnauthorized, guess(behindProxy, "198.51.100.1"))
	require.Equal(t, http.StatusOK, behindProxy.Do("GET", "/admin/rooms", "", "Authorization", "Bearer "+servertest.AdminToken,
		"X-Forwarded-For", "2001:db8:1:3::2").Status)

	// Trusting nobody, the peer (loopback) is the client whatever the
	// header says.
	direct := &servertest.AdminFixture{Fixture: servertest.NewStoreFixture(t, waitroom.RoomConfig{})}
	direct.Serve(server.Config{AdminToken: servertest.AdminToken, TrustedProxies: []netip.Prefix{}})
	for i := range burst {
		require.Equal(t, http.StatusUnauthorized, guess(direct, fmt.Sprintf("203.0.113.%d", i)))
	}
	require.Equal(t, http.StatusTooManyRequests, guess(direct, "203.0.113.200"))
}

// TestAdminApart: with AdminApart the Server answers 404 for the operator
// API, the dashboard and /metrics behind the token, and AdminHandler
// serves them, behind the same token.
func TestAdminApart(t *testing.T) {
	t.Parallel()
	store := servertest.MemRoom(t, "default", waitroom.RoomConfig{})
	s := servertest.MustServer(t, server.Config{Store: store, AdminToken: servertest.AdminToken, AdminApart: true,
		AdminRoutes: map[string]http.Handler{"GET /admin/products": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, `{"products":[]}`)
		})}})
	public, admin := httptest.NewServer(s), httptest.NewServer(s.AdminHandler())
	t.Cleanup(public.Close)
	t.Cleanup(admin.Close)
	request := func(base, path, auth string) *http.Request {
		req, err := http.NewRequestWithContext(t.Context(), "GET", base+path, nil)
		require.NoError(t, err)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		return req
	}
	get := func(base, path, auth string) servertest.Answer {
		return servertest.Send(t, http.DefaultClient, request(base, path, auth))
	}
	for _, path := range []string{"/admin/rooms", "/admin/rooms/default", "/admin/dashboard", "/admin/products", "/admin/", "/metrics"} {
		get(public.URL, path, servertest.AdminToken).RequireError(t, http.StatusNotFound, "NOT_FOUND", path)
		resp, body := testenv.Do(t, http.DefaultClient, request(admin.URL, path, servertest.AdminToken))
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
	}
	get(admin.URL, "/admin/rooms", "").RequireError(t, http.StatusUnauthorized, "UNAUTHORIZED")
	get(admin.URL, "/rooms/default/status", "").RequireError(t, http.StatusNotFound, "NOT_FOUND", "the crowd's API is not on the operator's listener")
	require.Equal(t, http.StatusOK, get(public.URL, "/healthz", "").Status)

	// Without AdminApart the Server serves them and AdminHandler nothing.
	together := servertest.MustServer(t, server.Config{Store: store, AdminToken: servertest.AdminToken})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/admin/rooms", nil)
	req.Header.Set("Authorization", "Bearer "+servertest.AdminToken)
	together.AdminHandler().ServeHTTP(rec, req)
	require.Equal(t, http.StatusNotFound, rec.Code)
}

// TestAdminRefusesOpeningInThePast: a new opens_at that has passed (by the
// server's clock) is refused with 400 OPENS_AT_PAST on create and on
// change, and changes nothing; the room's own opening, once passed, may
// come back in a body that repeats it.
func TestAdminRefusesOpeningInThePast(t *testing.T) {
	t.Parallel()
	f := servertest.NewAdminFixture(t, servertest.FixtureOptions{})
	at := func(d time.Duration) string { return f.Clock.Now().Add(d).UTC().Format(time.RFC3339) }
	for _, past := range []string{at(-time.Minute), at(0), "2026-03-01T10:00:00+09:00"} {
		f.Admin("POST", "/admin/rooms", `{"name":"drop","opens_at":"`+past+`"}`).
			RequireError(t, http.StatusBadRequest, "OPENS_AT_PAST", past)
		f.Admin("PATCH", "/admin/rooms/"+f.Room, `{"opens_at":"`+past+`"}`).
			RequireError(t, http.StatusBadRequest, "OPENS_AT_PAST", past)
	}
	rooms, err := f.Store.Rooms(t.Context())
	require.NoError(t, err)
	require.Equal(t, []string{f.Room}, rooms)
	cfg, err := f.Store.RoomConfig(t.Context(), f.Room)
	require.NoError(t, err)
	require.True(t, cfg.OpensAt.IsZero(), "the refused opening was not written")

	opens := at(time.Minute)
	created := f.Admin("POST", "/admin/rooms", `{"name":"drop","opens_at":"`+opens+`"}`)
	require.Equal(t, http.StatusCreated, created.Status, created.Raw)
	f.Clock.Advance(2 * time.Minute)
	again := f.Admin("PATCH", "/admin/rooms/drop", `{"opens_at":"`+opens+`","rate":7}`)
	require.Equal(t, http.StatusOK, again.Status, again.Raw)
	require.Equal(t, opens, again.Str("opens_at"))
}
