// Package flagenv reads a command's settings: each one a flag, an
// environment variable that sets it when the flag is not given, and a
// default, read into its destination with an error that names the flag or
// variable at fault. The commands of cmd/waitroom declare their settings
// as tables of Setting and read them with Read; the environment comes from
// the getenv they are given, so tests pass their own.
package flagenv

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/waitroom/waitroom"
)

// Setting is one flag of a command, the environment variable that sets it
// when the flag is not given, its default, and where its value goes.
type Setting struct {
	Name, Env, Def, Kind, Help string
	// Into reads the text into its destination, its error saying what is
	// wrong with it; nil: the command reads the text itself (Values.Raw).
	// A Bool's flag needs no value (--json as well as --json=false).
	Into flag.Value
}

// PrintUsage prints a command's help: head, then every setting with its
// kind (none when Kind is empty), default and variable.
func PrintUsage(w io.Writer, head string, settings []Setting) {
	fmt.Fprintf(w, "%s\n\nFlags:\n", head)
	for _, s := range settings {
		def := s.Def
		if def == "" {
			def = "none"
		}
		kind := " " + s.Kind
		if s.Kind == "" {
			kind = ""
		}
		fmt.Fprintf(w, "  --%s%s\n        %s\n        (default %s; env %s)\n", s.Name, kind, s.Help, def, s.Env)
	}
}

// UsageError is a mistake in the flags or environment, which the command
// tells apart from a failure at run time (its exit code).
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Errorf is a UsageError with fmt.Errorf's message.
func Errorf(format string, args ...any) error {
	return UsageError{Err: fmt.Errorf(format, args...)}
}

// Raw is a setting's text and where it came from, for error messages
// that name what to fix.
type Raw struct {
	Text   string
	Source string // "--rate", "WAITROOM_RATE" or "default of --rate"
	Given  bool   // by flag or environment, not the default
	Secret bool   // read by Secret: its text is never echoed
}

// Fail is the mistake why in v, naming its source and its text (a URL's
// without the password; a secret's not at all).
func (v Raw) Fail(why string) error {
	if v.Secret {
		return Errorf("%s: %s", v.Source, why)
	}
	return Errorf("%s=%q: %s", v.Source, withoutPassword(v.Text), why)
}

// withoutPassword hides the password of a URL-shaped value, so an error
// about --redis-url or --database-url never prints a credential. A value
// that does not parse is cut at its last '@' for the same reason.
func withoutPassword(text string) string {
	if !strings.Contains(text, "@") {
		return text
	}
	if u, err := url.Parse(text); err == nil && u.User != nil {
		return u.Redacted()
	}
	return "…" + text[strings.LastIndex(text, "@"):]
}

// Var is the setting name, set by the variable env when the flag is not
// given, else by def; kind and help are what --help says of it.
func Var(name, env, def, kind, help string, into flag.Value) Setting {
	return Setting{Name: name, Env: env, Def: def, Kind: kind, Help: help, Into: into}
}

// Values are a command's settings as read: each one's text and source,
// and the mistakes found in them.
type Values struct {
	Raw    map[string]Raw
	errs   []error
	failed map[string]bool
}

// Fail records a mistake in setting name.
func (v *Values) Fail(name, why string) {
	v.errs = append(v.errs, v.Raw[name].Fail(why))
	v.failed[name] = true
}

// Failed says whether setting name had a mistake.
func (v *Values) Failed(name string) bool { return v.failed[name] }

// Check records err, a mistake of more than one setting, if any.
func (v *Values) Check(err error) {
	if err != nil {
		v.errs = append(v.errs, err)
	}
}

// Err is every mistake recorded, as one usage error.
func (v *Values) Err() error {
	if len(v.errs) == 0 {
		return nil
	}
	return UsageError{Err: errors.Join(v.errs...)}
}

