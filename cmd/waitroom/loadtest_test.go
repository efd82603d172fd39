package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/waitroom/waitroom/instance"
)

// A small crowd through the whole in-process room: places 1..N, every
// admission tick within its quota, no more orders than stock.
func TestLoadtestInproc(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	// A long store timeout: this checks the load test's figures, not the
	// failure policy, and a starved machine can hold a call past 1 s.
	code := run(t.Context(), []string{"loadtest", "--inproc", "--users", "2000", "--rate", "4000", "--stock", "500",
		"--no-order", "0.1", "--check-positions", "--json", "--store-timeout", "30s"}, envOf(), &stdout, &stderr)
	require.Equal(t, exitOK, code, "stderr:\n%s\nstdout:\n%s", stderr.String(), stdout.String())
	require.Contains(t, stderr.String(), "loadtest ", "a status line")

	var rep struct {
		Complete bool `json:"complete"`
		Queue    struct {
			Entered      int   `json:"entered"`
			PeakPosition int64 `json:"peak_position"`
			PositionsOK  bool  `json:"positions_ok"`
		} `json:"queue"`
		Orders struct {
			Created int `json:"created"`
		} `json:"orders"`
		Violations []string `json:"violations"`
		Server     struct {
			Source            string `json:"source"`
			QueueAtAllEntered int64  `json:"queue_at_all_entered"`
			Admitted          int64  `json:"admitted"`
			TickMax           int    `json:"tick_max"`
			Quota             int    `json:"tick_quota"`
		} `json:"server"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep))
	require.True(t, rep.Complete)
	require.Empty(t, rep.Violations)
	require.Equal(t, 2000, rep.Queue.Entered)
	require.EqualValues(t, 2000, rep.Queue.PeakPosition)
	require.True(t, rep.Queue.PositionsOK)
	require.Equal(t, 500, rep.Orders.Created)
	require.Equal(t, "admitter", rep.Server.Source)
	require.EqualValues(t, 2000, rep.Server.QueueAtAllEntered)
	require.EqualValues(t, 2000, rep.Server.Admitted)
	require.Equal(t, 400, rep.Server.Quota)
	require.LessOrEqual(t, rep.Server.TickMax, rep.Server.Quota)
}

func TestLoadtestTextReport(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"loadtest", "--inproc", "--users", "200", "--rate", "2000", "--store-timeout", "30s"},
		envOf("WAITROOM_LOADTEST_STOCK", "50"), &stdout, &stderr)
	require.Equal(t, exitOK, code, "stderr:\n%s", stderr.String())
	require.Contains(t, stdout.String(), "orders     50 placed")
	require.Contains(t, stdout.String(), "violations: none")
	require.Contains(t, stdout.String(), "server-side violations: none")
}

// --html writes the page beside the text report; a path that cannot be
// written stops before the run.
func TestLoadtestHTMLReport(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "report.html")
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"loadtest", "--inproc", "--users", "200", "--rate", "2000", "--html", file, "--store-timeout", "30s"}, envOf(), &stdout, &stderr)
	require.Equal(t, exitOK, code, "stderr:\n%s", stderr.String())
	require.Contains(t, stdout.String(), "violations: none", "the text report stays")
	require.Contains(t, stderr.String(), "HTML report in "+file)
	page, err := os.ReadFile(file)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(page), "<!doctype html>"))
	require.Contains(t, string(page), "Admissions per second against the rate")

	stdout.Reset()
	stderr.Reset()
	missing := filepath.Join(t.TempDir(), "no-such-dir", "report.html")
	code = run(t.Context(), []string{"loadtest", "--inproc", "--users", "200", "--html", missing}, envOf(), &stdout, &stderr)
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr.String(), "--html: open "+missing)
	require.NotContains(t, stderr.String(), "loadtest ", "no run started")
	require.Empty(t, stdout.String())
}

func TestLoadtestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"--inproc", "--users", "many"}, nil, `--users="many": not a whole number`},
		{[]string{"--inproc", "--bogus"}, nil, "flag provided but not defined: -bogus"},
		{nil, nil, "give --url of a running waiting room, or --inproc"},
		{[]string{"--inproc", "--url", "http://127.0.0.1:1"}, nil, "exclude each other"},
		{[]string{"--inproc", "--leave", "0.1", "--check-positions"}, nil, "--check-positions needs --leave 0"},
		{[]string{"--url", "http://127.0.0.1:1", "--check-positions"}, nil, "needs --admin-token"},
		{[]string{"--inproc"}, []string{"WAITROOM_LOADTEST_NO_ORDER", "2"}, `WAITROOM_LOADTEST_NO_ORDER="2": must be in [0, 1]`},
		{[]string{"--inproc", "--json=maybe"}, nil, `--json="maybe": not true or false`},
		{[]string{"--url", "http://127.0.0.1:1", "--store-timeout", "5s"}, nil, "--store-timeout goes with --inproc"},
		{[]string{"--inproc", "--store-timeout", "1ms"}, nil, `--store-timeout="1ms": must be`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), append([]string{"loadtest"}, tt.args...), envOf(tt.env...), &stdout, &stderr)
			require.Equal(t, exitUsage, code)
			require.Contains(t, stderr.String(), tt.want)
			require.Empty(t, stdout.String())
		})
	}
}

func TestLoadtestRefusesRemoteURL(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"loadtest", "--url", "http://192.0.2.1:8080", "--users", "1"}, envOf(), &stdout, &stderr)
	require.Equal(t, exitFailure, code)
	require.Contains(t, stderr.String(), "not loopback")
}

// Against a running serve: the room is held paused until everyone has
// entered (through the admin API), then opened, and the admitted counter
// is read to time the ticks.
func TestLoadtestURL(t *testing.T) {
	t.Parallel()
	const token = "loadtest-test-token-0123"
	// A long store timeout: this checks the load test's figures, not the
	// failure policy, and a loaded machine can hold a call past 1 s.
	cfg, err := parseServe([]string{"--addr", "127.0.0.1:0", "--rate", "4000", "--products", "drop:300", "--admin-token", token,
		"--store-timeout", "30s"}, envOf())
	require.NoError(t, err)
	m := &instance.Instance{Config: cfg}
	require.NoError(t, m.Run(t.Context()))
	t.Cleanup(func() { require.NoError(t, m.Close()) })

	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"loadtest", "--url", "http://" + m.Addr(), "--users", "1000", "--check-positions", "--stock", "300", "--json"},
		envOf("WAITROOM_ADMIN_TOKEN", token), &stdout, &stderr)
	require.Equal(t, exitOK, code, "stderr:\n%s\nstdout:\n%s", stderr.String(), stdout.String())
	var rep struct {
		Queue struct {
			PositionsOK bool `json:"positions_ok"`
		} `json:"queue"`
		Orders struct {
			Created int `json:"created"`
		} `json:"orders"`
		Server struct {
			Source            string  `json:"source"`
			Rate              float64 `json:"rate"`
			QueueAtAllEntered int64   `json:"queue_at_all_entered"`
			Admitted          int64   `json:"admitted"`
		} `json:"server"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep))
	require.True(t, rep.Queue.PositionsOK)
	require.Equal(t, 300, rep.Orders.Created)
	require.Equal(t, "admin counter", rep.Server.Source)
	require.InDelta(t, 4000.0, rep.Server.Rate, 1e-9)
	require.EqualValues(t, 1000, rep.Server.QueueAtAllEntered)
	require.EqualValues(t, 1000, rep.Server.Admitted)
}

