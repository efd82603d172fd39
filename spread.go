package waitroom

import "fmt"

// MaxShards bounds RoomConfig.Shards: an admission tick reads and writes
// every shard of the room, so its round trips grow with it, and 16
// shard-cores take far more ENTERs than the ticket counter hands out
// (OPERATIONS.md, "Spreading one room over K shards").
const MaxShards = 16

// ShardsRefusal is the error a store that keeps every room on one shard
// (memstore, a standalone or Sentinel Redis) gives for Shards > 1.
func ShardsRefusal(cfg RoomConfig) error {
	if cfg.Shards <= 1 {
		return nil
	}
	return fmt.Errorf("%w (got shards %d)", ErrShardsNeedCluster, cfg.Shards)
}
