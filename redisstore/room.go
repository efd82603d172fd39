package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom"
)

// createRoomScript stores a room's settings unless it has some.
//
// KEYS[1] cfg
// KEYS[2] ver
// ARGV[1] the settings' new version (RoomVersions)
// ARGV[2 ..] field, value, … (configArgs, then openingArgs)
//
// Returns "CREATED", or "EXISTS" (nothing written but a missing version).
var createRoomScript = newFunction("create_room")

// CreateRoom stores cfg, with defaults applied, unless the room exists. The
// room is then listed in the rooms set, also when it existed, so a crash
// between the two steps heals on the next call.
func (s *Store) CreateRoom(ctx context.Context, room string, cfg waitroom.RoomConfig) (bool, error) {
	if err := checkRoom(room); err != nil {
		return false, err
	}
	cfg, err := cfg.Stored()
	if err != nil {
		return false, err
	}
	if err := waitroom.PageChangeRefusal(waitroom.RoomConfig{}, cfg); err != nil {
		return false, err
	}
	if err := s.checkSpread(cfg); err != nil {
		return false, err
	}
	k := s.keys(room)
	args := append(append([]any{waitroom.NewToken()}, configArgs(cfg)...), openingArgs(cfg, true)...)
	spread, l, err := s.spreadFields(ctx, room, cfg)
	if err != nil {
		return false, err
	}
	if _, cluster := s.client.(*redis.ClusterClient); cluster {
		args = append(args, spread...)
	}
	r, err := s.do(ctx, "create room", createRoomScript, []string{k.cfg, k.ver}, args...)
	if err != nil {
		return false, err
	}
	created := r.code() == "CREATED"
	if !created && r.code() != "EXISTS" {
		return false, s.unexpected(ctx, "create room", r)
	}
	if created && l.shards > 1 {
		s.forgetLayout(room)
		if err := s.syncSubs(ctx, l, cfg, "", true); err != nil {
			return created, err
		}
	}
	// The rooms set spans rooms (no hash tag), so it is a separate command.
	if err := s.client.SAdd(ctx, s.roomsKey(), room).Err(); err != nil {
		return created, s.fail("create room", err)
	}
	return created, s.seedDraw(ctx, room, cfg)
}

// seedDraw gives a scheduled room the seed of its draw, unless it has one,
// so that its commitment can be published as soon as it is scheduled.
func (s *Store) seedDraw(ctx context.Context, room string, cfg waitroom.RoomConfig) error {
	if cfg.OpensAt.IsZero() {
		return nil
	}
	seed, commitment := newSeed()
	r, err := s.do(ctx, "seed draw", drawSeedScript, []string{s.keys(room).draw}, seed, commitment)
	if err != nil {
		return err
	}
	if r.code() != "OK" {
		return s.unexpected(ctx, "seed draw", r)
	}
	return nil
}

// updateRoomScript replaces an existing room's settings if they are still
// what the caller read (compare and set).
//
// KEYS[1] cfg
// KEYS[2] ver
// KEYS[3] draw
// KEYS[4] q
// KEYS[5] seq
// KEYS[6..8] tok, stats, buyers: a reshard's (updateControl)
// ARGV[1] the settings' new version (RoomVersions)
// ARGV[2] order_changed: "1" when the new settings place early arrivals
//
//	in another order
//
// ARGV[3] opening_set: "1" when they set a new opening time
// ARGV[4] tickets: "" or, for a spread room's new opening time, the
// ticket counter its sub-queues were found empty at (spread_settled)
// ARGV[5] n: how many of the following values are the expected settings
// ARGV[6 .. n+5]   field, value, … the settings the caller read (configArgs)
// ARGV[n+6 ..]     field, value, … the new settings (configArgs, openingArgs)
//
// Returns "OK", "ROOM_CHANGED", "ROOM_NOT_FOUND", "DRAW_PUBLISHED",
// "QUEUE_NOT_EMPTY" or "TICKETED" (the counter moved past tickets; nothing
// written).
var updateRoomScript = newFunction("update_room")

