package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/instance"
	"github.com/waitroom/waitroom/internal/flagenv"
	"github.com/waitroom/waitroom/redisstore"
	"github.com/waitroom/waitroom/server"
	"github.com/waitroom/waitroom/shop"
	"github.com/waitroom/waitroom/webhook"
)

// serveFlags is what serve's settings are read into: the instance's
// Config and what the rate is derived from.
type serveFlags struct {
	instance.Config
	serviceTime   time.Duration
	webhookSecret string
}

// serveSettings are serve's settings, read into f. Those of the failure
// policy come after --failure-policy, which they refine.
func serveSettings(f *serveFlags) []flagenv.Setting {
	c := &f.Config
	return []flagenv.Setting{
		flagenv.Var("addr", "WAITROOM_ADDR", "127.0.0.1:8080", "host:port", "address to listen on; port 0 picks a free one", flagenv.Text(&c.Addr)),
		flagenv.Var("redis-url", "REDIS_URL", "", "url", "Redis that keeps the rooms: redis://host:port/db (also rediss://, unix://), redis+sentinel://s1:26379,s2:26379,s3:26379/MASTER, or redis+cluster://h1:6379,h2:6379,h3:6379; empty: in this process only, not durable, one instance", flagenv.Checked(&c.RedisURL, flagenv.OrEmpty(redisstore.CheckURL))),
		flagenv.Var("redis-prefix", "WAITROOM_REDIS_PREFIX", "wr", "prefix", "start of every Redis key; waiting rooms with different prefixes share nothing", flagenv.Text(&c.RedisPrefix)),
		flagenv.Var("rate", "WAITROOM_RATE", "", "users/s", "admission rate; empty: derived as pool / service-time × margin", nil),
		flagenv.Var("pool", "WAITROOM_POOL", "", "n", "database connections of the protected order API; empty: --db-pool", flagenv.Optional(flagenv.IntIn(&c.Pool, 1, math.MaxInt32))),
		flagenv.Var("service-time", "WAITROOM_SERVICE_TIME", "200ms", "duration", "how long one order holds a connection", flagenv.DurationIn(&f.serviceTime, time.Millisecond, time.Hour)),
		flagenv.Var("margin", "WAITROOM_MARGIN", "0.7", "fraction", "share of the capacity to use, in (0, 1]", flagenv.FloatIn(&c.Margin, 0, 1, true, "")),
		flagenv.Var("auto-rate", "WAITROOM_AUTO_RATE", "false", "bool", "keep the default room's rate at pool ÷ measured order time × margin, starting from --service-time", flagenv.Bool(&c.AutoRate)),
		flagenv.Var("slice", "WAITROOM_SLICE", "100ms", "duration", "admission tick; each tick admits one slice's share of the rate", flagenv.DurationIn(&c.Room.Slice, math.MinInt64, math.MaxInt64)),
		flagenv.Var("max-queue", "WAITROOM_MAX_QUEUE", "100000", "n", "longest queue; further entries get 429 QUEUE_FULL", flagenv.IntIn(&c.Room.MaxQueue, math.MinInt, math.MaxInt)),
		flagenv.Var("token-ttl", "WAITROOM_TOKEN_TTL", "300s", "duration", "how long an entry token lives", flagenv.DurationIn(&c.Room.TokenTTL, math.MinInt64, math.MaxInt64)),
		flagenv.Var("lease", "WAITROOM_LEASE", "30s", "duration", "how long an order may hold a token unrenewed; a lapsed hold is usable again after the "+waitroom.SettleWindow.String()+" settle window, in which its gate may still settle it", flagenv.DurationIn(&c.Room.Lease, math.MinInt64, math.MaxInt64)),
		flagenv.Var("max-active", "WAITROOM_MAX_ACTIVE", "0", "n", "most live entry tokens at once, at most 100000000; 0: no cap", flagenv.IntIn(&c.Room.MaxActive, math.MinInt, math.MaxInt)),
		flagenv.Var("shards", "WAITROOM_SHARDS", "1", "n", "Redis Cluster shards the default room is spread over, 1 to 16; more than 1 needs a redis+cluster:// store", flagenv.IntIn(&c.Room.Shards, math.MinInt, math.MaxInt)),
		flagenv.Var("one-order-per-user", "WAITROOM_ONE_ORDER_PER_USER", "false", "bool", "a buyer whose order completed in the default room cannot enter it again (409 ALREADY_ORDERED), and the gate keys orders by buyer, so the order API refuses a second one even after a lossy Redis failover", flagenv.Bool(&c.Room.OneOrderPerUser)),
		flagenv.Var("invite-only", "WAITROOM_INVITE_ONLY", "false", "bool", "the default room lets in pass holders only (waitroom admin passes create); others get 403 INVITE_ONLY", flagenv.Bool(&c.Room.InviteOnly)),
		flagenv.Var("opens-at", "WAITROOM_OPENS_AT", "", "time", "RFC 3339 opening of the default room; before it users are told \"scheduled\" and get places 1..N at the opening by --prequeue-order; empty: open at once", flagenv.Time(&c.Room.OpensAt)),
		flagenv.Var("prequeue-order", "WAITROOM_PREQUEUE_ORDER", "random", "random|fifo", "how the early arrivals are placed at the opening: random (a draw whose commitment GET /rooms/{room}/draw publishes before and whose seed it reveals after) or fifo (arrival order)", prequeueOrder(&c.Room.PrequeueOrder)),
		flagenv.Var("closes-at", "WAITROOM_CLOSES_AT", "", "time", "RFC 3339 time from which new entries get ROOM_CLOSED; empty: never", flagenv.Time(&c.Room.ClosesAt)),
		flagenv.Var("shop-url", "WAITROOM_SHOP_URL", "", "url", "absolute http(s) URL of the shop the waiting page sends an admitted buyer on to, and back to after the order; empty: no link", flagenv.Checked(&c.Room.ShopURL, waitroom.CheckShopURL)),
		flagenv.Var("shop-name", "WAITROOM_SHOP_NAME", "", "text", "who sells in the default room, as its waiting page names it (at most 200 bytes, one line); empty: the page names no shop", flagenv.Checked(&c.Room.ShopName, waitroom.CheckName)),
		flagenv.Var("product-name", "WAITROOM_PRODUCT_NAME", "", "text", "what the default room sells, as its waiting page names it (at most 200 bytes, one line); empty: none", flagenv.Checked(&c.Room.ProductName, waitroom.CheckName)),
		flagenv.Var("stock", "WAITROOM_STOCK", "0", "n", "units the default room sells in all; a live entry token reserves --units-per-order of them, so nobody is admitted to find nothing; 0: not tracked", flagenv.IntIn(&c.Room.Stock, math.MinInt, math.MaxInt)),
		flagenv.Var("units-per-order", "WAITROOM_UNITS_PER_ORDER", "1", "n", "units one entry token reserves of --stock and one order may buy, at most 1000 and at most --stock; the gate tells the order API in the Waitroom-Units header, and the built-in shop refuses a larger quantity with 422 QUANTITY_OVER_LIMIT", flagenv.IntIn(&c.Room.UnitsPerOrder, math.MinInt, math.MaxInt)),
		flagenv.Var("abandon-after", "WAITROOM_ABANDON_AFTER", "5m", "duration", "a waiting user silent (no enter, no status) this long has left: skipped at the head, counted abandoned", flagenv.DurationIn(&c.Room.AbandonAfter, math.MinInt64, math.MaxInt64)),
		flagenv.Var("first-use-within", "WAITROOM_FIRST_USE_WITHIN", "60s", "duration", "an admitted user must confirm (one status call after the one that told it) or order this soon, else its token expires as a no-show and frees its slot; at most --token-ttl, which it follows when shorter unless given", flagenv.DurationIn(&c.Room.FirstUseWithin, math.MinInt64, math.MaxInt64)),
		flagenv.Var("notified-first-use-within", "WAITROOM_NOTIFIED_FIRST_USE_WITHIN", "5m", "duration", "a buyer who asked to be told of its turn (--smtp-url, --vapid-key-file) has this long from the notice to come back, instead of --first-use-within; at most --token-ttl, which it follows when shorter unless given", flagenv.DurationIn(&c.Room.NotifiedFirstUseWithin, math.MinInt64, math.MaxInt64)),
		flagenv.Var("upstream", "WAITROOM_UPSTREAM", "", "url", "order API the gate guards; empty: the built-in reference shop", flagenv.HTTPURL(&c.Upstream)),
		flagenv.Var("upstream-timeout", "WAITROOM_UPSTREAM_TIMEOUT", "25s", "duration", "longest wait for the upstream's answer to an order; then 502 and the token is released", flagenv.DurationIn(&c.UpstreamTimeout, 100*time.Millisecond, instance.MaxUpstreamTimeout)),
		flagenv.Var("upstream-dial-timeout", "WAITROOM_UPSTREAM_DIAL_TIMEOUT", "5s", "duration", "longest wait to connect to the upstream", flagenv.DurationIn(&c.UpstreamDialTimeout, 10*time.Millisecond, time.Minute)),
		flagenv.Var("upstream-max-body", "WAITROOM_UPSTREAM_MAX_BODY", "1048576", "bytes", "largest answer body the upstream may send through the gate", flagenv.IntIn(&c.UpstreamMaxBody, 1<<10, 1<<30)),
		flagenv.Var("shop-addr", "WAITROOM_SHOP_ADDR", "", "host:port", "also serve the built-in shop's POST /orders on this listener, for a proxy with forward auth in front (deploy/nginx, deploy/caddy, deploy/traefik); each order settles its hold through POST /gate/settle; needs --settle-secret; empty: none", flagenv.HostPort(&c.ShopAddr)),
		flagenv.Var("database-url", "DATABASE_URL", "", "url", "PostgreSQL of the built-in shop (postgres://…); empty: in this process only, not durable", flagenv.Checked(&c.DatabaseURL, flagenv.OrEmpty(flagenv.URLOf("must be a postgres:// URL", false, "postgres", "postgresql")))),
		flagenv.Var("db-pool", "WAITROOM_DB_POOL", "40", "n", "connection pool maximum of the built-in shop; also the default of --pool", flagenv.IntIn(&c.DBPool, 1, instance.MaxDBPool)),
		flagenv.Var("amqp-url", "AMQP_URL", "", "url", "RabbitMQ that receives the built-in shop's order events (amqp://…); empty: events wait in the outbox", flagenv.Checked(&c.AMQPURL, flagenv.OrEmpty(flagenv.URLOf("must be an amqp:// or amqps:// URL", true, "amqp", "amqps")))),
		flagenv.Var("products", "WAITROOM_PRODUCTS", "", "id:stock,…", "products the built-in shop creates at start unless they exist, e.g. drop:1000", flagenv.Func(func(s string) (err error) { c.Products, err = shop.ParseProducts(s); return err })),
		flagenv.Var("gated-routes", "WAITROOM_GATED_ROUTES", "POST /orders", "patterns", "comma-separated routes (Go ServeMux patterns) that need an entry token", flagenv.List(&c.GatedRoutes)),
		flagenv.Var("user-header", "WAITROOM_USER_HEADER", waitroom.DefaultUserHeader, "name", "request header with the user id, set by the shop's auth layer", flagenv.Text(&c.UserHeader)),
		flagenv.Var("cookie-secret", "WAITROOM_COOKIE_SECRET", "", "secret", "key of at least 32 bytes that signs the waiting page's visitor cookies; give every instance the same one; empty: a random one per start, so visitors lose their place on a restart", flagenv.Secret(&c.CookieSecret)),
		flagenv.Var("settle-secret", "WAITROOM_SETTLE_SECRET", "", "secret", "bearer secret of at least 32 bytes with which the shop settles a forward-auth hold (POST /gate/settle); empty: forward auth (/gate/auth) is off", flagenv.Secret(&c.SettleSecret)),
		flagenv.Var("token-cookie-domain", "WAITROOM_TOKEN_COOKIE_DOMAIN", "", "domain", "the shop's domain, for which the waiting page sets the entry token as the waitroom_token cookie (HttpOnly, Secure, SameSite=Lax) that /gate/auth reads; empty: no cookie", flagenv.Trimmed(&c.TokenCookieDomain)),
		flagenv.Var("page-product", "WAITROOM_PAGE_PRODUCT", "", "id", "product the waiting page's order button orders; empty: the first of --products", flagenv.Trimmed(&c.PageProduct)),
		flagenv.Var("page-dir", "WAITROOM_PAGE_DIR", "", "dir", "the shop's brand on the waiting page: logo.svg or logo.png, theme.css, messages/LANG.json, page.html (OPERATIONS.md, \"Branding the page\"); checked at start, a bad file refuses to start; empty: the built-in page", flagenv.Trimmed(&c.PageDir)),
		flagenv.Var("rooms", "WAITROOM_ROOMS", "", "names", "comma-separated rooms to declare at start besides "+server.DefaultRoom, flagenv.Func(f.rooms)),
		flagenv.Var("failure-policy", "WAITROOM_FAILURE_POLICY", "closed", "policy", "what the gate does while Redis is unreachable: closed (refuse, 503) or open (let a bounded share of the rate through); per room as default=open,sale=closed", flagenv.Func(func(s string) (err error) { c.FailurePolicy, err = server.ParseFailurePolicy(s); return err })),
		flagenv.Var("open-share", "WAITROOM_OPEN_SHARE", "0.5", "fraction", "failing open, the share of a room's last known rate that the instances together let through, in (0, 1]", flagenv.FloatIn(&c.FailurePolicy.OpenShare, 0, 1, true, "")),
		flagenv.Var("instances", "WAITROOM_INSTANCES", "1", "n", "how many instances serve the rooms; failing open, each lets through its 1/n of the share, and with Redis each answers its 1/n of --user-rate-limit and --visitor-rate-limit without asking Redis", flagenv.IntIn(&c.FailurePolicy.Instances, 1, 10_000)),
		flagenv.Var("store-timeout", "WAITROOM_STORE_TIMEOUT", "1s", "duration", "longest wait for Redis per request before answering by the failure policy", flagenv.DurationIn(&c.StoreTimeout, 10*time.Millisecond, time.Minute)),
		flagenv.Var("trusted-proxies", "WAITROOM_TRUSTED_PROXIES", "127.0.0.0/8,::1/128", "CIDRs", "comma-separated networks of the proxies in front (the shop's auth layer, the load balancer): only from them is the user header believed and an X-Forwarded-For hop counted; none: nobody", flagenv.Networks(&c.TrustedProxies)),
		flagenv.Var("user-rate-limit", "WAITROOM_USER_RATE_LIMIT", "5", "requests/s", "most queue requests (enter, status, leave, page) per second per user, bursts of twice that; beyond it 429 RATE_LIMITED, the place is kept; 0: off", flagenv.FloatIn(&c.UserRateLimit, 0, 1_000_000, false, " per second")),
		flagenv.Var("visitor-rate-limit", "WAITROOM_VISITOR_RATE_LIMIT", "50", "visitors/s", "most new visitors (cookies) per second per client address (an IPv4 address, an IPv6 /64), bursts of twice that (at least 1); beyond it 429 RATE_LIMITED; 0: off", flagenv.FloatIn(&c.VisitorRateLimit, 0, 1_000_000, false, " per second")),
		flagenv.Var("cookie-secure", "WAITROOM_COOKIE_SECURE", "false", "bool", "mark the visitor cookie Secure also on plain HTTP, when TLS ends at a proxy in front", flagenv.Bool(&c.CookieSecure)),
		flagenv.Var("join-challenge", "WAITROOM_JOIN_CHALLENGE", "off", "off|on|bits", fmt.Sprintf("proof of work before a new place: the page solves a SHA-256 puzzle of this many leading zero bits, API clients get it in a 428 answer; on: %d bits; at most %d", server.DefaultJoinDifficulty, server.MaxJoinDifficulty), flagenv.Func(f.joinChallenge)),
		flagenv.Var("metrics-addr", "WAITROOM_METRICS_ADDR", "", "host:port", "serve /metrics on this listener of its own (for the scraper, not the crowd); empty: /metrics is on --addr behind --admin-token, and not served without one", flagenv.HostPort(&c.MetricsAddr)),
		flagenv.Var("admin-addr", "WAITROOM_ADMIN_ADDR", "", "host:port", "serve the admin API and the dashboard (and /metrics behind --admin-token) only on this listener of its own, for the operator's network; --addr answers 404 for them; needs --admin-token; empty: they are on --addr", flagenv.HostPort(&c.AdminAddr)),
		flagenv.Var("tls-cert", "WAITROOM_TLS_CERT", "", "file", "PEM certificate (with its chain) to serve TLS and HTTP/2 with on every listener, where no proxy in front ends TLS; needs --tls-key; taken again within seconds when the file changes; empty: plain HTTP", flagenv.Trimmed(&c.TLSCert)),
		flagenv.Var("tls-key", "WAITROOM_TLS_KEY", "", "file", "PEM private key of --tls-cert; needs --tls-cert", flagenv.Trimmed(&c.TLSKey)),
		flagenv.Var("log-format", "WAITROOM_LOG_FORMAT", "text", "text|json", "log format", flagenv.OneOf(&c.LogFormat, "must be text or json", "text", "json")),
		flagenv.Var("log-level", "WAITROOM_LOG_LEVEL", "info", "level", "debug, info, warn or error; debug logs every request", flagenv.Level(&c.LogLevel)),
		flagenv.Var("public-url", "WAITROOM_PUBLIC_URL", "", "url", "where buyers reach the waiting room (https://queue.shop.example): the notices' return links lead there; needed by --smtp-url and --vapid-key-file", flagenv.HTTPURL(&c.PublicURL)),
		flagenv.Var("smtp-url", "WAITROOM_SMTP_URL", "", "url", "SMTP server that emails buyers who asked to be told of their turn: smtp://[user:password@]host[:port] (STARTTLS when offered) or smtps://…; needs --mail-from and --public-url; empty: no email", flagenv.Secret(&c.SMTPURL)),
		flagenv.Var("mail-from", "WAITROOM_MAIL_FROM", "", "address", "From address of the notices (queue@shop.example)", flagenv.Trimmed(&c.MailFrom)),
		flagenv.Var("vapid-key-file", "WAITROOM_VAPID_KEY_FILE", "", "file", "Web Push (VAPID) key pair of the notices, JSON, created if absent; give every instance the same file; needs --public-url; empty: no Web Push", flagenv.Trimmed(&c.VAPIDKeyFile)),
		flagenv.Var("admin-token", "WAITROOM_ADMIN_TOKEN", "", "token", fmt.Sprintf("bearer token of the operator API under /admin/ ('waitroom admin'), at least %d characters; empty: the admin API is off", instance.MinAdminToken), flagenv.Secret(&c.AdminToken)),
		flagenv.Var("webhook-url", "WAITROOM_WEBHOOK_URL", "", "url", "absolute http(s) URL that gets every room's events as signed webhooks (Standard Webhooks); the admin API adds endpoints per room and event; empty: none but the admin API's", flagenv.Checked(&c.WebhookURL, flagenv.OrEmpty(webhook.CheckURL))),
		flagenv.Var("webhook-secret", "WAITROOM_WEBHOOK_SECRET", "", "whsec_…", "signing secret of --webhook-url, whsec_ and 24 to 64 bytes in base64 (the receiver's); during a rotation new,old: both sign", flagenv.Secret(&f.webhookSecret)),
	}
}

