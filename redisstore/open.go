package redisstore

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Client defaults that replace go-redis's own (5 s dials, 3 s reads, up to
// 4 s waiting for a pooled connection, 5 dial attempts): a Redis that does
// not answer must turn into STORE_UNAVAILABLE within about a second, not
// hold a buyer's request for many. The longest script is an Admit of 1,000
// users, about 10 ms, so a second is ample headroom.
const (
	defaultDialTimeout  = time.Second
	defaultReadTimeout  = time.Second
	defaultWriteTimeout = time.Second
	defaultPoolTimeout  = time.Second
	// One retry covers a connection the server closed while it sat idle;
	// more would multiply the wait on a dead server.
	defaultMaxRetries = 1
	// A failed dial is not retried by the connection pool; the command's
	// own retry (above) still applies.
	defaultDialerRetries = 1
	// go-redis reloads a cluster's slot map on MOVED and ASK, not on a
	// refused connection; by default it would keep dialling a dead primary
	// for 60 s after its replica took over.
	clusterStateReload = time.Second
)

// Default ports when a host in a seed list has none.
const (
	defaultRedisPort    = "6379"
	defaultSentinelPort = "26379"
)

// Open returns a client for url; the caller closes it. The forms:
//
//	redis://[user:pass@]host:port[/db]            one Redis (*redis.Client)
//	rediss://…                                    the same over TLS
//	unix://[user:pass@]/path/to/redis.sock[?db=N] one Redis on a Unix socket
//	redis+cluster://[user:pass@]h1:p1,h2:p2,h3:p3 Redis Cluster seed list (*redis.ClusterClient)
//	rediss+cluster://…                            the same over TLS
//	redis://h1:p1?addr=h2:p2&addr=h3:p3           go-redis's own cluster form, also accepted
//	redis+sentinel://[user:pass@]s1:p1,s2:p2,s3:p3/MASTER[?db=N]
//	                                              the primary Sentinel names MASTER (failover *redis.Client)
//	rediss+sentinel://…                           the same over TLS
//
// A seed list needs only some of the nodes (the client learns the rest);
// hosts without a port get 6379, sentinels 26379. In the sentinel form
// user:pass authenticate to the primary; sentinel_username and
// sentinel_password (query options) to the sentinels, when they need it.
//
// Every client reads and writes only on primaries (never ReadOnly,
// RouteByLatency, RouteRandomly or ReplicaOnly; the query options that
// would set them are refused): a user's status must see the place Enter
// just gave it, and Claim the token Admit just issued.
//
// Timeouts are short, never go-redis's defaults: dial, read, write and
// pool wait 1 s each, one retry (none per node on a cluster, whose client
// retries on another attempt by itself), no dial retries, and a request's
// context deadline also bounds its Redis call. A cluster's slot map is
// reloaded every second, so the client follows a promoted replica within
// about a second. go-redis's query options override these where it has
// them, e.g. ?dial_timeout=500ms&read_timeout=2s&max_retries=2&pool_size=50;
// a value of 0 (or absent) means the default above, -1 disables a timeout
// or retries. An unknown option is an error.
//
// The client autopipelines the hot path (Enter, Status, Claim, Complete,
// Release: see Options.AutoPipeline): ?autopipeline=false turns that off.
func Open(rawURL string) (redis.UniversalClient, error) {
	o, err := parseURL(rawURL)
	switch {
	case err != nil:
		return nil, err
	case o.cluster != nil:
		return redis.NewClusterClient(o.cluster), nil
	case o.failover != nil:
		return redis.NewFailoverClient(o.failover), nil
	default:
		return redis.NewClient(o.single), nil
	}
}

// CheckURL reports whether Open would accept url, without connecting;
// flag validation calls it. Its error never contains the URL, which may
// hold a password.
func CheckURL(rawURL string) error {
	_, err := parseURL(rawURL)
	return err
}

// clientOptions are what Open builds from a URL: exactly one is set.
type clientOptions struct {
	single   *redis.Options
	cluster  *redis.ClusterOptions
	failover *redis.FailoverOptions
}

func parseURL(rawURL string) (clientOptions, error) {
	rawURL, autoPipeline, err := cutAutoPipeline(rawURL)
	if err != nil {
		return clientOptions{}, err
	}
	o, err := parseClientURL(rawURL)
	if err != nil || !autoPipeline {
		return o, err
	}
	switch {
	case o.single != nil:
		o.single.AutoPipelineOptions = autoPipelineOptions()
	case o.cluster != nil:
		o.cluster.AutoPipelineOptions = autoPipelineOptions()
	case o.failover != nil:
		o.failover.AutoPipelineOptions = autoPipelineOptions()
	}
	return o, nil
}

