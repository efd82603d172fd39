package redistest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterOptions shape a cluster. The zero value is three primaries without
// replicas.
type ClusterOptions struct {
	// Primaries is how many primaries share the 16384 slots; default 3,
	// the fewest Redis Cluster accepts.
	Primaries int
	// ReplicasPerPrimary is how many replicas each primary gets; with one
	// or more a primary's death is survived by failover.
	ReplicasPerPrimary int
	// Args are appended to every node's command line, e.g.
	// "--cluster-require-full-coverage", "no" to keep the other shards
	// serving while one has no primary.
	Args []string
}

// Cluster is a Redis Cluster started by StartCluster.
type Cluster struct {
	// Addrs are all nodes, primaries and replicas, as host:port.
	Addrs []string

	tb    testing.TB
	nodes map[string]*node
}

// clusterNodeTimeout is short so that failure detection and replica
// failover happen within a few seconds in tests.
const clusterNodeTimeout = 2000 // ms

// StartCluster starts the nodes of a Redis Cluster, joins them with
// redis-cli --cluster create, and returns once every node sees every other,
// all slots are served and every replica is in sync with its primary.
func StartCluster(tb testing.TB, opts ClusterOptions) *Cluster {
	tb.Helper()
	if opts.Primaries == 0 {
		opts.Primaries = 3
	}
	if opts.Primaries < 3 || opts.ReplicasPerPrimary < 0 {
		tb.Fatalf("redistest: a cluster needs at least 3 primaries and no negative replicas; got %+v", opts)
	}
	dir := tb.TempDir()
	total := opts.Primaries * (1 + opts.ReplicasPerPrimary)
	c := &Cluster{tb: tb, nodes: make(map[string]*node, total)}
	begin := time.Now()
	for range total {
		n := launch(tb, dir, true, func(port int, dir string) []string {
			args := append(baseArgs(port, dir),
				"--cluster-enabled", "yes",
				"--cluster-config-file", "nodes-"+strconv.Itoa(port)+".conf",
				"--cluster-node-timeout", strconv.Itoa(clusterNodeTimeout),
			)
			return append(args, opts.Args...)
		})
		c.Addrs = append(c.Addrs, n.addr)
		c.nodes[n.addr] = n
	}

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	create := append([]string{"--cluster", "create"}, c.Addrs...)
	create = append(create, "--cluster-replicas", strconv.Itoa(opts.ReplicasPerPrimary), "--cluster-yes")
	out, err := exec.CommandContext(ctx, "redis-cli", create...).CombinedOutput()
	if err != nil {
		tb.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.waitReady(ctx, opts); err != nil {
		tb.Fatalf("redistest: cluster did not become ready: %v", err)
	}
	tb.Logf("redistest: cluster of %d nodes (%d primaries) ready in %v", total, opts.Primaries, time.Since(begin).Round(time.Millisecond))
	return c
}

// waitReady waits until every node reports the whole cluster healthy, knows
// every replica as a replica of its primary, and every replica's link is up,
// so a failover test starts from replicas that hold the data and primaries
// that will vote for them. (CLUSTER SLOTS is no guide: 7.0 lists a new
// replica there seconds after CLUSTER NODES does.)
func (c *Cluster) waitReady(ctx context.Context, opts ClusterOptions) error {
	for _, addr := range c.Addrs {
		cl := newClient(addr)
		err := poll(ctx, func() error {
			info, err := cl.ClusterInfo(ctx).Result()
			if err != nil {
				return err
			}
			if s := infoField(info, "cluster_state"); s != "ok" {
				return fmt.Errorf("%s: cluster_state:%s", addr, s)
			}
			if s := infoField(info, "cluster_slots_ok"); s != "16384" {
				return fmt.Errorf("%s: cluster_slots_ok:%s", addr, s)
			}
			nodes, err := cl.ClusterNodes(ctx).Result()
			if err != nil {
				return err
			}
			if err := checkNodes(nodes, opts); err != nil {
				return fmt.Errorf("%s: %w", addr, err)
			}
			repl, err := cl.Info(ctx, "replication").Result()
			if err != nil {
				return err
			}
			if infoField(repl, "role") == "slave" && infoField(repl, "master_link_status") != "up" {
				return fmt.Errorf("%s: replica link to its primary is %s", addr, infoField(repl, "master_link_status"))
			}
			return nil
		})
		cl.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// checkNodes checks one node's CLUSTER NODES: every node connected and
// healthy, the expected primaries, each with the expected replicas.
func checkNodes(nodes string, opts ClusterOptions) error {
	primaries := map[string]int{} // primary id → replicas
	var replicaOf []string
	for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
		// id addr flags master ping pong epoch link slots…
		f := strings.Fields(line)
		if len(f) < 8 {
			return fmt.Errorf("unexpected CLUSTER NODES line %q", line)
		}
		for _, flag := range strings.Split(f[2], ",") {
			switch flag {
			case "fail", "fail?", "handshake", "noaddr":
				return fmt.Errorf("node %s is %s", f[1], f[2])
			}
		}
		if f[7] != "connected" {
			return fmt.Errorf("node %s is %s", f[1], f[7])
		}
		if strings.Contains(f[2], "master") {
			primaries[f[0]] += 0
		} else {
			replicaOf = append(replicaOf, f[3])
		}
	}
	for _, id := range replicaOf {
		if _, ok := primaries[id]; !ok {
			return fmt.Errorf("a replica follows %s, not a known primary", id)
		}
		primaries[id]++
	}
	if len(primaries) != opts.Primaries {
		return fmt.Errorf("%d primaries, want %d", len(primaries), opts.Primaries)
	}
	for id, n := range primaries {
		if n != opts.ReplicasPerPrimary {
			return fmt.Errorf("primary %s has %d replicas, want %d", id, n, opts.ReplicasPerPrimary)
		}
	}
	return nil
}

// Client returns a cluster client seeded with every node, closed when the
// test ends.
//
// Its slot map is reloaded every second: go-redis reloads it on MOVED, ASK
// and READONLY replies but not on a refused connection, so after a primary
// dies a client with the default interval (60 s) keeps dialling the corpse
// for up to a minute although a replica took over seconds ago.
func (c *Cluster) Client() *redis.ClusterClient {
	cl := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                      c.Addrs,
		ClusterStateReloadInterval: time.Second,
		ContextTimeoutEnabled:      true,
		DisableIdentity:            true,
	})
	c.tb.Cleanup(func() { cl.Close() })
	return cl
}