// SettingErrors records each error of a validation such as
// RoomConfig.Validate, naming the flag of the setting at fault instead of
// its field (max_queue: --max-queue); a setting whose text did not read
// has said so already.
func (v *Values) SettingErrors(err error) {
	if err == nil {
		return
	}
	unread := maps.Clone(v.failed)
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, err := range errs {
		var se *waitroom.SettingError
		if !errors.As(err, &se) {
			v.Check(UsageError{Err: err})
			continue
		}
		flags := make([]string, len(se.Fields))
		for i, f := range se.Fields {
			flags[i] = strings.ReplaceAll(f, "_", "-")
		}
		switch {
		case slices.ContainsFunc(flags, func(f string) bool { return unread[f] }):
		case len(flags) == 1:
			v.Fail(flags[0], se.Reason)
		default:
			v.Check(Errorf("--%s together: %s", strings.Join(flags, " and --"), se.Reason))
		}
	}
}

// Read gives each setting its text: a flag wins over its environment
// variable, which wins over the default. Then each setting's Into reads
// its text; a mistake is recorded in Values, never a silent default. A
// mistake in the command line itself is a UsageError; --help is
// flag.ErrHelp.
// It is hand-written on purpose: peterbourgon/ff v4 derives every variable
// from one prefix (REDIS_URL and WAITROOM_LOADTEST_* cannot both stay) and
// alecthomas/kong reads the process environment and prints its own help,
// so neither keeps getenv injectable for tests, --help's text, or the
// errors that name the flag or variable at fault.
func Read(name string, settings []Setting, args []string, getenv func(string) string) (*Values, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	flags := make(map[string]*string, len(settings))
	for _, s := range settings {
		v := new(string)
		if b, ok := s.Into.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			fs.Var(boolText{v}, s.Name, s.Help)
		} else {
			fs.StringVar(v, s.Name, "", s.Help)
		}
		flags[s.Name] = v
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, UsageError{Err: err}
	}
	if fs.NArg() > 0 {
		return nil, Errorf("unexpected argument %q", fs.Arg(0))
	}
	onCommandLine := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	v := &Values{Raw: make(map[string]Raw, len(settings)), failed: map[string]bool{}}
	for _, s := range settings {
		switch env := getenv(s.Env); {
		case onCommandLine[s.Name]:
			v.Raw[s.Name] = Raw{Text: *flags[s.Name], Source: "--" + s.Name, Given: true}
		case env != "":
			v.Raw[s.Name] = Raw{Text: env, Source: s.Env, Given: true}
		default:
			v.Raw[s.Name] = Raw{Text: s.Def, Source: "default of --" + s.Name}
		}
		if _, ok := s.Into.(secret); ok {
			raw := v.Raw[s.Name]
			raw.Secret = true
			v.Raw[s.Name] = raw
		}
		if s.Into != nil {
			if err := s.Into.Set(v.Raw[s.Name].Text); err != nil {
				v.Fail(s.Name, err.Error())
			}
		}
	}
	return v, nil
}

// boolText lets a bool setting be given as --json as well as --json=false,
// keeping its text to be read like every other setting's.
type boolText struct{ text *string }

func (b boolText) String() string     { return "" }
func (b boolText) Set(s string) error { *b.text = s; return nil }
func (b boolText) IsBoolFlag() bool   { return true }

// Readers of a setting's text into its destination (Setting.Into). Each
// says what is wrong with a text, which Read prefixes with its source.

// Func reads a setting with a function of the command's.
type Func func(string) error

func (f Func) Set(s string) error { return f(s) }
func (f Func) String() string     { return "" }

// Text keeps the text as it is.
func Text(p *string) flag.Value {
	return Func(func(s string) error { *p = s; return nil })
}

// Trimmed keeps the text without surrounding spaces.
func Trimmed(p *string) flag.Value {
	return Func(func(s string) error { *p = strings.TrimSpace(s); return nil })
}

// List keeps the items of a comma-separated list (SplitList).
func List(p *[]string) flag.Value {
	return Func(func(s string) error { *p = SplitList(s); return nil })
}

