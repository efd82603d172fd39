package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/adminapi"
	"github.com/waitroom/waitroom/internal/flagenv"
)

const passesUsage = `Usage: waitroom admin passes <command> --room ROOM [flags]

Passes let staff and invited buyers in without queueing: the holder of a
pass link gets an entry token at once (within max_active and the stock),
and a room set --invite-only lets in pass holders only.

Commands:
  passes create --room R [--uses N] [--expires D]
                             mint a pass good for N entries (default 1) for
                             D (default 168h); prints its link
  passes list --room R       the room's passes: uses left, expiry, link
  passes revoke --room R ID  end a pass at once

Flags:
  --url url                  the server (default http://127.0.0.1:8080; env WAITROOM_ADMIN_URL);
                             links are printed on it
  --token token              the admin bearer token (env WAITROOM_ADMIN_TOKEN)
  --json                     print the server's JSON answer

Example:
  waitroom admin passes create --room drop --uses 5 --expires 48h`

// adminHelp is 'waitroom help admin': rooms, passes, then webhooks.
var adminHelp = adminUsage + "\n\n" + passesUsage + "\n\n" + webhooksUsage

// adminPasses runs 'waitroom admin passes …'.
func adminPasses(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cmd, err := flagenv.Subcommand(args, "passes", "create", "list", "revoke")
	if err != nil {
		return err
	}
	fs := newAdminFlags("passes")
	room := fs.String("room", "", "")
	uses := fs.Int("uses", 1, "")
	expires := fs.String("expires", "168h", "")
	names, given, err := fs.parse(args[1:])
	if err != nil {
		return err
	}
	switch {
	case !waitroom.ValidRoomName(*room):
		return flagenv.Errorf("--room=%q: give the room's name (%s)", *room, waitroom.RoomNameRule)
	case cmd == "revoke" && len(names) != 1:
		return flagenv.Errorf("passes revoke needs exactly one pass id")
	case cmd != "revoke" && len(names) > 0:
		return flagenv.Errorf("passes %s takes no arguments, got %q", cmd, names[0])
	case cmd != "create" && (given["uses"] || given["expires"]):
		return flagenv.Errorf("--uses and --expires are for passes create")
	case *uses < 1 || *uses > waitroom.MaxPassUses:
		return flagenv.Errorf("--uses=%d: must be in [1, %d]", *uses, waitroom.MaxPassUses)
	}
	lifetime, err := time.ParseDuration(*expires)
	if err != nil || lifetime < time.Minute || lifetime > waitroom.MaxPassLifetime {
		return flagenv.Errorf("--expires=%q: a duration in [1m, %s], such as 30m or 48h", *expires, waitroom.MaxPassLifetime)
	}
	c, ctx, cancel, err := fs.client(ctx, getenv)
	if err != nil {
		return err
	}
	defer cancel()
	var (
		pass   adminapi.Pass
		passes []adminapi.Pass
		raw    []byte
	)
	switch cmd {
	case "create":
		pass, raw, err = c.CreatePass(ctx, *room, *uses, lifetime)
	case "list":
		passes, raw, err = c.Passes(ctx, *room)
	case "revoke":
		pass, raw, err = c.RevokePass(ctx, *room, names[0])
	}
	return fs.answer(stdout, raw, err, func() error {
		switch cmd {
		case "list":
			return c.WritePassTable(stdout, passes, time.Now())
		case "revoke":
			fmt.Fprintf(stdout, "pass %s revoked (%d of %d uses were left)\n", pass.ID, pass.Left, pass.Uses)
			return nil
		}
		fmt.Fprintf(stdout, "pass %s: %d use(s), expires %s\n%s\n", pass.ID, pass.Uses, pass.ExpiresAt.Format(time.RFC3339), c.PassLink(pass))
		return nil
	})
}
