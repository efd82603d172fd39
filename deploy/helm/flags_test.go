package helm

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
)

// serveFlag is one flag of `waitroom serve --help` and its variable.
type serveFlag struct{ name, env string }

var (
	flagLineRE = regexp.MustCompile(`^  --([a-z0-9-]+) `)
	envRE      = regexp.MustCompile(`; env ([A-Z0-9_]+)\)$`)
)

// serveFlags builds waitroom from the main module and reads its serve
// flags from --help, so a flag added there is a flag this chart must
// reach.
func serveFlags(t *testing.T) []serveFlag {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "waitroom")
	build := exec.Command("go", "build", "-o", bin, "./cmd/waitroom")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building waitroom: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("waitroom serve --help: %v\n%s", err, out)
	}
	var flags []serveFlag
	for _, line := range strings.Split(string(out), "\n") {
		if m := flagLineRE.FindStringSubmatch(line); m != nil {
			flags = append(flags, serveFlag{name: m[1]})
		} else if m := envRE.FindStringSubmatch(line); m != nil && len(flags) > 0 && flags[len(flags)-1].env == "" {
			flags[len(flags)-1].env = m[1]
		}
	}
	if len(flags) < 40 {
		t.Fatalf("read %d flags from serve --help, want them all:\n%s", len(flags), out)
	}
	for _, f := range flags {
		if f.env == "" {
			t.Fatalf("--%s: no env variable in serve --help", f.name)
		}
	}
	return flags
}

// chartPath is how a flag outside config is set: the values that set it,
// and what its variable must then be.
type chartPath struct{ values, want string }

// chartPaths are the flags the chart sets from values of its own (the
// listeners, Redis, the secrets, TLS) rather than from config.
var chartPaths = map[string]chartPath{
	"addr":           {"ports: {http: 8181}", ":8181"},
	"metrics-addr":   {"metrics: {port: 9191}", ":9191"},
	"admin-addr":     {"admin: {port: 9292}\nsecrets: {adminToken: admin-token-for-the-flag-test}", ":9292"},
	"shop-addr":      {"shop: {port: 9393}\nsecrets: {databaseUrl: 'postgres://pg/shop', amqpUrl: 'amqp://mq/'}", ":9393"},
	"redis-url":      {"redis: {url: 'redis+cluster://:flag-pw@h1:6379,h2:6379'}", "redis+cluster://:flag-pw@h1:6379,h2:6379"},
	"cookie-secret":  {"secrets: {cookieSecret: cookie-secret-for-the-flag-test-0123456}", "cookie-secret-for-the-flag-test-0123456"},
	"admin-token":    {"secrets: {adminToken: admin-token-for-the-flag-test}", "admin-token-for-the-flag-test"},
	"settle-secret":  {"secrets: {settleSecret: settle-secret-for-the-flag-test-012345}", "settle-secret-for-the-flag-test-012345"},
	"database-url":   {"secrets: {databaseUrl: 'postgres://shop:flag-pw@pg:5432/shop'}", "postgres://shop:flag-pw@pg:5432/shop"},
	"amqp-url":       {"secrets: {amqpUrl: 'amqp://shop:flag-pw@mq:5672/'}", "amqp://shop:flag-pw@mq:5672/"},
	"webhook-secret": {"secrets: {webhookSecret: 'whsec_ZmxhZy10ZXN0LXdlYmhvb2stc2VjcmV0LTAx'}", "whsec_ZmxhZy10ZXN0LXdlYmhvb2stc2VjcmV0LTAx"},
	"smtp-url":       {"secrets: {smtpUrl: 'smtp://q:flag-pw@mail:587'}", "smtp://q:flag-pw@mail:587"},
	"tls-cert":       {"tls: {secretName: flag-tls}", "/etc/waitroom/tls/tls.crt"},
	"tls-key":        {"tls: {secretName: flag-tls}", "/etc/waitroom/tls/tls.key"},
}

// configKeys are the keys of values.yaml's config and of the schema's.
func configKeys(t *testing.T) (values, schema []string) {
	t.Helper()
	v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := v.Table("config")
	if err != nil {
		t.Fatal(err)
	}
	for k := range cfg {
		values = append(values, k)
	}
	data, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties struct {
			Config struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"config"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	for k := range s.Properties.Config.Properties {
		schema = append(schema, k)
	}
	sort.Strings(values)
	sort.Strings(schema)
	return values, schema
}

// TestEveryServeFlagReachable sets every flag of `waitroom serve --help`
// through the chart's values and finds it in the container's environment
// under the variable serve reads. A new serve flag fails here until it has
// a values path.
func TestEveryServeFlagReachable(t *testing.T) {
	flags := serveFlags(t)
	values, schema := configKeys(t)
	if !slices.Equal(values, schema) {
		t.Fatalf("values.yaml's config has %v, the schema's %v: each flag belongs in both", values, schema)
	}
	byName := map[string]serveFlag{}
	for _, f := range flags {
		byName[f.name] = f
	}
	for _, k := range values {
		if _, ok := byName[k]; !ok {
			t.Errorf("config.%s is no serve flag", k)
		}
		if _, ok := chartPaths[k]; ok {
			t.Errorf("config.%s is also set by the chart's own values", k)
		}
	}

	// Every config flag at once, each to a value of its own.
	var set strings.Builder
	set.WriteString("config:\n")
	for _, k := range values {
		fmt.Fprintf(&set, "  %s: probe-%s\n", k, k)
	}
	m := render(t, nil, set.String())
	configEnv := containerEnv(t, m, waitroomContainer(t, the(t, "Deployment", m.deployments)))

	for _, f := range flags {
		var got envSource
		var want, path string
		if p, ok := chartPaths[f.name]; ok {
			m := render(t, nil, p.values)
			got = containerEnv(t, m, waitroomContainer(t, the(t, "Deployment", m.deployments)))[f.env]
			want, path = p.want, p.values
		} else if slices.Contains(values, f.name) {
			got, want, path = configEnv[f.env], "probe-"+f.name, "config."+f.name
		} else {
			t.Errorf("serve flag --%s (%s) has no values path: add it to config in values.yaml and values.schema.json, or give it a path of the chart's own", f.name, f.env)
			continue
		}
		if !got.resolved || got.value != want {
			t.Errorf("--%s through %q: %s = %+v, want %q", f.name, path, f.env, got, want)
		}
	}
}
