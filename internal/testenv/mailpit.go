package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// MailpitVersion is the SMTP server the mail tests run: built from the Go
// module proxy, once per machine, into the user cache.
const MailpitVersion = "v1.33.1"

var mailpitBuild struct {
	once sync.Once
	path string
	err  error
}

// mailpitBinary returns the mailpit binary: $MAILPIT if set, else one
// go-installed into the user cache dir (a minute the first time).
func mailpitBinary(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("MAILPIT"); p != "" {
		return p
	}
	mailpitBuild.once.Do(func() {
		cache, err := os.UserCacheDir()
		if err != nil {
			mailpitBuild.err = err
			return
		}
		dir := filepath.Join(cache, "waitroom-test", "mailpit-"+MailpitVersion)
		bin := filepath.Join(dir, "mailpit")
		if _, err := os.Stat(bin); err == nil {
			mailpitBuild.path = bin
			return
		}
		// Built into a directory of its own, then renamed into place: the
		// test binaries of several packages may build it at once.
		if err := os.MkdirAll(dir, 0o755); err != nil {
			mailpitBuild.err = err
			return
		}
		tmp, err := os.MkdirTemp(dir, "build-")
		if err != nil {
			mailpitBuild.err = err
			return
		}
		defer os.RemoveAll(tmp)
		cmd := exec.Command("go", "install", "github.com/axllent/mailpit@"+MailpitVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-buildvcs=false", "GOWORK=off")
		cmd.Dir = os.TempDir() // outside this module: its go.mod must not decide
		if out, err := cmd.CombinedOutput(); err != nil {
			mailpitBuild.err = fmt.Errorf("go install mailpit %s: %v\n%s", MailpitVersion, err, out)
			return
		}
		if err := os.Rename(filepath.Join(tmp, "mailpit"), bin); err != nil {
			mailpitBuild.err = err
			return
		}
		mailpitBuild.path = bin
	})
	if mailpitBuild.err != nil {
		tb.Fatalf("the mail tests need mailpit (set MAILPIT to a binary, or let the test build it): %v", mailpitBuild.err)
	}
	return mailpitBuild.path
}

// Mailpit is a running mailpit: SMTP at SMTPURL, its API at API.
type Mailpit struct {
	SMTPURL string // smtp://127.0.0.1:PORT
	API     string // http://127.0.0.1:PORT
}

// StartMailpit starts a mailpit on loopback for the test; it stops at the
// test's end.
func StartMailpit(tb testing.TB) *Mailpit {
	tb.Helper()
	bin := mailpitBinary(tb)
	smtpPort, httpPort := freePort(tb), freePort(tb)
	dir := tb.TempDir()
	cmd := exec.Command(bin, "--smtp", "127.0.0.1:"+strconv.Itoa(smtpPort), "--listen", "127.0.0.1:"+strconv.Itoa(httpPort),
		"--database", filepath.Join(dir, "mailpit.db"), "--quiet", "--smtp-disable-rdns")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start mailpit: %v", err)
	}
	tb.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	m := &Mailpit{SMTPURL: "smtp://127.0.0.1:" + strconv.Itoa(smtpPort), API: "http://127.0.0.1:" + strconv.Itoa(httpPort)}
	// Ready when its API and its SMTP port answer: polled on a ticker,
	// at most 400 times.
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	var err error
	for try := 0; try < 400; try++ {
		var resp *http.Response
		if resp, err = http.Get(m.API + "/api/v1/messages"); err == nil {
			resp.Body.Close()
			var c net.Conn
			if c, err = net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(smtpPort)); err == nil {
				c.Close()
				return m
			}
		}
		<-tick.C
	}
	tb.Fatalf("mailpit did not come up: %v", err)
	return nil
}

func freePort(tb testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// MailpitMessage is one received message.
type MailpitMessage struct {
	ID      string
	Subject string
	To      []struct{ Address string }
	Text    string
	Headers map[string][]string
}

// Messages returns every message mailpit holds, newest first, in full.
func (m *Mailpit) Messages(ctx context.Context) ([]MailpitMessage, error) {
	var list struct {
		Messages []struct{ ID string }
	}
	if err := m.get(ctx, "/api/v1/messages", &list); err != nil {
		return nil, err
	}
	out := make([]MailpitMessage, 0, len(list.Messages))
	for _, l := range list.Messages {
		var msg MailpitMessage
		if err := m.get(ctx, "/api/v1/message/"+url.PathEscape(l.ID), &msg); err != nil {
			return nil, err
		}
		if err := m.get(ctx, "/api/v1/message/"+url.PathEscape(l.ID)+"/headers", &msg.Headers); err != nil {
			return nil, err
		}
		out = append(out, msg)
	}
	return out, nil
}

func (m *Mailpit) get(ctx context.Context, path string, into any) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m.API+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("mailpit %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}
