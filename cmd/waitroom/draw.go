package main

import (
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/adminclient"
	"github.com/waitroom/waitroom/internal/flagenv"
)

const drawUsage = `Usage: waitroom draw verify ROOM [--url url] [--token token] [--commitment hex] [--user id]
       waitroom draw verify --file draw.json [--commitment hex] [--user id]
       waitroom draw export ROOM [--url url] [--token token] > draw.json

verify checks a scheduled room's draw from its revealed seed and its
entrants and reports every place that differs. It reads the draw's record
and the entrants from the operator API (GET /admin/rooms/ROOM/entrants), or
from --file: the public verification file that export writes (each
entrant's draw value and place, no user ids), or the operator's export
saved. It checks that the seed matches the commitment, that the commitment
is the one saved before the opening (--commitment), that the list has the
record's entrant count and digest (so no entrant was removed or added),
and that places go by ascending draw value HMAC-SHA256(seed, user id).
With --user it also prints that user's draw value and place in the list.
Exit status 0: the draw is reproduced exactly; 1: it is not.

export writes the public verification file to hand to anyone.

Flags:
  --url url          the server (default http://127.0.0.1:8080; env WAITROOM_ADMIN_URL)
  --token token      the admin bearer token (env WAITROOM_ADMIN_TOKEN)
  --file path        verify: a saved file instead of the server
  --commitment hex   verify: the commitment published before the opening, as saved then
  --user id          verify: your own user id, to find your place`

func runDraw(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return finish("draw", drawCommand(ctx, args, getenv, stdout), printText(drawUsage), usageHint, stdout, stderr)
}

func drawCommand(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cmd, err := flagenv.Command(args, "a command is needed: verify or export", "unknown command %q; try verify or export", "verify", "export")
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("draw", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	baseURL := fs.String("url", "", "")
	token := fs.String("token", "", "")
	var file, commitment, user *string
	if cmd == "verify" {
		file, commitment, user = fs.String("file", "", ""), fs.String("commitment", "", ""), fs.String("user", "", "")
	}
	names, err := flagenv.ParseInterleaved(fs, args[1:])
	if err != nil {
		return err
	}
	var o adminclient.DrawFileCheck
	if cmd == "verify" {
		if c, err := hex.DecodeString(*commitment); *commitment != "" && (err != nil || len(c) != 32) {
			return flagenv.Errorf("--commitment: %q is not a commitment (64 hex digits)", *commitment)
		}
		if *user != "" && !waitroom.ValidUserID(*user) {
			return flagenv.Errorf("--user: %q is not a user id", *user)
		}
		o = adminclient.DrawFileCheck{Commitment: *commitment, User: *user}
	}
	var raw []byte
	switch {
	case len(names) > 1:
		return flagenv.Errorf("one room at a time; got %q and %q", names[0], names[1])
	case file != nil && *file != "":
		if raw, err = os.ReadFile(*file); err != nil {
			return err
		}
	case len(names) == 0:
		if cmd == "export" {
			return flagenv.Errorf("a room is needed")
		}
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
	if cmd == "export" {
		public, err := adminclient.PublicDrawFile(raw)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, string(public))
		return err
	}
	return adminclient.CheckDrawFile(stdout, raw, o)
}
