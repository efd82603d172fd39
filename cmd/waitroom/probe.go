package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/waitroom/waitroom/internal/flagenv"
)

const probeUsage = `Usage: waitroom probe [--url URL] [--timeout DURATION]

Asks a running server whether it is ready and exits 0 if it answers 2xx,
1 otherwise (refused, timed out, any other status; a redirect is not
followed). It is the container healthcheck: the image has no shell and no
curl.

Flags:
  --url      the URL to GET, http:// or https:// (default http://127.0.0.1:8080/readyz)
  --timeout  the longest wait for the answer, in (0, 1m] (default 2s)`

// maxProbeTimeout bounds --timeout: a healthcheck that hangs longer than
// this tells the orchestrator nothing it can act on.
const maxProbeTimeout = time.Minute

func runProbe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return finish("probe", probe(ctx, args, stdout), printText(probeUsage), usageHint, stdout, stderr)
}

func probe(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	target := fs.String("url", "http://127.0.0.1:8080/readyz", "")
	timeout := fs.Duration("timeout", 2*time.Second, "")
	names, err := flagenv.ParseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(names) > 0 {
		return flagenv.Errorf("probe takes no arguments; got %q", names[0])
	}
	u, err := url.Parse(*target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return flagenv.Errorf("--url %q: want an http:// or https:// URL with a host", *target)
	}
	if *timeout <= 0 || *timeout > maxProbeTimeout {
		return flagenv.Errorf("--timeout %v: want a duration in (0, %v]", *timeout, maxProbeTimeout)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("GET %s: %s", u.Redacted(), resp.Status)
	}
	fmt.Fprintf(stdout, "GET %s: %s\n", u.Redacted(), resp.Status)
	return nil
}
