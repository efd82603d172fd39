package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/servertest"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/memstore"
	"github.com/waitroom/waitroom/server"
)

// TestStockOverHTTP: the stock's answers as a client sees them: units_left
// while short, sold_out at the next poll, 409 SOLD_OUT for a new entry, and
// the admin API's restock bringing the queue back.
func TestStockOverHTTP(t *testing.T) {
	t.Parallel()
	f := servertest.NewAdminFixture(t, servertest.FixtureOptions{
		Room:      waitroom.RoomConfig{Stock: 2},
		Protected: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }),
	})
	tokA := f.Admit("a")
	for _, u := range []string{"b", "c"} {
		require.Equal(t, http.StatusOK, f.Enter(u).Status)
	}
	b := f.Status("b")
	require.Equal(t, "waiting", b.Str("state"))
	require.NotContains(t, b.Body, "units_left", "1 unit left for the 1st in line")
	c := f.Status("c")
	require.Equal(t, int64(1), c.Num("units_left"), "1 unit left, the 2nd in line: %v", c.Body)

	require.Equal(t, http.StatusCreated, f.Order("a", tokA).Status)
	tokB := f.Admit("b")
	require.Equal(t, http.StatusCreated, f.Order("b", tokB).Status)

	c = f.Status("c")
	require.Equal(t, http.StatusOK, c.Status)
	require.Equal(t, map[string]any{"state": "sold_out", "room": f.Room}, c.Body)
	d := f.Enter("d")
	d.RequireError(t, http.StatusConflict, "SOLD_OUT")
	status, page := roomPage(f.Fixture, "c")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, page, `<body data-state="sold_out">`, "the page says so at once")

	show := f.Admin("GET", "/admin/rooms/"+f.Room+"?window=0", "")
	require.Equal(t, http.StatusOK, show.Status)
	figures := show.Body["figures"].(map[string]any)
	require.Equal(t, true, figures["sold_out"])
	require.Equal(t, 0.0, figures["units_left"])

	restock := f.Admin("PATCH", "/admin/rooms/"+f.Room, `{"stock":3}`)
	require.Equal(t, http.StatusOK, restock.Status, restock.Body)
	require.Equal(t, int64(3), restock.Num("stock"))
	c = f.Status("c")
	require.Equal(t, "waiting", c.Str("state"))
	require.Equal(t, int64(1), c.Num("position"))
}

// TestOneOrderPerUserOverHTTP: in a room with one order per user, the
// order goes upstream keyed by the buyer, the same for every token the
// buyer is given, and a buyer entering again is told 409 ALREADY_ORDERED,
// on the API and on the page.
func TestOneOrderPerUserOverHTTP(t *testing.T) {
	t.Parallel()
	up := servertest.NewUpstream(t)
	f := newFixture(t, servertest.FixtureOptions{Room: waitroom.RoomConfig{OneOrderPerUser: true}, Protected: servertest.ProxyTo(t, up.Srv.URL)})
	token := f.Admit("u1")
	require.Equal(t, http.StatusCreated, f.Order("u1", token).Status)
	require.Equal(t, waitroom.BuyerKey(f.Room, "u1"), up.Headers[0].Get("Idempotency-Key"))
	require.NotEqual(t, waitroom.IdempotencyKey(f.Room, token), up.Headers[0].Get("Idempotency-Key"))

	again := f.Enter("u1")
	again.RequireError(t, http.StatusConflict, "ALREADY_ORDERED")
	status := f.Status("u1")
	status.RequireError(t, http.StatusConflict, "ALREADY_ORDERED")
	code, page := roomPage(f, "u1")
	require.Equal(t, http.StatusConflict, code)
	require.Contains(t, page, `<body data-state="already_ordered">`)

	// Buyer keys differ by room and by user.
	require.NotEqual(t, waitroom.BuyerKey(f.Room, "u1"), waitroom.BuyerKey(f.Room, "u2"))
	require.NotEqual(t, waitroom.BuyerKey(f.Room, "u1"), waitroom.BuyerKey(f.Room+"x", "u1"))
}

