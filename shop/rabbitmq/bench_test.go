package rabbitmq

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/shop"
)

// BenchmarkDeliveryLag measures the outbox delivery lag: from the order's
// commit (PlaceOrder returning) to its event reaching a consumer, with a
// running relay polling at the given interval. Orders go one at a time, so
// this is the lag of a quiet shop: about a uniform share of the interval
// plus one claim, publish and confirm.
func BenchmarkDeliveryLag(b *testing.B) {
	for _, interval := range []time.Duration{DefaultInterval, 10 * time.Millisecond} {
		b.Run(fmt.Sprintf("interval=%v", interval), func(b *testing.B) {
			s := newPostgres(b, 4)
			br := newBroker(b)
			require.NoError(b, s.CreateProduct(b.Context(), shop.Product{ID: "p", Name: "P", Stock: shop.MaxStock}))
			r, err := NewRelay(s, Config{URL: testenv.AMQPURL(), Exchange: br.exchange, Interval: interval})
			require.NoError(b, err)
			ctx, cancel := context.WithCancel(b.Context())
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx) }()
			defer func() { cancel(); <-done }()

			var lags []time.Duration
			i := 0
			for b.Loop() {
				i++
				// Orders arrive at random points of the relay's cycle, not
				// right after the pass that delivered the previous one.
				b.StopTimer()
				time.Sleep(rand.N(interval))
				b.StartTimer()
				o, _, err := s.PlaceOrder(b.Context(), shop.PlaceOrder{User: "u", IdempotencyKey: fmt.Sprintf("k%d", i), ProductID: "p", Quantity: 1})
				require.NoError(b, err)
				committed := time.Now()
				m := br.next(b)
				lags = append(lags, time.Since(committed))
				var got shop.Order
				require.NoError(b, json.Unmarshal(m.Body, &got))
				require.Equal(b, o.ID, got.ID)
			}
			slices.Sort(lags)
			pct := func(p float64) float64 {
				return float64(lags[int(p*float64(len(lags)-1))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.50), "p50-lag-ms")
			b.ReportMetric(pct(0.99), "p99-lag-ms")
			b.ReportMetric(pct(1), "max-lag-ms")
		})
	}
}
