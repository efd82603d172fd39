package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/internal/testenv"
)

// TestServeWarnsOpeningInThePast: an --opens-at that has passed still
// starts (a restart after the opening must), but says loudly that the
// room opens at once; one to come says nothing of the kind.
func TestServeWarnsOpeningInThePast(t *testing.T) {
	t.Parallel()
	const warning = "--opens-at is in the past"
	past := &testenv.LogBuffer{}
	startMainLogging(t, []string{"--opens-at", time.Now().Add(-time.Hour).Format(time.RFC3339)}, envOf(), past)
	require.Contains(t, past.String(), "level=WARN msg=\""+warning)
	require.Contains(t, past.String(), "room=default")

	future := &testenv.LogBuffer{}
	startMainLogging(t, []string{"--opens-at", time.Now().Add(time.Hour).Format(time.RFC3339)}, envOf(), future)
	require.Contains(t, future.String(), "waiting room listening")
	require.NotContains(t, future.String(), warning)
}

// TestServeLogsLiveRate: on Redis a later start keeps the room's live
// settings, and its "listening" line tells the live rate and slice, not
// the flags'.
func TestServeLogsLiveRate(t *testing.T) {
	t.Parallel()
	env := redisEnv(t, "wrtest-cmd-liverate")
	first := &testenv.LogBuffer{}
	startMainLogging(t, []string{"--rate", "3", "--slice", "200ms"}, env, first)
	require.Regexp(t, `msg="waiting room listening" .* rate=3 rate_derived=false slice=200ms `, first.String())

	later := &testenv.LogBuffer{}
	startMainLogging(t, []string{"--rate", "10"}, env, later)
	require.Contains(t, later.String(), "keeping the live ones")
	line := regexp.MustCompile(`msg="waiting room listening" .*`).FindString(later.String())
	require.Regexp(t, ` rate=3 rate_derived=false slice=200ms `, line)
}

// TestServePageDir: --page-dir (or WAITROOM_PAGE_DIR) brands the page, and
// a page template that does not parse refuses the start, naming the file
// and the line.
func TestServePageDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, err := parseServe(nil, envOf("WAITROOM_PAGE_DIR", dir))
	require.NoError(t, err)
	require.Equal(t, dir, c.PageDir)
	c, err = parseServe([]string{"--page-dir", " " + dir + " "}, envOf("WAITROOM_PAGE_DIR", "/elsewhere"))
	require.NoError(t, err)
	require.Equal(t, dir, c.PageDir, "the flag wins")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "page.html"), []byte("<!doctype html>\n<title>{{.Title}}</title>\n<p>{{.State}</p>\n"), 0o644))
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"serve", "--addr", "127.0.0.1:0", "--page-dir", dir}, envOf(), &stdout, &stderr)
	require.Equal(t, exitFailure, code)
	require.Contains(t, stderr.String(), filepath.Join(dir, "page.html")+": template: page.html:3: bad character U+007D")
}