// roomPage loads the room's waiting page as user and returns the status and
// the HTML.
func roomPage(f *servertest.Fixture, user string) (int, string) {
	f.T.Helper()
	req, err := http.NewRequestWithContext(f.T.Context(), "GET", f.Srv.URL+"/rooms/"+f.Room, nil)
	require.NoError(f.T, err)
	req.Header.Set("X-User-Id", user)
	resp, html := testenv.Do(f.T, f.Srv.Client(), req)
	return resp.StatusCode, html
}

// TestScheduledOverHTTP: before the opening, enter and status answer
// "scheduled" with the opening, the time to it and a poll hint that lands
// after it, without a position in a random room; the page shows the
// countdown; GET /rooms/{room}/draw publishes the commitment, and after
// the opening the seed, which the admin export lets anyone check.
func TestScheduledOverHTTP(t *testing.T) {
	t.Parallel()
	f := servertest.NewAdminFixture(t, servertest.FixtureOptions{})
	opens := f.Clock.Now().Add(time.Minute)
	created := f.Admin("POST", "/admin/rooms", `{"name":"drop","opens_at":"`+opens.Format(time.RFC3339)+`","rate":1}`)
	require.Equal(t, http.StatusCreated, created.Status, created.Body)
	require.Equal(t, opens.UTC().Format(time.RFC3339), created.Str("opens_at"))
	require.Equal(t, "random", created.Str("prequeue_order"))

	enter := func(user string) servertest.Answer {
		return f.Do("POST", "/rooms/drop/enter", "", "X-User-Id", user)
	}
	a := enter("ann")
	require.Equal(t, http.StatusOK, a.Status, a.Body)
	require.Equal(t, "scheduled", a.Str("state"))
	require.Equal(t, opens.UTC().Format(time.RFC3339), a.Str("opens_at"))
	require.Equal(t, int64(60_000), a.Num("opens_in_ms"))
	require.NotContains(t, a.Body, "position", "the draw has not happened")
	require.Greater(t, a.Num("poll_after_ms"), int64(0))
	for _, u := range []string{"bob", "cy", "dee"} {
		require.Equal(t, "scheduled", enter(u).Str("state"))
	}
	// The page counts down and says places are drawn at the opening.
	req, err := http.NewRequestWithContext(t.Context(), "GET", f.Srv.URL+"/rooms/drop", nil)
	require.NoError(t, err)
	req.Header.Set("X-User-Id", "ann")
	p := pageOf(t, f.Srv.Client(), req)
	p.requireShows(t, http.StatusOK, "scheduled")
	require.Contains(t, p.body, `id="opens-in">0:01:00<`)
	require.Contains(t, p.body, `<p id="drawn">`, "the draw is said, not hidden")
	require.Contains(t, p.body, `<p id="by-arrival" hidden>`)
	// Near the opening the hints land in the seconds after it, each user
	// at its own moment.
	f.Clock.Advance(55 * time.Second)
	hints := map[int64]bool{}
	for _, u := range []string{"ann", "bob", "cy", "dee"} {
		st := f.Do("GET", "/rooms/drop/status", "", "X-User-Id", u)
		require.Equal(t, "scheduled", st.Str("state"))
		hint := st.Num("poll_after_ms")
		require.Greater(t, hint, st.Num("opens_in_ms"), "after the opening")
		require.LessOrEqual(t, hint, st.Num("opens_in_ms")+waitroom.OpeningSpread.Milliseconds())
		hints[hint] = true
	}
	require.Greater(t, len(hints), 1, "spread, not one moment for all")

	before := f.Do("GET", "/rooms/drop/draw", "")
	require.Equal(t, http.StatusOK, before.Status)
	require.Equal(t, "pending", before.Str("state"))
	require.Len(t, before.Str("commitment"), 64)
	require.NotContains(t, before.Body, "seed")
	pending := f.Admin("GET", "/admin/rooms/drop/entrants", "")
	pending.RequireError(t, http.StatusConflict, "DRAW_PENDING")
	require.Equal(t, "NO_DRAW", f.Do("GET", "/rooms/"+f.Room+"/draw", "").Code())

	f.Clock.Advance(6 * time.Second)
	_, err = f.Store.Admit(t.Context(), "drop")
	require.NoError(t, err)
	after := f.Do("GET", "/rooms/drop/draw", "")
	require.Equal(t, "done", after.Str("state"))
	require.Equal(t, before.Str("commitment"), after.Str("commitment"))
	require.Equal(t, int64(4), after.Num("entrants"))
	export := f.Admin("GET", "/admin/rooms/drop/entrants", "")
	require.Equal(t, http.StatusOK, export.Status, export.Body)
	var entrants []waitroom.Entrant
	for _, e := range export.Body["entrants"].([]any) {
		m := e.(map[string]any)
		entrants = append(entrants, waitroom.Entrant{User: m["user"].(string), Place: int64(m["place"].(float64))})
		st := f.Do("GET", "/rooms/drop/status", "", "X-User-Id", m["user"].(string))
		require.Equal(t, int64(m["place"].(float64)), st.Num("position"))
	}
	record := waitroom.DrawRecordCheck{Seed: after.Str("seed"), Commitment: after.Str("commitment"),
		Entrants: after.Num("entrants"), Digest: after.Str("entrants_digest")}
	public, err := waitroom.PublicEntrants(record.Seed, entrants)
	require.NoError(t, err)
	diffs, err := waitroom.VerifyDraw(record, public)
	require.NoError(t, err)
	require.Empty(t, diffs)
	forged := record
	forged.Seed = waitroom.NewSeed()
	_, err = waitroom.VerifyDraw(forged, public)
	require.ErrorIs(t, err, waitroom.ErrBadRequest, "another seed does not match the commitment")

	// A room opens once: a new opening after the draw is refused, and
	// clearing the time is not.
	reopen := f.Admin("PATCH", "/admin/rooms/drop", `{"opens_at":"`+f.Clock.Now().Add(time.Hour).Format(time.RFC3339)+`"}`)
	reopen.RequireError(t, http.StatusBadRequest, "BAD_REQUEST")
	require.Contains(t, reopen.Raw, "opens once")
	require.Equal(t, "done", f.Do("GET", "/rooms/drop/draw", "").Str("state"))

	for _, bad := range []string{`{"opens_at":"tomorrow"}`, `{"prequeue_order":"lottery"}`, `{"closes_at":"2000-01-01T00:00:00Z"}`} {
		a := f.Admin("PATCH", "/admin/rooms/drop", bad)
		require.Equal(t, http.StatusBadRequest, a.Status, bad)
	}
	cleared := f.Admin("PATCH", "/admin/rooms/drop", `{"opens_at":""}`)
	require.Equal(t, http.StatusOK, cleared.Status, cleared.Raw)
}

