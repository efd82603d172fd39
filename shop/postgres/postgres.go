// Package postgres is the shop.Store and shop.Outbox on PostgreSQL (pgx v5),
// the durable reference order service. Its connection pool has a hard
// maximum: the waiting room's admission rate is derived from it.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waitroom/waitroom/shop"
)

// DefaultMaxConns is the pool's default hard maximum: the bottleneck the
// admission rate is derived from (serve's --db-pool and --pool; README.md,
// "The rate comes from the numbers").
const DefaultMaxConns = 40

// Config configures Open. URL is required; zero fields get defaults.
type Config struct {
	// URL is a PostgreSQL connection string (postgres://… or key=value).
	URL string
	// MaxConns caps the pool; requests beyond it wait for a connection
	// (bounded by their context). Default DefaultMaxConns.
	MaxConns int32
	// Schema, if set, is the search_path: the tables live there. The schema
	// must exist.
	Schema string
	// Logger receives migration notes. Default: discard.
	Logger *slog.Logger
}

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

func (c Config) withDefaults() (Config, error) {
	if c.URL == "" {
		return c, errors.New("postgres: URL is required")
	}
	if c.MaxConns == 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxConns < 1 {
		return c, fmt.Errorf("postgres: MaxConns %d must be positive", c.MaxConns)
	}
	if c.Schema != "" && !schemaName.MatchString(c.Schema) {
		return c, fmt.Errorf("postgres: schema %q must match %s", c.Schema, schemaName)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c, nil
}

// Store is a shop.Store and shop.Outbox on a pgx pool.
type Store struct {
	pool *pgxpool.Pool
	log  *slog.Logger
}

var (
	_ shop.Store  = (*Store)(nil)
	_ shop.Outbox = (*Store)(nil)
)

// Open connects, checks the server answers, and applies the embedded
// migrations (safe when several instances start at once).
func Open(ctx context.Context, cfg Config) (*Store, error) {
	return open(ctx, cfg, nil)
}

// open lets tests adjust the pool config (hooks that count connections).
func open(ctx context.Context, cfg Config, tune func(*pgxpool.Config)) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse URL: %w", err)
	}
	pc.MaxConns = cfg.MaxConns
	if pc.MinConns > pc.MaxConns {
		pc.MinConns = pc.MaxConns
	}
	if cfg.Schema != "" {
		pc.ConnConfig.RuntimeParams["search_path"] = cfg.Schema
	}
	if tune != nil {
		tune(pc)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres: create pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	if err := migrate(ctx, pool, cfg.Logger); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return &Store{pool: pool, log: cfg.Logger}, nil
}

// Close closes the pool, waiting for acquired connections to come back.
func (s *Store) Close() { s.pool.Close() }

// Ping reports whether the database answers, for readiness checks.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: ping: %w", err)
	}
	return nil
}

// Stat reports the pool's counters (acquired, idle, waits) for metrics.
func (s *Store) Stat() *pgxpool.Stat { return s.pool.Stat() }

const orderColumns = `id, user_id, product_id, quantity, coalesce(coupon_id, ''), idempotency_key, created_at`

const (
	sqlOrderByKey = `SELECT ` + orderColumns + ` FROM orders WHERE idempotency_key = $1`

	// now() is the transaction's start time: the order's created_at.
	sqlLockProduct = `SELECT stock, now() FROM products WHERE id = $1 FOR UPDATE`

	sqlLockCoupon = `SELECT owner, used FROM coupons WHERE id = $1 FOR UPDATE`

	sqlTakeStock = `UPDATE products SET stock = stock - $2 WHERE id = $1`

	sqlUseCoupon = `UPDATE coupons SET used = true WHERE id = $1`

	// One statement inserts the order and, only if it was inserted, its
	// outbox event. A concurrent insert of the same key waits on the
	// unique index until the other transaction ends, then does nothing:
	// zero rows affected means a racing duplicate won.
	sqlInsertOrderAndEvent = `WITH placed AS (
		INSERT INTO orders (id, user_id, product_id, quantity, coupon_id, idempotency_key, created_at)
		VALUES ($1, $2, $3, $4, nullif($5, ''), $6, $7)
		ON CONFLICT (idempotency_key) DO NOTHING
		RETURNING id
	)
	INSERT INTO outbox (event_id, order_id, type, payload, created_at)
	SELECT $8, placed.id, $9, $10, $7 FROM placed`
)