// defaultAutoPipeline is whether a URL without autopipeline=… gives a
// client that autopipelines the hot path (see BENCHMARKS.md).
const defaultAutoPipeline = true

// cutAutoPipeline removes our own query option autopipeline=true|false
// (go-redis does not know it) and returns its value, or the default.
func cutAutoPipeline(rawURL string) (string, bool, error) {
	base, query, ok := strings.Cut(rawURL, "?")
	if !ok {
		return rawURL, defaultAutoPipeline, nil
	}
	query, fragment, hasFragment := strings.Cut(query, "#")
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", false, urlError(err)
	}
	if !q.Has("autopipeline") {
		return rawURL, defaultAutoPipeline, nil
	}
	on, err := strconv.ParseBool(q.Get("autopipeline"))
	if err != nil || len(q["autopipeline"]) > 1 {
		return "", false, fmt.Errorf("redisstore: bad Redis URL: autopipeline=%q is not true or false", q.Get("autopipeline"))
	}
	q.Del("autopipeline")
	if len(q) > 0 {
		base += "?" + q.Encode()
	}
	if hasFragment {
		base += "#" + fragment
	}
	return base, on, nil
}

func parseClientURL(rawURL string) (clientOptions, error) {
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok {
		return clientOptions{}, errors.New("redisstore: the Redis URL needs a scheme: redis://, rediss://, unix://, redis+cluster:// or redis+sentinel://")
	}
	switch strings.ToLower(scheme) {
	case "redis", "rediss":
		u, err := url.Parse(rawURL)
		if err != nil {
			return clientOptions{}, urlError(err)
		}
		if u.Query().Has("addr") { // go-redis's cluster form
			return parseCluster(rawURL)
		}
		return parseSingle(rawURL)
	case "unix":
		return parseSingle(rawURL)
	case "redis+cluster", "rediss+cluster":
		return parseSeedList(rawURL, true)
	case "redis+sentinel", "rediss+sentinel":
		return parseSeedList(rawURL, false)
	default:
		return clientOptions{}, fmt.Errorf("redisstore: Redis URL scheme %q is not one of redis, rediss, unix, redis+cluster, rediss+cluster, redis+sentinel, rediss+sentinel", scheme)
	}
}

// urlError wraps a parse error without the URL, which may hold a password.
func urlError(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	return fmt.Errorf("redisstore: bad Redis URL: %w", err)
}

func parseSingle(rawURL string) (clientOptions, error) {
	o, err := redis.ParseURL(rawURL)
	if err != nil {
		return clientOptions{}, urlError(err)
	}
	withDefaults(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout, &o.MaxRetries, &o.DialerRetries, &o.ContextTimeoutEnabled)
	o.MaintNotificationsConfig = noMaintNotifications(o.MaintNotificationsConfig)
	return clientOptions{single: o}, nil
}

func parseCluster(goRedisURL string) (clientOptions, error) {
	o, err := redis.ParseClusterURL(goRedisURL)
	if err != nil {
		return clientOptions{}, urlError(err)
	}
	if o.ReadOnly || o.RouteByLatency || o.RouteRandomly {
		return clientOptions{}, errReplicaReads
	}
	// MaxRetries stays go-redis's cluster default (no retry per node): the
	// cluster client retries the command itself, up to MaxRedirects times,
	// and on its second attempt marks the node failing.
	withDefaults(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout, nil, &o.DialerRetries, &o.ContextTimeoutEnabled)
	o.ClusterStateReloadInterval = clusterStateReload
	o.MaintNotificationsConfig = noMaintNotifications(o.MaintNotificationsConfig)
	return clientOptions{cluster: o}, nil
}

var errReplicaReads = errors.New("redisstore: read_only, route_by_latency, route_randomly, replica_only and use_disconnected_replicas would read from replicas, which may not have a user's latest place or token yet; waitroom reads only primaries")

