package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/waitroom/waitroom/internal/flagenv"
)

const versionUsage = `Usage: waitroom version [--json]   (also: waitroom --version [--json])

Prints what this binary was built from, one fact a line: the module
version, the VCS revision, its commit time, whether the working tree had
uncommitted changes, and the Go version. A binary built by 'go run' or
'go test', with -buildvcs=false, or outside a git checkout carries no VCS
information: those lines then say unknown, never a guess.

Flags:
  --json  the same facts as one JSON object (unknown facts are null)`

// unknown stands for a fact the build info does not carry.
const unknown = "unknown"

// buildVersion is what a binary knows about its own build. A nil field
// is a fact the build did not record.
type buildVersion struct {
	Version  string  `json:"version"`
	Revision *string `json:"revision"`
	Time     *string `json:"time"`
	Modified *bool   `json:"modified"`
	Go       string  `json:"go"`
}

// versionOf reads the build info the Go toolchain stamps into a binary;
// info is nil when the binary carries none.
func versionOf(info *debug.BuildInfo) buildVersion {
	v := buildVersion{Version: unknown, Go: runtime.Version()}
	if info == nil {
		return v
	}
	if info.Main.Version != "" {
		v.Version = info.Main.Version
	}
	if info.GoVersion != "" {
		v.Go = info.GoVersion
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = &s.Value
		case "vcs.time":
			v.Time = &s.Value
		case "vcs.modified":
			// The toolchain writes exactly "true" or "false"; anything
			// else is not a fact to report.
			if s.Value == "true" || s.Value == "false" {
				modified := s.Value == "true"
				v.Modified = &modified
			}
		}
	}
	return v
}

func (v buildVersion) print(w io.Writer) {
	orUnknown := func(s *string) string {
		if s == nil {
			return unknown
		}
		return *s
	}
	modified := unknown
	if v.Modified != nil {
		modified = fmt.Sprint(*v.Modified)
	}
	fmt.Fprintf(w, "version:  %s\nrevision: %s\ntime:     %s\nmodified: %s\ngo:       %s\n",
		v.Version, orUnknown(v.Revision), orUnknown(v.Time), modified, v.Go)
	if v.Revision == nil {
		fmt.Fprintln(w, "note:     this binary carries no VCS information (built by go run or go test, with -buildvcs=false, or outside a git checkout)")
	}
}

func runVersion(args []string, stdout, stderr io.Writer) int {
	return finish("version", printVersion(args, stdout), printText(versionUsage), usageHint, stdout, stderr)
}

func printVersion(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "")
	names, err := flagenv.ParseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(names) > 0 {
		return flagenv.Errorf("version takes no arguments; got %q", names[0])
	}
	info, _ := debug.ReadBuildInfo()
	v := versionOf(info)
	if *asJSON {
		return json.NewEncoder(stdout).Encode(v)
	}
	v.print(stdout)
	return nil
}
