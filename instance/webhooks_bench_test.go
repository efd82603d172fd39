package instance_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/instance"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/webhook"
)

// BenchmarkEnterWebhooks: HTTP ENTER of new users into a room on Redis
// that admits 2,000 users a second, with webhooks off (no endpoint) and
// on (an endpoint answering each message after 20 ms, a slow receiver),
// 16 callers at once. The two sides alternate, round after round, in one
// run (go test -count runs a sub-benchmark's repeats back to back).
// deliveries/op is the messages the receiver got per ENTER.
func BenchmarkEnterWebhooks(b *testing.B) {
	for round := range 4 {
		for _, on := range []bool{false, true} {
			name := fmt.Sprintf("round=%d/webhooks=off", round)
			if on {
				name = fmt.Sprintf("round=%d/webhooks=on", round)
			}
			b.Run(name, func(b *testing.B) { benchEnter(b, on) })
		}
	}
}

func benchEnter(b *testing.B, webhooks bool) {
	client, err := redisstore.Open(testenv.RedisURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Close() })
	prefix := "wrbench-" + waitroom.NewToken()[:12]
	b.Cleanup(func() { _ = redisstore.DeletePrefix(context.Background(), client, prefix) })
	var delivered atomic.Int64
	cfg := instance.Config{Addr: "127.0.0.1:0", RedisPrefix: prefix, Rooms: []string{"bench"},
		GatedRoutes: []string{"POST /orders"}, UserHeader: waitroom.DefaultUserHeader,
		Room: waitroom.RoomConfig{Rate: 2000, MaxQueue: waitroom.MaxMaxQueue}.WithDefaults()}
	if webhooks {
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(20 * time.Millisecond) // the slow receiver under measure, not a test's wait
			delivered.Add(1)
			w.WriteHeader(http.StatusNoContent)
		}))
		b.Cleanup(hook.Close)
		cfg.WebhookURL, cfg.WebhookSecrets = hook.URL, []string{webhook.NewSecret()}
	}
	in := &instance.Instance{Config: cfg, Store: redisstore.New(client, redisstore.Options{Prefix: prefix})}
	if err := in.Run(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = in.Close() })
	url := "http://" + in.Addr() + "/rooms/bench/enter"
	httpClient := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest("POST", url, nil)
			req.Header.Set(waitroom.DefaultUserHeader, "user-"+strconv.FormatInt(n.Add(1), 10))
			resp, err := httpClient.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(delivered.Load())/float64(b.N), "deliveries/op")
}