// parseSeedList parses a redis+cluster:// or redis+sentinel:// URL by
// rewriting it into go-redis's own form (the first host in the authority,
// the others as addr query options) and parsing that, so every go-redis
// query option keeps working.
func parseSeedList(rawURL string, cluster bool) (clientOptions, error) {
	scheme, rest, _ := strings.Cut(rawURL, "://")
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	userinfo, hostList := "", authority
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		userinfo, hostList = authority[:i+1], authority[i+1:]
	}
	// Parse the rest against a placeholder host: url.Parse does not accept
	// a comma-separated host list.
	u, err := url.Parse("redis://" + userinfo + "seed" + tail)
	if err != nil {
		return clientOptions{}, urlError(err)
	}
	if u.Fragment != "" {
		return clientOptions{}, errors.New("redisstore: bad Redis URL: unexpected fragment")
	}
	defPort := defaultRedisPort
	if !cluster {
		defPort = defaultSentinelPort
	}
	var hosts []string
	for _, h := range strings.Split(hostList, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			// A host without a port; brackets keep an IPv6 literal whole.
			host, port = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), defPort
		}
		if host == "" || port == "" || strings.ContainsAny(host, "/@?#[]") {
			return clientOptions{}, fmt.Errorf("redisstore: bad Redis URL: bad host %q in the list %q", h, hostList)
		}
		hosts = append(hosts, net.JoinHostPort(host, port))
	}

	q := u.Query()
	if q.Has("addr") {
		return clientOptions{}, errors.New("redisstore: bad Redis URL: list the hosts in the authority (h1:p1,h2:p2), not as addr options")
	}
	for _, o := range []string{"read_only", "route_by_latency", "route_randomly", "replica_only", "use_disconnected_replicas"} {
		if q.Has(o) {
			return clientOptions{}, errReplicaReads
		}
	}
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	goRedis := url.URL{Scheme: "redis", User: u.User, Host: hosts[0]}
	if strings.HasPrefix(strings.ToLower(scheme), "rediss") {
		goRedis.Scheme = "rediss"
	}

	if cluster {
		if strings.Trim(u.Path, "/") != "" {
			return clientOptions{}, errors.New("redisstore: bad Redis URL: a cluster has no database number or path")
		}
		goRedis.RawQuery = q.Encode()
		return parseCluster(goRedis.String())
	}

	master := strings.Trim(u.Path, "/")
	if master == "" || strings.Contains(master, "/") {
		return clientOptions{}, errors.New("redisstore: bad Redis URL: redis+sentinel:// needs the master name as its path: redis+sentinel://s1:26379,s2:26379/MASTER")
	}
	for _, o := range []string{"master_name", "username", "password"} {
		if q.Has(o) {
			return clientOptions{}, fmt.Errorf("redisstore: bad Redis URL: %s goes in the URL itself (user:pass@…/MASTER), not as a query option", o)
		}
	}
	sentinelUser, sentinelPass := q.Get("sentinel_username"), q.Get("sentinel_password")
	q.Del("sentinel_username")
	q.Del("sentinel_password")
	q.Set("master_name", master)
	// go-redis's form authenticates to the sentinels with the userinfo and
	// to the data nodes with username/password options; ours the other way.
	if u.User != nil {
		q.Set("username", u.User.Username())
		if p, ok := u.User.Password(); ok {
			q.Set("password", p)
		}
		goRedis.User = nil
	}
	goRedis.RawQuery = q.Encode()
	o, err := redis.ParseFailoverURL(goRedis.String())
	if err != nil {
		return clientOptions{}, urlError(err)
	}
	o.SentinelUsername, o.SentinelPassword = sentinelUser, sentinelPass
	if o.ReplicaOnly || o.RouteByLatency || o.RouteRandomly || o.UseDisconnectedReplicas {
		return clientOptions{}, errReplicaReads
	}
	withDefaults(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout, &o.MaxRetries, &o.DialerRetries, &o.ContextTimeoutEnabled)
	return clientOptions{failover: o}, nil
}

// withDefaults gives the timeouts and retries a URL left out their
// defaults, and makes every call honour its context's deadline; retries is
// nil where go-redis's own default stands.
func withDefaults(dial, read, write, pool *time.Duration, retries, dialerRetries *int, contextTimeout *bool) {
	*dial = orDefault(*dial, defaultDialTimeout)
	*read = orDefault(*read, defaultReadTimeout)
	*write = orDefault(*write, defaultWriteTimeout)
	*pool = orDefault(*pool, defaultPoolTimeout)
	if retries != nil {
		*retries = orDefault(*retries, defaultMaxRetries)
	}
	*dialerRetries = orDefault(*dialerRetries, defaultDialerRetries)
	*contextTimeout = true
}

// noMaintNotifications turns go-redis's maintenance notifications off
// unless configured: their handshake (CLIENT MAINT_NOTIFICATIONS, which
// Redis 7 refuses) fails on every new connection, and go-redis v9.23.0's
// fallback then rewrites options that connections opening at the same time
// read (a data race the race detector reports under concurrent Admits).
func noMaintNotifications(c *maintnotifications.Config) *maintnotifications.Config {
	if c != nil {
		return c
	}
	return &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}

// orDefault is v, or def when v is zero (not given).
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}
