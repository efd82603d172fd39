package redisstore

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

// The package's tests move the Redis clock instead of sleeping. advance
// raises an offset kept here for the store's prefix; every function call
// of the package carries it after testClockMark (withTestClock), the
// tests' library takes it off ARGV and adds it to TIME, and serverNow and
// the Store's own clock add it too. It needs no key, so it works the same
// on a Cluster. Key expiry (PX, EXPIRE) stays on Redis's real clock.

const prodClock = `local function clock_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end`

const testClock = `local clock_offset_us = 0 -- this call's test clock: set by every call's prologue
local function clock_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2]) + clock_offset_us
end`

// testPrologue takes the test clock off the end of ARGV.
const testPrologue = `clock_offset_us = 0
if #ARGV >= 2 and ARGV[#ARGV - 1] == '` + testClockMark + `' then
  clock_offset_us = tonumber(table.remove(ARGV))
  table.remove(ARGV)
end
`

func init() {
	editTop = func(name, code string) string {
		if name != "shared.lua" {
			return code
		}
		if strings.Count(code, prodClock) != 1 {
			panic("redisstore tests: lua/shared.lua's clock_us is not the one clock_test.go replaces")
		}
		return strings.Replace(code, prodClock, testClock, 1)
	}
	callPrologue = testPrologue
	testClockOffsets = func(prefix string) time.Duration {
		if us, ok := movedBy.Load(prefix); ok {
			return time.Duration(us.(*atomic.Int64).Load()) * time.Microsecond
		}
		return 0
	}
}

// movedBy is how far each prefix's clock was moved, in µs: every Store of
// the prefix in this process reads it.
var movedBy sync.Map

// advance moves s's Redis clock forward by d, at once. Safe from any
// goroutine.
func advance(_ testing.TB, s *Store, d time.Duration) {
	us, _ := movedBy.LoadOrStore(s.prefix, new(atomic.Int64))
	us.(*atomic.Int64).Add(d.Microseconds())
}

// advanceTo moves s's Redis clock to at, if it is not past it yet.
func advanceTo(t testing.TB, s *Store, at time.Time) {
	t.Helper()
	if d := at.Sub(clockNow(t, s)); d > 0 {
		advance(t, s, d)
	}
}

// clockNow is s's Redis clock now, test offset included: this machine's
// clock, as the test Redis runs here (serverNow's estimate may be off by
// half a round trip).
func clockNow(_ testing.TB, s *Store) time.Time { return s.now() }

// clockProbe answers the library's clock; a function of the tests' library
// only.
var clockProbe = declare("test_clock", "return function() return clock_us() end", "no-writes")

// libraryClock reads the library's clock through a function of room.
func libraryClock(t testing.TB, s *Store, room string) time.Time {
	t.Helper()
	us, err := s.call(t.Context(), s.client, clockProbe, []string{s.keys(room).cfg}).Int64()
	require.NoError(t, err)
	return time.UnixMicro(us)
}

// movedLua defines moved() for the tests' own scripts: the test clock's
// offset in µs, passed as their last argument.
const movedLua = `
local function moved() return tonumber(ARGV[#ARGV]) end
`

// TestClockMovesTheLibraryAndServerNow: an advance shows at once in the
// library's clock and in serverNow, and only for that prefix.
func TestClockMovesTheLibraryAndServerNow(t *testing.T) {
	t.Parallel()
	s, other := newStore(t), newStore(t)
	room := newRoom(t, s, waitroom.RoomConfig{Rate: 10})
	otherRoom := newRoom(t, other, waitroom.RoomConfig{Rate: 10})
	before, libBefore, otherBefore := clockNow(t, s), libraryClock(t, s, room), libraryClock(t, other, otherRoom)
	advance(t, s, time.Hour)
	require.GreaterOrEqual(t, clockNow(t, s).Sub(before), time.Hour)
	moved, err := s.serverNow(t.Context())
	require.NoError(t, err)
	require.GreaterOrEqual(t, moved.Sub(before), time.Hour-time.Second, "serverNow, within its estimate's error")
	require.GreaterOrEqual(t, libraryClock(t, s, room).Sub(libBefore), time.Hour)
	require.Less(t, libraryClock(t, other, otherRoom).Sub(otherBefore), time.Hour, "another prefix's clock")
	require.Less(t, s.now().Sub(time.Now().Add(time.Hour)).Abs(), time.Minute, "the Store's own clock")
}
