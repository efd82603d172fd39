package webhook_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/webhook"
)

// BenchmarkDeliverAdmitted: 100,000 admissions as user.admitted events of
// MaxBatchUsers each, appended to the Redis log and delivered to a
// loopback receiver that takes everything, at once or after 20 ms (a
// receiver doing some work), in one room (strictly one after the other)
// and spread over 8. users/s is the delivery rate.
func BenchmarkDeliverAdmitted(b *testing.B) {
	for _, c := range []struct {
		rooms int
		delay time.Duration
	}{{1, 0}, {8, 0}, {1, 20 * time.Millisecond}, {8, 20 * time.Millisecond}} {
		rooms := c.rooms
		b.Run(fmt.Sprintf("rooms=%d/receiver=%s", rooms, c.delay), func(b *testing.B) {
			var messages atomic.Int64
			rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(c.delay) // the receiver under measure, not a test's wait
				messages.Add(1)
				w.WriteHeader(http.StatusNoContent)
			}))
			b.Cleanup(rc.Close)
			log := redisLog(b)
			ep, err := webhook.StaticEndpoint(rc.URL, []string{webhook.NewSecret()})
			if err != nil {
				b.Fatal(err)
			}
			d := &webhook.Dispatcher{Log: log, ID: "bench", Static: []webhook.Endpoint{ep}}
			if err := d.Step(b.Context()); err != nil {
				b.Fatal(err)
			}
			em := &webhook.Emitter{Log: log}
			const buyers = 100_000
			list := make([]waitroom.Admission, webhook.MaxBatchUsers)
			var took time.Duration
			events := int64(0)
			for b.Loop() {
				for i := range buyers / webhook.MaxBatchUsers {
					for j := range list {
						list[j].User = fmt.Sprintf("buyer-%06d", i*webhook.MaxBatchUsers+j)
					}
					em.Admitted(fmt.Sprintf("room-%d", i%rooms), list)
				}
				if err := em.Flush(b.Context()); err != nil {
					b.Fatal(err)
				}
				want := messages.Load() + buyers/webhook.MaxBatchUsers
				start := time.Now()
				for messages.Load() < want {
					if err := d.Step(b.Context()); err != nil {
						b.Fatal(err)
					}
				}
				took += time.Since(start)
				events += buyers / webhook.MaxBatchUsers
			}
			b.ReportMetric(float64(events*webhook.MaxBatchUsers)/took.Seconds(), "users/s")
			b.ReportMetric(float64(events)/took.Seconds(), "events/s")
		})
	}
}
