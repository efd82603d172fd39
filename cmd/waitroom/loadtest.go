package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/adminclient"
	"github.com/waitroom/waitroom/instance"
	"github.com/waitroom/waitroom/internal/flagenv"
	"github.com/waitroom/waitroom/loadtest"
	"github.com/waitroom/waitroom/server"
	"github.com/waitroom/waitroom/shop"
)

// loadtestSettings are loadtest's settings, read into c. They follow
// serve's rule: flag, then environment variable, then default.
func loadtestSettings(c *loadtestConfig) []flagenv.Setting {
	r := &c.run
	return []flagenv.Setting{
		flagenv.Var("url", "WAITROOM_LOADTEST_URL", "", "url", "the running waiting room to load-test, e.g. http://127.0.0.1:8080", flagenv.Checked(&r.URL, flagenv.OrEmpty(flagenv.URLOf("must be an absolute http:// or https:// URL", true, "http", "https")))),
		flagenv.Var("inproc", "WAITROOM_LOADTEST_INPROC", "false", "", "start the waiting room (server, store, admitter, reference shop) in this process instead of --url", loadtestBool(&c.inproc)),
		flagenv.Var("redis-url", "REDIS_URL", "", "url", "with --inproc: keep the room in this Redis (under a fresh key prefix, deleted afterwards); empty: in-process memstore", nil),
		flagenv.Var("admin-token", "WAITROOM_ADMIN_TOKEN", "", "token", "with --url: the server's admin token; loadtest then reads the room's rate, holds the room paused until everyone has entered (--check-positions) and times admissions from the store's counter", flagenv.Text(&c.adminToken)),
		flagenv.Var("room", "WAITROOM_LOADTEST_ROOM", server.DefaultRoom, "name", "the room to queue in; its tokens must open POST /orders", flagenv.Checked(&r.Room, roomName)),
		flagenv.Var("users", "WAITROOM_LOADTEST_USERS", "100000", "n", "virtual users", flagenv.IntIn(&r.Users, 1, 10_000_000)),
		flagenv.Var("arrival", "WAITROOM_LOADTEST_ARRIVAL", "0s", "duration", "spread the entries evenly over this span; 0: all at once", flagenv.DurationIn(&r.Arrival, 0, 24*time.Hour)),
		flagenv.Var("no-order", "WAITROOM_LOADTEST_NO_ORDER", "0", "share", "share of admitted users who never order, in [0, 1]", flagenv.FloatIn(&r.NoOrderShare, 0, 1, false, "")),
		flagenv.Var("leave", "WAITROOM_LOADTEST_LEAVE", "0", "share", "share of users who leave the queue after their first status answer, in [0, 1]", flagenv.FloatIn(&r.LeaveShare, 0, 1, false, "")),
		flagenv.Var("vanish", "WAITROOM_LOADTEST_VANISH", "0", "share", "share of users who stop polling after their entry answer without leaving (a closed tab), in [0, 1 − leave]", flagenv.FloatIn(&r.VanishShare, 0, 1, false, "")),
		flagenv.Var("abandon-after", "WAITROOM_LOADTEST_ABANDON_AFTER", "5m", "duration", "with --inproc: the room's abandon_after (a waiting user silent this long has left)", flagenv.DurationIn(&c.abandonAfter, waitroom.MinAbandonAfter, waitroom.MaxAbandonAfter)),
		flagenv.Var("first-use-within", "WAITROOM_LOADTEST_FIRST_USE_WITHIN", "60s", "duration", "with --inproc: the room's first_use_within (an unconfirmed token expires then as a no-show)", flagenv.DurationIn(&c.firstUseWithin, waitroom.MinFirstUseWithin, waitroom.MaxTokenTTL)),
		flagenv.Var("rate", "WAITROOM_LOADTEST_RATE", "", "users/s", "with --inproc: the room's admission rate (default 1000); with --url: the rate to compare admissions with (default: the room's, read with --admin-token; else not compared)", flagenv.Optional(flagenv.FloatIn(&r.Rate, 0, waitroom.MaxRate, true, " users/s"))),
		flagenv.Var("tick", "WAITROOM_LOADTEST_TICK", "25ms", "duration", "with --inproc: the admitter's tick (serve ticks four times per slice too); the room's slice is 100 ms, and a faster tick splits its quota finer, leaving room under the per-tick cap to make up late ticks", flagenv.DurationIn(&c.tick, waitroom.MinSlice, waitroom.DefaultSlice)),
		flagenv.Var("store-timeout", "WAITROOM_LOADTEST_STORE_TIMEOUT", "1s", "duration", "with --inproc: the server's longest wait for its store per request before it answers 503 STORE_UNAVAILABLE (serve's --store-timeout); a run on a starved machine may want more", flagenv.DurationIn(&c.storeTimeout, 10*time.Millisecond, time.Minute)),
		flagenv.Var("stock", "WAITROOM_LOADTEST_STOCK", "", "n", "with --inproc: the product's stock (default 1000); with --url: the stock to check orders against (default unknown: not checked)", flagenv.Optional(flagenv.IntIn(&r.Stock, 0, shop.MaxStock))),
		flagenv.Var("room-stock", "WAITROOM_LOADTEST_ROOM_STOCK", "false", "", "with --inproc: the room tracks the product's stock (a live token reserves a unit), so nobody is admitted to find nothing: the report's orders.admitted_without_stock", loadtestBool(&c.roomStock)),
		flagenv.Var("opens-in", "WAITROOM_LOADTEST_OPENS_IN", "", "duration", "the room opens this long after the start (opens_at; with --url it needs --admin-token and a room not yet drawn): everyone arrives before it (--arrival must be shorter), is told scheduled, and gets a place by the opening's draw; the report gives the draw's time", flagenv.Optional(flagenv.DurationIn(&r.OpensIn, time.Second, 24*time.Hour))),
		flagenv.Var("product", "WAITROOM_LOADTEST_PRODUCT", "drop", "id", "the product users order", flagenv.Checked(&r.ProductID, productID)),
		flagenv.Var("concurrency", "WAITROOM_LOADTEST_CONCURRENCY", "256", "n", "requests in flight at most", flagenv.IntIn(&r.Concurrency, 1, 100_000)),
		flagenv.Var("duration", "WAITROOM_LOADTEST_DURATION", "30m", "duration", "bound of the whole run; users still on their way then are unfinished", flagenv.DurationIn(&r.Duration, time.Second, 24*time.Hour)),
		flagenv.Var("check-positions", "WAITROOM_LOADTEST_CHECK_POSITIONS", "false", "", "check that the positions given at entry are exactly 1..N; admissions wait until everyone has entered", loadtestBool(&c.checkPositions)),
		flagenv.Var("json", "WAITROOM_LOADTEST_JSON", "false", "", "print the report as JSON", loadtestBool(&c.jsonOut)),
		flagenv.Var("html", "WAITROOM_LOADTEST_HTML", "", "file", "also write the report as one self-contained HTML page with charts (admissions/s against the rate, queue length, waits, ETA against the wait, outcomes) to this file", flagenv.Trimmed(&c.htmlFile)),
		flagenv.Var("seed", "WAITROOM_LOADTEST_SEED", "1", "n", "picks who leaves and who never orders", flagenv.Uint(&r.Seed)),
		flagenv.Var("allow-remote", "WAITROOM_LOADTEST_ALLOW_REMOTE", "false", "", "allow a --url whose host is not loopback", loadtestBool(&r.AllowNonLoopback)),
	}
}

