package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/instance"
	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/server"
)

// setting is one flag of serve and the environment variable that sets it
// when the flag is not given.
type setting struct {
	name, env, def, kind, help string
}

var serveSettings = []setting{
	{"addr", "WAITROOM_ADDR", "127.0.0.1:8080", "host:port", "address to listen on; port 0 picks a free one"},
	{"redis-url", "REDIS_URL", "", "url", "Redis that keeps the rooms: redis://host:port/db (also rediss://, unix://), redis+sentinel://s1:26379,s2:26379,s3:26379/MASTER, or redis+cluster://h1:6379,h2:6379,h3:6379; empty: in this process only, not durable, one instance"},
	{"redis-prefix", "WAITROOM_REDIS_PREFIX", "wr", "prefix", "start of every Redis key; waiting rooms with different prefixes share nothing"},
	{"rate", "WAITROOM_RATE", "", "users/s", "admission rate; empty: derived as pool / service-time × margin"},
	{"pool", "WAITROOM_POOL", "", "n", "database connections of the protected order API; empty: --db-pool"},
	{"service-time", "WAITROOM_SERVICE_TIME", "200ms", "duration", "how long one order holds a connection"},
	{"margin", "WAITROOM_MARGIN", "0.7", "fraction", "share of the capacity to use, in (0, 1]"},
	{"auto-rate", "WAITROOM_AUTO_RATE", "false", "bool", "keep the default room's rate at pool ÷ measured order time × margin, starting from --service-time"},
	{"slice", "WAITROOM_SLICE", "100ms", "duration", "admission tick; each tick admits one slice's share of the rate"},
	{"max-queue", "WAITROOM_MAX_QUEUE", "100000", "n", "longest queue; further entries get 429 QUEUE_FULL"},
	{"token-ttl", "WAITROOM_TOKEN_TTL", "300s", "duration", "how long an entry token lives"},
	{"lease", "WAITROOM_LEASE", "30s", "duration", "how long an order may hold a token before it is usable again"},
	{"max-active", "WAITROOM_MAX_ACTIVE", "0", "n", "most live entry tokens at once, at most 100000000; 0: no cap"},
	{"one-order-per-user", "WAITROOM_ONE_ORDER_PER_USER", "false", "bool", "a buyer whose order completed in the default room cannot enter it again (409 ALREADY_ORDERED), and the gate keys orders by buyer, so the order API refuses a second one even after a lossy Redis failover"},
	{"invite-only", "WAITROOM_INVITE_ONLY", "false", "bool", "the default room lets in pass holders only (waitroom admin passes create); others get 403 INVITE_ONLY"},
	{"opens-at", "WAITROOM_OPENS_AT", "", "time", "RFC 3339 opening of the default room; before it users are told \"scheduled\" and get places 1..N at the opening by --prequeue-order; empty: open at once"},
	{"prequeue-order", "WAITROOM_PREQUEUE_ORDER", "random", "random|fifo", "how the early arrivals are placed at the opening: random (a draw whose commitment GET /rooms/{room}/draw publishes before and whose seed it reveals after) or fifo (arrival order)"},
	{"closes-at", "WAITROOM_CLOSES_AT", "", "time", "RFC 3339 time from which new entries get ROOM_CLOSED; empty: never"},
	{"stock", "WAITROOM_STOCK", "0", "n", "units the default room sells in all; a live entry token reserves one, so nobody is admitted to find nothing; 0: not tracked"},
	{"abandon-after", "WAITROOM_ABANDON_AFTER", "5m", "duration", "a waiting user silent (no enter, no status) this long has left: skipped at the head, counted abandoned"},
	{"first-use-within", "WAITROOM_FIRST_USE_WITHIN", "60s", "duration", "an admitted user must confirm (one status call after the one that told it) or order this soon, else its token expires as a no-show and frees its slot; at most --token-ttl"},
	{"upstream", "WAITROOM_UPSTREAM", "", "url", "order API the gate guards; empty: the built-in reference shop"},
	{"upstream-timeout", "WAITROOM_UPSTREAM_TIMEOUT", "25s", "duration", "longest wait for the upstream's answer to an order; then 502 and the token is released"},
	{"upstream-dial-timeout", "WAITROOM_UPSTREAM_DIAL_TIMEOUT", "5s", "duration", "longest wait to connect to the upstream"},
	{"upstream-max-body", "WAITROOM_UPSTREAM_MAX_BODY", "1048576", "bytes", "largest answer body the upstream may send through the gate"},
	{"database-url", "DATABASE_URL", "", "url", "PostgreSQL of the built-in shop (postgres://…); empty: in this process only, not durable"},
	{"db-pool", "WAITROOM_DB_POOL", "40", "n", "connection pool maximum of the built-in shop; also the default of --pool"},
	{"amqp-url", "AMQP_URL", "", "url", "RabbitMQ that receives the built-in shop's order events (amqp://…); empty: events wait in the outbox"},
	{"products", "WAITROOM_PRODUCTS", "", "id:stock,…", "products the built-in shop creates at start unless they exist, e.g. drop:1000"},
	{"gated-routes", "WAITROOM_GATED_ROUTES", "POST /orders", "patterns", "comma-separated routes (Go ServeMux patterns) that need an entry token"},
	{"user-header", "WAITROOM_USER_HEADER", waitroom.DefaultUserHeader, "name", "request header with the user id, set by the shop's auth layer"},
	{"cookie-secret", "WAITROOM_COOKIE_SECRET", "", "secret", "key of at least 32 bytes that signs the waiting page's visitor cookies; give every instance the same one; empty: a random one per start, so visitors lose their place on a restart"},
	{"page-product", "WAITROOM_PAGE_PRODUCT", "", "id", "product the waiting page's order button orders; empty: the first of --products"},
	{"rooms", "WAITROOM_ROOMS", "", "names", "comma-separated rooms to declare at start besides " + server.DefaultRoom},
	{"failure-policy", "WAITROOM_FAILURE_POLICY", "closed", "policy", "what the gate does while Redis is unreachable: closed (refuse, 503) or open (let a bounded share of the rate through); per room as default=open,sale=closed"},
	{"open-share", "WAITROOM_OPEN_SHARE", "0.5", "fraction", "failing open, the share of a room's last known rate that the instances together let through, in (0, 1]"},
	{"instances", "WAITROOM_INSTANCES", "1", "n", "how many instances serve the rooms; failing open, each lets through its 1/n of the share, and with Redis each answers its 1/n of --user-rate-limit and --visitor-rate-limit without asking Redis"},
	{"store-timeout", "WAITROOM_STORE_TIMEOUT", "1s", "duration", "longest wait for Redis per request before answering by the failure policy"},
	{"trusted-proxies", "WAITROOM_TRUSTED_PROXIES", "127.0.0.0/8,::1/128", "CIDRs", "comma-separated networks of the proxies in front (the shop's auth layer, the load balancer): only from them is the user header believed and an X-Forwarded-For hop counted; none: nobody"},
	{"user-rate-limit", "WAITROOM_USER_RATE_LIMIT", "5", "requests/s", "most queue requests (enter, status, leave, page) per second per user, bursts of twice that; beyond it 429 RATE_LIMITED, the place is kept; 0: off"},
	{"visitor-rate-limit", "WAITROOM_VISITOR_RATE_LIMIT", "0", "visitors/s", "most new visitors (cookies) per second per client address, bursts of twice that (at least 1); 0: off"},
	{"cookie-secure", "WAITROOM_COOKIE_SECURE", "false", "bool", "mark the visitor cookie Secure also on plain HTTP, when TLS ends at a proxy in front"},
	{"join-challenge", "WAITROOM_JOIN_CHALLENGE", "off", "off|on|bits", fmt.Sprintf("proof of work before a new place: the page solves a SHA-256 puzzle of this many leading zero bits, API clients get it in a 428 answer; on: %d bits; at most %d", server.DefaultJoinDifficulty, server.MaxJoinDifficulty)},
	{"metrics-addr", "WAITROOM_METRICS_ADDR", "", "host:port", "serve /metrics on this listener of its own (for the scraper, not the crowd); empty: /metrics is on --addr behind --admin-token, and not served without one"},
	{"log-format", "WAITROOM_LOG_FORMAT", "text", "text|json", "log format"},
	{"log-level", "WAITROOM_LOG_LEVEL", "info", "level", "debug, info, warn or error; debug logs every request"},
	{"admin-token", "WAITROOM_ADMIN_TOKEN", "", "token", fmt.Sprintf("bearer token of the operator API under /admin/ ('waitroom admin'), at least %d characters; empty: the admin API is off", minAdminToken)},
}

func printServeUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: waitroom serve [flags]\n\nRuns the waiting room: the HTTP API and the admission ticker.\nEvery flag may instead be set by its environment variable; a flag wins.\n\nFlags:\n")
	for _, s := range serveSettings {
		def := s.def
		if def == "" {
			def = "none"
		}
		fmt.Fprintf(w, "  --%s %s\n        %s\n        (default %s; env %s)\n", s.name, s.kind, s.help, def, s.env)
	}
}

// usageError is a mistake in the flags or environment: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// rawValue is a setting's text and where it came from, for error messages
// that name what to fix.
type rawValue struct {
	text   string
	source string // "--rate", "WAITROOM_RATE" or "default of --rate"
	given  bool   // by flag or environment, not the default
}

func (v rawValue) fail(why string) error {
	return usageErrorf("%s=%q: %s", v.source, withoutPassword(v.text), why)
}

// withoutPassword hides the password of a URL-shaped value, so an error
// about --redis-url or --database-url never prints a credential. A value
// that does not parse is cut at its last '@' for the same reason.
func withoutPassword(text string) string {
	if !strings.Contains(text, "@") {
		return text
	}
	if u, err := url.Parse(text); err == nil && u.User != nil {
		return u.Redacted()
	}
	return "…" + text[strings.LastIndex(text, "@"):]
}

