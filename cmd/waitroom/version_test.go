package main

import (
	"bytes"
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVersionOfBuildInfo(t *testing.T) {
	t.Parallel()
	withVCS := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/waitroom/waitroom", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{
			{Key: "-trimpath", Value: "true"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "8718b25c0ffee"},
			{Key: "vcs.time", Value: "2026-12-02T05:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	var out bytes.Buffer
	versionOf(withVCS).print(&out)
	require.Equal(t, "version:  v1.2.3\nrevision: 8718b25c0ffee\ntime:     2026-12-02T05:00:00Z\nmodified: true\ngo:       go1.26.8\n", out.String())

	// What go run and go test builds carry: no vcs settings.
	devel := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/waitroom/waitroom", Version: "(devel)"}}
	out.Reset()
	versionOf(devel).print(&out)
	require.Equal(t, "version:  (devel)\nrevision: unknown\ntime:     unknown\nmodified: unknown\ngo:       go1.26.8\n"+
		"note:     this binary carries no VCS information (built by go run or go test, with -buildvcs=false, or outside a git checkout)\n", out.String())

	clean := versionOf(&debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.modified", Value: "false"}}})
	require.NotNil(t, clean.Modified)
	require.False(t, *clean.Modified)
	require.Equal(t, "unknown", clean.Version, "an empty module version is not invented")
	require.Nil(t, versionOf(&debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.modified", Value: "maybe"}}}).Modified)

	none := versionOf(nil)
	require.Equal(t, buildVersion{Version: "unknown", Go: runtime.Version()}, none, "a binary without build info reports only what the runtime knows")

	raw, err := json.Marshal(versionOf(devel))
	require.NoError(t, err)
	require.JSONEq(t, `{"version":"(devel)","revision":null,"time":null,"modified":null,"go":"go1.26.8"}`, string(raw))
}

func TestVersionCommand(t *testing.T) {
	t.Parallel()
	want := func() string {
		info, _ := debug.ReadBuildInfo()
		var b bytes.Buffer
		versionOf(info).print(&b)
		return b.String()
	}()
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		var stdout, stderr bytes.Buffer
		require.Equal(t, exitOK, run(t.Context(), args, envOf(), &stdout, &stderr), args)
		require.Empty(t, stderr.String(), args)
		require.Equal(t, want, stdout.String(), args)
		require.Regexp(t, `\Aversion:  \S.*\nrevision: \S.*\ntime:     \S.*\nmodified: (true|false|unknown)\ngo:       go\S+\n`, stdout.String(), args)
	}

	var stdout, stderr bytes.Buffer
	require.Equal(t, exitOK, run(t.Context(), []string{"--version", "--json"}, envOf(), &stdout, &stderr))
	var v map[string]any
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &v), stdout.String())
	require.Equal(t, runtime.Version(), v["go"])
	require.Len(t, v, 5)

	stdout.Reset()
	require.Equal(t, exitUsage, run(t.Context(), []string{"version", "extra"}, envOf(), &stdout, &stderr))
	require.Contains(t, stderr.String(), `version takes no arguments; got "extra"`)
	stderr.Reset()
	require.Equal(t, exitUsage, run(t.Context(), []string{"version", "--frob"}, envOf(), &stdout, &stderr))
	require.Contains(t, stderr.String(), "flag provided but not defined: -frob")

	stdout.Reset()
	require.Equal(t, exitOK, run(t.Context(), []string{"help"}, envOf(), &stdout, &stderr))
	require.Contains(t, stdout.String(), "\n  waitroom version          print the version")
	stdout.Reset()
	require.Equal(t, exitOK, run(t.Context(), []string{"help", "version"}, envOf(), &stdout, &stderr))
	require.True(t, strings.HasPrefix(stdout.String(), "Usage: waitroom version"))
	stdout.Reset()
	require.Equal(t, exitOK, run(t.Context(), []string{"version", "--help"}, envOf(), &stdout, &stderr))
	require.True(t, strings.HasPrefix(stdout.String(), "Usage: waitroom version"))
}