// TestScheduledHintsFollowTheCrowd: an early arrival among 600,000 is told
// to poll as far back in a queue that long would be (every 2 minutes, not
// every minute), from the room's waiting count the server reads.
func TestScheduledHintsFollowTheCrowd(t *testing.T) {
	t.Parallel()
	const early = 600_000
	f := servertest.NewStoreFixture(t, waitroom.RoomConfig{Rate: 1000, MaxQueue: waitroom.MaxMaxQueue, OpensAt: time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)})
	f.Serve(server.Config{})
	for i := range early {
		_, err := f.Store.Enter(t.Context(), f.Room, fmt.Sprintf("u%d", i))
		require.NoError(t, err)
	}
	a := f.Do("POST", "/rooms/"+f.Room+"/enter", "", "X-User-Id", "ann")
	require.Equal(t, "scheduled", a.Str("state"), a.Body)
	require.Equal(t, waitroom.OpeningPollAfter(2*time.Hour, 0, early+1).Milliseconds(), a.Num("poll_after_ms"))
	require.Equal(t, int64(120_000), a.Num("poll_after_ms"), "2 minutes, the ceiling 600,000 places back")
}

// TestDrawSettingsAfterPublication: once a room is scheduled its
// commitment is public, and the admin API refuses to change its
// prequeue_order (409 DRAW_PUBLISHED); an opening over a queue is refused
// with 409 QUEUE_NOT_EMPTY, and nothing is written either time.
func TestDrawSettingsAfterPublication(t *testing.T) {
	t.Parallel()
	opens := time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC) // an hour after the fixture's clock
	f := servertest.NewAdminFixture(t, servertest.FixtureOptions{Room: waitroom.RoomConfig{OpensAt: opens}})
	patch := f.Admin("PATCH", "/admin/rooms/"+f.Room, `{"prequeue_order":"fifo"}`)
	patch.RequireError(t, http.StatusConflict, "DRAW_PUBLISHED")
	record := f.Do("GET", "/rooms/"+f.Room+"/draw", "")
	require.Equal(t, "random", record.Str("prequeue_order"))

	queued := servertest.NewAdminFixture(t, servertest.FixtureOptions{})
	require.Equal(t, http.StatusOK, queued.Enter("waiting-1").Status)
	patch = queued.Admin("PATCH", "/admin/rooms/"+queued.Room, `{"opens_at":"`+opens.Format(time.RFC3339)+`"}`)
	patch.RequireError(t, http.StatusConflict, "QUEUE_NOT_EMPTY")
	show := queued.Admin("GET", "/admin/rooms/"+queued.Room+"?window=0", "")
	require.Empty(t, show.Str("opens_at"), "nothing written")
}

