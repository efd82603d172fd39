package redisstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/redistest"
)

// runOutOfMemory sets maxmemory below what Redis uses: with noeviction,
// every write is refused with OOM, as on a Redis that filled up.
func runOutOfMemory(ctx context.Context, t *testing.T, rdb *redis.Client) {
	t.Helper()
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err())
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "1").Err())
	err := rdb.Set(ctx, "ballast", "x", 0).Err()
	require.True(t, redis.HasErrorPrefix(err, "OOM"), "a write: %v", err)
}

// breakBGSave makes the next BGSAVE fail (its rename onto a non-empty
// directory) and waits until it has: with stop-writes-on-bgsave-error,
// Redis then answers writes with MISCONF.
func breakBGSave(ctx context.Context, t *testing.T, rdb *redis.Client) {
	t.Helper()
	dir, err := rdb.ConfigGet(ctx, "dir").Result()
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir["dir"], "dump.rdb", "in-the-way"), 0o755))
	require.NoError(t, rdb.BgSave(ctx).Err())
	require.Eventually(t, func() bool {
		info, err := rdb.Info(ctx, "persistence").Result()
		return err == nil && strings.Contains(info, "rdb_bgsave_in_progress:0") &&
			strings.Contains(info, "rdb_last_bgsave_status:err")
	}, 10*time.Second, 10*time.Millisecond)
}

// TestRedisCannotServeNowIsUnavailable: a Redis out of memory (OOM) or
// refusing writes after a failed save (MISCONF) cannot serve now; every
// write is ErrStoreUnavailable with the reply as its cause, so the server
// answers 503 with Retry-After and applies its failure policy, not 500.
func TestRedisCannotServeNowIsUnavailable(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		args  []string
		spoil func(ctx context.Context, t *testing.T, rdb *redis.Client)
		reply string
	}{
		{"OOM", nil, runOutOfMemory, "OOM"},
		{"MISCONF", []string{"--save", "3600 1", "--stop-writes-on-bgsave-error", "yes", "--dbfilename", "dump.rdb"},
			breakBGSave, "MISCONF"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			srv := redistest.StartServer(t, tt.args...)
			for _, pipelined := range []bool{true, false} {
				c, err := Open(srv.URL() + fmt.Sprintf("?autopipeline=%t", pipelined))
				require.NoError(t, err)
				t.Cleanup(func() { _ = c.Close() })
				s := New(c, Options{Prefix: fmt.Sprintf("p%t", pipelined)})
				_, err = s.CreateRoom(ctx, "sale", waitroom.RoomConfig{Rate: 1000})
				require.NoError(t, err)
				_, err = s.Enter(ctx, "sale", "early")
				require.NoError(t, err)
			}
			tt.spoil(ctx, t, srv.Client())

			for _, pipelined := range []bool{true, false} {
				c, err := Open(srv.URL() + fmt.Sprintf("?autopipeline=%t", pipelined))
				require.NoError(t, err)
				t.Cleanup(func() { _ = c.Close() })
				s := New(c, Options{Prefix: fmt.Sprintf("p%t", pipelined)})
				calls := map[string]func() error{
					"Enter":      func() error { _, err := s.Enter(ctx, "sale", "late"); return err },
					"Admit":      func() error { _, err := s.Admit(ctx, "sale"); return err },
					"CreateRoom": func() error { _, err := s.CreateRoom(ctx, "other", waitroom.RoomConfig{}); return err },
				}
				for name, call := range calls {
					err := call()
					require.ErrorIs(t, err, waitroom.ErrStoreUnavailable, "%s, autopipeline=%t", name, pipelined)
					var reply redis.Error
					require.ErrorAs(t, err, &reply, "%s, autopipeline=%t: the reply stays the cause", name, pipelined)
					require.True(t, strings.HasPrefix(reply.Error(), tt.reply), "%s, autopipeline=%t: %v", name, pipelined, err)
				}
			}
		})
	}
}
