package server

import "time"

// SetDrawClock makes s's cache of draw records count its bounds on now:
// the fake clock of a test's store, so a record kept is let go when the
// store's own time moves past it.
func SetDrawClock(s *Server, now func() time.Time) { s.draws.now = now }
