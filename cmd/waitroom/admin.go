package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/adminapi"
	"github.com/waitroom/waitroom/adminclient"
	"github.com/waitroom/waitroom/internal/flagenv"
)

var adminUsage = `Usage: waitroom admin rooms <command> [flags]

Calls the operator API (/admin/…) of a running waiting room.

Commands:
  rooms list                 every room and its settings
  rooms show NAME            a room's settings and figures (waiting, live
                             tokens, admitted/s, completed, released, …)
  rooms create NAME [set]    create a room; settings left out take defaults
  rooms set NAME set…        change settings of a running room; every
                             instance on the same Redis follows within a slice
  rooms page NAME DIR        give the room a waiting page of its own: DIR holds
                             what --page-dir holds, checked by the server
  rooms page NAME --clear    the room shows the instance's page again

Settings (create, set):
` + settingsHelp() + `
Flags:
  --url url                  the server (default http://127.0.0.1:8080; env WAITROOM_ADMIN_URL)
  --token token              the admin bearer token (env WAITROOM_ADMIN_TOKEN)
  --window duration          show: measure admitted/s over this long (default 1s; 0 skips)
  --clear                    page: remove the room's own page
  --json                     print the server's JSON answer

Example:
  waitroom admin rooms set default --rate 200 --state paused`

// settingsHelp lists settingFlags as help does: the flag and its kind,
// then its help in a column.
func settingsHelp() string {
	var b strings.Builder
	for _, s := range settingFlags {
		name, gap := "--"+s.flag+" "+s.kind, " "
		if len(name) > 26 {
			gap = "  "
		}
		fmt.Fprintf(&b, "  %-26s%s%s\n", name, gap, strings.ReplaceAll(s.help, "\n", "\n"+strings.Repeat(" ", 29)))
	}
	return b.String()
}

// adminTimeout bounds one call; show waits its window (at most 10 s) on
// the server.
const adminTimeout = 30 * time.Second

func runAdmin(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return finish("admin", admin(ctx, args, getenv, stdout), printText(adminHelp), usageHint, stdout, stderr)
}

// settingFlags are the room settings create and set accept, in the order
// help lists them: each one's flag (its JSON field with '_' for '-'), the
// kind of value settingValue reads, and its help.
var settingFlags = []struct{ flag, kind, help string }{
	{"rate", "users/s", "admission rate"},
	{"slice", "duration", "admission tick, e.g. 100ms"},
	{"max-queue", "n", "longest queue; further entries get QUEUE_FULL"},
	{"token-ttl", "duration", "how long an entry token lives, e.g. 5m"},
	{"lease", "duration", "how long an order may hold a token, e.g. 30s"},
	{"max-active", "n", "most live entry tokens at once; 0: no cap"},
	{"stock", "n", "units the room sells in all, sold ones included;\n0: not tracked; raising it is a restock"},
	{"units-per-order", "n", "units one entry token reserves and one order may buy\n(1 to 1000, at most stock)"},
	{"one-order-per-user", "bool", "a buyer whose order completed cannot enter again\n(ALREADY_ORDERED), and orders are keyed by buyer"},
	{"invite-only", "bool", "only pass holders get in (see passes create)"},
	{"abandon-after", "duration", "a waiting user silent this long has left, e.g. 5m"},
	{"first-use-within", "duration", "an unconfirmed token expires this soon, e.g. 60s"},
	{"opens-at", "time", "RFC 3339 opening; before it users are \"scheduled\"\nand get places at the opening; \"\" clears it"},
	{"prequeue-order", "random|fifo", "how the early arrivals are placed (default random:\na draw with a published commitment)"},
	{"closes-at", "time", "RFC 3339; new entries get ROOM_CLOSED from then on"},
	{"shop-url", "url", "absolute http(s) URL the waiting page sends admitted\nbuyers on to; \"\" clears it"},
	{"shop-name", "name", "who sells, as the waiting page names it; \"\" clears it"},
	{"product-name", "name", "what is sold, as the waiting page names it; \"\" clears it"},
	{"state", "open|paused|closed", "paused admits nobody; closed refuses new entries"},
}

