package redisstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/redistest"
)

// TestRoomKeeperCostDoesNotGrowWithRooms counts, on a Redis of its own
// (INFO commandstats is the whole server's), the commands the room keepers
// of several instances send in one check when nothing was lost: the same
// few per instance for 5 rooms as for 300, and a room's settings are read
// again only when they changed. Then a room whose settings alone were
// deleted and a room lost whole both come back at the next check.
func TestRoomKeeperCostDoesNotGrowWithRooms(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := redistest.StartServer(t)
	admin := openURL(t, srv.URL())
	commands := func() map[string]int64 { return commandCalls(ctx, t, admin) }
	since := func(before map[string]int64) (map[string]int64, int64) {
		diff, total := map[string]int64{}, int64(0)
		for cmd, n := range commands() {
			if d := n - before[cmd]; d > 0 {
				diff[cmd], total = d, total+d
			}
		}
		return diff, total
	}

	type deployment struct {
		stores  []*Store
		keepers []*waitroom.RoomKeeper
		rooms   []string
	}
	deploy := func(rooms, instances int) deployment {
		d := deployment{}
		declared := map[string]waitroom.RoomConfig{}
		for i := range rooms {
			room := fmt.Sprintf("r%03d", i)
			d.rooms = append(d.rooms, room)
			declared[room] = waitroom.RoomConfig{Rate: 50}.WithDefaults()
		}
		prefix := randomPrefix()
		for range instances {
			s := New(openURL(t, srv.URL()), Options{Prefix: prefix})
			d.stores = append(d.stores, s)
			d.keepers = append(d.keepers, &waitroom.RoomKeeper{Store: s, Rooms: declared})
		}
		for _, k := range d.keepers { // create, then learn every room
			_, err := k.Tick(ctx)
			require.NoError(t, err)
			_, err = k.Tick(ctx)
			require.NoError(t, err)
		}
		return d
	}
	check := func(d deployment) (map[string]int64, int64) {
		before := commands()
		for _, k := range d.keepers {
			recreated, err := k.Tick(ctx)
			require.NoError(t, err)
			require.Empty(t, recreated)
		}
		return since(before)
	}

	small, big := deploy(5, 1), deploy(300, 3)
	smallCmds, smallTotal := check(small)
	bigCmds, bigTotal := check(big)
	t.Logf("one check with nothing lost: 5 rooms × 1 instance %v, 300 rooms × 3 instances %v", smallCmds, bigCmds)
	require.Equal(t, 3*smallTotal, bigTotal, "per instance the same commands, whatever the rooms: %v against %v", bigCmds, smallCmds)
	require.LessOrEqual(t, smallTotal, int64(3), "the rooms listed, their versions and their settings' presence: %v", smallCmds)

	// An operator's change through one instance is read by the others,
	// once, and only for that room.
	s := big.stores[0]
	cfg := testenv.RoomConfig(t, s, "r007")
	to := cfg
	to.Rate = 80
	require.NoError(t, s.UpdateRoom(ctx, "r007", cfg, to))
	changed, total := check(big)
	require.Equal(t, bigTotal+3, total, "one HGETALL per instance for the changed room: %v", changed)
	require.Equal(t, int64(3), changed["hgetall"])

	// The settings of one room deleted alone (its version stays), and
	// another room lost whole: both come back, as last seen.
	k := s.keys("r011")
	require.NoError(t, admin.Del(ctx, s.keys("r007").cfg).Err())
	require.NoError(t, admin.Del(ctx, k.cfg, k.ver).Err())
	recreated, err := big.keepers[1].Tick(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"r007", "r011"}, recreated)
	got := testenv.RoomConfig(t, s, "r007")
	require.Equal(t, 80.0, got.Rate, "re-created with the settings last seen")
	for _, keeper := range big.keepers {
		_, err := keeper.Tick(ctx) // learn the new versions
		require.NoError(t, err)
	}
	_, total = check(big)
	require.Equal(t, bigTotal, total, "back to the flat cost")
}

// keySlot agrees with CLUSTER KEYSLOT (the values Redis's documentation
// gives, and a hash tag's).
func TestKeySlot(t *testing.T) {
	t.Parallel()
	require.Equal(t, 12739, keySlot("123456789"))
	require.Equal(t, 11058, keySlot("somekey"))
	require.Equal(t, 2515, keySlot("foo{hash_tag}"))
	require.Equal(t, keySlot("room"), keySlot("wr:{room}:cfg"))
	require.Equal(t, keySlot("a{}b"), keySlot("a{}b"), "an empty tag hashes the whole key")
	require.NotEqual(t, keySlot("a{}b"), keySlot(""))
}

// TestWorkOfIdleRoomsIsOneCommand counts, on a Redis of its own, the
// commands of the admitter's probe: one for 5 idle rooms and one for 300;
// a room that holds something costs its group a command per room, and
// says what it holds.
func TestWorkOfIdleRoomsIsOneCommand(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	srv := redistest.StartServer(t)
	admin := openURL(t, srv.URL())
	s := New(openURL(t, srv.URL()), Options{Prefix: randomPrefix()})
	var rooms []string
	for i := range 300 {
		rooms = append(rooms, fmt.Sprintf("r%03d", i))
		_, err := s.CreateRoom(ctx, rooms[i], waitroom.RoomConfig{})
		require.NoError(t, err)
	}
	probe := func(rooms []string) ([]waitroom.Work, int64) {
		before, err := CommandStats(ctx, admin)
		require.NoError(t, err)
		work, err := s.Work(ctx, rooms)
		require.NoError(t, err)
		after, err := CommandStats(ctx, admin)
		require.NoError(t, err)
		return work, after["exists"].Calls - before["exists"].Calls
	}
	for _, n := range []int{5, 300} {
		work, calls := probe(rooms[:n])
		require.Equal(t, int64(1), calls, "%d idle rooms", n)
		require.Equal(t, make([]waitroom.Work, n), work)
	}
	work, calls := probe(nil)
	require.Zero(t, calls)
	require.Empty(t, work)

	_, err := s.Enter(ctx, rooms[42], "u1")
	require.NoError(t, err)
	work, calls = probe(rooms)
	require.Equal(t, int64(1+300+1), calls, "the group holds something: each room asked, and the one that holds one of the four again")
	want := make([]waitroom.Work, 300)
	want[42] = waitroom.WorkQueue
	require.Equal(t, want, work)
}

// commandCalls reads the calls of each command the whole Redis ran
// (INFO commandstats), without the reading's own INFO and a new
// connection's handshake.
func commandCalls(ctx context.Context, t *testing.T, admin redis.UniversalClient) map[string]int64 {
	t.Helper()
	stats, err := CommandStats(ctx, admin)
	require.NoError(t, err)
	out := map[string]int64{}
	for cmd, s := range stats {
		if cmd != "info" && cmd != "hello" && cmd != "client|setinfo" {
			out[cmd] = s.Calls
		}
	}
	return out
}

// commandsDuring are the calls of each command the whole Redis ran
// during f (commandCalls before and after).
func commandsDuring(ctx context.Context, t *testing.T, admin redis.UniversalClient, f func()) map[string]int64 {
	t.Helper()
	before := commandCalls(ctx, t, admin)
	f()
	calls := map[string]int64{}
	for cmd, n := range commandCalls(ctx, t, admin) {
		if d := n - before[cmd]; d > 0 {
			calls[cmd] = d
		}
	}
	return calls
}
