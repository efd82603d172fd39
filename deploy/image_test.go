package deploy

import (
	"bufio"
	"context"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// repoRoot is where the Dockerfile and go.mod are.
const repoRoot = ".."

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	op   string // upper case: FROM, RUN, COPY, …
	args string
}

// stage is a FROM and what follows it up to the next FROM.
type stage struct {
	from, name string
	body       []instruction
}

// parseDockerfile returns the ARGs before the first FROM (name → default)
// and the stages in order. It understands what this Dockerfile uses:
// comments, parser directives, backslash continuations.
func parseDockerfile(t *testing.T, path string) (map[string]string, []stage) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	var pending string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || line == "" && pending == "" {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			pending += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		lines = append(lines, pending+line)
		pending = ""
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if pending != "" {
		t.Fatalf("%s ends in a continuation", path)
	}
	globalArgs := map[string]string{}
	var stages []stage
	for _, line := range lines {
		op, args, _ := strings.Cut(line, " ")
		in := instruction{op: strings.ToUpper(op), args: strings.TrimSpace(args)}
		switch {
		case in.op == "FROM":
			fields := strings.Fields(in.args)
			s := stage{from: fields[0]}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				s.name = fields[2]
			} else if len(fields) != 1 {
				t.Fatalf("FROM %s: want IMAGE [AS NAME]", in.args)
			}
			stages = append(stages, s)
		case len(stages) == 0 && in.op == "ARG":
			name, def, _ := strings.Cut(in.args, "=")
			globalArgs[name] = def
		case len(stages) == 0:
			t.Fatalf("%s before the first FROM", in.op)
		default:
			stages[len(stages)-1].body = append(stages[len(stages)-1].body, in)
		}
	}
	return globalArgs, stages
}

func (s stage) all(op string) []string {
	var out []string
	for _, in := range s.body {
		if in.op == op {
			out = append(out, in.args)
		}
	}
	return out
}

// buildCommand is the Dockerfile's go build, split into its environment
// and arguments (single quotes group as in sh).
func buildCommand(t *testing.T, s stage) (env, args []string) {
	t.Helper()
	for _, run := range s.all("RUN") {
		if !strings.Contains(run, "go build") {
			continue
		}
		var words []string
		var word strings.Builder
		quoted := false
		for _, r := range run + " " {
			switch {
			case r == '\'':
				quoted = !quoted
			case r == ' ' && !quoted:
				if word.Len() > 0 {
					words = append(words, word.String())
					word.Reset()
				}
			default:
				word.WriteRune(r)
			}
		}
		for len(words) > 0 && strings.Contains(words[0], "=") {
			env, words = append(env, words[0]), words[1:]
		}
		if len(words) < 2 || words[0] != "go" || words[1] != "build" {
			t.Fatalf("RUN %s: want [VAR=value …] go build …", run)
		}
		return env, words[2:]
	}
	t.Fatalf("stage %s runs no go build", s.name)
	return nil, nil
}

// TestDockerfile checks what the image promises, read from the
// Dockerfile itself: the bases are build arguments, the build is static,
// and every runtime stage runs nothing, holds the binary only and starts
// it as the non-root uid.
func TestDockerfile(t *testing.T) {
	globalArgs, stages := parseDockerfile(t, filepath.Join(repoRoot, "Dockerfile"))
	wantArgs := map[string]string{
		"GO_IMAGE":      "golang:1.26-bookworm",
		"RUNTIME_IMAGE": "gcr.io/distroless/static-debian12:nonroot",
	}
	for name, def := range wantArgs {
		if globalArgs[name] != def {
			t.Errorf("ARG %s=%q, want %q", name, globalArgs[name], def)
		}
	}
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a build stage and a runtime stage", len(stages))
	}
	var build *stage
	for i, s := range stages {
		switch s.from {
		case "${GO_IMAGE}":
			if build != nil {
				t.Errorf("two stages FROM ${GO_IMAGE}")
			}
			build = &stages[i]
		case "${RUNTIME_IMAGE}":
			checkRuntimeStage(t, s)
		default:
			t.Errorf("stage %s FROM %s: want ${GO_IMAGE} or ${RUNTIME_IMAGE}", s.name, s.from)
		}
	}
	if last := stages[len(stages)-1]; last.from != "${RUNTIME_IMAGE}" {
		t.Errorf("the default (last) stage is FROM %s, want ${RUNTIME_IMAGE}", last.from)
	}
	if build == nil {
		t.Fatal("no stage FROM ${GO_IMAGE}")
	}
	env, args := buildCommand(t, *build)
	if strings.Join(env, " ") != "CGO_ENABLED=0" {
		t.Errorf("go build environment %v, want CGO_ENABLED=0 (a static binary)", env)
	}
	for _, want := range []string{"-trimpath", "-buildvcs=true", "-ldflags=-s -w", "./cmd/waitroom"} {
		if !contains(args, want) {
			t.Errorf("go build %v lacks %s", args, want)
		}
	}
}