// UpdateRoom replaces the live settings of an existing room with to if
// they are still from. Every instance's next script reads them.
func (s *Store) UpdateRoom(ctx context.Context, room string, from, to waitroom.RoomConfig) error {
	if err := checkRoom(room); err != nil {
		return err
	}
	to, err := to.Stored()
	if err != nil {
		return err
	}
	if err := waitroom.PageChangeRefusal(from, to); err != nil {
		return err
	}
	if err := s.checkSpread(to); err != nil {
		return err
	}
	from = from.WithDefaults()
	if _, cluster := s.client.(*redis.ClusterClient); cluster {
		return s.updateSpread(ctx, room, from, to)
	}
	return s.updateControl(ctx, room, from, to, nil, false, "")
}

// updateControl is UpdateRoom on the room's own keys, with extra fields
// written too; reshard refuses it, in the same step, while anyone waits
// in the room's own queue (as a new opening time is) or holds a token in
// its own keys, or they hold a sale or a buyer: another layout would not
// find them. tickets (not "") refuses it with errTicketed once the ticket
// counter moved past it (spreadOpeningOverQueue).
func (s *Store) updateControl(ctx context.Context, room string, from, to waitroom.RoomConfig, extra []any, reshard bool, tickets string) error {
	expected := configArgs(from)
	flag := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	// The script compares from with what is stored first, so these two
	// say what the update changes.
	orderChanged := flag(to.Order() != from.Order())
	openingSet := flag(reshard || !to.OpensAt.IsZero() && !to.OpensAt.Equal(from.OpensAt))
	args := append(append(append([]any{waitroom.NewToken(), orderChanged, openingSet, tickets, len(expected)}, expected...), configArgs(to)...), openingArgs(to, false)...)
	args = append(args, extra...)
	k := s.keys(room)
	keys := []string{k.cfg, k.ver, k.draw, k.q, k.seq}
	if reshard {
		keys = append(keys, k.tok, k.stats, k.buyers)
	}
	r, err := s.do(ctx, "update room", updateRoomScript, keys, args...)
	if reshard && errors.Is(err, waitroom.ErrQueueNotEmpty) {
		return waitroom.ErrShardsNotEmpty
	}
	if err != nil {
		return err
	}
	switch r.code() {
	case "OK":
	case "TICKETED":
		return errTicketed
	default:
		return s.unexpected(ctx, "update room", r)
	}
	return s.seedDraw(ctx, room, to)
}

// RoomConfig returns a room's live settings. One HGETALL is atomic, so it
// needs no script.
func (s *Store) RoomConfig(ctx context.Context, room string) (waitroom.RoomConfig, error) {
	if err := checkRoom(room); err != nil {
		return waitroom.RoomConfig{}, err
	}
	m, err := s.client.HGetAll(ctx, s.keys(room).cfg).Result()
	if err != nil {
		return waitroom.RoomConfig{}, s.fail("room config", err)
	}
	if len(m) == 0 {
		return waitroom.RoomConfig{}, waitroom.ErrRoomNotFound
	}
	cfg, err := parseConfig(m)
	if err != nil {
		return waitroom.RoomConfig{}, fmt.Errorf("redisstore room config %q: %w", room, err)
	}
	return cfg, nil
}

