package waitroom_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

// TestRoomConfigValidateNamesFields: every setting out of range is reported,
// each named as the admin API names it, in a fixed order; the client sees
// the first as a BAD_REQUEST; a zero is a value, not the default.
func TestRoomConfigValidateNamesFields(t *testing.T) {
	t.Parallel()
	require.NoError(t, waitroom.RoomConfig{}.WithDefaults().Validate())

	bad := waitroom.RoomConfig{
		Rate: math.NaN(), Slice: time.Millisecond, MaxQueue: 0, TokenTTL: time.Hour * 48, Lease: time.Hour,
		MaxActive: -1, Stock: -1, AbandonAfter: 0, FirstUseWithin: time.Hour * 49, NotifiedFirstUseWithin: 0, State: "ajar",
	}
	err := bad.Validate()
	require.ErrorIs(t, err, waitroom.ErrBadRequest)
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var se *waitroom.SettingError
		require.True(t, errors.As(e, &se), "%v", e)
		fields = append(fields, se.Fields...)
	}
	require.Equal(t, []string{"rate", "slice", "max_queue", "token_ttl", "lease", "max_active", "stock", "units_per_order", "abandon_after", "first_use_within", "notified_first_use_within", "state", "shards"}, fields)
	a := waitroom.Classify(err)
	require.Equal(t, 400, a.Status)
	require.Equal(t, fmt.Sprintf("rate: must be in [%g, 100000] users/s, got NaN", waitroom.MinRate), a.Message)

	opens := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	drop := waitroom.RoomConfig{OpensAt: opens, ClosesAt: opens.Add(-time.Hour), PrequeueOrder: "lottery"}.WithDefaults()
	require.Equal(t, "closes_at: must be after opens_at (2026-03-01T10:00:00Z), got 2026-03-01T09:00:00Z", waitroom.ErrorMessage(drop.Validate()))
	require.ErrorContains(t, drop.Validate(), `prequeue_order: must be random or fifo, got "lottery"`)

	// Rules that tie two settings name both.
	tick := waitroom.RoomConfig{Rate: 100_000, Slice: time.Second}.WithDefaults()
	require.Equal(t, "rate × slice: must admit at most 1000 users per slice, got 100000", waitroom.ErrorMessage(tick.Validate()))
	max := waitroom.RoomConfig{MaxActive: waitroom.MaxMaxActive + 1}.WithDefaults()
	require.Equal(t, "max_active: must be in [0, 100000000] (0: no cap), got 100000001", waitroom.ErrorMessage(max.Validate()))

	// A token reserves 1 to 1000 units, and never more than the stock.
	require.Equal(t, 1, waitroom.RoomConfig{}.WithDefaults().UnitsPerOrder)
	for units, want := range map[int]string{
		-1:   "units_per_order: must be in [1, 1000] units, got -1",
		1001: "units_per_order: must be in [1, 1000] units, got 1001",
		26:   "units_per_order: must be at most stock (25 units), got 26",
	} {
		cfg := waitroom.RoomConfig{Stock: 25, UnitsPerOrder: units}.WithDefaults()
		require.Equal(t, want, waitroom.ErrorMessage(cfg.Validate()), "units %d", units)
	}
	require.NoError(t, waitroom.RoomConfig{Stock: 25, UnitsPerOrder: 25}.WithDefaults().Validate())
	require.NoError(t, waitroom.RoomConfig{UnitsPerOrder: 1000}.WithDefaults().Validate(), "no stock: no bound by it")
}

// CheckName takes names in any script, the bidirectional marks an Arabic
// or Hebrew name may need among them, and refuses what would break or
// reorder the page's line: controls, line separators, and the embeddings,
// overrides and isolates that reorder text after the name.
func TestCheckName(t *testing.T) {
	for _, good := range []string{"", "Kim's Shop", "한정판", "متجر\u200f 24", "חנות\u200e 2", "دكان\u061c 3", "Drop №2"} {
		require.NoError(t, waitroom.CheckName(good), "%q", good)
	}
	for _, bad := range []string{
		"two\nlines", "tab\there", "\x1b[2J", "line\u2028sep", "para\u2029sep",
		"\u202aembed", "\u202bembed", "\u202cpop", "\u202doverride", "\u202eevil",
		"\u2066isolate", "\u2067isolate", "\u2068isolate", "\u2069pop",
		" padded", "padded ", "\xff\xfe", strings.Repeat("가", waitroom.MaxNameBytes/3+1),
	} {
		require.Error(t, waitroom.CheckName(bad), "%q", bad)
	}
}