func checkRuntimeStage(t *testing.T, s stage) {
	t.Helper()
	if runs := s.all("RUN"); len(runs) > 0 {
		t.Errorf("runtime stage %s runs %q: it has no shell and must hold the binary only", s.name, runs)
	}
	for _, c := range s.all("COPY") {
		dest := strings.Fields(c)[len(strings.Fields(c))-1]
		if dest != "/waitroom" && dest != "/etc/ssl/certs/ca-certificates.crt" {
			t.Errorf("runtime stage %s copies %q: only the binary and CA certificates belong there", s.name, c)
		}
	}
	checks := map[string]string{
		"USER":       "65532:65532",
		"EXPOSE":     "8080",
		"ENTRYPOINT": `["/waitroom"]`,
		"CMD":        `["serve", "--addr", ":8080"]`,
	}
	for op, want := range checks {
		if got := s.all(op); len(got) != 1 || got[0] != want {
			t.Errorf("runtime stage %s: %s %q, want exactly %s %s", s.name, op, got, op, want)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// buildBinary builds cmd/waitroom with the Dockerfile's own command into
// dir/waitroom.
func buildBinary(t *testing.T, dir string) string {
	t.Helper()
	_, stages := parseDockerfile(t, filepath.Join(repoRoot, "Dockerfile"))
	var env, args []string
	for _, s := range stages {
		if s.from == "${GO_IMAGE}" {
			env, args = buildCommand(t, s)
		}
	}
	out := filepath.Join(dir, "waitroom")
	for i := range args {
		if args[i] == "-o" && i+1 < len(args) {
			args[i+1] = out
		}
	}
	cmd := exec.Command("go", append([]string{"build"}, args...)...)
	cmd.Dir = repoRoot
	// GOFLAGS is emptied so a developer's -buildvcs=false cannot change
	// the build the image gets.
	cmd.Env = append(os.Environ(), append(env, "GOFLAGS=")...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %v: %v\n%s", args, err, b)
	}
	return out
}

// podman runs podman with args and returns its output, failing the test
// with the output when it fails.
func podman(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, "podman", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return strings.TrimSpace(string(b))
}

// runFlags run a container the way the image is meant to run: a
// read-only root filesystem. runc, because crun refuses a host with cgroup
// v1 hierarchies and a controller on v2 (as CI's is); the limits at or
// below the host's, because podman's defaults raise them and a runner
// without CAP_SYS_RESOURCE may not.
var runFlags = []string{"--runtime", "runc", "run", "--rm", "--read-only",
	"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"}

// TestImage builds the binary as the Dockerfile does, checks it is
// static, builds the image from it FROM scratch (nothing to pull) and runs
// it: version answers as the non-root uid on a read-only root, and serve
// answers /healthz from inside the container.
func TestImage(t *testing.T) {
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatal("podman is missing (Debian: apt-get install -y podman runc; ./scripts/test installs it)")
	}
	ctxDir := t.TempDir()
	bin := buildBinary(t, ctxDir)

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("binary has a %v program header: it is not static", p.Type)
		}
	}
	if f.Section(".dynamic") != nil {
		t.Error("binary has a .dynamic section: it is not static")
	}
	f.Close()

	dockerfile, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), dockerfile, 0o644); err != nil {
		t.Fatal(err)
	}
	image := "localhost/waitroom-test:" + randomHex(t)
	podman(t, "build", "--build-arg", "RUNTIME_IMAGE=scratch", "--target", "prebuilt", "-t", image, ctxDir)
	t.Cleanup(func() { _ = exec.Command("podman", "rmi", "-f", image).Run() })

	if got := podman(t, "image", "inspect", "--format", "{{.Config.User}}", image); got != "65532:65532" {
		t.Errorf("image user %q, want 65532:65532", got)
	}
	out := podman(t, append(runFlags, image, "version")...)
	if !strings.Contains(out, "version:") || !strings.Contains(out, "go:") {
		t.Errorf("waitroom version in the image printed:\n%s", out)
	}

	// serve on the host's network at a free loopback port; no --user: the
	// image's own USER must make it non-root.
	port := freePort(t)
	name := "waitroom-test-" + randomHex(t)
	podman(t, append(append([]string{}, runFlags...), "-d", "--name", name, "--network", "host",
		image, "serve", "--addr", "127.0.0.1:"+port)...)
	t.Cleanup(func() { _ = exec.Command("podman", "rm", "-f", name).Run() })
	if got := podman(t, "inspect", "--format", "{{.Config.User}}", name); got != "65532:65532" {
		t.Errorf("container user %q, want 65532:65532", got)
	}
	// The image has no ps for podman top: read the process's uids from
	// the host's /proc.
	pid := podman(t, "inspect", "--format", "{{.State.Pid}}", name)
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if ids, ok := strings.CutPrefix(line, "Uid:"); ok && strings.Join(strings.Fields(ids), " ") != "65532 65532 65532 65532" {
			t.Errorf("serve in the container runs with uids %s, want 65532 throughout", ids)
		}
	}
	url := "http://127.0.0.1:" + port + "/healthz"
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			t.Fatalf("GET %s: %s", url, resp.Status)
		}
		if time.Now().After(deadline) {
			logs, _ := exec.Command("podman", "logs", name).CombinedOutput()
			t.Fatalf("GET %s: %v after a minute; container log:\n%s", url, err, logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
