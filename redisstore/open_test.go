package redisstore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestOpenURLForms(t *testing.T) {
	t.Parallel()
	t.Run("standalone", func(t *testing.T) {
		t.Parallel()
		o, err := parseURL("redis://u:p%40ss@10.0.0.1:6380/2")
		require.NoError(t, err)
		require.NotNil(t, o.single)
		require.Equal(t, "10.0.0.1:6380", o.single.Addr)
		require.Equal(t, 2, o.single.DB)
		require.Equal(t, "u", o.single.Username)
		require.Equal(t, "p@ss", o.single.Password)
		requireShortTimeouts(t, o.single.DialTimeout, o.single.ReadTimeout, o.single.WriteTimeout, o.single.PoolTimeout)
		require.Equal(t, 1, o.single.MaxRetries)
		require.Equal(t, 1, o.single.DialerRetries)
		require.True(t, o.single.ContextTimeoutEnabled)
		require.Nil(t, o.single.TLSConfig)

		o, err = parseURL("rediss://h/0")
		require.NoError(t, err)
		require.NotNil(t, o.single.TLSConfig)
		require.Equal(t, "h:6379", o.single.Addr)

		o, err = parseURL("unix:///run/redis.sock?db=3")
		require.NoError(t, err)
		require.Equal(t, "unix", o.single.Network)
		require.Equal(t, "/run/redis.sock", o.single.Addr)
		require.Equal(t, 3, o.single.DB)
	})
	t.Run("overrides", func(t *testing.T) {
		t.Parallel()
		o, err := parseURL("redis://h:1/0?dial_timeout=250ms&read_timeout=3s&write_timeout=2s&pool_timeout=4s&max_retries=-1&pool_size=7")
		require.NoError(t, err)
		require.Equal(t, 250*time.Millisecond, o.single.DialTimeout)
		require.Equal(t, 3*time.Second, o.single.ReadTimeout)
		require.Equal(t, 2*time.Second, o.single.WriteTimeout)
		require.Equal(t, 4*time.Second, o.single.PoolTimeout)
		require.Equal(t, -1, o.single.MaxRetries)
		require.Equal(t, 7, o.single.PoolSize)
	})
	t.Run("autopipeline", func(t *testing.T) {
		t.Parallel()
		for url, want := range map[string]bool{
			"redis://h:1/0": defaultAutoPipeline,
			"redis://h:1/0?autopipeline=true&read_timeout=3s":        true,
			"redis://h:1/0?read_timeout=3s&autopipeline=false":       false,
			"redis+cluster://h1:1,h2:2?autopipeline=false":           false,
			"redis+cluster://h1:1,h2:2?autopipeline=1":               true,
			"redis+sentinel://s1:1,s2:2/main?autopipeline=true":      true,
			"redis+sentinel://s1:1,s2:2/main?db=1&autopipeline=0":    false,
			"redis://h:1?addr=h2:2&autopipeline=false&max_retries=2": false,
		} {
			o, err := parseURL(url)
			require.NoError(t, err, url)
			var got bool
			switch {
			case o.single != nil:
				got = o.single.AutoPipelineOptions != nil
				require.Equal(t, strings.Contains(url, "read_timeout"), o.single.ReadTimeout == 3*time.Second, url)
			case o.cluster != nil:
				got = o.cluster.AutoPipelineOptions != nil
			case o.failover != nil:
				got = o.failover.AutoPipelineOptions != nil
			}
			require.Equal(t, want, got, url)
		}
		for _, url := range []string{"redis://h:1/0?autopipeline=maybe", "redis://h:1/0?autopipeline=true&autopipeline=false"} {
			_, err := parseURL(url)
			require.ErrorContains(t, err, "autopipeline", url)
		}
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		o, err := parseURL("redis+cluster://u:pw@127.0.0.1:7000,127.0.0.1:7001,[::1]:7002,h4?read_timeout=2s")
		require.NoError(t, err)
		require.NotNil(t, o.cluster)
		require.Equal(t, []string{"127.0.0.1:7000", "127.0.0.1:7001", "[::1]:7002", "h4:6379"}, o.cluster.Addrs)
		require.Equal(t, "u", o.cluster.Username)
		require.Equal(t, "pw", o.cluster.Password)
		require.Equal(t, time.Second, o.cluster.ClusterStateReloadInterval)
		require.False(t, o.cluster.ReadOnly || o.cluster.RouteByLatency || o.cluster.RouteRandomly)
		requireShortTimeouts(t, o.cluster.DialTimeout, o.cluster.WriteTimeout, o.cluster.PoolTimeout)
		require.Equal(t, 2*time.Second, o.cluster.ReadTimeout)
		require.Equal(t, 1, o.cluster.DialerRetries)
		require.True(t, o.cluster.ContextTimeoutEnabled)

		o, err = parseURL("rediss+cluster://h1:1,h2:2")
		require.NoError(t, err)
		require.NotNil(t, o.cluster.TLSConfig)

		// go-redis's own form.
		o, err = parseURL("redis://h1:1?addr=h2:2&addr=h3:3")
		require.NoError(t, err)
		require.NotNil(t, o.cluster)
		require.Equal(t, []string{"h1:1", "h2:2", "h3:3"}, o.cluster.Addrs)
		require.Equal(t, time.Second, o.cluster.ClusterStateReloadInterval)
	})
	t.Run("sentinel", func(t *testing.T) {
		t.Parallel()
		o, err := parseURL("redis+sentinel://u:pw@s1:26379,s2:26380,s3/mymaster?db=2&sentinel_password=spw&dial_timeout=500ms")
		require.NoError(t, err)
		require.NotNil(t, o.failover)
		f := o.failover
		require.Equal(t, "mymaster", f.MasterName)
		require.Equal(t, []string{"s1:26379", "s2:26380", "s3:26379"}, f.SentinelAddrs)
		require.Equal(t, 2, f.DB)
		require.Equal(t, "u", f.Username)
		require.Equal(t, "pw", f.Password)
		require.Equal(t, "", f.SentinelUsername)
		require.Equal(t, "spw", f.SentinelPassword)
		require.False(t, f.ReplicaOnly || f.RouteByLatency || f.RouteRandomly || f.UseDisconnectedReplicas)
		require.Equal(t, 500*time.Millisecond, f.DialTimeout)
		requireShortTimeouts(t, f.ReadTimeout, f.WriteTimeout, f.PoolTimeout)
		require.Equal(t, 1, f.MaxRetries)
		require.True(t, f.ContextTimeoutEnabled)
	})
	t.Run("bad", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct{ url, want string }{
			{"127.0.0.1:6379", "needs a scheme"},
			{"http://127.0.0.1:6379", "scheme"},
			{"redis://h:1/x", "database"},
			{"redis://h:1/0?nonsense=1", "unexpected option"},
			{"redis://h:1/0?dial_timeout=soon", "dial_timeout"},
			{"redis+cluster://h1:1,,h3:3", "bad host"},
			{"redis+cluster://h1:1,h2:2/0", "no database"},
			{"redis+cluster://h1:1?read_only=true", "replicas"},
			{"redis+cluster://h1:1?route_randomly=1", "replicas"},
			{"redis://h1:1?addr=h2:2&route_by_latency=true", "replicas"},
			{"redis+cluster://h1:1?addr=h2:2", "authority"},
			{"redis+sentinel://s1,s2", "master name"},
			{"redis+sentinel://s1,s2/a/b", "master name"},
			{"redis+sentinel://s1/m?replica_only=true", "replicas"},
			{"redis+sentinel://s1/m?master_name=n", "master_name"},
			{"redis+sentinel://s1/m?db=x", "database"},
		} {
			_, err := Open(tt.url)
			require.ErrorContains(t, err, tt.want, tt.url)
			require.ErrorContains(t, CheckURL(tt.url), tt.want, tt.url)
		}
		// A password never shows in the error.
		err := CheckURL("redis+sentinel://u:hunter2@s1/m?bogus=1")
		require.Error(t, err)
		require.NotContains(t, err.Error(), "hunter2")
		err = CheckURL("redis://u:hunter2@h:1/0?bogus=1")
		require.Error(t, err)
		require.NotContains(t, err.Error(), "hunter2")
	})
}

func requireShortTimeouts(t *testing.T, ds ...time.Duration) {
	t.Helper()
	for i, d := range ds {
		require.Equal(t, time.Second, d, "timeout %d", i)
	}
}

// TestOpenClientKinds: each form opens the client its topology needs.
func TestOpenClientKinds(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]string{
		"redis://127.0.0.1:1/0":                   "*redis.Client",
		"redis+cluster://127.0.0.1:1,127.0.0.1:2": "*redis.ClusterClient",
		"redis+sentinel://127.0.0.1:1/m":          "*redis.Client",
	} {
		c, err := Open(url)
		require.NoError(t, err, url)
		require.Equal(t, want, fmt.Sprintf("%T", c), url)
		require.NoError(t, c.Close())
	}
}