func admin(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	group, err := flagenv.Command(args, "a command is needed: rooms list|show|create|set, passes create|list|revoke, or webhooks list|create|delete|rotate|dead|redeliver",
		"unknown command %q; try 'rooms', 'passes' or 'webhooks'", "rooms", "passes", "webhooks")
	if err != nil {
		return err
	}
	switch group {
	case "passes":
		return adminPasses(ctx, args[1:], getenv, stdout)
	case "webhooks":
		return adminWebhooks(ctx, args[1:], getenv, stdout)
	}
	cmd, err := flagenv.Subcommand(args[1:], "rooms", "list", "show", "create", "set", "page")
	if err != nil {
		return err
	}

	fs := newAdminFlags("admin")
	windowText := fs.String("window", "", "")
	clearPage := fs.Bool("clear", false, "")
	settings := make(map[string]*string)
	if cmd == "create" || cmd == "set" {
		for _, s := range settingFlags {
			settings[s.flag] = fs.String(s.flag, "", "")
		}
	}
	names, given, err := fs.parse(args[2:])
	if err != nil {
		return err
	}
	switch {
	case cmd == "list" && len(names) > 0:
		return flagenv.Errorf("rooms list takes no arguments, got %q", names[0])
	case given["clear"] && cmd != "page":
		return flagenv.Errorf("--clear is for rooms page")
	case cmd == "page" && *clearPage && len(names) != 1:
		return flagenv.Errorf("rooms page NAME --clear takes no directory")
	case cmd == "page" && !*clearPage && len(names) != 2:
		return flagenv.Errorf("rooms page needs a room name and a page directory (or --clear)")
	case cmd != "list" && cmd != "page" && len(names) != 1:
		return flagenv.Errorf("rooms %s needs exactly one room name", cmd)
	case given["window"] && cmd != "show":
		return flagenv.Errorf("--window is for rooms show")
	}
	body := map[string]any{}
	for _, s := range settingFlags {
		if !given[s.flag] {
			continue
		}
		v, err := settingValue(s.flag, s.kind, *settings[s.flag])
		if err != nil {
			return err
		}
		body[strings.ReplaceAll(s.flag, "-", "_")] = v
	}
	if cmd == "set" && len(body) == 0 {
		return flagenv.Errorf("rooms set needs at least one setting, such as --rate 200 or --state paused")
	}
	window := time.Duration(-1) // the server's
	if given["window"] {
		if window, err = time.ParseDuration(*windowText); err != nil || window < 0 {
			return flagenv.Errorf("--window=%q: not a duration (such as 1s, 500ms; 0 skips)", *windowText)
		}
	}
	var archive []byte
	if cmd == "page" && !*clearPage {
		if archive, err = adminclient.ZipPageDir(names[1]); err != nil {
			return flagenv.Errorf("%v", err)
		}
	}
	c, ctx, cancel, err := fs.client(ctx, getenv)
	if err != nil {
		return err
	}
	defer cancel()
	var (
		rooms []adminapi.Room
		room  adminapi.Room
		raw   []byte
	)
	switch cmd {
	case "list":
		rooms, raw, err = c.ListRooms(ctx)
	case "show":
		room, raw, err = c.ShowRoom(ctx, names[0], window)
	case "create":
		room, raw, err = c.CreateRoom(ctx, names[0], body)
	case "set":
		room, raw, err = c.ChangeRoom(ctx, names[0], body)
	case "page":
		if *clearPage {
			room, raw, err = c.ClearPage(ctx, names[0])
		} else {
			room, raw, err = c.SetPage(ctx, names[0], archive)
		}
	}
	return fs.answer(stdout, raw, err, func() error {
		if cmd == "list" {
			return adminclient.WriteRoomTable(stdout, rooms)
		}
		return adminclient.WriteRoomText(stdout, room)
	})
}

// adminFlags is the flag set of an admin command, with the flags every
// one takes: --url, --token and --json.
type adminFlags struct {
	*flag.FlagSet
	baseURL, token *string
	asJSON         *bool
}

func newAdminFlags(name string) adminFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return adminFlags{FlagSet: fs, baseURL: fs.String("url", "", ""), token: fs.String("token", "", ""), asJSON: fs.Bool("json", false, "")}
}

