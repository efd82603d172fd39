package server

import (
	"net/http"
	"strings"

	"github.com/waitroom/waitroom"
)

// The crowd's two calls, ENTER and STATUS, are most of what a server
// answers in a drop. serveOn routes them here without the ServeMux, which
// it would otherwise ask twice per request (once for the route's name,
// for the metrics, and once to serve it), each time matching the path
// and capturing {room} on the heap. Only requests the ServeMux would give
// to exactly these routes are taken: an exact method, a clean path
// spelled without escapes, a valid room name; everything else, HEAD
// included, goes the ServeMux's way as before.

// The hot routes' patterns: as registered in New, and the metrics' names.
const (
	patternEnter         = "POST /rooms/{room}/enter"
	patternStatus        = "GET /rooms/{room}/status"
	patternQueueEnter    = "POST /queue/enter"
	patternQueuePosition = "GET /queue/position"
)

// roomHandler is a hot route's handler, given the room it is for.
type roomHandler func(s *Server, w http.ResponseWriter, r *http.Request, room string) error

// hotRoute returns the hot route r is for, its pattern and its room; nil
// when r is not for one, or the routes may not take it (hotRoutesSafe).
func (s *Server) hotRoute(r *http.Request) (h roomHandler, pattern, room string) {
	if !s.hotRoutes || r.URL.RawPath != "" {
		return nil, "", ""
	}
	path := r.URL.Path
	switch r.Method {
	case http.MethodPost:
		if path == "/queue/enter" {
			return (*Server).enter, patternQueueEnter, s.defaultRoom
		}
		if room, ok := roomOf(path, "/enter"); ok {
			return (*Server).enter, patternEnter, room
		}
	case http.MethodGet:
		if path == "/queue/position" {
			return (*Server).status, patternQueuePosition, s.defaultRoom
		}
		if room, ok := roomOf(path, "/status"); ok {
			return (*Server).status, patternStatus, room
		}
	}
	return nil, "", ""
}

// roomOf reads the room of "/rooms/{room}" + suffix, a valid room name
// (which has no '/', '.' or '%': the path is clean and the segment is
// what the ServeMux would capture).
func roomOf(path, suffix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/rooms/")
	if !ok {
		return "", false
	}
	room, ok := strings.CutSuffix(rest, suffix)
	if !ok || !waitroom.ValidRoomName(room) {
		return "", false
	}
	return room, true
}

// hotRoutesSafe reports whether hotRoute may serve the hot routes itself
// with routes registered: no pattern but the server's own (own, the queue
// routes, the hot ones among them) may be more specific for any request
// it takes (the ServeMux refuses patterns that overlap with neither more
// specific). Only a literal where the hot pattern has a wildcard, or a
// host, is: patterns with a host, and any other under /rooms/ or /queue/
// (a shop's own routes, unusual gated routes), leave the routing of
// everything to the ServeMux, as before.
func hotRoutesSafe(routes, own map[string]http.Handler) bool {
	for _, p := range []string{patternEnter, patternStatus, patternQueueEnter, patternQueuePosition} {
		if own[p] == nil {
			return false // not the routes hotRoute serves
		}
	}
	for p := range routes {
		if _, ok := own[p]; ok {
			continue
		}
		_, rest, hasMethod := strings.Cut(p, " ")
		if !hasMethod {
			rest = p
		}
		if !strings.HasPrefix(rest, "/") || strings.HasPrefix(rest, "/rooms/") || strings.HasPrefix(rest, "/queue/") {
			return false
		}
	}
	return true
}