// URL is the cluster as a seed list: redis+cluster://host:port,host:port,…
func (c *Cluster) URL() string {
	return "redis+cluster://" + strings.Join(c.Addrs, ",")
}

// PrimaryFor returns the address of the primary serving key's slot, as the
// first live node that answers sees it.
func (c *Cluster) PrimaryFor(ctx context.Context, key string) (string, error) {
	err := errors.New("no live node")
	for _, addr := range c.Addrs {
		if c.nodes[addr].proc.exited() {
			continue
		}
		var primary string
		primary, err = primaryFor(ctx, addr, key)
		if err == nil {
			return primary, nil
		}
	}
	return "", fmt.Errorf("redistest: primary for %q: %w", key, err)
}

func primaryFor(ctx context.Context, addr, key string) (string, error) {
	cl := newClient(addr)
	defer cl.Close()
	slot, err := cl.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return "", err
	}
	slots, err := cl.ClusterSlots(ctx).Result()
	if err != nil {
		return "", err
	}
	for _, s := range slots {
		if int64(s.Start) <= slot && slot <= int64(s.End) && len(s.Nodes) > 0 {
			return s.Nodes[0].Addr, nil
		}
	}
	return "", fmt.Errorf("%s: slot %d is not served", addr, slot)
}

// Kill SIGKILLs the node at addr, as a crash would.
func (c *Cluster) Kill(addr string) {
	c.tb.Helper()
	n, ok := c.nodes[addr]
	if !ok {
		c.tb.Fatalf("redistest: %s is not a node of this cluster (%v)", addr, c.Addrs)
	}
	n.proc.kill()
}

// Stop stops every node; the test's cleanup does so too.
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(n.proc.stop)
	}
	wg.Wait()
}
