package redisstore

import (
	"testing"

	"github.com/waitroom/waitroom/redistest"
	"github.com/waitroom/waitroom/storetest"
)

// TestSentinelStore: the conformance suite on a Sentinel-managed primary
// with one replica, through the failover client Open makes from the
// redis+sentinel:// URL. Every Admit that issues tokens also WAITs for the
// replica here.
func TestSentinelStore(t *testing.T) {
	// Not parallel with other top-level tests: see heavyTests.
	s := redistest.StartSentinel(t, redistest.SentinelOptions{})
	storetest.Run(t, storeHarness(s.URL()))
}