// parseConfig reads the cfg hash that configArgs wrote. The first field
// that is no number is the error.
func parseConfig(m map[string]string) (waitroom.RoomConfig, error) {
	var bad error
	num := func(field string) float64 {
		v, err := strconv.ParseFloat(m[field], 64)
		if err != nil && bad == nil {
			bad = fmt.Errorf("field %s: %w", field, err)
		}
		return v
	}
	millis := func(field string) time.Duration {
		return time.Duration(math.Round(num(field) * 1e6))
	}
	cfg := waitroom.RoomConfig{
		Rate:            num("rate"),
		Slice:           millis("slice_ms"),
		MaxQueue:        int(num("max_queue")),
		TokenTTL:        millis("ttl_ms"),
		Lease:           millis("lease_ms"),
		MaxActive:       int(num("max_active")),
		State:           waitroom.RoomState(m["state"]),
		OneOrderPerUser: m["one_order"] == "1",
		InviteOnly:      m["invite_only"] == "1",
		PrequeueOrder:   waitroom.PrequeueOrder(m["prequeue"]),
		ShopURL:         m["shop_url"], // absent in a room made before it: none
		ShopName:        m["shop_name"],
		ProductName:     m["product_name"],
		Page:            m["page"],
	}
	// Settings added since a room was made are absent: their zero value.
	if m["stock"] != "" {
		cfg.Stock = int(num("stock"))
	}
	if m["abandon_ms"] != "" {
		cfg.AbandonAfter = millis("abandon_ms")
	}
	if m["first_use_ms"] != "" {
		cfg.FirstUseWithin = millis("first_use_ms")
	}
	if m["units"] != "" {
		cfg.UnitsPerOrder = int(num("units"))
	}
	if m["shards"] != "" {
		cfg.Shards = int(num("shards"))
	}
	if m["notified_first_use_ms"] != "" {
		cfg.NotifiedFirstUseWithin = millis("notified_first_use_ms")
	}
	if bad != nil {
		return cfg, bad
	}
	for _, f := range []struct {
		field string
		into  *time.Time
	}{{"opens_at_ms", &cfg.OpensAt}, {"closes_at_ms", &cfg.ClosesAt}} {
		if ms, err := strconv.ParseInt(m[f.field], 10, 64); err == nil && ms > 0 {
			*f.into = time.UnixMilli(ms).UTC()
		}
	}
	return cfg.WithDefaults(), nil
}

// RoomVersions reads, for every group of rooms on one slot (all of them
// off Cluster), the versions in one MGET and whether the settings are
// there in one EXISTS, all groups in one pipeline: what tells a keeper
// that nothing was lost costs a few commands, not some per room. Only a
// group short of a cfg while its versions stayed (a key deleted or
// evicted by itself) is asked again, room by room.
func (s *Store) RoomVersions(ctx context.Context, rooms []string) ([]string, error) {
	if err := waitroom.CheckWorkRooms(rooms); err != nil {
		return nil, err
	}
	groups := s.slotGroups(rooms)
	versions := make([]*redis.SliceCmd, len(groups))
	settings := make([]*redis.IntCmd, len(groups))
	if _, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for g, group := range groups {
			vers, cfgs := make([]string, len(group)), make([]string, len(group))
			for j, i := range group {
				k := s.keys(rooms[i])
				vers[j], cfgs[j] = k.ver, k.cfg
			}
			versions[g], settings[g] = p.MGet(ctx, vers...), p.Exists(ctx, cfgs...)
		}
		return nil
	}); err != nil {
		return nil, s.fail("room versions", err)
	}
	out := make([]string, len(rooms))
	var short []int // rooms of groups short of a cfg
	for g, group := range groups {
		for j, i := range group {
			if v, ok := versions[g].Val()[j].(string); ok {
				out[i] = v
			}
		}
		if settings[g].Val() < int64(len(group)) {
			short = append(short, group...)
		}
	}
	if len(short) == 0 {
		return out, nil
	}
	exists := make([]*redis.IntCmd, len(short))
	if _, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for j, i := range short {
			exists[j] = p.Exists(ctx, s.keys(rooms[i]).cfg)
		}
		return nil
	}); err != nil {
		return nil, s.fail("room versions", err)
	}
	for j, i := range short {
		if exists[j].Val() == 0 {
			out[i] = ""
		}
	}
	return out, nil
}

