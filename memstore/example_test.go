package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/memstore"
)

// A room admitting 20 users a second lets two through per 100 ms tick.
// The clock is a variable here so the example is exact; leave Now nil for
// the real one.
func Example() {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	s := memstore.New(memstore.Options{Now: func() time.Time { return now }})
	if _, err := s.CreateRoom(ctx, "sale", waitroom.RoomConfig{Rate: 20}); err != nil {
		panic(err)
	}
	for _, user := range []string{"ann", "bob", "cat"} {
		st, _ := s.Enter(ctx, "sale", user)
		fmt.Println(user, st.State, st.Position)
	}

	_, _ = s.Admit(ctx, "sale") // the first call starts the bucket's clock
	now = now.Add(100 * time.Millisecond)
	admitted, _ := s.Admit(ctx, "sale")
	for _, a := range admitted {
		fmt.Println("admitted", a.User)
	}
	st, _ := s.Status(ctx, "sale", "cat")
	fmt.Println("cat", st.State, st.Position)

	// The gate: claim ann's token, run the order, complete it.
	hold, _ := s.Claim(ctx, "sale", "ann", admitted[0].Token)
	_ = s.Complete(ctx, hold)
	stats, _ := s.Stats(ctx, "sale")
	fmt.Printf("waiting %d, active %d, completed %d\n", stats.Waiting, stats.Active, stats.Completed)
	// Output:
	// ann waiting 1
	// bob waiting 2
	// cat waiting 3
	// admitted ann
	// admitted bob
	// cat waiting 1
	// waiting 1, active 1, completed 1
}
