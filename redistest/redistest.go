// Package redistest starts real Redis topologies for tests: a standalone
// server (StartServer), a Redis Cluster (StartCluster) and a primary with
// replicas watched by Sentinels (StartSentinel).
//
//	c := redistest.StartCluster(t, redistest.ClusterOptions{Primaries: 3, ReplicasPerPrimary: 1})
//	client := c.Client()            // or open c.URL() the way production does
//	primary, _ := c.PrimaryFor(ctx, "wr:{room-a}:q")
//	c.Kill(primary)                 // a crash; the replica takes over in ~3 s
//
// Every process is a redis-server from PATH, bound to 127.0.0.1 on a spare
// port, writing only into the test's temp dir, in its own process group and
// (on Linux) killed by the kernel if the test binary dies. t.Cleanup stops
// and reaps them all, and when the test failed it logs the end of every
// server's log. Anything that does not come up within a bound fails the
// test; nothing is skipped, because a missing Redis is a broken test
// machine, not a reason to pass.
//
// Start functions and Kill helpers call t.Fatal, so call them from the test's
// goroutine. Helpers that ask Redis something take a ctx and return an error,
// so tests can poll them while a failover is in progress.
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// startTimeout bounds each step of bringing a topology up.
	startTimeout = 20 * time.Second
	// stopTimeout is how long a SIGTERMed process gets before SIGKILL.
	stopTimeout = 5 * time.Second
	// logTail is how many lines of a server log a failure shows.
	logTail = 40
	// bindAttempts is how many ports a server tries when the one picked
	// was taken between the check and redis-server's bind.
	bindAttempts = 5
)

// Ports come from [portMin, portMax) so that a cluster bus port (port+10000)
// stays below Linux's ephemeral range (32768…), where outgoing connections
// could take it.
const (
	portMin    = 15000
	portMax    = 22000
	busPortGap = 10000
)

// reserved holds the ports handed out in this test binary, so parallel tests
// never pick the same one; other processes are ruled out by a bind check
// and, failing that, by retrying when redis-server cannot bind.
var reserved = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// reservePort returns a free loopback port; with bus, port+10000 is free too
// and reserved with it. The test releases both when it ends.
func reservePort(tb testing.TB, bus bool) int {
	tb.Helper()
	reserved.Lock()
	defer reserved.Unlock()
	for range 1000 {
		p := portMin + rand.IntN(portMax-portMin)
		if reserved.ports[p] || reserved.ports[p+busPortGap] || !portFree(p) {
			continue
		}
		if bus && !portFree(p+busPortGap) {
			continue
		}
		reserved.ports[p] = true
		if bus {
			reserved.ports[p+busPortGap] = true
		}
		tb.Cleanup(func() {
			reserved.Lock()
			defer reserved.Unlock()
			delete(reserved.ports, p)
			if bus {
				delete(reserved.ports, p+busPortGap)
			}
		})
		return p
	}
	tb.Fatalf("redistest: no free loopback port in [%d, %d)", portMin, portMax)
	return 0
}

