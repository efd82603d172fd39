package redistest

import (
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Server is one standalone redis-server started by StartServer.
type Server struct {
	// Addr is host:port on 127.0.0.1.
	Addr string

	tb   testing.TB
	node *node
}

// StartServer starts a standalone redis-server on a spare loopback port with
// no persistence, its files in a temp dir. args are appended to the command
// line, so they override the defaults (e.g. "--appendonly", "yes" to keep
// data across Restart).
func StartServer(tb testing.TB, args ...string) *Server {
	tb.Helper()
	dir := tb.TempDir()
	n := launch(tb, dir, false, func(port int, dir string) []string {
		return append(baseArgs(port, dir), args...)
	})
	return &Server{Addr: n.addr, tb: tb, node: n}
}

// baseArgs is the part of every data node's command line that keeps it on
// loopback and on disk only in dir.
func baseArgs(port int, dir string) []string {
	return []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--daemonize", "no",
		// A replica syncs at once instead of after the default 5 s wait for others.
		"--repl-diskless-sync-delay", "0",
	}
}

// URL is the server as a redis:// URL for database 0.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// Client returns a client of the server, closed when the test ends.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true, DisableIdentity: true})
	s.tb.Cleanup(func() { c.Close() })
	return c
}

// Kill SIGKILLs the server: no shutdown, no final save.
func (s *Server) Kill() {
	s.node.proc.kill()
}

// Freeze stops the server in its tracks (SIGSTOP): its port still accepts
// connections and nothing answers, as a hung Redis. The function it
// returns resumes it (SIGCONT); so does the end of the test.
func (s *Server) Freeze() (resume func()) {
	s.node.proc.signal(syscall.SIGSTOP)
	resume = sync.OnceFunc(func() { s.node.proc.signal(syscall.SIGCONT) })
	s.tb.Cleanup(resume)
	return resume
}

// Restart stops the server (SHUTDOWN by SIGTERM) if it runs, and starts it
// again on the same port and dir; it returns once it answers PING.
func (s *Server) Restart() {
	s.tb.Helper()
	s.node.proc.stop()
	if err := s.node.start(s.tb); err != nil {
		s.tb.Fatalf("redistest: restart: %v", err)
	}
}
