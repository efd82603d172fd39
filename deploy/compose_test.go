package deploy

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/types"
)

var (
	composeFile = filepath.Join("compose", "compose.yaml")
	envExample  = filepath.Join("compose", ".env.example")
)

// marker is what variable name interpolates to in the test: a value that
// came from the env file is recognisable wherever it lands.
func marker(name string) string { return "from-env-file." + name }

var markerRE = regexp.MustCompile(`from-env-file\.[A-Z_]+`)

// loadCompose loads compose.yaml with compose-go as docker compose does,
// every variable set to its marker, and nothing from the process's own
// environment or a local .env.
func loadCompose(t *testing.T, names []string) (*types.Project, error) {
	t.Helper()
	env := make([]string, 0, len(names))
	for _, name := range names {
		env = append(env, name+"="+marker(name))
	}
	opts, err := cli.NewProjectOptions([]string{composeFile}, cli.WithEnv(env), cli.WithInterpolation(true))
	if err != nil {
		t.Fatal(err)
	}
	return opts.LoadProject(context.Background())
}

// exampleNames are the variables .env.example sets, sorted.
func exampleNames(t *testing.T) []string {
	t.Helper()
	vars, err := dotenv.Read(envExample)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name, value := range vars {
		// The example must not be a working set of secrets.
		if !strings.HasPrefix(value, "change-me") {
			t.Errorf(".env.example sets %s=%q: want a change-me placeholder", name, value)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func TestComposeStack(t *testing.T) {
	names := exampleNames(t)
	p, err := loadCompose(t, names)
	if err != nil {
		t.Fatalf("compose-go cannot load %s with .env.example's variables: %v", composeFile, err)
	}
	want := []string{"lb", "postgres", "rabbitmq", "valkey", "waitroom-1", "waitroom-2"}
	if got := p.ServiceNames(); !slices.Equal(sorted(got), want) {
		t.Fatalf("services %v, want %v", sorted(got), want)
	}
	for name, s := range p.Services {
		hc := s.HealthCheck
		if hc == nil || hc.Disable || len(hc.Test) < 2 || hc.Test[0] != "CMD" {
			t.Errorf("service %s: healthcheck %+v, want a CMD test", name, hc)
		}
		if s.Build != nil {
			checkWaitroomService(t, name, s)
		} else if name != "lb" && len(s.Ports) > 0 {
			t.Errorf("service %s publishes %v: only the load balancer faces the buyers", name, s.Ports)
		}
		checkNoSecretLiteral(t, name, s)
	}
	lb := p.Services["lb"]
	for _, port := range readmePorts(t) {
		if !slices.ContainsFunc(lb.Ports, func(pc types.ServicePortConfig) bool { return pc.Published == port }) {
			t.Errorf("README names port %s; the load balancer publishes %+v", port, lb.Ports)
		}
	}
	// waitroom believes the user header and X-Forwarded-For only from
	// nginx's fixed address.
	edge := lb.Networks["edge"]
	for _, name := range []string{"waitroom-1", "waitroom-2"} {
		trusted := p.Services[name].Environment["WAITROOM_TRUSTED_PROXIES"]
		if edge == nil || trusted == nil {
			t.Errorf("%s: no WAITROOM_TRUSTED_PROXIES, or no fixed address for the load balancer", name)
		} else if *trusted != edge.Ipv4Address+"/32" {
			t.Errorf("%s trusts %s; the load balancer is at %s", name, *trusted, edge.Ipv4Address)
		}
	}
	conf, err := os.ReadFile(filepath.Join("compose", "nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"waitroom-1", "waitroom-2"} {
		if !strings.Contains(string(conf), "server "+name+":8080") {
			t.Errorf("nginx.conf does not balance onto %s:8080", name)
		}
	}
}

// TestComposeNeedsEverySecret: a variable missing from .env stops
// compose (${VAR:?}) instead of starting with an empty password.
func TestComposeNeedsEverySecret(t *testing.T) {
	names := exampleNames(t)
	for i, missing := range names {
		rest := slices.Delete(slices.Clone(names), i, i+1)
		if _, err := loadCompose(t, rest); err == nil || !strings.Contains(err.Error(), missing) {
			t.Errorf("without %s: load error %v, want one naming it", missing, err)
		}
	}
}

func checkWaitroomService(t *testing.T, name string, s types.ServiceConfig) {
	t.Helper()
	if !s.ReadOnly {
		t.Errorf("%s: root filesystem writable, want read_only: true", name)
	}
	if s.User != "65532:65532" {
		t.Errorf("%s: user %q, want 65532:65532", name, s.User)
	}
	if !slices.Equal(s.CapDrop, []string{"ALL"}) || len(s.CapAdd) > 0 {
		t.Errorf("%s: cap_drop %v cap_add %v, want cap_drop [ALL] and nothing added", name, s.CapDrop, s.CapAdd)
	}
	if !slices.Contains(s.SecurityOpt, "no-new-privileges:true") {
		t.Errorf("%s: security_opt %v lacks no-new-privileges:true", name, s.SecurityOpt)
	}
	if s.Privileged {
		t.Errorf("%s: privileged", name)
	}
	if test := s.HealthCheck.Test; len(test) < 3 || test[1] != "/waitroom" || test[2] != "probe" {
		t.Errorf("%s: healthcheck %v, want CMD /waitroom probe …", name, test)
	}
	if s.Build.Context != mustAbs(t, repoRoot) {
		t.Errorf("%s: builds %s, want the repository's root Dockerfile", name, s.Build.Context)
	}
}

// secretName is an environment variable or flag that carries a secret.
var secretName = regexp.MustCompile(`(?i)pass|token|secret|auth|key`)

// checkNoSecretLiteral: every secret in the service's environment and
// command — by name, or as a URL's password — is a variable from the env
// file, never text in compose.yaml.
func checkNoSecretLiteral(t *testing.T, name string, s types.ServiceConfig) {
	t.Helper()
	fromEnvFile := func(v string) bool { return markerRE.FindString(v) == v }
	for key, v := range s.Environment {
		if v == nil {
			continue
		}
		if secretName.MatchString(key) && !fromEnvFile(*v) {
			t.Errorf("%s: %s=%q is written in compose.yaml; want ${VAR} from .env", name, key, *v)
		}
		checkURLPassword(t, name, key, *v, fromEnvFile)
	}
	for i, word := range s.Command {
		if strings.HasPrefix(word, "--") && secretName.MatchString(word) {
			if i+1 >= len(s.Command) || !fromEnvFile(s.Command[i+1]) {
				t.Errorf("%s: command %s is not followed by a ${VAR} from .env", name, word)
			}
		}
		checkURLPassword(t, name, "command", word, fromEnvFile)
	}
}

func checkURLPassword(t *testing.T, service, where, v string, fromEnvFile func(string) bool) {
	t.Helper()
	if !strings.Contains(v, "://") {
		return
	}
	u, err := url.Parse(v)
	if err != nil {
		t.Errorf("%s: %s=%q does not parse: %v", service, where, v, err)
		return
	}
	if pw, ok := u.User.Password(); ok && !fromEnvFile(pw) {
		t.Errorf("%s: %s has a literal password in its URL", service, where)
	}
}

// readmePorts are the localhost ports README's "Run it for real" section
// tells the reader to open.
func readmePorts(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Run it for real\n")
	if !ok {
		t.Fatal(`README.md has no "## Run it for real" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	if !strings.Contains(section, "docker compose -f deploy/compose/compose.yaml up -d") {
		t.Error("README's Run it for real section does not give the one command")
	}
	var ports []string
	for _, m := range regexp.MustCompile(`localhost:(\d+)`).FindAllStringSubmatch(section, -1) {
		ports = append(ports, m[1])
	}
	if len(ports) == 0 {
		t.Error("README's Run it for real section names no localhost port")
	}
	return ports
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

func mustAbs(t *testing.T, path string) string {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}
