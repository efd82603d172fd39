package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/waitroom/waitroom/adminclient"
	"github.com/waitroom/waitroom/internal/flagenv"
	"github.com/waitroom/waitroom/webhook"
)

const webhooksUsage = `Usage: waitroom admin webhooks <command> [flags]

Webhook endpoints get the rooms' events, signed as Standard Webhooks say;
the one of --webhook-url is listed too but changed only by the flags.

Commands:
  webhooks list              the endpoints: URL, rooms, events, secrets signing
  webhooks create --endpoint URL [--rooms a,b] [--events e1,e2]
                             add an endpoint (no --rooms/--events: every room,
                             every event); prints its secret, shown only once
  webhooks delete ID         remove an endpoint
  webhooks rotate ID [--overlap D]
                             give an endpoint a new secret (printed once); the
                             old one also signs for D (default: the server's, 24h)
  webhooks dead [--limit N]  the dead letters, newest first (default 100)
  webhooks redeliver ID      send a dead letter again, with its webhook-id

Flags:
  --url url                  the server (default http://127.0.0.1:8080; env WAITROOM_ADMIN_URL)
  --token token              the admin bearer token (env WAITROOM_ADMIN_TOKEN)
  --json                     print the server's JSON answer

Example:
  waitroom admin webhooks create --endpoint https://shop.example/hooks --events user.admitted,room.sold_out`

// adminWebhooks runs 'waitroom admin webhooks …'.
func adminWebhooks(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cmd, err := flagenv.Subcommand(args, "webhooks", "list", "create", "delete", "rotate", "dead", "redeliver")
	if err != nil {
		return err
	}
	fs := newAdminFlags("webhooks")
	endpoint := fs.String("endpoint", "", "")
	rooms := fs.String("rooms", "", "")
	events := fs.String("events", "", "")
	overlapText := fs.String("overlap", "", "")
	limit := fs.Int("limit", webhook.DefaultDeadListed, "")
	names, given, err := fs.parse(args[1:])
	if err != nil {
		return err
	}
	for _, f := range []struct{ flag, cmd string }{{"endpoint", "create"}, {"rooms", "create"}, {"events", "create"}, {"overlap", "rotate"}, {"limit", "dead"}} {
		if given[f.flag] && cmd != f.cmd {
			return flagenv.Errorf("--%s is for webhooks %s", f.flag, f.cmd)
		}
	}
	takesID := cmd == "delete" || cmd == "rotate" || cmd == "redeliver"
	switch {
	case takesID && len(names) != 1:
		return flagenv.Errorf("webhooks %s needs exactly one id", cmd)
	case !takesID && len(names) > 0:
		return flagenv.Errorf("webhooks %s takes no arguments, got %q", cmd, names[0])
	case cmd == "create":
		if err := webhook.CheckURL(*endpoint); err != nil {
			return flagenv.Errorf("--endpoint=%q: %v", *endpoint, err)
		}
	case cmd == "dead" && (*limit < 1 || *limit > webhook.MaxDeadListed):
		return flagenv.Errorf("--limit=%d: must be in [1, %d]", *limit, webhook.MaxDeadListed)
	}
	overlap := time.Duration(-1) // the server's
	if given["overlap"] {
		if overlap, err = time.ParseDuration(*overlapText); err != nil || overlap < 0 || overlap > webhook.MaxOverlap {
			return flagenv.Errorf("--overlap=%q: a duration in [0, %s], such as 1h", *overlapText, webhook.MaxOverlap)
		}
	}
	c, ctx, cancel, err := fs.client(ctx, getenv)
	if err != nil {
		return err
	}
	defer cancel()
	var (
		eps  []webhook.EndpointView
		ep   webhook.EndpointView
		dead []webhook.DeadLetter
		raw  []byte
	)
	switch cmd {
	case "list":
		eps, raw, err = c.Webhooks(ctx)
	case "create":
		ep, raw, err = c.CreateWebhook(ctx, adminclient.NewWebhook{URL: *endpoint, Rooms: commaList(*rooms), Events: commaList(*events)})
	case "delete":
		err = c.DeleteWebhook(ctx, names[0])
	case "rotate":
		ep, raw, err = c.RotateWebhook(ctx, names[0], overlap)
	case "dead":
		dead, raw, err = c.DeadLetters(ctx, *limit)
	case "redeliver":
		raw, err = c.Redeliver(ctx, names[0])
	}
	return fs.answer(stdout, raw, err, func() error {
		switch cmd {
		case "list":
			return adminclient.WriteWebhookTable(stdout, eps)
		case "dead":
			return adminclient.WriteDeadTable(stdout, dead)
		case "delete":
			fmt.Fprintf(stdout, "webhook endpoint %s deleted\n", names[0])
		case "redeliver":
			fmt.Fprintf(stdout, "dead letter %s appended again\n", names[0])
		default: // create, rotate
			fmt.Fprintf(stdout, "webhook endpoint %s: %s\nsecret (shown only now): %s\n", ep.ID, ep.URL, ep.Secret)
		}
		return nil
	})
}

// commaList splits a flag's "a,b" into its items, spaces trimmed; "" is
// none.
func commaList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
