package waitroom

import (
	"fmt"
	"strings"
)

// MaxShards bounds RoomConfig.Shards: an admission tick reads and writes
// every shard of the room, so its round trips grow with it, and 16
// shard-cores take far more ENTERs than the ticket counter hands out
// (OPERATIONS.md, "Spreading one room over K shards").
const MaxShards = 16

// SpreadRefusal says which of cfg's settings a room spread over shards
// (Shards > 1) does not support, as an error with code SHARDS_UNSUPPORTED
// naming them; nil when cfg is on one shard or uses none of them. They
// need a way in beside the queue (passes, invite-only). (Stock and one
// order per buyer are kept on a spread room: only admission issues
// tokens, and it counts every sub-shard; a buyer's orders are all on its
// own. So is a scheduled opening: its early arrivals wait in their
// sub-shards, and the admitter draws them over all.)
// A store that spreads rooms refuses them at CreateRoom and UpdateRoom
// rather than ignore them.
func SpreadRefusal(cfg RoomConfig) error {
	if cfg.Shards <= 1 {
		return nil
	}
	var fields []string
	for _, f := range []struct {
		name string
		on   bool
	}{
		{"invite_only", cfg.InviteOnly},
	} {
		if f.on {
			fields = append(fields, f.name)
		}
	}
	if len(fields) == 0 {
		return nil
	}
	return &spreadRefusal{fmt.Sprintf("shards %d does not support %s", cfg.Shards, strings.Join(fields, ", "))}
}

// ShardsRefusal is the error a store that keeps every room on one shard
// (memstore, a standalone or Sentinel Redis) gives for Shards > 1.
func ShardsRefusal(cfg RoomConfig) error {
	if cfg.Shards <= 1 {
		return nil
	}
	return fmt.Errorf("%w (got shards %d)", ErrShardsNeedCluster, cfg.Shards)
}

// spreadRefusal is ErrShardsUnsupported with the settings it names.
type spreadRefusal struct{ msg string }

func (r *spreadRefusal) Error() string        { return ErrShardsUnsupported.Code + ": " + r.msg }
func (r *spreadRefusal) Is(target error) bool { return target == ErrShardsUnsupported }
func (r *spreadRefusal) As(target any) bool {
	if p, ok := target.(**Error); ok {
		*p = &Error{ErrShardsUnsupported.Code, r.msg, ErrShardsUnsupported.Status}
		return true
	}
	return false
}

// SpreadUnsupported is ErrShardsUnsupported for a feature a spread room
// does not offer (passes), named by what.
func SpreadUnsupported(shards int, what string) error {
	return &spreadRefusal{fmt.Sprintf("shards %d does not support %s", shards, what)}
}