// PlaceOrder implements shop.Store in one transaction: look up the key,
// lock the product row, check stock, lock and check the coupon, then take
// the stock, use the coupon and insert the order with its outbox event.
// Rows are always locked product first, then coupon, so orders never
// deadlock each other.
func (s *Store) PlaceOrder(ctx context.Context, req shop.PlaceOrder) (shop.Order, bool, error) {
	if err := req.Validate(); err != nil {
		return shop.Order{}, false, err
	}
	var (
		o       shop.Order
		created bool
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		o, created, err = placeOrder(ctx, tx, req)
		return err
	})
	switch {
	case err == nil:
		return o, created, nil
	case errors.Is(err, errDuplicate) || isShopError(err):
		// A same-key request may have committed while we waited for the
		// product row; then it took the stock or the coupon and our failure
		// is only a symptom: the answer is its order. The lookup is a fresh
		// statement, so it sees that commit.
		first, found, lookupErr := s.orderByKey(ctx, req)
		if lookupErr != nil {
			return shop.Order{}, false, lookupErr
		}
		if found {
			return first, false, nil
		}
		if errors.Is(err, errDuplicate) {
			// The winner rolled back after all; the caller may retry.
			return shop.Order{}, false, fmt.Errorf("place order: duplicate key %q vanished", req.IdempotencyKey)
		}
		return shop.Order{}, false, err
	default:
		return shop.Order{}, false, fmt.Errorf("place order: %w", err)
	}
}

// errDuplicate rolls back an order whose key a concurrent request took.
var errDuplicate = errors.New("idempotency key taken concurrently")

func isShopError(err error) bool {
	return errors.Is(err, shop.ErrSoldOut) || errors.Is(err, shop.ErrCouponUsed) ||
		errors.Is(err, shop.ErrCouponNotFound) || errors.Is(err, shop.ErrCouponNotOwned) ||
		errors.Is(err, shop.ErrProductNotFound)
}

func placeOrder(ctx context.Context, tx pgx.Tx, req shop.PlaceOrder) (shop.Order, bool, error) {
	if o, found, err := scanOrderByKey(ctx, tx, req); err != nil || found {
		return o, false, err
	}

	var (
		stock int64
		now   time.Time
	)
	err := tx.QueryRow(ctx, sqlLockProduct, req.ProductID).Scan(&stock, &now)
	if errors.Is(err, pgx.ErrNoRows) {
		return shop.Order{}, false, fmt.Errorf("product %s: %w", req.ProductID, shop.ErrProductNotFound)
	}
	if err != nil {
		return shop.Order{}, false, fmt.Errorf("lock product: %w", err)
	}
	if stock < int64(req.Quantity) {
		return shop.Order{}, false, fmt.Errorf("product %s: %w", req.ProductID, shop.ErrSoldOut)
	}

	if req.CouponID != "" {
		var (
			owner string
			used  bool
		)
		err := tx.QueryRow(ctx, sqlLockCoupon, req.CouponID).Scan(&owner, &used)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return shop.Order{}, false, fmt.Errorf("coupon %s: %w", req.CouponID, shop.ErrCouponNotFound)
		case err != nil:
			return shop.Order{}, false, fmt.Errorf("lock coupon: %w", err)
		}
		if err := req.CheckCoupon(owner, used); err != nil {
			return shop.Order{}, false, err
		}
	}

	o := req.Order(now)
	ev, err := shop.NewEvent(o)
	if err != nil {
		return shop.Order{}, false, err
	}

	// The writes go in one round trip; the locks are already held.
	b := &pgx.Batch{}
	b.Queue(sqlTakeStock, req.ProductID, req.Quantity)
	if req.CouponID != "" {
		b.Queue(sqlUseCoupon, req.CouponID)
	}
	inserted := b.Queue(sqlInsertOrderAndEvent, o.ID, o.User, o.ProductID, o.Quantity, o.CouponID,
		o.IdempotencyKey, o.CreatedAt, ev.EventID, ev.Type, ev.Payload)
	var rows int64
	inserted.Exec(func(tag pgconn.CommandTag) error {
		rows = tag.RowsAffected()
		return nil
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return shop.Order{}, false, fmt.Errorf("write order: %w", mapWriteError(err))
	}
	if rows == 0 {
		return shop.Order{}, false, errDuplicate
	}
	return o, true, nil
}

