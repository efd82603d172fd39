package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/shop"
	"github.com/waitroom/waitroom/shop/postgres"
	"github.com/waitroom/waitroom/shop/shoptest"
)

// newStore opens a store in a fresh schema. Pools stay small: the server
// allows 100 connections for every test running at once.
func newStore(tb testing.TB, maxConns int32, tune func(*pgxpool.Config)) *postgres.Store {
	tb.Helper()
	schema := testenv.Schema(tb, "shoptest")
	s, err := postgres.OpenTuned(context.Background(), postgres.Config{
		URL: testenv.DatabaseURL(), MaxConns: maxConns, Schema: schema,
	}, tune)
	require.NoError(tb, err)
	tb.Cleanup(s.Close) // registered after the drop, so it runs before it
	return s
}

func TestStore(t *testing.T) {
	t.Parallel()
	shoptest.Run(t, func(t *testing.T) shoptest.Store { return newStore(t, 6, nil) })
}

// TestMigrateConcurrently starts several instances on one empty schema at
// once: the advisory lock makes one apply the migrations and the others
// find them applied.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	schema := testenv.Schema(t, "shoptest")
	const instances = 5
	errs := make([]error, instances)
	testenv.AtOnce(instances, func(i int) {
		s, err := postgres.Open(t.Context(), postgres.Config{URL: testenv.DatabaseURL(), MaxConns: 2, Schema: schema})
		errs[i] = err
		if err == nil {
			s.Close()
		}
	})
	for _, err := range errs {
		require.NoError(t, err)
	}

	conn, err := pgx.Connect(t.Context(), testenv.DatabaseURL())
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var applied int
	require.NoError(t, conn.QueryRow(t.Context(), "SELECT count(*) FROM "+schema+".schema_migrations").Scan(&applied))
	require.Equal(t, 1, applied)
}

func TestOpenRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []postgres.Config{
		{},
		{URL: testenv.DatabaseURL(), MaxConns: -1},
		{URL: testenv.DatabaseURL(), Schema: "x; DROP TABLE y"},
		{URL: "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2"},
	} {
		_, err := postgres.Open(t.Context(), cfg)
		require.Error(t, err, "%+v", cfg)
	}
}

// TestPoolCap places 1,000 orders at once through a pool of 40: no more
// than 40 connections are ever in use, and every request waits its turn
// instead of failing (each is either created or sold out).
func TestPoolCap(t *testing.T) {
	// Not parallel: it alone uses 40 of the server's 100 connections.
	const (
		maxConns = 40
		requests = 1000
		units    = 600
	)
	var inUse, peak atomic.Int32
	s := newStore(t, maxConns, func(pc *pgxpool.Config) {
		pc.PrepareConn = func(context.Context, *pgx.Conn) (bool, error) {
			n := inUse.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			return true, nil
		}
		pc.AfterRelease = func(*pgx.Conn) bool {
			inUse.Add(-1)
			return true
		}
	})
	require.NoError(t, s.CreateProduct(t.Context(), shop.Product{ID: "hot", Name: "Hot", Stock: units}))

	start := make(chan struct{})
	var created, soldOut atomic.Int32
	errs := make(chan error, requests)
	var wg sync.WaitGroup
	for i := range requests {
		wg.Go(func() {
			<-start
			_, ok, err := s.PlaceOrder(t.Context(), shop.PlaceOrder{
				User: fmt.Sprintf("u%d", i), IdempotencyKey: fmt.Sprintf("k%d", i), ProductID: "hot", Quantity: 1,
			})
			switch {
			case err == nil && ok:
				created.Add(1)
			case errors.Is(err, shop.ErrSoldOut):
				soldOut.Add(1)
			default:
				errs <- fmt.Errorf("request %d: created=%v err=%w", i, ok, err)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int32(units), created.Load())
	require.Equal(t, int32(requests-units), soldOut.Load())
	require.LessOrEqual(t, peak.Load(), int32(maxConns))
	require.Equal(t, int32(maxConns), s.Stat().MaxConns())
	t.Logf("peak connections in use: %d of %d; acquires that waited: %d", peak.Load(), maxConns, s.Stat().EmptyAcquireCount())
}

// TestDuplicateKeyBehindProductLock makes two same-key orders both miss the
// first lookup: a third session holds the product row while both start, so
// both queue on its lock with no order yet. Released, one places the order;
// the other finds the key taken (on insert, or as the SOLD_OUT the first
// order caused) and must answer with that one order.
func TestDuplicateKeyBehindProductLock(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		stock int64 // 1: the loser fails on stock; 10: on the key's insert
	}{{"InsertConflict", 10}, {"LastUnit", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			schema := testenv.Schema(t, "shoptest")
			// The store's sessions are named after the schema, to be told
			// apart from parallel tests' while they wait.
			url := testenv.DatabaseURL() + "&application_name=" + schema
			if !strings.Contains(testenv.DatabaseURL(), "?") {
				url = testenv.DatabaseURL() + "?application_name=" + schema
			}
			s, err := postgres.Open(ctx, postgres.Config{URL: url, MaxConns: 4, Schema: schema})
			require.NoError(t, err)
			t.Cleanup(s.Close)
			require.NoError(t, s.CreateProduct(ctx, shop.Product{ID: "p", Name: "P", Stock: tc.stock}))

			holder, err := pgx.Connect(ctx, testenv.DatabaseURL())
			require.NoError(t, err)
			defer holder.Close(context.Background())
			tx, err := holder.Begin(ctx)
			require.NoError(t, err)
			_, err = tx.Exec(ctx, "SELECT 1 FROM "+schema+".products WHERE id = 'p' FOR UPDATE")
			require.NoError(t, err)

			type outcome struct {
				order   shop.Order
				created bool
				err     error
			}
			var outs [2]outcome
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range outs {
				wg.Go(func() {
					<-start
					o, created, err := s.PlaceOrder(ctx, shop.PlaceOrder{
						User: "alice", IdempotencyKey: "the-key", ProductID: "p", Quantity: 1,
					})
					outs[i] = outcome{o, created, err}
				})
			}
			close(start)

			// Both are past the lookup once both wait on the holder's lock.
			watch, err := pgx.Connect(ctx, testenv.DatabaseURL())
			require.NoError(t, err)
			defer watch.Close(context.Background())
			var waiting int
			for range 500 {
				require.NoError(t, watch.QueryRow(ctx,
					"SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'",
					schema).Scan(&waiting))
				if waiting == 2 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			require.Equal(t, 2, waiting, "both orders wait on the product row")
			var orders int
			require.NoError(t, tx.QueryRow(ctx, "SELECT count(*) FROM "+schema+".orders").Scan(&orders))
			require.Zero(t, orders, "neither has placed an order yet")
			require.NoError(t, tx.Commit(ctx))
			wg.Wait()

			require.NoError(t, outs[0].err)
			require.NoError(t, outs[1].err)
			require.NotEqual(t, outs[0].created, outs[1].created, "one places, one replays")
			require.Equal(t, outs[0].order, outs[1].order, "both answer with the one order")
			p, err := s.Product(ctx, "p")
			require.NoError(t, err)
			require.Equal(t, tc.stock-1, p.Stock, "the stock is taken once")
			pending, err := s.PendingEvents(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, pending, "one order, one event")
		})
	}
}
