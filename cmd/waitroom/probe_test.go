package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestProbeReadyServer(t *testing.T) {
	t.Parallel()
	m := startMain(t, nil, envOf())
	for _, path := range []string{"/readyz", "/healthz"} {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), []string{"probe", "--url", "http://" + m.Addr() + path}, envOf(), &stdout, &stderr)
		require.Equal(t, exitOK, code, "%s: %s", path, stderr.String())
		require.Contains(t, stdout.String(), "200 OK")
	}
}

func TestProbeFailures(t *testing.T) {
	t.Parallel()
	m := startMain(t, nil, envOf())
	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(unavailable.Close)
	redirect := httptest.NewServer(http.RedirectHandler("http://"+m.Addr()+"/readyz", http.StatusFound))
	t.Cleanup(redirect.Close)
	// Never answers: the probe's own timeout ends it, however fast the
	// machine is.
	silent := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(silent.Close)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := "http://" + closed.Addr().String() + "/readyz"
	require.NoError(t, closed.Close())

	cases := map[string]struct {
		args []string
		want string
	}{
		"404":      {[]string{"--url", "http://" + m.Addr() + "/no-such-path"}, "404"},
		"503":      {[]string{"--url", unavailable.URL + "/readyz"}, "503"},
		"redirect": {[]string{"--url", redirect.URL}, "302"},
		"refused":  {[]string{"--url", refused}, "connection refused"},
		"timeout":  {[]string{"--url", silent.URL, "--timeout", "50ms"}, "deadline exceeded"},
	}
	for name, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), append([]string{"probe"}, c.args...), envOf(), &stdout, &stderr)
		require.Equal(t, exitFailure, code, name)
		require.Contains(t, stderr.String(), c.want, name)
	}
}

func TestProbeRejectsBadFlags(t *testing.T) {
	t.Parallel()
	cases := map[string][]string{
		"scheme":       {"--url", "ftp://127.0.0.1/readyz"},
		"no host":      {"--url", "http:///readyz"},
		"empty url":    {"--url", ""},
		"not a url":    {"--url", "http://[::1"},
		"zero timeout": {"--timeout", "0s"},
		"long timeout": {"--timeout", "2m"},
		"bad timeout":  {"--timeout", "soon"},
		"argument":     {"http://127.0.0.1:8080/readyz"},
		"unknown flag": {"--retries", "3"},
	}
	for name, args := range cases {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), append([]string{"probe"}, args...), envOf(), &stdout, &stderr)
		require.Equal(t, exitUsage, code, "%s: %s", name, stderr.String())
		require.Contains(t, stderr.String(), "waitroom help probe", name)
	}
	var stdout bytes.Buffer
	require.Equal(t, exitOK, run(t.Context(), []string{"help", "probe"}, envOf(), &stdout, &bytes.Buffer{}))
	require.Contains(t, stdout.String(), "Usage: waitroom probe")
}