// TestLoadtestDrop: a drop from start to sold out in process: everyone
// arrives before the opening, the draw places them all, a room that tracks
// the stock admits exactly one buyer per unit, nobody is admitted to find
// nothing, and the rest are told sold_out without ordering. The 600
// arrivals are spread over 1 s and the opening is 15 s away, so even a
// starved machine (the suite under -race on 2 shared cores) has them all
// in before it.
func TestLoadtestDrop(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"loadtest", "--inproc", "--users", "600", "--rate", "400", "--stock", "60",
		"--room-stock", "--opens-in", "15s", "--arrival", "1s", "--duration", "2m", "--json", "--store-timeout", "30s"}, envOf(), &stdout, &stderr)
	require.Equal(t, exitOK, code, "stderr:\n%s\nstdout:\n%s", stderr.String(), stdout.String())
	var rep struct {
		Complete bool `json:"complete"`
		Outcomes struct {
			Ordered     int `json:"ordered"`
			SoldOut     int `json:"sold_out"`
			ToldSoldOut int `json:"told_sold_out"`
		} `json:"outcomes"`
		Orders struct {
			Created              int `json:"created"`
			AdmittedWithoutStock int `json:"admitted_without_stock"`
		} `json:"orders"`
		Draw struct {
			State    string `json:"state"`
			Entrants int64  `json:"entrants"`
		} `json:"draw"`
		Violations []string `json:"violations"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep), stdout.String())
	require.True(t, rep.Complete)
	require.Empty(t, rep.Violations)
	require.Equal(t, "done", rep.Draw.State)
	require.Equal(t, int64(600), rep.Draw.Entrants, "everyone arrived before the opening")
	require.Equal(t, 60, rep.Orders.Created)
	require.Zero(t, rep.Orders.AdmittedWithoutStock)
	require.Equal(t, 60, rep.Outcomes.Ordered)
	require.Zero(t, rep.Outcomes.SoldOut)
	require.Equal(t, 540, rep.Outcomes.ToldSoldOut)
}
