package notify

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/smtp"
	"net/url"
	"strings"
	"time"
)

// Mailer sends notices over SMTP.
type Mailer struct {
	addr     string // host:port
	host     string
	implicit bool // smtps: TLS from the first byte
	auth     smtp.Auth
	from     string
	// TLS configures STARTTLS and smtps; nil: the system's roots for host.
	TLS *tls.Config
	// Timeout bounds one message, dial to QUIT; default 30 s.
	Timeout time.Duration
}

// NewMailer reads an SMTP URL, smtp://[user:password@]host[:port] (port
// 25, STARTTLS whenever the server offers it) or smtps://… (port 465,
// TLS at once), and the From address.
func NewMailer(smtpURL, from string) (*Mailer, error) {
	u, err := url.Parse(smtpURL)
	if err != nil {
		return nil, fmt.Errorf("--smtp-url: %w", err)
	}
	m := &Mailer{host: u.Hostname(), from: from}
	port := u.Port()
	switch u.Scheme {
	case "smtp":
		port = cmpOr(port, "25")
	case "smtps":
		port, m.implicit = cmpOr(port, "465"), true
	default:
		return nil, fmt.Errorf("--smtp-url must be smtp://host[:port] or smtps://host[:port], got scheme %q", u.Scheme)
	}
	if m.host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, fmt.Errorf("--smtp-url must be smtp://[user:password@]host[:port] and nothing more, got %q", u.Redacted())
	}
	if err := CheckEmail(from); err != nil {
		return nil, fmt.Errorf("--mail-from %q is not a bare address (name@domain)", from)
	}
	m.addr = net.JoinHostPort(m.host, port)
	if u.User != nil {
		pw, _ := u.User.Password()
		// net/smtp sends PLAIN only over TLS or to loopback.
		m.auth = smtp.PlainAuth("", u.User.Username(), pw, m.host)
	}
	return m, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Send writes one plain-text message to to.
func (m *Mailer) Send(ctx context.Context, to, subject, body string) error {
	timeout := m.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tlsConfig := m.TLS
	if tlsConfig == nil {
		tlsConfig = &tls.Config{ServerName: m.host, MinVersion: tls.VersionTLS12}
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", m.addr)
	if err != nil {
		return fmt.Errorf("smtp: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if m.implicit {
		conn = tls.Client(conn, tlsConfig)
	}
	c, err := smtp.NewClient(conn, m.host)
	if err != nil {
		conn.Close()
		return fmt.Errorf("smtp: %w", err)
	}
	defer c.Close()
	if !m.implicit {
		if ok, _ := c.Extension("STARTTLS"); ok {
			if err := c.StartTLS(tlsConfig); err != nil {
				return fmt.Errorf("smtp starttls: %w", err)
			}
		}
	}
	if m.auth != nil {
		if err := c.Auth(m.auth); err != nil {
			return fmt.Errorf("smtp auth: %w", err)
		}
	}
	if err := c.Mail(m.from); err != nil {
		return fmt.Errorf("smtp MAIL FROM: %w", err)
	}
	if err := c.Rcpt(to); err != nil {
		return fmt.Errorf("smtp RCPT TO: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	if _, err := w.Write(m.message(to, subject, body)); err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	return c.Quit()
}

// message is the RFC 5322 message: UTF-8 subject in encoded words, the
// body quoted-printable, so that any language passes any relay.
func (m *Mailer) message(to, subject, body string) []byte {
	var id [12]byte
	_, _ = rand.Read(id[:])
	_, domain, _ := strings.Cut(m.from, "@")
	var b bytes.Buffer
	for _, h := range [][2]string{
		{"From", m.from},
		{"To", to},
		{"Subject", mime.QEncoding.Encode("utf-8", subject)},
		{"Date", time.Now().UTC().Format(time.RFC1123Z)},
		{"Message-ID", "<" + hex.EncodeToString(id[:]) + "@" + domain + ">"},
		{"MIME-Version", "1.0"},
		{"Content-Type", "text/plain; charset=utf-8"},
		{"Content-Transfer-Encoding", "quoted-printable"},
		{"Auto-Submitted", "auto-generated"},
	} {
		b.WriteString(h[0] + ": " + h[1] + "\r\n")
	}
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	_, _ = qp.Write([]byte(strings.ReplaceAll(body, "\n", "\r\n")))
	_ = qp.Close()
	return b.Bytes()
}