// Secret keeps a password, key or token; a mistake in it is told by its
// source alone. Empty leaves *p as it is.
func Secret[T string | []byte](p *T) flag.Value {
	return secret(func(s string) error {
		if s != "" {
			*p = T(s)
		}
		return nil
	})
}

type secret Func

func (f secret) Set(s string) error { return f(s) }
func (f secret) String() string     { return "" }

// Checked keeps the text, and check says what is wrong with it.
func Checked(p *string, check func(string) error) flag.Value {
	return Func(func(s string) error { *p = s; return check(s) })
}

// OrEmpty is check that also approves of no value.
func OrEmpty(check func(string) error) func(string) error {
	return func(s string) error {
		if s == "" {
			return nil
		}
		return check(s)
	}
}

// Optional reads a setting with v only when it has a value.
func Optional(v flag.Value) flag.Value {
	return Func(OrEmpty(v.Set))
}

// OneOf keeps the text if it is one of choices; why says what else fails.
func OneOf(p *string, why string, choices ...string) flag.Value {
	return Checked(p, func(s string) error {
		if !slices.Contains(choices, s) {
			return errors.New(why)
		}
		return nil
	})
}

// boolValue reads true or false, or says why not; its flag needs no value.
type boolValue struct {
	p   *bool
	why string
}

// Bool reads true or false; its flag needs no value (--json as well as
// --json=false).
func Bool(p *bool) flag.Value { return BoolWhy(p, "must be true or false") }

// BoolWhy is Bool with its own word for a mistake.
func BoolWhy(p *bool, why string) flag.Value { return boolValue{p, why} }

func (b boolValue) IsBoolFlag() bool { return true }
func (b boolValue) String() string   { return "" }
func (b boolValue) Set(s string) error {
	v, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return errors.New(b.why)
	}
	*b.p = v
	return nil
}

// IntIn reads a whole number in [lo, hi].
func IntIn[T int | int64](p *T, lo, hi T) flag.Value {
	return within(p, func(s string) (T, error) {
		n, err := strconv.ParseInt(s, 10, 64)
		return T(n), err
	}, "not a whole number", lo, hi)
}

// Uint reads a whole number ≥ 0 of up to 64 bits.
func Uint(p *uint64) flag.Value {
	return Func(func(s string) (err error) {
		if *p, err = strconv.ParseUint(strings.TrimSpace(s), 10, 64); err != nil {
			return errors.New("not a whole number ≥ 0")
		}
		return nil
	})
}

// DurationIn reads a duration in [lo, hi].
func DurationIn(p *time.Duration, lo, hi time.Duration) flag.Value {
	return within(p, time.ParseDuration, "not a duration (such as 200ms, 30s, 5m)", lo, hi)
}

// within reads a value with parse, which failing is the mistake what
// names, and checks it is in [lo, hi].
func within[T int | int64 | time.Duration](p *T, parse func(string) (T, error), what string, lo, hi T) flag.Value {
	return Func(func(s string) error {
		x, err := parse(strings.TrimSpace(s))
		if err != nil {
			return errors.New(what)
		}
		if x < lo || x > hi {
			return fmt.Errorf("must be in [%v, %v]", lo, hi)
		}
		*p = x
		return nil
	})
}

