package main

import (
	"context"
	"flag"
	"io"
	"os"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/flagenv"
	"github.com/waitroom/waitroom/server"
)

const drawUsage = `Usage: waitroom draw verify ROOM [--url url] [--token token] [--file draw.json]

Recomputes a scheduled room's draw from its revealed seed and its entrants
and reports every place that differs. It reads the draw's record and the
entrants from the operator API (GET /admin/rooms/ROOM/entrants), or from
--file, that answer saved (so anyone given the file can check it without
access to the server). It checks that the seed matches the commitment
published before the opening, recomputes each entrant's value
HMAC-SHA256(seed, user id), orders by it, and compares with the places
given. Exit status 0: the draw is reproduced exactly; 1: it is not.

Flags:
  --url url      the server (default http://127.0.0.1:8080; env WAITROOM_ADMIN_URL)
  --token token  the admin bearer token (env WAITROOM_ADMIN_TOKEN)
  --file path    a saved GET /admin/rooms/ROOM/entrants answer instead of the server`

func runDraw(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return finish("draw", drawVerify(ctx, args, getenv, stdout), printText(drawUsage), usageHint, stdout, stderr)
}

func drawVerify(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if _, err := flagenv.Command(args, "a command is needed: verify", "unknown command %q; try verify", "verify"); err != nil {
		return err
	}
	fs := flag.NewFlagSet("draw", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	baseURL := fs.String("url", "", "")
	token := fs.String("token", "", "")
	file := fs.String("file", "", "")
	names, err := flagenv.ParseInterleaved(fs, args[1:])
	if err != nil {
		return err
	}
	var raw []byte
	switch {
	case len(names) > 1:
		return flagenv.Errorf("one room at a time; got %q and %q", names[0], names[1])
	case *file != "":
		if raw, err = os.ReadFile(*file); err != nil {
			return err
		}
	case len(names) == 0:
		return flagenv.Errorf("a room is needed (or --file)")
	case !waitroom.ValidRoomName(names[0]):
		return flagenv.Errorf("%q is not a room name", names[0])
	default:
		c, err := newAdminClient(*baseURL, *token, getenv)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, adminTimeout)
		defer cancel()
		if raw, err = c.Entrants(ctx, names[0]); err != nil {
			return err
		}
	}
	return server.VerifyDraw(stdout, raw)
}
