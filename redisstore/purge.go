package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// DeletePrefix removes every key a Store with this prefix wrote: for load
// tests, benchmarks and tests that work under a throwaway prefix in a
// Redis that may serve others. On a cluster it visits every primary, and it
// unlinks key by key (pipelined), since one command may not span slots.
// The prefix is matched literally: what SCAN MATCH would read as a
// wildcard in it is escaped, as in the wakes' pattern.
func DeletePrefix(ctx context.Context, client redis.UniversalClient, prefix string) error {
	match := globEscaper.Replace(prefix) + ":*"
	purge := func(ctx context.Context, node redis.UniversalClient) error {
		iter := node.Scan(ctx, 0, match, 1000).Iterator()
		pipe := node.Pipeline()
		for iter.Next(ctx) {
			pipe.Unlink(ctx, iter.Val())
			if pipe.Len() == 500 {
				if _, err := pipe.Exec(ctx); err != nil {
					return err
				}
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		if pipe.Len() > 0 {
			_, err := pipe.Exec(ctx)
			return err
		}
		return nil
	}
	if cluster, ok := client.(*redis.ClusterClient); ok {
		return cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return purge(ctx, node)
		})
	}
	return purge(ctx, client)
}
