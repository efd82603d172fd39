// Command waitroom runs the waiting room.
//
//	waitroom serve [flags]    the HTTP server and the admission ticker
//	waitroom admin …          the operator API's client (rooms list|create|show|set)
//	waitroom draw verify|export …  check a scheduled room's draw; write its public file
//	waitroom loadtest …       a simulated flash crowd against a server
//	waitroom bench …          throughput, Redis time per script, memory per user
//	waitroom version          the version, VCS revision and Go version of the build
//	waitroom probe [--url …]  exit 0 if a server answers 2xx (the container healthcheck)
//
// Every flag of serve can also be set by an environment variable; see
// 'waitroom serve --help'.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/waitroom/waitroom/internal/flagenv"
)

const usage = `waitroom is a virtual waiting room for flash sales.

Usage:
  waitroom serve [flags]    run the waiting room server
  waitroom admin rooms …    list, create, show or change rooms of a running server
  waitroom draw verify ROOM recompute a scheduled room's draw from its revealed seed
  waitroom draw export ROOM write the draw's public verification file (no user ids)
  waitroom loadtest …       simulate a flash crowd against a server (--url) or in process (--inproc)
  waitroom bench [flags]    measure throughput, Redis time per script and memory per user
  waitroom version          print the version, VCS revision and Go version of this build
  waitroom probe [--url …]  exit 0 if a running server answers 2xx (a container healthcheck)
  waitroom help [command]   show help

Run 'waitroom serve --help' for the flags of serve.`

// Exit codes: 2 is a usage or configuration mistake, 1 a failure at run
// time (the store unreachable, the address taken).
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process: tests call it with their own arguments,
// environment and output.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "serve":
		return runServe(ctx, args[1:], getenv, stdout, stderr)
	case "admin":
		return runAdmin(ctx, args[1:], getenv, stdout, stderr)
	case "draw":
		return runDraw(ctx, args[1:], getenv, stdout, stderr)
	case "loadtest":
		return runLoadtest(ctx, args[1:], getenv, stdout, stderr)
	case "bench":
		return runBench(ctx, args[1:], getenv, stdout, stderr)
	case "version", "-version", "--version":
		return runVersion(args[1:], stdout, stderr)
	case "probe":
		return runProbe(ctx, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		if len(args) > 1 && commandHelp[args[1]] != nil {
			commandHelp[args[1]](stdout)
			return exitOK
		}
		fmt.Fprintln(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "waitroom: unknown command %q\n\n%s\n", args[0], usage)
		return exitUsage
	}
}

// commandHelp prints 'waitroom help COMMAND'.
var commandHelp = map[string]func(io.Writer){
	"serve":    printServeUsage,
	"admin":    printText(adminHelp),
	"draw":     printText(drawUsage),
	"loadtest": printLoadtestUsage,
	"bench":    printBenchUsage,
	"version":  printText(versionUsage),
	"probe":    printText(probeUsage),
}

func printText(text string) func(io.Writer) {
	return func(w io.Writer) { fmt.Fprintln(w, text) }
}

// finish ends command name with err and returns its exit status: none
// is success; --help prints help; a usage mistake is reported with hint
// (a format taking the command's name) pointing at the help; anything
// else is a failure at run time.
func finish(name string, err error, help func(io.Writer), hint string, stdout, stderr io.Writer) int {
	var usage flagenv.UsageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		help(stdout)
		return exitOK
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "waitroom %s: %v\n\n"+hint+"\n", name, err, name)
		return exitUsage
	}
	fmt.Fprintf(stderr, "waitroom %s: %v\n", name, err)
	return exitFailure
}

// The hints of finish: the settings commands' help is their --help, the
// client commands' is 'waitroom help'.
const (
	flagsHint = "Run 'waitroom %s --help' for the flags."
	usageHint = "Run 'waitroom help %s' for usage."
)
