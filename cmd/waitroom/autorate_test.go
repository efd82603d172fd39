package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseAutoRate(t *testing.T) {
	t.Parallel()
	cfg, err := parseServe([]string{"--auto-rate", "--db-pool", "20", "--margin", "0.5"}, envOf())
	require.NoError(t, err)
	require.True(t, cfg.AutoRate)
	require.Equal(t, 20, cfg.Pool, "--pool defaults to --db-pool")
	require.Equal(t, 0.5, cfg.Margin)
	require.InDelta(t, 50.0, cfg.Room.Rate, 1e-9, "the tuner starts from the derived rate")

	_, err = parseServe([]string{"--auto-rate", "--rate", "100"}, envOf())
	require.ErrorContains(t, err, "cannot go with --rate")
	_, err = parseServe(nil, envOf("WAITROOM_AUTO_RATE", "sometimes"))
	require.ErrorContains(t, err, `WAITROOM_AUTO_RATE="sometimes": must be true or false`)
}

// TestServeAutoRateFeedsTheTuner: with --auto-rate every order that passes
// the gate is measured and steers the default room's rate.
func TestServeAutoRateFeedsTheTuner(t *testing.T) {
	t.Parallel()
	m := startMain(t, []string{"--auto-rate", "--products", "drop:5", "--service-time", "100ms"}, envOf())
	require.NotNil(t, m.Tuner())
	// One order is enough here; the running tuner first tunes after 10 s.
	m.Tuner().MinSamples = 1
	base := "http://" + m.Addr()
	status, body := order(t, base, "dora", admitted(t, base, "dora"))
	require.Equal(t, 201, status, body)

	// The in-process order took far less than 100 ms: the rate rises, by
	// the tuner's bounded step.
	rate, err := m.Tuner().Tune(t.Context())
	require.NoError(t, err)
	require.Equal(t, m.Config.Room.Rate*1.25, rate)
}