const loadtestUsage = `Usage: waitroom loadtest (--url URL | --inproc) [flags]

Simulates a flash crowd: every virtual user enters the queue, polls its
status at the server's poll hint, orders once admitted (or leaves, or never
orders). A status line goes to stderr once a second, the report to stdout.
The exit code is 1 when an invariant breaks (oversold, a user admitted twice,
an unexpected error) or the run did not finish, 2 for a usage mistake.
Every flag may instead be set by its environment variable; a flag wins.`

func printLoadtestUsage(w io.Writer) {
	flagenv.PrintUsage(w, loadtestUsage, loadtestSettings(new(loadtestConfig)))
}

// In-process defaults: 100,000 users at 1,000/s are admitted in 100 s.
const (
	inprocDefaultRate  = 1000.0
	inprocDefaultStock = 1000
)

// loadtestConfig is what 'waitroom loadtest' runs with.
type loadtestConfig struct {
	run            loadtest.Config
	inproc         bool
	redisURL       string
	adminToken     string
	tick           time.Duration
	storeTimeout   time.Duration // the in-process server's
	abandonAfter   time.Duration // the in-process room's
	firstUseWithin time.Duration
	jsonOut        bool
	htmlFile       string
	checkPositions bool
	roomStock      bool // the in-process room tracks the product's stock
}

