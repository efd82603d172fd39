package redisstore

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom"
)

// setPageScript keeps a room's page archive and names its version in the
// room's settings, in one step, so that no instance reads a version whose
// archive is not there.
//
//	KEYS: cfg, ver, page
//	ARGV: the settings' new version, the page's version ("" removes the
//	      page), the archive
//	reply: OK | ROOM_NOT_FOUND
var setPageScript = newFunction("set_page")

var _ waitroom.PageStore = (*Store)(nil)

// SetPage keeps archive as room's own page (waitroom.PageStore).
func (s *Store) SetPage(ctx context.Context, room string, archive []byte, version string) (waitroom.RoomConfig, error) {
	if err := checkRoom(room); err != nil {
		return waitroom.RoomConfig{}, err
	}
	if err := waitroom.CheckPage(archive, version); err != nil {
		return waitroom.RoomConfig{}, err
	}
	k := s.keys(room)
	r, err := s.do(ctx, "set page", setPageScript, []string{k.cfg, k.ver, k.page}, waitroom.NewToken(), version, archive)
	if err != nil {
		return waitroom.RoomConfig{}, err
	}
	if r.code() != "OK" {
		return waitroom.RoomConfig{}, s.unexpected(ctx, "set page", r)
	}
	return s.RoomConfig(ctx, room)
}

// Page returns room's page archive and its version; one HMGET reads both
// as set_page wrote them.
func (s *Store) Page(ctx context.Context, room string) ([]byte, string, error) {
	if err := checkRoom(room); err != nil {
		return nil, "", err
	}
	vals, err := s.client.HMGet(ctx, s.keys(room).page, "v", "archive").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, "", s.fail("page", err)
	}
	version, _ := vals[0].(string)
	archive, _ := vals[1].(string)
	if version == "" {
		return nil, "", nil
	}
	return []byte(archive), version, nil
}