// slotGroups groups rooms (by index) that one multi-key command may name
// together: on Cluster the rooms whose keys hash to one slot, elsewhere
// all of them.
func (s *Store) slotGroups(rooms []string) [][]int {
	if len(rooms) == 0 {
		return nil // a command with no key is an error
	}
	if _, cluster := s.client.(*redis.ClusterClient); !cluster {
		all := make([]int, len(rooms))
		for i := range all {
			all[i] = i
		}
		return [][]int{all}
	}
	var groups [][]int
	bySlot := map[int]int{} // slot → its group
	for i, room := range rooms {
		slot := keySlot(s.keys(room).cfg)
		g, ok := bySlot[slot]
		if !ok {
			g = len(groups)
			bySlot[slot] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// keySlot is Redis Cluster's hash slot of key: CRC16 (XMODEM) of its hash
// tag (what stands between its first "{" and the next "}", if anything),
// else of the whole key, modulo 16384.
func keySlot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	var crc uint16
	for i := range len(key) {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// Rooms lists the names of all rooms, sorted.
func (s *Store) Rooms(ctx context.Context) ([]string, error) {
	rooms, err := s.client.SMembers(ctx, s.roomsKey()).Result()
	if err != nil {
		return nil, s.fail("rooms", err)
	}
	slices.Sort(rooms)
	return rooms, nil
}

// statsScript reads a room's counters and sizes at one instant.
//
// KEYS[1] cfg
// KEYS[2] q
// KEYS[3] active
// KEYS[4] stats
// KEYS[5] bucket
// KEYS[6] seq
// KEYS[7] pre
// KEYS[8] drawn
// KEYS[9] tok
//
// Returns {"OK", waiting, active, entered, full, admitted, completed,
// released, expired, no_shows, abandoned, max_active, pace_time,
// pace_regular, pace_admitted, pace_abandoned, pace_no_shows, pace_arrivals,
// pace_left, pace_left_after, sold}, or
// {"ROOM_NOT_FOUND"}. The pace sums (admitScript) are strings, exact
// floats.
var statsScript = newFunction("stats", "no-writes")

// Stats returns a room's figures.
func (s *Store) Stats(ctx context.Context, room string) (waitroom.Stats, error) {
	if err := checkRoom(room); err != nil {
		return waitroom.Stats{}, err
	}
	k := s.keys(room)
	r, err := s.do(ctx, "stats", statsScript, []string{k.cfg, k.q, k.active, k.stats, k.bucket, k.seq, k.pre, k.drawn, k.tok})
	if err != nil {
		return waitroom.Stats{}, err
	}
	if r.code() != "OK" {
		return waitroom.Stats{}, s.unexpected(ctx, "stats", r)
	}
	var v [11]int64 // … abandoned, max_active
	var ok bool
	for i := range v {
		if v[i], ok = r.int(i + 1); !ok {
			return waitroom.Stats{}, s.unexpected(ctx, "stats", r)
		}
	}
	var p [8]float64
	for i := range p {
		str, ok := r.str(len(v) + 1 + i)
		f, err := strconv.ParseFloat(str, 64)
		if !ok || err != nil {
			return waitroom.Stats{}, s.unexpected(ctx, "stats", r)
		}
		p[i] = f
	}
	sold, ok := r.int(len(v) + 1 + len(p))
	if !ok {
		return waitroom.Stats{}, s.unexpected(ctx, "stats", r)
	}
	st := waitroom.Stats{
		Waiting: v[0], Active: v[1],
		Entered: v[2], Full: v[3], Admitted: v[4],
		Completed: v[5], Sold: sold, Released: v[6], Expired: v[7],
		NoShows: v[8], Abandoned: v[9],
		Pace: waitroom.PaceSums{Time: p[0], Regular: p[1], Admitted: p[2], Abandoned: p[3], NoShows: p[4],
			Arrivals: p[5], Left: p[6], LeftAfter: p[7]}.Pace(v[10] == 0),
	}
	if l, err := s.layout(ctx, room); err != nil {
		return waitroom.Stats{}, err
	} else if l.shards > 1 {
		return s.spreadStats(ctx, l, st)
	}
	return st, nil
}
