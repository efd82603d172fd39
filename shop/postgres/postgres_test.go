package postgres_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/shop"
	"github.com/waitroom/waitroom/shop/postgres"
	"github.com/waitroom/waitroom/shop/shoptest"
)

// databaseURL is the test server; a missing server fails the tests.
func databaseURL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// newSchema creates a fresh schema for one test and drops it when the test
// ends, so tests run in parallel on one database.
func newSchema(tb testing.TB) string {
	tb.Helper()
	ctx := context.Background()
	schema := "shoptest_" + strings.ToLower(rand.Text())
	conn, err := pgx.Connect(ctx, databaseURL())
	require.NoError(tb, err, "PostgreSQL at DATABASE_URL must be running")
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+schema)
	require.NoError(tb, err)
	tb.Cleanup(func() {
		conn, err := pgx.Connect(ctx, databaseURL())
		require.NoError(tb, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
		require.NoError(tb, err)
	})
	return schema
}

// newStore opens a store in a fresh schema. Pools stay small: the server
// allows 100 connections for every test running at once.
func newStore(tb testing.TB, maxConns int32, tune func(*pgxpool.Config)) *postgres.Store {
	tb.Helper()
	schema := newSchema(tb)
	s, err := postgres.OpenTuned(context.Background(), postgres.Config{
		URL: databaseURL(), MaxConns: maxConns, Schema: schema,
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
	schema := newSchema(t)
	const instances = 5
	start := make(chan struct{})
	errs := make([]error, instances)
	var wg sync.WaitGroup
	for i := range instances {
		wg.Go(func() {
			<-start
			s, err := postgres.Open(t.Context(), postgres.Config{URL: databaseURL(), MaxConns: 2, Schema: schema})
			errs[i] = err
			if err == nil {
				s.Close()
			}
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}

	conn, err := pgx.Connect(t.Context(), databaseURL())
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
		{URL: databaseURL(), MaxConns: -1},
		{URL: databaseURL(), Schema: "x; DROP TABLE y"},
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
