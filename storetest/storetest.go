// Package storetest is the conformance suite every waitroom.Store passes,
// run against the real backends (like river's riverdrivertest).
package storetest

import (
	"testing"
	"time"

	"github.com/waitroom/waitroom"
)

// Harness gives the suite one store under test.
type Harness struct {
	// Store is the store under test; rooms made by the suite have unique
	// names, so one backend may serve parallel tests.
	Store waitroom.Store
	// Peer returns another handle on the same backend, as a second server
	// instance would have (a new client on the same Redis; the same store
	// in process).
	Peer func(t *testing.T) waitroom.Store
	// Advance moves the store's clock forward by at least d: a fake clock
	// where the store has one, a real wait where the clock is the server's.
	Advance func(t *testing.T, d time.Duration)
	// FakeClock says Advance is exact and instant, so the suite may run
	// long simulated spans (10 s of admissions) exactly.
	FakeClock bool
}
