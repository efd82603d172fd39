package server

import "time"

// SetDrawClock makes s's cache of draw records count its bounds on now:
// the fake clock of a test's store, so a record kept is let go when the
// store's own time moves past it.
func SetDrawClock(s *Server, now func() time.Time) { s.draws.now = now }

// KeptRoomPages names the rooms whose own pages s keeps parsed.
func KeptRoomPages(s *Server) []string {
	s.roomBrands.mu.Lock()
	defer s.roomBrands.mu.Unlock()
	names := make([]string, 0, len(s.roomBrands.byRoom))
	for room := range s.roomBrands.byRoom {
		names = append(names, room)
	}
	return names
}

// MaxRoomPages is how many room pages an instance keeps parsed.
const MaxRoomPages = maxRoomBrands