// client makes the command's client and the context of its call, bounded
// by adminTimeout.
func (fs adminFlags) client(ctx context.Context, getenv func(string) string) (*adminclient.Client, context.Context, context.CancelFunc, error) {
	c, err := newAdminClient(*fs.baseURL, *fs.token, getenv)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	return c, ctx, cancel, nil
}

// answer prints the server's answer: under --json raw as sent, even if it
// does not decode; else err's hint, or text's rendering.
func (fs adminFlags) answer(stdout io.Writer, raw []byte, err error, text func() error) error {
	switch {
	case *fs.asJSON && raw != nil:
		return adminclient.WriteIndented(stdout, raw)
	case err != nil:
		return adminHint(err)
	}
	return text()
}

// parse parses args, flags between the names as well, and returns the
// names and which flags were given.
func (fs adminFlags) parse(args []string) (names []string, given map[string]bool, err error) {
	names, err = flagenv.ParseInterleaved(fs.FlagSet, args)
	return names, flagenv.Given(fs.FlagSet), err
}

// settingValue checks a setting's syntax and turns it into its JSON value;
// ranges are the server's to check, so they are stated in one place.
func settingValue(name, kind, text string) (any, error) {
	text = strings.TrimSpace(text)
	switch kind {
	case "users/s":
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return nil, flagenv.Errorf("--%s=%q: not a number of users per second", name, text)
		}
		return f, nil
	case "n":
		n, err := strconv.Atoi(text)
		if err != nil {
			return nil, flagenv.Errorf("--%s=%q: not a whole number", name, text)
		}
		return n, nil
	case "duration":
		d, err := time.ParseDuration(text)
		if err != nil {
			return nil, flagenv.Errorf("--%s=%q: not a duration (such as 100ms, 30s, 5m)", name, text)
		}
		return d.String(), nil
	case "time":
		if text == "" {
			return "", nil
		}
		t, err := time.Parse(time.RFC3339, text)
		if err != nil {
			return nil, flagenv.Errorf("--%s=%q: not an RFC 3339 time (such as 2026-03-01T10:00:00+09:00)", name, text)
		}
		return t.Format(time.RFC3339Nano), nil
	case "random|fifo":
		switch text {
		case "random", "fifo":
			return text, nil
		}
		return nil, flagenv.Errorf("--%s=%q: must be random or fifo", name, text)
	case "url":
		if err := waitroom.CheckShopURL(text); err != nil {
			return nil, flagenv.Errorf("--%s: %v", name, err)
		}
		return text, nil
	case "name":
		if err := waitroom.CheckName(text); err != nil {
			return nil, flagenv.Errorf("--%s: %v", name, err)
		}
		return text, nil
	case "bool":
		b, err := strconv.ParseBool(text)
		if err != nil {
			return nil, flagenv.Errorf("--%s=%q: must be true or false", name, text)
		}
		return b, nil
	default: // state
		switch text {
		case "open", "paused", "closed":
			return text, nil
		}
		return nil, flagenv.Errorf("--%s=%q: must be open, paused or closed", name, text)
	}
}

func newAdminClient(rawURL, token string, getenv func(string) string) (*adminclient.Client, error) {
	rawURL = cmp.Or(rawURL, getenv("WAITROOM_ADMIN_URL"), "http://127.0.0.1:8080")
	base, err := url.Parse(rawURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, flagenv.Errorf("--url=%q: must be an absolute http:// or https:// URL", rawURL)
	}
	if token = cmp.Or(token, getenv("WAITROOM_ADMIN_TOKEN")); token == "" {
		return nil, flagenv.Errorf("no admin token: give --token or set WAITROOM_ADMIN_TOKEN")
	}
	return &adminclient.Client{BaseURL: base, Token: token}, nil
}

// adminHint adds what to check to the errors an operator can fix.
func adminHint(err error) error {
	var e *adminclient.Error
	switch {
	case !errors.As(err, &e):
		return err
	case e.Status == http.StatusUnauthorized:
		return fmt.Errorf("%w (check --token or WAITROOM_ADMIN_TOKEN)", err)
	case e.Code == "NOT_FOUND":
		return fmt.Errorf("%w (is the admin API on? it needs 'serve --admin-token')", err)
	}
	return err
}