func parseLoadtest(args []string, getenv func(string) string) (loadtestConfig, error) {
	var c loadtestConfig
	v, err := flagenv.Read("loadtest", loadtestSettings(&c), args, getenv)
	if err != nil {
		return loadtestConfig{}, err
	}
	r, raw := &c.run, v.Raw
	switch {
	case c.inproc && r.URL != "":
		v.Check(flagenv.Errorf("--url and --inproc exclude each other: test a running server or start one here"))
	case !c.inproc && r.URL == "":
		v.Check(flagenv.Errorf("give --url of a running waiting room, or --inproc"))
	}
	if c.redisURL = raw["redis-url"].Text; c.redisURL != "" {
		if _, err := redis.ParseURL(c.redisURL); err != nil {
			v.Fail("redis-url", err.Error())
		}
		if !c.inproc {
			// REDIS_URL in the environment is meant for serve; only a
			// flag given with --url is a mistake worth stopping for.
			if raw["redis-url"].Source == "--redis-url" {
				v.Check(flagenv.Errorf("--redis-url goes with --inproc; with --url the server has its own store"))
			}
			c.redisURL = ""
		}
	}
	if c.inproc && raw["admin-token"].Source == "--admin-token" {
		v.Check(flagenv.Errorf("--admin-token goes with --url; --inproc controls its own room"))
	}
	if c.checkPositions && !c.inproc && c.adminToken == "" {
		v.Check(flagenv.Errorf("--check-positions with --url needs --admin-token, to hold admissions until every user has entered"))
	}
	if !c.inproc && r.OpensIn > 0 && c.adminToken == "" {
		v.Check(flagenv.Errorf("--opens-in with --url needs --admin-token, to schedule the room's opening"))
	}
	if !v.Failed("leave") && !v.Failed("vanish") && r.LeaveShare+r.VanishShare > 1 {
		v.Fail("vanish", "--leave and --vanish together must be at most 1")
	}
	if c.checkPositions && (r.LeaveShare > 0 || r.VanishShare > 0) {
		v.Check(flagenv.Errorf("--check-positions needs --leave 0 and --vanish 0: a user who leaves shifts the positions of those behind"))
	}
	for _, name := range []string{"abandon-after", "first-use-within"} {
		if raw[name].Given && !c.inproc {
			v.Check(flagenv.Errorf("--%s goes with --inproc; a running server's room has its own (waitroom admin rooms set)", name))
		}
	}
	if raw["tick"].Given && !c.inproc {
		v.Check(flagenv.Errorf("--tick goes with --inproc; a running server ticks as it was started"))
	}
	if raw["store-timeout"].Given && !c.inproc {
		v.Check(flagenv.Errorf("--store-timeout goes with --inproc; a running server has its own (serve --store-timeout)"))
	}
	r.CheckPositions = c.checkPositions
	if c.inproc && raw["rate"].Text == "" {
		r.Rate = inprocDefaultRate
	}
	if c.inproc && raw["stock"].Text == "" {
		r.Stock = inprocDefaultStock
	}
	if err := v.Err(); err != nil {
		return loadtestConfig{}, err
	}
	return c, nil
}

// loadtestBool reads one of loadtest's bools, which tell a mistake as
// "not true or false".
func loadtestBool(p *bool) flag.Value { return flagenv.BoolWhy(p, "not true or false") }

func roomName(s string) error {
	if !waitroom.ValidRoomName(s) {
		return errors.New("names are " + waitroom.RoomNameRule)
	}
	return nil
}

func productID(s string) error { return shop.Product{ID: s, Name: s}.Validate() }