// mapWriteError turns constraint violations that the locks should make
// impossible into the answers they stand for.
func mapWriteError(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch {
	case pgErr.Code == "23514" && pgErr.TableName == "products": // stock CHECK
		return fmt.Errorf("%w (%v)", shop.ErrSoldOut, err)
	case pgErr.Code == "23505" && pgErr.ConstraintName == "orders_coupon_once":
		return fmt.Errorf("%w (%v)", shop.ErrCouponUsed, err)
	}
	return err
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func scanOrderByKey(ctx context.Context, q querier, req shop.PlaceOrder) (shop.Order, bool, error) {
	var o shop.Order
	err := q.QueryRow(ctx, sqlOrderByKey, req.IdempotencyKey).Scan(
		&o.ID, &o.User, &o.ProductID, &o.Quantity, &o.CouponID, &o.IdempotencyKey, &o.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return shop.Order{}, false, nil
	}
	if err != nil {
		return shop.Order{}, false, fmt.Errorf("look up idempotency key: %w", err)
	}
	if o.User != req.User {
		// Never show another user's order.
		return shop.Order{}, false, shop.ErrIdempotencyConflict
	}
	o.CreatedAt = o.CreatedAt.UTC()
	return o, true, nil
}

func (s *Store) orderByKey(ctx context.Context, req shop.PlaceOrder) (shop.Order, bool, error) {
	return scanOrderByKey(ctx, s.pool, req)
}

const sqlOrder = `SELECT ` + orderColumns + ` FROM orders WHERE id = $1 AND user_id = $2`

// Order implements shop.Store.
func (s *Store) Order(ctx context.Context, user, id string) (shop.Order, error) {
	var o shop.Order
	err := s.pool.QueryRow(ctx, sqlOrder, id, user).Scan(
		&o.ID, &o.User, &o.ProductID, &o.Quantity, &o.CouponID, &o.IdempotencyKey, &o.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return shop.Order{}, fmt.Errorf("order %s: %w", id, shop.ErrOrderNotFound)
	}
	if err != nil {
		return shop.Order{}, fmt.Errorf("read order: %w", err)
	}
	o.CreatedAt = o.CreatedAt.UTC()
	return o, nil
}

const (
	sqlCreateProduct = `INSERT INTO products (id, name, stock) VALUES ($1, $2, $3)`
	sqlProduct       = `SELECT id, name, stock FROM products WHERE id = $1`
	sqlCreateCoupon  = `INSERT INTO coupons (id, owner, discount) VALUES ($1, $2, $3)`
	sqlCoupon        = `SELECT id, owner, discount, used FROM coupons WHERE id = $1`
)

// CreateProduct implements shop.Store.
func (s *Store) CreateProduct(ctx context.Context, p shop.Product) error {
	if err := p.Validate(); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, sqlCreateProduct, p.ID, p.Name, p.Stock)
	return created(err, "product", p.ID, shop.ErrProductExists)
}