// boolFlag lets a bool setting be given as --json as well as --json=false,
// while keeping its text for parseBool like every other setting.
type boolFlag struct{ text *string }

func (b boolFlag) String() string     { return "" }
func (b boolFlag) Set(s string) error { *b.text = s; return nil }
func (b boolFlag) IsBoolFlag() bool   { return true }

// readSettings gives each setting its text: a flag wins over its
// environment variable, which wins over the default (serve's rule).
// It is hand-written on purpose: peterbourgon/ff v4 derives every variable
// from one prefix (REDIS_URL and WAITROOM_LOADTEST_* cannot both stay) and
// alecthomas/kong reads the process environment and prints its own help,
// so neither keeps getenv injectable for tests, --help's text, or the
// errors that name the flag or variable at fault.
func readSettings(name string, settings []setting, args []string, getenv func(string) string) (map[string]rawValue, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	flags := make(map[string]*string, len(settings))
	for _, s := range settings {
		if s.kind == "bool" {
			v := new(string)
			fs.Var(boolFlag{v}, s.name, s.help)
			flags[s.name] = v
			continue
		}
		flags[s.name] = fs.String(s.name, "", s.help)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{err}
	}
	if fs.NArg() > 0 {
		return nil, usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	onCommandLine := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	raw := make(map[string]rawValue, len(settings))
	for _, s := range settings {
		switch env := getenv(s.env); {
		case onCommandLine[s.name]:
			raw[s.name] = rawValue{*flags[s.name], "--" + s.name, true}
		case env != "":
			raw[s.name] = rawValue{env, s.env, true}
		default:
			raw[s.name] = rawValue{s.def, "default of --" + s.name, false}
		}
	}
	return raw, nil
}

// parseServe reads serve's settings: a flag wins over its environment
// variable, which wins over the default. Every value is checked; a bad one
// is an error naming the flag or variable, never a silent default.
func parseServe(args []string, getenv func(string) string) (instance.Config, error) {
	raw, err := readSettings("serve", serveSettings, args, getenv)
	if err != nil {
		return instance.Config{}, err
	}
	return buildServeConfig(raw)
}

func buildServeConfig(raw map[string]rawValue) (instance.Config, error) {
	c := instance.Config{
		Addr:        raw["addr"].text,
		RedisURL:    raw["redis-url"].text,
		RedisPrefix: raw["redis-prefix"].text,
	}
	var errs []error
	check := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}

	if c.Addr == "" {
		check(raw["addr"].fail("an address to listen on is required"))
	}
	if c.RedisURL != "" {
		if err := redisstore.CheckURL(c.RedisURL); err != nil {
			check(raw["redis-url"].fail(err.Error()))
		}
	}
	if c.RedisPrefix == "" || strings.ContainsAny(c.RedisPrefix, "{} \t\r\n") {
		check(raw["redis-prefix"].fail("must be non-empty, without braces or spaces"))
	}

	// Pool, service time and margin are checked even when --rate is given:
	// a bad value is a mistake to report, not one to ignore.
	capacityErrs := len(errs)
	dbPool, err := parseInt(raw["db-pool"], 1, instance.MaxDBPool)
	check(err)
	c.DBPool = dbPool
	pool := dbPool
	if raw["pool"].text != "" {
		pool, err = parseInt(raw["pool"], 1, math.MaxInt32)
		check(err)
	}
	serviceTime, err := parseDuration(raw["service-time"], time.Millisecond, time.Hour)
	check(err)
	margin, err := parseFloat(raw["margin"])
	check(err)
	if err == nil && (margin <= 0 || margin > 1) {
		check(raw["margin"].fail("must be in (0, 1]"))
	}
	capacityOK := len(errs) == capacityErrs
	c.Pool, c.Margin = pool, margin
	autoRate, err := strconv.ParseBool(strings.TrimSpace(raw["auto-rate"].text))
	if err != nil {
		check(raw["auto-rate"].fail("must be true or false"))
	}
	c.AutoRate = autoRate
	if autoRate && raw["rate"].given {
		check(usageErrorf("--auto-rate measures the rate; it cannot go with --rate"))
	}
	// The room's settings are read here and checked by RoomConfig.Validate,
	// their one set of rules; its errors are told by flag name.
	roomErrs := len(errs)
	switch r := raw["rate"]; {
	case r.given:
		rate, err := parseFloat(r)
		check(err)
		c.Room.Rate = rate
	case capacityOK:
		rate, err := waitroom.RateFromCapacity(pool, serviceTime, margin)
		switch {
		case err != nil:
			check(usageErrorf("deriving the rate from --pool, --service-time and --margin: %s", waitroom.ErrorMessage(err)))
		case rate > waitroom.MaxRate:
			check(usageErrorf("--pool / --service-time × --margin gives %g users/s, above the most, %g; set --rate", rate, waitroom.MaxRate))
		}
		c.Room.Rate, c.RateDerived = rate, true
	}

	c.Room.Slice, err = readDuration(raw["slice"])
	check(err)
	c.Room.MaxQueue, err = readInt(raw["max-queue"])
	check(err)
	c.Room.TokenTTL, err = readDuration(raw["token-ttl"])
	check(err)
	c.Room.Lease, err = readDuration(raw["lease"])
	check(err)
	c.Room.MaxActive, err = readInt(raw["max-active"])
	check(err)
	c.Room.Stock, err = readInt(raw["stock"])
	check(err)
	c.Room.OneOrderPerUser, err = strconv.ParseBool(strings.TrimSpace(raw["one-order-per-user"].text))
	if err != nil {
		check(raw["one-order-per-user"].fail("must be true or false"))
	}
	c.Room.InviteOnly, err = strconv.ParseBool(strings.TrimSpace(raw["invite-only"].text))
	if err != nil {
		check(raw["invite-only"].fail("must be true or false"))
	}
	c.Room.AbandonAfter, err = readDuration(raw["abandon-after"])
	check(err)
	c.Room.FirstUseWithin, err = readDuration(raw["first-use-within"])
	check(err)
	for _, f := range []struct {
		name string
		into *time.Time
	}{{"opens-at", &c.Room.OpensAt}, {"closes-at", &c.Room.ClosesAt}} {
		if text := strings.TrimSpace(raw[f.name].text); text != "" {
			t, err := time.Parse(time.RFC3339, text)
			if err != nil {
				check(raw[f.name].fail("must be an RFC 3339 time such as 2026-03-01T10:00:00+09:00"))
			}
			*f.into = t
		}
	}
	switch order := strings.TrimSpace(raw["prequeue-order"].text); order {
	case "random": // the zero value
	case "fifo":
		c.Room.PrequeueOrder = waitroom.PrequeueFIFO
	default:
		check(raw["prequeue-order"].fail("must be random or fifo"))
	}
	c.Room.State = waitroom.RoomOpen
	if len(errs) == roomErrs && (c.Room.Rate != 0 || raw["rate"].given) {
		for _, err := range settingFlagErrors(raw, c.Room.Validate()) {
			check(err)
		}
	}

	if u := raw["upstream"]; u.text != "" {
		target, err := url.Parse(u.text)
		switch {
		case err != nil:
			check(u.fail(err.Error()))
		case target.Scheme != "http" && target.Scheme != "https", target.Host == "":
			check(u.fail("must be an absolute http:// or https:// URL"))
		default:
			c.Upstream = target
		}
	}

	// The response timeout stays below the server's write timeout, so the
	// gate, not the connection, decides an upstream that is too slow.
	c.UpstreamTimeout, err = parseDuration(raw["upstream-timeout"], 100*time.Millisecond, instance.MaxUpstreamTimeout)
	check(err)
	c.UpstreamDialTimeout, err = parseDuration(raw["upstream-dial-timeout"], 10*time.Millisecond, time.Minute)
	check(err)
	maxBody, err := parseInt(raw["upstream-max-body"], 1<<10, 1<<30)
	check(err)
	c.UpstreamMaxBody = int64(maxBody)

	c.DatabaseURL = raw["database-url"].text
	if c.DatabaseURL != "" {
		if u, err := url.Parse(c.DatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			check(raw["database-url"].fail("must be a postgres:// URL"))
		}
	}
	c.AMQPURL = raw["amqp-url"].text
	if c.AMQPURL != "" {
		if u, err := url.Parse(c.AMQPURL); err != nil || (u.Scheme != "amqp" && u.Scheme != "amqps") || u.Host == "" {
			check(raw["amqp-url"].fail("must be an amqp:// or amqps:// URL"))
		}
	}
	products, err := parseProducts(raw["products"])
	check(err)
	c.Products = products
	c.PageProduct = strings.TrimSpace(raw["page-product"].text)
	if c.PageProduct == "" && len(products) > 0 {
		c.PageProduct = products[0].ID
	}
	if c.Upstream != nil && (c.DatabaseURL != "" || c.AMQPURL != "" || len(c.Products) > 0) {
		check(usageErrorf("--upstream guards another order API: --database-url, --amqp-url and --products configure the built-in shop and cannot go with it"))
	}

	for _, p := range splitList(raw["gated-routes"].text) {
		if err := checkPattern(p); err != nil {
			check(raw["gated-routes"].fail(fmt.Sprintf("route %q: %v", p, err)))
		}
		c.GatedRoutes = append(c.GatedRoutes, p)
	}
	if len(c.GatedRoutes) == 0 {
		check(raw["gated-routes"].fail("at least one route is required"))
	}

	c.UserHeader = raw["user-header"].text
	if !validHeaderName(c.UserHeader) {
		check(raw["user-header"].fail("not a valid header name"))
	}
	if secret := raw["cookie-secret"]; secret.text != "" {
		if len(secret.text) < server.MinCookieSecret {
			// Name the source, never echo the secret.
			check(usageErrorf("%s: must be at least %d bytes, got %d", secret.source, server.MinCookieSecret, len(secret.text)))
		}
		c.CookieSecret = []byte(secret.text)
	}

	c.Rooms = []string{server.DefaultRoom}
	for _, room := range splitList(raw["rooms"].text) {
		if !waitroom.ValidRoomName(room) {
			check(raw["rooms"].fail(fmt.Sprintf("room %q: names are 1–64 characters of a–z, 0–9, '-' and '_'", room)))
			continue
		}
		if !slices.Contains(c.Rooms, room) {
			c.Rooms = append(c.Rooms, room)
		}
	}

	policy, err := server.ParseFailurePolicy(raw["failure-policy"].text)
	if err != nil {
		check(raw["failure-policy"].fail(err.Error()))
	}
	share, err := parseFloat(raw["open-share"])
	check(err)
	if err == nil && (share <= 0 || share > 1) {
		check(raw["open-share"].fail("must be in (0, 1]"))
	}
	instances, err := parseInt(raw["instances"], 1, 10_000)
	check(err)
	policy.OpenShare, policy.Instances = share, instances
	// Until the store has told this instance a room's live rate, the
	// declared one bounds the open policy.
	policy.SeedRate = c.Room.Rate
	c.FailurePolicy = policy
	c.StoreTimeout, err = parseDuration(raw["store-timeout"], 10*time.Millisecond, time.Minute)
	check(err)

	if t := strings.TrimSpace(raw["trusted-proxies"].text); t == "none" {
		c.TrustedProxies = []netip.Prefix{}
	} else {
		for _, part := range splitList(t) {
			p, err := netip.ParsePrefix(part)
			if err != nil {
				if a, aerr := netip.ParseAddr(part); aerr == nil {
					p, err = netip.PrefixFrom(a, a.BitLen()), nil
				}
			}
			if err != nil {
				check(raw["trusted-proxies"].fail(fmt.Sprintf("%q is not a network (CIDR such as 10.0.0.0/8) or address", part)))
				continue
			}
			c.TrustedProxies = append(c.TrustedProxies, p.Masked())
		}
		if c.TrustedProxies == nil {
			c.TrustedProxies = []netip.Prefix{} // given empty: nobody
		}
	}
	for _, lim := range []struct {
		name string
		dst  *float64
	}{{"user-rate-limit", &c.UserRateLimit}, {"visitor-rate-limit", &c.VisitorRateLimit}} {
		v, err := parseFloat(raw[lim.name])
		check(err)
		if err == nil && (v < 0 || v > 1_000_000) {
			check(raw[lim.name].fail("must be in [0, 1000000] per second"))
		}
		*lim.dst = v
	}
	c.CookieSecure, err = strconv.ParseBool(strings.TrimSpace(raw["cookie-secure"].text))
	if err != nil {
		check(raw["cookie-secure"].fail("must be true or false"))
	}
	switch jc := strings.TrimSpace(raw["join-challenge"].text); jc {
	case "off", "0":
	case "on":
		c.JoinChallenge = server.DefaultJoinDifficulty
	default:
		c.JoinChallenge, err = parseInt(raw["join-challenge"], 1, server.MaxJoinDifficulty)
		check(err)
	}

	c.MetricsAddr = strings.TrimSpace(raw["metrics-addr"].text)
	if c.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			check(raw["metrics-addr"].fail("must be host:port"))
		}
	}

	c.LogFormat = raw["log-format"].text
	if c.LogFormat != "text" && c.LogFormat != "json" {
		check(raw["log-format"].fail("must be text or json"))
	}
	if err := c.LogLevel.UnmarshalText([]byte(raw["log-level"].text)); err != nil {
		check(raw["log-level"].fail("must be debug, info, warn or error"))
	}

	if t := raw["admin-token"]; t.text != "" {
		if len(t.text) < minAdminToken || strings.ContainsAny(t.text, " \t\r\n") {
			// Name the source, never echo the token.
			check(usageErrorf("%s: must be at least %d characters without spaces", t.source, minAdminToken))
		}
		c.AdminToken = t.text
	}

	if len(errs) > 0 {
		return instance.Config{}, usageError{errors.Join(errs...)}
	}
	return c, nil
}

