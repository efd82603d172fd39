package postgres

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// OpenTuned is Open with a hook on the pool config, for tests that count
// connections.
func OpenTuned(ctx context.Context, cfg Config, tune func(*pgxpool.Config)) (*Store, error) {
	return open(ctx, cfg, tune)
}
