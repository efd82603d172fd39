package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelOptions shape a Sentinel setup. The zero value is one primary,
// one replica and three sentinels watching "wr-master" with a quorum of two.
type SentinelOptions struct {
	// Replicas is how many replicas follow the primary; default 1.
	Replicas int
	// Sentinels is how many sentinels watch it; default 3.
	Sentinels int
	// MasterName is the name the sentinels monitor it under; default
	// "wr-master".
	MasterName string
	// Quorum is how many sentinels must find the primary down before a
	// failover; default a majority of Sentinels.
	Quorum int
}

// Sentinel is a primary with replicas, watched by sentinels, started by
// StartSentinel.
type Sentinel struct {
	// SentinelAddrs are the sentinels as host:port.
	SentinelAddrs []string
	// MasterName is the name the sentinels know the primary by.
	MasterName string

	tb        testing.TB
	data      map[string]*node // primary and replicas by address
	sentinels []*node
}

// Short sentinel timings, so a killed primary is replaced within seconds.
const (
	downAfter       = 1000 // ms without an answer before a sentinel finds a node down
	failoverTimeout = 5000 // ms; a failed failover is retried after twice this
)

// StartSentinel starts a primary, its replicas and the sentinels watching
// it, and returns once every sentinel names the primary, sees every replica
// and every other sentinel.
func StartSentinel(tb testing.TB, opts SentinelOptions) *Sentinel {
	tb.Helper()
	if opts.Replicas == 0 {
		opts.Replicas = 1
	}
	if opts.Sentinels == 0 {
		opts.Sentinels = 3
	}
	if opts.MasterName == "" {
		opts.MasterName = "wr-master"
	}
	if opts.Quorum == 0 {
		opts.Quorum = opts.Sentinels/2 + 1
	}
	if opts.Replicas < 0 || opts.Sentinels < 1 || opts.Quorum < 1 || opts.Quorum > opts.Sentinels {
		tb.Fatalf("redistest: bad sentinel options %+v", opts)
	}
	dir := tb.TempDir()
	s := &Sentinel{MasterName: opts.MasterName, tb: tb, data: map[string]*node{}}
	begin := time.Now()

	primary := launch(tb, dir, false, baseArgs)
	s.data[primary.addr] = primary
	for range opts.Replicas {
		n := launch(tb, dir, false, func(port int, dir string) []string {
			return append(baseArgs(port, dir), "--replicaof", "127.0.0.1", strconv.Itoa(primary.port))
		})
		s.data[n.addr] = n
	}
	for range opts.Sentinels {
		n := launch(tb, dir, false, func(port int, dir string) []string {
			conf := filepath.Join(dir, "sentinel.conf")
			// Sentinel rewrites this file as it learns, so each has its own.
			text := fmt.Sprintf(`port %d
bind 127.0.0.1
daemonize no
dir %q
sentinel resolve-hostnames no
sentinel monitor %[4]s 127.0.0.1 %[3]d %[5]d
sentinel down-after-milliseconds %[4]s %[6]d
sentinel failover-timeout %[4]s %[7]d
sentinel parallel-syncs %[4]s 1
`, port, dir, primary.port, opts.MasterName, opts.Quorum, downAfter, failoverTimeout)
			if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
				tb.Fatalf("redistest: %v", err)
			}
			return []string{conf, "--sentinel"}
		})
		s.SentinelAddrs = append(s.SentinelAddrs, n.addr)
		s.sentinels = append(s.sentinels, n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := s.waitReady(ctx, primary.addr, opts); err != nil {
		tb.Fatalf("redistest: sentinels did not become ready: %v", err)
	}
	tb.Logf("redistest: sentinel setup (1 primary, %d replica(s), %d sentinels) ready in %v",
		opts.Replicas, opts.Sentinels, time.Since(begin).Round(time.Millisecond))
	return s
}

// waitReady waits until every replica is in sync and every sentinel agrees
// on the primary and knows all replicas and all other sentinels; before
// that a failover could pick no replica or find no quorum.
func (s *Sentinel) waitReady(ctx context.Context, primary string, opts SentinelOptions) error {
	for addr := range s.data {
		if addr == primary {
			continue
		}
		cl := newClient(addr)
		err := poll(ctx, func() error {
			repl, err := cl.Info(ctx, "replication").Result()
			if err != nil {
				return err
			}
			if st := infoField(repl, "master_link_status"); st != "up" {
				return fmt.Errorf("replica %s: link to primary is %q", addr, st)
			}
			return nil
		})
		cl.Close()
		if err != nil {
			return err
		}
	}
	for _, addr := range s.SentinelAddrs {
		sc := newSentinelClient(addr)
		err := poll(ctx, func() error {
			got, err := sc.GetMasterAddrByName(ctx, s.MasterName).Result()
			if err != nil {
				return err
			}
			if a := joinAddr(got); a != primary {
				return fmt.Errorf("sentinel %s names %s as primary, want %s", addr, a, primary)
			}
			m, err := sc.Master(ctx, s.MasterName).Result()
			if err != nil {
				return err
			}
			if m["num-slaves"] != strconv.Itoa(opts.Replicas) || m["num-other-sentinels"] != strconv.Itoa(opts.Sentinels-1) {
				return fmt.Errorf("sentinel %s sees %s replicas and %s other sentinels, want %d and %d",
					addr, m["num-slaves"], m["num-other-sentinels"], opts.Replicas, opts.Sentinels-1)
			}
			replicas, err := sc.Replicas(ctx, s.MasterName).Result()
			if err != nil {
				return err
			}
			for _, r := range replicas {
				if r["flags"] != "slave" || r["master-link-status"] != "ok" {
					return fmt.Errorf("sentinel %s sees replica %s:%s with flags %q, link %q",
						addr, r["ip"], r["port"], r["flags"], r["master-link-status"])
				}
			}
			return nil
		})
		sc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func newSentinelClient(addr string) *redis.SentinelClient {
	return redis.NewSentinelClient(harnessOptions(addr))
}

// joinAddr turns a SENTINEL get-master-addr-by-name reply into host:port.
func joinAddr(ipPort []string) string {
	if len(ipPort) != 2 {
		return fmt.Sprint(ipPort)
	}
	return ipPort[0] + ":" + ipPort[1]
}

// FailoverClient returns a client that finds the primary through the
// sentinels and follows failovers, closed when the test ends.
func (s *Sentinel) FailoverClient() *redis.Client {
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            s.MasterName,
		SentinelAddrs:         s.SentinelAddrs,
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
	})
	s.tb.Cleanup(func() { c.Close() })
	return c
}

// URL is the setup as redis+sentinel://host:port,host:port,…/MASTER-NAME.
func (s *Sentinel) URL() string {
	return "redis+sentinel://" + strings.Join(s.SentinelAddrs, ",") + "/" + s.MasterName
}

// PrimaryAddr returns the primary's address as the first sentinel that
// answers names it.
func (s *Sentinel) PrimaryAddr(ctx context.Context) (string, error) {
	err := errors.New("no sentinel")
	for _, addr := range s.SentinelAddrs {
		var got []string
		sc := newSentinelClient(addr)
		got, err = sc.GetMasterAddrByName(ctx, s.MasterName).Result()
		sc.Close()
		if err == nil {
			return joinAddr(got), nil
		}
	}
	return "", fmt.Errorf("redistest: primary of %s: %w", s.MasterName, err)
}

// KillPrimary SIGKILLs the current primary, as a crash would, and returns
// its address.
func (s *Sentinel) KillPrimary(ctx context.Context) string {
	s.tb.Helper()
	addr, err := s.PrimaryAddr(ctx)
	if err != nil {
		s.tb.Fatal(err)
	}
	n, ok := s.data[addr]
	if !ok {
		s.tb.Fatalf("redistest: sentinels name %s as primary, which is not a node of this setup", addr)
	}
	n.proc.kill()
	return addr
}

// WaitFailover waits until every sentinel names the same primary other than
// old and that node answers ROLE as a master; it returns the new primary.
func (s *Sentinel) WaitFailover(ctx context.Context, old string) (string, error) {
	var primary string
	err := poll(ctx, func() error {
		primary = ""
		for _, addr := range s.SentinelAddrs {
			sc := newSentinelClient(addr)
			got, err := sc.GetMasterAddrByName(ctx, s.MasterName).Result()
			sc.Close()
			if err != nil {
				return fmt.Errorf("sentinel %s: %w", addr, err)
			}
			a := joinAddr(got)
			if a == old {
				return fmt.Errorf("sentinel %s still names %s", addr, old)
			}
			if primary != "" && a != primary {
				return fmt.Errorf("sentinels disagree: %s and %s", primary, a)
			}
			primary = a
		}
		cl := newClient(primary)
		defer cl.Close()
		role, err := cl.Do(ctx, "ROLE").Slice()
		if err != nil {
			return fmt.Errorf("%s: %w", primary, err)
		}
		if len(role) == 0 || role[0] != "master" {
			return fmt.Errorf("%s: ROLE is %v", primary, role)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("redistest: failover from %s: %w", old, err)
	}
	return primary, nil
}

// Stop stops the sentinels first, so they do not fail over while the data
// nodes go down, then the primary and replicas; the test's cleanup does so
// too.
func (s *Sentinel) Stop() {
	var wg sync.WaitGroup
	for _, n := range s.sentinels {
		wg.Go(n.proc.stop)
	}
	wg.Wait()
	for _, n := range s.data {
		wg.Go(n.proc.stop)
	}
	wg.Wait()
}
