package flagenv_test

import (
	"bytes"
	"errors"
	"flag"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom"
	"github.com/waitroom/waitroom/internal/flagenv"
)

type config struct {
	addr  string
	users int
	share float64
	wait  time.Duration
	json  bool
}

func settings(c *config) []flagenv.Setting {
	return []flagenv.Setting{
		flagenv.Var("addr", "T_ADDR", "127.0.0.1:8080", "host:port", "address", flagenv.Text(&c.addr)),
		flagenv.Var("users", "T_USERS", "10", "n", "users", flagenv.IntIn(&c.users, 1, 100)),
		flagenv.Var("share", "T_SHARE", "0.5", "fraction", "share", flagenv.FloatIn(&c.share, 0, 1, true, "")),
		flagenv.Var("wait", "T_WAIT", "1s", "duration", "wait", flagenv.DurationIn(&c.wait, 0, time.Minute)),
		flagenv.Var("json", "T_JSON", "false", "", "json", flagenv.Bool(&c.json)),
	}
}

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// A flag wins over its variable, which wins over the default; a bool's
// flag needs no value.
func TestReadPrecedence(t *testing.T) {
	t.Parallel()
	var c config
	v, err := flagenv.Read("t", settings(&c), []string{"--users", "7", "--json"}, env("T_USERS", "9", "T_SHARE", "0.25"))
	require.NoError(t, err)
	require.NoError(t, v.Err())
	require.Equal(t, config{addr: "127.0.0.1:8080", users: 7, share: 0.25, wait: time.Second, json: true}, c)
	require.Equal(t, flagenv.Raw{Text: "7", Source: "--users", Given: true}, v.Raw["users"])
	require.Equal(t, flagenv.Raw{Text: "0.25", Source: "T_SHARE", Given: true}, v.Raw["share"])
	require.Equal(t, flagenv.Raw{Text: "1s", Source: "default of --wait"}, v.Raw["wait"])
}

// Every mistake is told at once, each naming its source; none is a
// silent default.
func TestReadNamesEveryMistake(t *testing.T) {
	t.Parallel()
	var c config
	v, err := flagenv.Read("t", settings(&c), []string{"--users", "0", "--json=maybe"}, env("T_SHARE", "0", "T_WAIT", "soon"))
	require.NoError(t, err)
	err = v.Err()
	var usage flagenv.UsageError
	require.ErrorAs(t, err, &usage)
	for _, want := range []string{`--users="0": must be in [1, 100]`, `T_SHARE="0": must be in (0, 1]`,
		`T_WAIT="soon": not a duration`, `--json="maybe": must be true or false`} {
		require.ErrorContains(t, err, want)
	}
	require.True(t, v.Failed("users"))
	require.False(t, v.Failed("addr"))

	v, err = flagenv.Read("t", settings(&c), nil, env("T_ADDR", "redis://u:hunter2@x"))
	require.NoError(t, err)
	v.Fail("addr", "wrong")
	require.NotContains(t, v.Err().Error(), "hunter2", "a URL's password is never echoed")

	var token string
	v, err = flagenv.Read("t", []flagenv.Setting{flagenv.Var("token", "T_TOKEN", "", "token", "token", flagenv.Secret(&token))}, nil, env("T_TOKEN", "hunter2"))
	require.NoError(t, err)
	require.Equal(t, "hunter2", token)
	v.Fail("token", "too short")
	require.EqualError(t, v.Err(), "T_TOKEN: too short", "a secret is named by its source alone")
}

func TestReadCommandLine(t *testing.T) {
	t.Parallel()
	var c config
	_, err := flagenv.Read("t", settings(&c), []string{"--help"}, env())
	require.ErrorIs(t, err, flag.ErrHelp)
	_, err = flagenv.Read("t", settings(&c), []string{"extra"}, env())
	require.EqualError(t, err, `unexpected argument "extra"`)
	_, err = flagenv.Read("t", settings(&c), []string{"--nope"}, env())
	var usage flagenv.UsageError
	require.True(t, errors.As(err, &usage))

	var out bytes.Buffer
	flagenv.PrintUsage(&out, "Usage: t", settings(&c)[3:])
	require.Equal(t, "Usage: t\n\nFlags:\n  --wait duration\n        wait\n        (default 1s; env T_WAIT)\n  --json\n        json\n        (default false; env T_JSON)\n", out.String())
}

func TestParseInterleaved(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	rate := fs.String("rate", "", "")
	names, err := flagenv.ParseInterleaved(fs, []string{"set", "--rate", "5", "sale"})
	require.NoError(t, err)
	require.Equal(t, []string{"set", "sale"}, names)
	require.Equal(t, "5", *rate)
}

// A validation's field errors are told by flag: one setting by its source
// and text, several together by their flags, and none for a setting whose
// text did not read.
func TestSettingErrors(t *testing.T) {
	t.Parallel()
	var c config
	v, err := flagenv.Read("t", settings(&c), []string{"--users", "many"}, env("T_WAIT", "5s"))
	require.NoError(t, err)
	v.SettingErrors(errors.Join(
		&waitroom.SettingError{Fields: []string{"wait"}, Reason: "must be at most 1s"},
		&waitroom.SettingError{Fields: []string{"share", "wait"}, Reason: "too much together"},
		&waitroom.SettingError{Fields: []string{"users"}, Reason: "must be even"},
	))
	require.EqualError(t, v.Err(), `--users="many": not a whole number`+"\n"+
		`T_WAIT="5s": must be at most 1s`+"\n"+
		`--share and --wait together: too much together`)
}

func TestSubcommand(t *testing.T) {
	t.Parallel()
	got, err := flagenv.Subcommand([]string{"set", "sale"}, "rooms", "list", "show", "set")
	require.NoError(t, err)
	require.Equal(t, "set", got)

	_, err = flagenv.Subcommand(nil, "rooms", "list", "show", "set")
	require.EqualError(t, err, "rooms needs a command: list, show or set")
	var usage flagenv.UsageError
	require.ErrorAs(t, err, &usage, "a usage mistake (exit 2)")
	_, err = flagenv.Subcommand([]string{"drop"}, "rooms", "list", "show", "set")
	require.EqualError(t, err, `unknown command rooms "drop"; try list, show or set`)
	_, err = flagenv.Subcommand([]string{"x"}, "draw", "verify")
	require.EqualError(t, err, `unknown command draw "x"; try verify`)
	for _, help := range []string{"help", "-h", "--help"} {
		_, err = flagenv.Subcommand([]string{help}, "rooms", "list")
		require.ErrorIs(t, err, flag.ErrHelp, help)
	}
}

func TestGiven(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.String("url", "", "")
	fs.Int("uses", 1, "")
	names, err := flagenv.ParseInterleaved(fs, []string{"a", "--uses", "1", "b"})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, names)
	require.Equal(t, map[string]bool{"uses": true}, flagenv.Given(fs), "given at its default still counts; never given does not")
}