func runLoadtest(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	c, err := parseLoadtest(args, getenv)
	if err != nil {
		return finish("loadtest", err, printLoadtestUsage, flagsHint, stdout, stderr)
	}
	c.run.Out = stderr
	// The HTML file is made before the run, so a path that cannot be
	// written fails at once, not after a long run.
	var html *os.File
	if c.htmlFile != "" {
		if html, err = os.Create(c.htmlFile); err != nil {
			fmt.Fprintf(stderr, "waitroom loadtest: --html: %v\n", err)
			return exitUsage
		}
		defer html.Close()
	}
	var (
		rep   *loadtest.Report
		extra loadtest.ServerFigures
	)
	if c.inproc {
		rep, extra, err = loadtestInproc(ctx, c, stderr)
	} else {
		rep, extra, err = loadtestURL(ctx, c)
	}
	if rep == nil {
		// No run took place: a bad config for the library, or the
		// in-process room or the server's admin API failed to start.
		fmt.Fprintf(stderr, "waitroom loadtest: %v\n", err)
		if html != nil {
			_ = os.Remove(html.Name()) // no report to write
		}
		var usage flagenv.UsageError
		if errors.As(err, &usage) {
			return exitUsage
		}
		return exitFailure
	}
	out := loadtest.NewOutcome(rep, extra)
	write := out.WriteText
	if c.jsonOut {
		write = out.WriteJSON
	}
	if werr := write(stdout); werr != nil {
		fmt.Fprintf(stderr, "waitroom loadtest: writing the report: %v\n", werr)
		return exitFailure
	}
	if html != nil {
		werr := rep.WriteHTML(html)
		if werr == nil {
			werr = html.Close()
		}
		if werr != nil {
			fmt.Fprintf(stderr, "waitroom loadtest: writing the HTML report: %v\n", werr)
			return exitFailure
		}
		fmt.Fprintf(stderr, "waitroom loadtest: HTML report in %s\n", html.Name())
	}
	if err != nil || len(out.Server.Violations) > 0 {
		if err != nil {
			fmt.Fprintf(stderr, "waitroom loadtest: %v\n", err)
		}
		for _, v := range out.Server.Violations {
			fmt.Fprintf(stderr, "waitroom loadtest: %s\n", v)
		}
		return exitFailure
	}
	return exitOK
}

// loadtestInproc runs the crowd against a waiting room in this process
// (store, server, admitter, reference shop on a loopback port).
func loadtestInproc(ctx context.Context, c loadtestConfig, stderr io.Writer) (*loadtest.Report, loadtest.ServerFigures, error) {
	cfg, err := inprocConfig()
	if err != nil {
		return nil, loadtest.ServerFigures{}, err
	}
	cfg.StoreTimeout = c.storeTimeout
	rep, figs, err := loadtest.RunInProcess(ctx, c.run, loadtest.InProcess{Server: cfg, RedisURL: c.redisURL, Tick: c.tick,
		AbandonAfter: c.abandonAfter, FirstUseWithin: c.firstUseWithin, RoomStock: c.roomStock, Log: stderr})
	if se := (*waitroom.SettingError)(nil); rep == nil && errors.As(err, &se) {
		err = flagenv.Errorf("--rate, --abandon-after, --first-use-within: %s", waitroom.ErrorMessage(err))
	}
	return rep, figs, err
}

// inprocConfig is serve's configuration with every flag at its default
// and a port the system picks on loopback: the server that loadtest
// --inproc and bench start in this process.
func inprocConfig() (instance.Config, error) {
	return parseServe([]string{"--addr", "127.0.0.1:0"}, func(string) string { return "" })
}

// loadtestURL runs the crowd against a running server; with an admin
// token, watched through the operator API (loadtest.RunWatched).
func loadtestURL(ctx context.Context, c loadtestConfig) (*loadtest.Report, loadtest.ServerFigures, error) {
	if c.adminToken == "" {
		rep, err := loadtest.Run(ctx, c.run)
		return rep, loadtest.ServerFigures{QueueAtAllEntered: -1, Rate: c.run.Rate}, err
	}
	// The library's loopback rule, applied before the admin API is called.
	u, _ := url.Parse(c.run.URL) // checked by parseLoadtest
	if !c.run.AllowNonLoopback && !loadtest.IsLoopback(u.Hostname()) {
		return nil, loadtest.ServerFigures{}, flagenv.Errorf("refusing to load-test %q: its host is not loopback; add --allow-remote if you mean it", u.Host)
	}
	admin := &adminclient.Client{BaseURL: u, Token: c.adminToken, HTTP: &http.Client{Timeout: 10 * time.Second}}
	return loadtest.RunWatched(ctx, c.run, admin)
}