func portFree(p int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func addrOf(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// process is one running redis-server (or sentinel).
type process struct {
	cmd  *exec.Cmd
	log  string        // path of its stdout and stderr
	done chan struct{} // closed once it has exited and been reaped
}

// startProcess runs redis-server with args in its own process group,
// appending its output to logPath (appending keeps the history across
// restarts).
func startProcess(logPath string, args ...string) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child has its own copy
	cmd := exec.Command("redis-server", args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("redistest: start redis-server: %w", err)
	}
	p := &process{cmd: cmd, log: logPath, done: make(chan struct{})}
	// Reaping at once leaves no zombie, and done tells waiters it died.
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the whole process group, so nothing it forked lives on.
func (p *process) signal(sig syscall.Signal) {
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// kill SIGKILLs the process and waits until it is reaped.
func (p *process) kill() {
	if p.exited() {
		return
	}
	p.signal(syscall.SIGKILL)
	<-p.done
}

// stop asks the process to shut down and kills it if it takes too long.
func (p *process) stop() {
	if p.exited() {
		return
	}
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		p.kill()
	}
}

// tail returns the last n lines of the process's log.
func (p *process) tail(n int) string { return tailFile(p.log, n) }

func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// node is one redis-server of a topology: its address, its process and
// what it needs to start again on the same port.
type node struct {
	addr string
	port int
	dir  string
	args []string
	proc *process
}

// launch starts a redis-server on a spare port and waits until it answers
// PING. args builds the command line for a port and the node's own
// directory. A port lost to another process between the check and the bind
// is retried on a new one; any other failure fails the test with the log.
func launch(tb testing.TB, parent string, bus bool, args func(port int, dir string) []string) *node {
	tb.Helper()
	for attempt := 1; ; attempt++ {
		port := reservePort(tb, bus)
		dir := filepath.Join(parent, "redis-"+strconv.Itoa(port))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		n := &node{addr: addrOf(port), port: port, dir: dir, args: args(port, dir)}
		if err := n.start(tb); err != nil {
			if errors.Is(err, errAddrInUse) && attempt < bindAttempts {
				tb.Logf("redistest: %s was taken, trying another port", n.addr)
				continue
			}
			tb.Fatalf("redistest: %v", err)
		}
		return n
	}
}

var errAddrInUse = errors.New("address already in use")

// start runs the node's redis-server and waits until it answers PING.
// t.Cleanup stops it, whichever process runs at the time.
func (n *node) start(tb testing.TB) error {
	p, err := startProcess(filepath.Join(n.dir, "redis.log"), n.args...)
	if err != nil {
		return err
	}
	if n.proc == nil {
		tb.Cleanup(func() {
			n.proc.stop()
			// A failed test's cause is often in the server's own words.
			if tb.Failed() {
				tb.Logf("--- %s (last %d lines)\n%s", n.proc.log, logTail, n.proc.tail(logTail))
			}
		})
	}
	n.proc = p
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := waitPing(ctx, n.addr, p); err != nil {
		p.kill()
		if strings.Contains(p.tail(logTail), "Address already in use") {
			return fmt.Errorf("%s: %w", n.addr, errAddrInUse)
		}
		// The cleanup shows the log, as for every failed test.
		return fmt.Errorf("redis-server on %s did not come up: %w", n.addr, err)
	}
	return nil
}

// waitPing waits until addr answers PING, or p exits, or ctx ends.
func waitPing(ctx context.Context, addr string, p *process) error {
	c := newClient(addr)
	defer c.Close()
	return poll(ctx, func() error {
		if p.exited() {
			return errExited
		}
		return c.Ping(ctx).Err()
	})
}

var errExited = errors.New("process exited")

// poll calls f every 50 ms until it returns nil, errExited, or ctx ends;
// then it reports f's last error with ctx's.
func poll(ctx context.Context, f func() error) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		err := f()
		if err == nil || errors.Is(err, errExited) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// newClient is a single-node client for the harness's own questions: short
// timeouts, no retries, so a dead node answers quickly with an error.
func newClient(addr string) *redis.Client { return redis.NewClient(harnessOptions(addr)) }

func harnessOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:                  addr,
		DialTimeout:           time.Second,
		ReadTimeout:           time.Second,
		WriteTimeout:          time.Second,
		MaxRetries:            -1,
		PoolSize:              2,
		ContextTimeoutEnabled: true,
		DisableIdentity:       true, // CLIENT SETINFO is 7.2+; spare the 7.0 logs
	}
}

// infoField returns one field of an INFO section ("" when absent).
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// WaitReplicated returns once replicas replicas of primary have everything
// primary had when it was called. It writes probeKey (name it in the slot
// whose writes matter, on a Cluster) and WAITs on the same connection:
// WAIT counts acknowledgements of that connection's last write, and a
// replica that has the probe has every write before it. Comparing
// master_repl_offset with a replica's acknowledged offset instead never
// settles while anything else writes, since replicas acknowledge once a
// second.
func WaitReplicated(ctx context.Context, primary redis.Cmdable, probeKey string, replicas int) error {
	cmds, err := primary.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, probeKey, 1, time.Minute)
		p.Do(ctx, "WAIT", replicas, 10_000)
		return nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d replica(s): %w", replicas, err)
	}
	if got, _ := cmds[1].(*redis.Cmd).Int(); got < replicas {
		return fmt.Errorf("%d of %d replica(s) acknowledged the writes within 10s", got, replicas)
	}
	return nil
}