func printServeUsage(w io.Writer) {
	flagenv.PrintUsage(w, "Usage: waitroom serve [flags]\n\nRuns the waiting room: the HTTP API and the admission ticker.\nEvery flag may instead be set by its environment variable; a flag wins.", serveSettings(new(serveFlags)))
}

// parseServe reads serve's settings: a flag wins over its environment
// variable, which wins over the default. Every value is checked; a bad one
// is an error naming the flag or variable, never a silent default.
func parseServe(args []string, getenv func(string) string) (instance.Config, error) {
	var f serveFlags
	v, err := flagenv.Read("serve", serveSettings(&f), args, getenv)
	if err != nil {
		return instance.Config{}, err
	}
	c, raw := &f.Config, v.Raw
	if c.Addr == "" {
		v.Fail("addr", "an address to listen on is required")
	}
	if raw["pool"].Text == "" {
		c.Pool = c.DBPool
	}
	if f.webhookSecret != "" {
		c.WebhookSecrets = flagenv.SplitList(f.webhookSecret)
	}
	if c.AutoRate && raw["rate"].Given {
		v.Check(flagenv.Errorf("--auto-rate measures the rate; it cannot go with --rate"))
	}
	// The room's settings are read by the table and checked by
	// RoomConfig.Validate, their one set of rules; its errors are told by
	// flag name. Pool, service time and margin are checked even when
	// --rate is given: a bad value is a mistake to report, not one to ignore.
	rateOK := true
	switch r := raw["rate"]; {
	case r.Given:
		if err := flagenv.FloatIn(&c.Room.Rate, math.Inf(-1), math.Inf(1), false, "").Set(r.Text); err != nil {
			v.Fail("rate", err.Error())
		}
	case v.Failed("db-pool") || v.Failed("pool") || v.Failed("service-time") || v.Failed("margin"):
		rateOK = false
	default:
		rate, err := waitroom.RateFromCapacity(c.Pool, f.serviceTime, c.Margin)
		switch {
		case err != nil:
			v.Check(flagenv.Errorf("deriving the rate from --pool, --service-time and --margin: %s", waitroom.ErrorMessage(err)))
			rateOK = false
		case rate > waitroom.MaxRate:
			v.Check(flagenv.Errorf("--pool / --service-time × --margin gives %g users/s, above the most, %g; set --rate", rate, waitroom.MaxRate))
			rateOK = false
		}
		c.Room.Rate, c.RateDerived = rate, true
	}
	c.Room.State = waitroom.RoomOpen
	// The first-use deadline's default follows a shorter token TTL (as
	// RoomConfig.WithDefaults does); only a value given is held to it.
	if !raw["first-use-within"].Given && !v.Failed("token-ttl") && c.Room.TokenTTL >= waitroom.MinFirstUseWithin {
		c.Room.FirstUseWithin = min(c.Room.FirstUseWithin, c.Room.TokenTTL)
	}
	if !raw["notified-first-use-within"].Given && !v.Failed("token-ttl") && c.Room.TokenTTL >= waitroom.MinFirstUseWithin {
		c.Room.NotifiedFirstUseWithin = min(c.Room.NotifiedFirstUseWithin, c.Room.TokenTTL)
	}
	if rateOK {
		v.SettingErrors(c.Room.Validate())
	}

	if c.PageProduct == "" && len(c.Products) > 0 {
		c.PageProduct = c.Products[0].ID
	}
	if c.Upstream != nil && (c.DatabaseURL != "" || c.AMQPURL != "" || len(c.Products) > 0) {
		v.Check(flagenv.Errorf("--upstream guards another order API: --database-url, --amqp-url and --products configure the built-in shop and cannot go with it"))
	}
	// Until the store has told this instance a room's live rate, the
	// declared one bounds the open policy.
	c.FailurePolicy.DeclaredRate = c.Room.Rate
	v.SettingErrors(c.Validate())
	if err := v.Err(); err != nil {
		return instance.Config{}, err
	}
	return *c, nil
}

// serve's settings read by a function of their own.

// rooms reads --rooms: the default room first, then each other once.
func (f *serveFlags) rooms(text string) error {
	f.Rooms = []string{server.DefaultRoom}
	for _, room := range flagenv.SplitList(text) {
		if !slices.Contains(f.Rooms, room) {
			f.Rooms = append(f.Rooms, room)
		}
	}
	return nil
}

// joinChallenge reads --join-challenge: off, on or a number of bits.
func (f *serveFlags) joinChallenge(text string) error {
	switch strings.TrimSpace(text) {
	case "off", "0":
		return nil
	case "on":
		f.JoinChallenge = server.DefaultJoinDifficulty
		return nil
	}
	return flagenv.IntIn(&f.JoinChallenge, 1, server.MaxJoinDifficulty).Set(text)
}

// prequeueOrder keeps --prequeue-order for RoomConfig.Validate to judge;
// random is the zero value.
func prequeueOrder(p *waitroom.PrequeueOrder) flag.Value {
	return flagenv.Func(func(s string) error {
		if s = strings.TrimSpace(s); s != string(waitroom.PrequeueRandom) {
			*p = waitroom.PrequeueOrder(s)
		}
		return nil
	})
}
