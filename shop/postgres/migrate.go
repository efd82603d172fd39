package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLockKey is the pg_advisory_xact_lock key that serializes
// migrations across instances starting at once ("waitroom shop migrate").
const migrationLockKey int64 = 0x77617368_6f706d67

const (
	sqlMigrationLock   = `SELECT pg_advisory_xact_lock($1)`
	sqlMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer     PRIMARY KEY,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`
	sqlMigrationsApplied = `SELECT version FROM schema_migrations`
	sqlMigrationRecord   = `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`
)

type migration struct {
	version int
	name    string
	sql     string
}

// migrations lists the embedded files NNN_name.sql in version order.
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []migration
	seen := make(map[int]string)
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil || version <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNN_name.sql", name)
		}
		if other, dup := seen[version]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", other, name, version)
		}
		seen[version] = name
		body, err := fs.ReadFile(migrationFiles, "migrations/"+name)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		ms = append(ms, migration{version: version, name: name, sql: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// migrate applies the missing migrations in one transaction. The advisory
// lock, taken first, makes instances that start together wait for each
// other, so each migration runs once and a waiter sees it applied.
func migrate(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlMigrationLock, migrationLockKey); err != nil {
			return fmt.Errorf("lock migrations: %w", err)
		}
		if _, err := tx.Exec(ctx, sqlMigrationsTable); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		rows, err := tx.Query(ctx, sqlMigrationsApplied)
		if err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		applied, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		done := make(map[int]bool, len(applied))
		for _, v := range applied {
			done[int(v)] = true
		}
		for _, m := range ms {
			if done[m.version] {
				continue
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return fmt.Errorf("apply migration %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, sqlMigrationRecord, m.version, m.name); err != nil {
				return fmt.Errorf("record migration %s: %w", m.name, err)
			}
			log.InfoContext(ctx, "applied shop migration", slog.String("migration", m.name))
		}
		return nil
	})
}
