package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/webhook"
)

// BenchmarkDeliverAdmitted: 100,000 buyers admitted by redisstore's
// admission script into their rooms' outboxes (rooms at 100,000/s in 10 ms
// slices, an Admit a slice, so about 1,000 users an entry), then relayed
// by a Watcher to the Redis log (an event a room's second, at most 1,000
// users) and delivered to a loopback receiver that
// takes everything, at once or after 20 ms (a receiver doing some work),
// in one room (strictly one after the other) and spread over 8. Timed:
// the relay and the deliveries. users/s is the delivery rate.
func BenchmarkDeliverAdmitted(b *testing.B) {
	for _, c := range []struct {
		rooms int
		delay time.Duration
	}{{1, 0}, {8, 0}, {1, 20 * time.Millisecond}, {8, 20 * time.Millisecond}} {
		b.Run(fmt.Sprintf("rooms=%d/receiver=%s", c.rooms, c.delay), func(b *testing.B) {
			var messages atomic.Int64
			rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(c.delay) // the receiver under measure, not a test's wait
				messages.Add(1)
				w.WriteHeader(http.StatusNoContent)
			}))
			b.Cleanup(rc.Close)
			client, err := redisstore.Open(testenv.RedisURL())
			if err != nil {
				b.Fatal(err)
			}
			prefix := testenv.Unique("whbench")
			b.Cleanup(func() {
				_ = redisstore.DeletePrefix(context.Background(), client, prefix)
				_ = client.Close()
			})
			store := redisstore.New(client, redisstore.Options{Prefix: prefix})
			log := webhook.NewRedisLog(client, prefix)
			ep, err := webhook.StaticEndpoint(rc.URL, []string{webhook.NewSecret()})
			if err != nil {
				b.Fatal(err)
			}
			d := &webhook.Dispatcher{Log: log, ID: "bench", Static: []webhook.Endpoint{ep}}
			if err := d.Step(b.Context()); err != nil {
				b.Fatal(err)
			}
			// A clock past the admissions' seconds: one tick relays them all.
			ahead := func() time.Time { return time.Now().Add(time.Hour) }
			w := &webhook.Watcher{Store: store, Log: log, Emitter: &webhook.Emitter{Log: log}, Now: ahead}
			const buyers = 100_000
			var took time.Duration
			var users, events int64
			for round := 0; b.Loop(); round++ {
				rooms := admitToOutboxes(b, store, w, c.rooms, buyers, round)
				want := messages.Load()
				for _, room := range rooms {
					read, err := store.ReadOutbox(b.Context(), room, 1000)
					if err != nil {
						b.Fatal(err)
					}
					evs, _ := webhook.OutboxEvents(room, read.Entries, ahead(), false)
					want += int64(len(evs))
					events += int64(len(evs))
				}
				start := time.Now()
				if err := w.Tick(b.Context()); err != nil {
					b.Fatal(err)
				}
				for messages.Load() < want {
					if err := d.Step(b.Context()); err != nil {
						b.Fatal(err)
					}
				}
				took += time.Since(start)
				users += buyers
			}
			b.ReportMetric(float64(users)/took.Seconds(), "users/s")
			b.ReportMetric(float64(events)/took.Seconds(), "events/s")
		})
	}
}

// admitToOutboxes makes n rooms whose outboxes w turns on, enters buyers
// over them and admits them all, a slice apart: untimed.
func admitToOutboxes(b *testing.B, store *redisstore.Store, w *webhook.Watcher, n, buyers, round int) []string {
	ctx := b.Context()
	cfg := waitroom.RoomConfig{Rate: 100_000, Slice: 10 * time.Millisecond, MaxQueue: waitroom.MaxMaxQueue, TokenTTL: time.Hour}
	var rooms []string
	for i := range n {
		room := fmt.Sprintf("room-%d-%d", round, i)
		if _, err := store.CreateRoom(ctx, room, cfg); err != nil {
			b.Fatal(err)
		}
		rooms = append(rooms, room)
	}
	if err := w.Tick(ctx); err != nil { // marks the outboxes on
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	const callers = 32
	for c := range callers {
		wg.Go(func() {
			for i := c; i < buyers; i += callers {
				if _, err := store.Enter(ctx, rooms[i%n], fmt.Sprintf("buyer-%06d", i)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for admitted := 0; admitted < buyers; {
		for _, room := range rooms {
			got, err := store.Admit(ctx, room)
			if err != nil {
				b.Fatal(err)
			}
			admitted += len(got)
		}
		time.Sleep(cfg.Slice) // an admitter's tick, untimed
	}
	return rooms
}