// Product implements shop.Store.
func (s *Store) Product(ctx context.Context, id string) (shop.Product, error) {
	var p shop.Product
	err := s.pool.QueryRow(ctx, sqlProduct, id).Scan(&p.ID, &p.Name, &p.Stock)
	if err := found(err, "product", id, shop.ErrProductNotFound); err != nil {
		return shop.Product{}, err
	}
	return p, nil
}

// CreateCoupon implements shop.Store.
func (s *Store) CreateCoupon(ctx context.Context, c shop.Coupon) error {
	if err := c.Validate(); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, sqlCreateCoupon, c.ID, c.Owner, c.DiscountPercent)
	return created(err, "coupon", c.ID, shop.ErrCouponExists)
}

// Coupon implements shop.Store.
func (s *Store) Coupon(ctx context.Context, id string) (shop.Coupon, error) {
	var c shop.Coupon
	err := s.pool.QueryRow(ctx, sqlCoupon, id).Scan(&c.ID, &c.Owner, &c.DiscountPercent, &c.Used)
	if err := found(err, "coupon", id, shop.ErrCouponNotFound); err != nil {
		return shop.Coupon{}, err
	}
	return c, nil
}

// created is the error of an INSERT of what: a taken id is exists.
func created(err error, what, id string, exists error) error {
	if isUniqueViolation(err) {
		return fmt.Errorf("%s %s: %w", what, id, exists)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", what, err)
	}
	return nil
}

// found is the error of reading one what by id: no row is notFound.
func found(err error, what, id string, notFound error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s %s: %w", what, id, notFound)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	return nil
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

const (
	// SKIP LOCKED lets concurrent relays take disjoint batches; the row
	// locks last until this pass commits its sent marks.
	sqlClaimEvents = `SELECT event_id, order_id, type, payload, created_at
		FROM outbox WHERE sent_at IS NULL
		ORDER BY id LIMIT $1
		FOR UPDATE SKIP LOCKED`

	sqlMarkSent = `UPDATE outbox SET sent_at = now() WHERE event_id = ANY($1) AND sent_at IS NULL`

	sqlPendingEvents = `SELECT count(*) FROM outbox WHERE sent_at IS NULL`
)

// DeliverEvents implements shop.Outbox in one transaction: claim, publish,
// mark the confirmed ones sent, commit. If the commit fails after the broker
// confirmed, those events are published again by a later pass: delivery is
// at least once, and consumers deduplicate by event id.
func (s *Store) DeliverEvents(ctx context.Context, limit int, publish func(ctx context.Context, events []shop.Event) ([]string, error)) (int, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("deliver events: limit %d must be positive", limit)
	}
	var (
		sent       int
		publishErr error
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sqlClaimEvents, limit)
		if err != nil {
			return fmt.Errorf("claim events: %w", err)
		}
		events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (shop.Event, error) {
			var e shop.Event
			err := row.Scan(&e.EventID, &e.OrderID, &e.Type, &e.Payload, &e.CreatedAt)
			e.CreatedAt = e.CreatedAt.UTC()
			return e, err
		})
		if err != nil {
			return fmt.Errorf("claim events: %w", err)
		}
		if len(events) == 0 {
			return nil
		}
		var confirmed []string
		confirmed, publishErr = publish(ctx, events)
		if len(confirmed) == 0 {
			return nil
		}
		tag, err := tx.Exec(ctx, sqlMarkSent, confirmed)
		if err != nil {
			return fmt.Errorf("mark events sent: %w", err)
		}
		sent = int(tag.RowsAffected())
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("deliver events: %w", errors.Join(err, publishErr))
	}
	return sent, publishErr
}

// PendingEvents implements shop.Outbox.
func (s *Store) PendingEvents(ctx context.Context) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, sqlPendingEvents).Scan(&n); err != nil {
		return 0, fmt.Errorf("count pending events: %w", err)
	}
	return n, nil
}
