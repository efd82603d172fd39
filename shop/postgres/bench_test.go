package postgres_test

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/shop"
	"github.com/waitroom/waitroom/shop/postgres"
)

// BenchmarkPlaceOrder places orders from as many goroutines as the pool has
// connections (the default 40), and reports throughput and latency
// percentiles. hot_product is the flash sale: every order locks one row.
// spread spreads orders over 100 products, so only the pool limits them.
func BenchmarkPlaceOrder(b *testing.B) {
	for _, products := range []int{1, 100} {
		name := "hot_product"
		if products > 1 {
			name = fmt.Sprintf("spread_%d_products", products)
		}
		b.Run(name, func(b *testing.B) {
			s := newStore(b, postgres.DefaultMaxConns, nil)
			for i := range products {
				require.NoError(b, s.CreateProduct(b.Context(), shop.Product{ID: fmt.Sprintf("p%d", i), Name: "P", Stock: shop.MaxStock}))
			}
			benchmarkOrders(b, s, products)
		})
	}
}

func benchmarkOrders(b *testing.B, s *postgres.Store, products int) {
	var (
		seq       atomic.Int64
		mu        sync.Mutex
		latencies []time.Duration
	)
	// One goroutine per pool connection.
	b.SetParallelism((postgres.DefaultMaxConns + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			n := seq.Add(1)
			req := shop.PlaceOrder{
				User:           fmt.Sprintf("user-%d", n),
				IdempotencyKey: fmt.Sprintf("key-%d", n),
				ProductID:      fmt.Sprintf("p%d", n%int64(products)),
				Quantity:       1,
			}
			start := time.Now()
			_, created, err := s.PlaceOrder(b.Context(), req)
			mine = append(mine, time.Since(start))
			if err != nil || !created {
				b.Errorf("order %d: created=%v err=%v", n, created, err)
				return
			}
		}
		mu.Lock()
		latencies = append(latencies, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	if len(latencies) == 0 {
		return
	}
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "orders/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op") // wall time per op says little under RunParallel
}
