package testenv

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
)

// AwaitWakes enters a user into room, an empty one, and takes it out
// again until every reader has seen room's wake, within: a subscription
// may take a moment to start, or to come back after a failover. Then it
// drains what else came meanwhile, so that a test reads only the wakes of
// what it does next.
func AwaitWakes(t *testing.T, s waitroom.Store, room string, within time.Duration, readers ...<-chan string) {
	t.Helper()
	ctx := t.Context()
	woken := make([]bool, len(readers))
	var last error // the store may be failing over: tell its last error
	for deadline := time.Now().Add(within); slices.Contains(woken, false); {
		require.False(t, time.Now().After(deadline), "no wake of %s within %s (readers woken: %v; last error: %v)", room, within, woken, last)
		if _, last = s.Enter(ctx, room, "await-wakes"); last == nil {
			last = s.Leave(ctx, room, "await-wakes")
		}
		time.Sleep(20 * time.Millisecond)
		for i, wakes := range readers {
			for len(wakes) > 0 {
				if <-wakes == room {
					woken[i] = true
				}
			}
		}
	}
	time.Sleep(200 * time.Millisecond)
	for _, wakes := range readers {
		for len(wakes) > 0 {
			<-wakes
		}
	}
}