// FloatIn reads a number in [lo, hi], or (lo, hi] when loOpen; unit
// follows the range in the error.
func FloatIn(p *float64, lo, hi float64, loOpen bool, unit string) flag.Value {
	return Func(func(s string) error {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		switch {
		case err != nil || math.IsNaN(f) || math.IsInf(f, 0):
			return errors.New("not a number")
		case f < lo || f > hi || loOpen && f == lo:
			open := map[bool]string{true: "(", false: "["}[loOpen]
			return fmt.Errorf("must be in %s%s, %s]%s", open, formatFloat(lo), formatFloat(hi), unit)
		}
		*p = f
		return nil
	})
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// Time reads an RFC 3339 time; empty: none.
func Time(p *time.Time) flag.Value {
	return Func(func(s string) error {
		if s = strings.TrimSpace(s); s == "" {
			return nil
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return errors.New("must be an RFC 3339 time such as 2026-03-01T10:00:00+09:00")
		}
		*p = t
		return nil
	})
}

// HTTPURL reads an absolute http:// or https:// URL; empty: none.
func HTTPURL(p **url.URL) flag.Value {
	return Func(func(s string) error {
		if s == "" {
			return nil
		}
		u, err := url.Parse(s)
		switch {
		case err != nil:
			return err
		case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
			return errors.New("must be an absolute http:// or https:// URL")
		}
		*p = u
		return nil
	})
}

// URLOf checks a URL has one of schemes (and a host when needHost).
func URLOf(why string, needHost bool, schemes ...string) func(string) error {
	return func(s string) error {
		if u, err := url.Parse(s); err != nil || !slices.Contains(schemes, u.Scheme) || needHost && u.Host == "" {
			return errors.New(why)
		}
		return nil
	}
}

// Networks reads a comma-separated list of networks (CIDR) or addresses
// (each its own network); none or empty: an empty list, not nil.
func Networks(p *[]netip.Prefix) flag.Value {
	return Func(func(s string) error {
		*p = []netip.Prefix{}
		if strings.TrimSpace(s) == "none" {
			return nil
		}
		for _, part := range SplitList(s) {
			n, err := netip.ParsePrefix(part)
			if a, aerr := netip.ParseAddr(part); err != nil && aerr == nil {
				n, err = netip.PrefixFrom(a, a.BitLen()), nil
			}
			if err != nil {
				return fmt.Errorf("%q is not a network (CIDR such as 10.0.0.0/8) or address", part)
			}
			*p = append(*p, n.Masked())
		}
		return nil
	})
}

// HostPort reads a listener's host:port, trimmed; empty: none.
func HostPort(p *string) flag.Value {
	return Func(func(s string) error {
		*p = strings.TrimSpace(s)
		if _, _, err := net.SplitHostPort(*p); *p != "" && err != nil {
			return errors.New("must be host:port")
		}
		return nil
	})
}

// Level reads a log level: debug, info, warn or error.
func Level(p *slog.Level) flag.Value {
	return Func(func(s string) error {
		if p.UnmarshalText([]byte(s)) != nil {
			return errors.New("must be debug, info, warn or error")
		}
		return nil
	})
}

// SplitList is the items of a comma-separated list, trimmed, without
// empty ones.
func SplitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// Command is args[0] when it is one of choices; none says what to give
// when there is no command, unknown (a format of it) when it is another.
func Command(args []string, none, unknown string, choices ...string) (string, error) {
	switch {
	case len(args) == 0:
		return "", Errorf("%s", none)
	case slices.Contains(choices, args[0]):
		return args[0], nil
	case slices.Contains([]string{"help", "-h", "-help", "--help"}, args[0]):
		return "", flag.ErrHelp
	}
	return "", Errorf(unknown, args[0])
}

// Subcommand is Command for the commands of group (a word such as
// "rooms"), with the messages made from the choices (at least one).
func Subcommand(args []string, group string, choices ...string) (string, error) {
	list := choices[len(choices)-1]
	if len(choices) > 1 {
		list = strings.Join(choices[:len(choices)-1], ", ") + " or " + list
	}
	return Command(args, group+" needs a command: "+list, "unknown command "+group+" %q; try "+list, choices...)
}

// Given is which flags of fs were set by its last parse.
func Given(fs *flag.FlagSet) map[string]bool {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	return given
}

// ParseInterleaved parses flags that may come before, between or after the
// positional arguments ("rooms set sale --rate 200"), which flag.Parse
// alone stops at, and returns the positional ones.
func ParseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, UsageError{Err: err}
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