// TestDrawServedFromCache: GET /rooms/{room}/draw on two instances of one
// store. Before the opening many GETs cost about one store read per
// instance per second; once the store has drawn, the next GET on either
// instance answers the revealed record (no pending record is kept past
// the opening); the revealed record is kept.
func TestDrawServedFromCache(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// One manual clock for the store and both caches: the bounds are
	// counted on it, so the verdict never depends on the machine's speed.
	clock := memstore.NewManualClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	mem := memstore.New(memstore.Options{Now: clock.Now})
	var reads atomic.Int64
	store := &testenv.FaultStore{Store: mem}
	store.SetFault(func(_ context.Context, method string) error {
		if method == "Draw" {
			reads.Add(1)
		}
		return nil
	})
	room := servertest.UniqueRoom(t)
	opensAt := clock.Now().Add(3 * time.Second)
	_, err := mem.CreateRoom(ctx, room, waitroom.RoomConfig{Rate: 1, OpensAt: opensAt})
	require.NoError(t, err)
	_, err = mem.Enter(ctx, room, "early")
	require.NoError(t, err)
	var instances []string
	for range 2 {
		s := servertest.MustServer(t, server.Config{Store: store, DefaultRoom: room, Now: clock.Now})
		server.SetDrawClock(s, clock.Now)
		srv := httptest.NewServer(s)
		t.Cleanup(srv.Close)
		instances = append(instances, srv.URL)
	}
	get := func(base string) map[string]any {
		t.Helper()
		res, err := http.Get(base + "/rooms/" + room + "/draw")
		require.NoError(t, err)
		defer res.Body.Close()
		require.Equal(t, http.StatusOK, res.StatusCode)
		var body map[string]any
		require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
		return body
	}

	// 200 GETs 10 ms apart: two seconds, so one read per instance and
	// second.
	const n = 200
	for i := range n {
		require.Equal(t, "pending", get(instances[i%2])["state"])
		clock.Advance(10 * time.Millisecond)
	}
	require.Equal(t, int64(2*2), reads.Load(), "%d GETs over 2 s", n)

	// Read just before the opening, so that a record kept past it would
	// be seen stale below.
	clock.Advance(opensAt.Add(-200 * time.Millisecond).Sub(clock.Now()))
	for _, base := range instances {
		require.Equal(t, "pending", get(base)["state"])
	}
	clock.Advance(opensAt.Sub(clock.Now()))
	_, err = mem.Admit(ctx, room)
	require.NoError(t, err)
	d := mustDraw(t, mem, room)
	require.Equal(t, waitroom.DrawDone, d.State)
	for _, base := range instances {
		got := get(base)
		require.Equal(t, "done", got["state"], "no pending record after the reveal")
		require.Equal(t, d.Seed, got["seed"])
		require.Equal(t, d.Digest, got["entrants_digest"])
	}
	before := reads.Load()
	for i := range n {
		require.Equal(t, "done", get(instances[i%2])["state"])
		clock.Advance(10 * time.Millisecond)
	}
	require.Equal(t, int64(0), reads.Load()-before, "the revealed record is kept")
}

func mustDraw(t *testing.T, s waitroom.Store, room string) waitroom.Draw {
	t.Helper()
	d, err := s.Draw(t.Context(), room)
	require.NoError(t, err)
	return d
}
