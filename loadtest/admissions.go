package loadtest

import (
	"sync"
	"time"

	"github.com/waitroom/waitroom"
)

// AdmissionEvent is one user admitted by the server.
type AdmissionEvent struct {
	Room string
	User string
	At   time.Time
}

// AdmissionRecorder keeps the times at which the server admitted users, so
// that the report measures the admitter's pacing rather than when users
// happened to poll. Feed it from the admitter when the server runs in the
// same process:
//
//	rec := &loadtest.AdmissionRecorder{}
//	admitter := &waitroom.Admitter{Store: store, OnAdmit: rec.OnAdmit}
//
// The zero value is ready to use; it is safe for concurrent use.
type AdmissionRecorder struct {
	mu     sync.Mutex
	events []AdmissionEvent
}

// OnAdmit records admitted users as admitted now; its signature is
// waitroom.Admitter's OnAdmit hook.
func (a *AdmissionRecorder) OnAdmit(room string, admitted []waitroom.Admission) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ad := range admitted {
		a.events = append(a.events, AdmissionEvent{Room: room, User: ad.User, At: now})
	}
}

// Record records events from another source.
func (a *AdmissionRecorder) Record(events ...AdmissionEvent) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, events...)
}

// between returns room's admissions in [from, to].
func (a *AdmissionRecorder) between(room string, from, to time.Time) []AdmissionEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []AdmissionEvent
	for _, ev := range a.events {
		if ev.Room == room && !ev.At.Before(from) && !ev.At.After(to) {
			out = append(out, ev)
		}
	}
	return out
}
