package storetest

import "github.com/waitroom/waitroom"

// spread is cfg as the suite makes rooms: over h.Shards shards unless
// cfg names its own.
func (h Harness) spread(cfg waitroom.RoomConfig) waitroom.RoomConfig {
	if cfg.Shards == 0 {
		cfg.Shards = h.Shards
	}
	return cfg
}