// settingFlagErrors names, in each error of RoomConfig.Validate, the flag
// of the setting at fault instead of its admin API name.
func settingFlagErrors(raw map[string]rawValue, err error) []error {
	if err == nil {
		return nil
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	out := make([]error, 0, len(errs))
	for _, err := range errs {
		var se *waitroom.SettingError
		if !errors.As(err, &se) {
			out = append(out, usageError{err})
			continue
		}
		flags := make([]string, len(se.Fields))
		for i, f := range se.Fields {
			flags[i] = strings.ReplaceAll(f, "_", "-")
		}
		if len(flags) == 1 {
			out = append(out, raw[flags[0]].fail(se.Reason))
			continue
		}
		out = append(out, usageErrorf("--%s together: %s", strings.Join(flags, " and --"), se.Reason))
	}
	return out
}

// readInt and readDuration read a room setting; its range is
// RoomConfig.Validate's to check.
func readInt(v rawValue) (int, error) {
	return parseInt(v, math.MinInt, math.MaxInt)
}

func readDuration(v rawValue) (time.Duration, error) {
	return parseDuration(v, math.MinInt64, math.MaxInt64)
}

func parseInt(v rawValue, lo, hi int) (int, error) {
	return parseIn(v, strconv.Atoi, "not a whole number", lo, hi)
}

func parseFloat(v rawValue) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v.text), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, v.fail("not a number")
	}
	return f, nil
}

func parseDuration(v rawValue, lo, hi time.Duration) (time.Duration, error) {
	return parseIn(v, time.ParseDuration, "not a duration (such as 200ms, 30s, 5m)", lo, hi)
}

// parseIn reads v with parse, which failing is the mistake what names,
// and checks the value is in [lo, hi].
func parseIn[T int | time.Duration](v rawValue, parse func(string) (T, error), what string, lo, hi T) (T, error) {
	x, err := parse(strings.TrimSpace(v.text))
	if err != nil {
		return 0, v.fail(what)
	}
	if x < lo || x > hi {
		return 0, v.fail(fmt.Sprintf("must be in [%v, %v]", lo, hi))
	}
	return x, nil
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// checkPattern reports whether ServeMux accepts p, turning its panic into
// an error.
func checkPattern(p string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	http.NewServeMux().Handle(p, http.NotFoundHandler())
	return nil
}

// validHeaderName reports whether s is an HTTP field name (RFC 9110 token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
