package instance

import (
	"crypto/tls"
	"log/slog"
	"math/big"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/internal/testenv"
)

// fakeClock is the holder's clock, moved by hand, so that a check of the
// files falls due when the test says, not after a sleep.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time          { return c.now }
func (c *fakeClock) Advance(d time.Duration) { c.now = c.now.Add(d) }

// startHolder loads pair from fresh files into a holder on a fake clock.
func startHolder(t *testing.T, pair testenv.CertPair, logs *testenv.LogBuffer) (h *certHolder, clock *fakeClock, certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = testenv.CertFiles(t)
	pair.Write(t, certFile, keyFile)
	h, err := newCertHolder(certFile, keyFile, slog.New(slog.NewTextHandler(logs, nil)))
	require.NoError(t, err)
	clock = &fakeClock{now: time.Now()}
	h.now = clock.Now
	h.next = clock.now.Add(h.every)
	return h, clock, certFile, keyFile
}

// handshake is one TLS handshake with h's config over a pipe; it returns
// the serial of the certificate the server presented.
func handshake(t *testing.T, h *certHolder) *big.Int {
	t.Helper()
	serverEnd, clientEnd := net.Pipe()
	defer serverEnd.Close()
	defer clientEnd.Close()
	served := make(chan error, 1)
	go func() { served <- tls.Server(serverEnd, h.tlsConfig()).Handshake() }()
	client := tls.Client(clientEnd, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test reads what is presented
	require.NoError(t, client.Handshake())
	require.NoError(t, <-served)
	return client.ConnectionState().PeerCertificates[0].SerialNumber
}

// TestCertHolderReloadsChangedPair: a renewed pair is presented by the
// first handshake once a check is due, not before, and without a restart.
func TestCertHolderReloadsChangedPair(t *testing.T) {
	t.Parallel()
	first, second := testenv.NewCertPair(t, "first"), testenv.NewCertPair(t, "second")
	logs := &testenv.LogBuffer{}
	h, clock, certFile, keyFile := startHolder(t, first, logs)
	require.Equal(t, first.Cert.SerialNumber, handshake(t, h))

	second.Write(t, certFile, keyFile)
	clock.Advance(h.every - time.Millisecond)
	require.Equal(t, first.Cert.SerialNumber, handshake(t, h), "no look at the files before the check is due")
	clock.Advance(time.Millisecond)
	require.Equal(t, second.Cert.SerialNumber, handshake(t, h))
	require.Contains(t, logs.String(), `msg="TLS certificate reloaded"`)
	require.Contains(t, logs.String(), `subject="CN=second"`)

	// Unchanged files: nothing is loaded or told again.
	clock.Advance(h.every)
	require.Equal(t, second.Cert.SerialNumber, handshake(t, h))
	require.Equal(t, 1, strings.Count(logs.String(), "TLS certificate reloaded"))
}

// TestCertHolderKeepsPairThatFailsToLoad: a new pair that does not load
// (a garbled certificate, a key of another certificate, a file half
// renamed away) leaves the previous pair served and is told once per
// change; a good pair after it is taken.
func TestCertHolderKeepsPairThatFailsToLoad(t *testing.T) {
	t.Parallel()
	first, other, last := testenv.NewCertPair(t, "first"), testenv.NewCertPair(t, "other"), testenv.NewCertPair(t, "last")
	logs := &testenv.LogBuffer{}
	h, clock, certFile, keyFile := startHolder(t, first, logs)
	const failed = "the changed TLS certificate files do not load"
	steps := []struct {
		name  string
		write func()
		want  string // in the one error logged
	}{
		{"garbled certificate", func() {
			require.NoError(t, os.WriteFile(certFile, []byte("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n"), 0o600))
		}, "--tls-cert " + certFile},
		{"the key of another certificate", func() {
			require.NoError(t, os.WriteFile(certFile, other.CertPEM, 0o600))
		}, "--tls-key " + keyFile},
		{"the key file gone", func() { require.NoError(t, os.Remove(keyFile)) }, "--tls-key: open " + keyFile},
	}
	for i, step := range steps {
		step.write()
		for range 3 { // each change is told once, however many checks see it
			clock.Advance(h.every)
			require.Equal(t, first.Cert.SerialNumber, handshake(t, h), step.name)
		}
		require.Equal(t, i+1, strings.Count(logs.String(), failed), step.name)
		require.Contains(t, logs.String(), step.want, step.name)
	}
	last.Write(t, certFile, keyFile)
	clock.Advance(h.every)
	require.Equal(t, last.Cert.SerialNumber, handshake(t, h))
	require.Equal(t, len(steps), strings.Count(logs.String(), failed))
}

// TestNewCertHolderRefusesBadPair: at start a pair that does not load is
// an error naming the flag and the file at fault.
func TestNewCertHolderRefusesBadPair(t *testing.T) {
	t.Parallel()
	pair, other := testenv.NewCertPair(t, "pair"), testenv.NewCertPair(t, "other")
	tests := []struct {
		name      string
		cert, key []byte // nil: no such file
		want      string // %c and %k: the files
	}{
		{"no certificate file", nil, pair.KeyPEM, "--tls-cert: open %c"},
		{"no key file", pair.CertPEM, nil, "--tls-key: open %k"},
		{"a key as the certificate", pair.KeyPEM, pair.KeyPEM, "--tls-cert %c: no PEM CERTIFICATE block"},
		{"a certificate that does not parse", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), pair.KeyPEM, "--tls-cert %c: x509:"},
		{"a certificate as the key", pair.CertPEM, pair.CertPEM, "--tls-key %k (for --tls-cert %c): tls:"},
		{"the key of another certificate", pair.CertPEM, other.KeyPEM, "--tls-key %k (for --tls-cert %c): tls: private key does not match public key"},
	}
	for _, tt := range tests {
		certFile, keyFile := testenv.CertFiles(t)
		if tt.cert != nil {
			require.NoError(t, os.WriteFile(certFile, tt.cert, 0o600))
		}
		if tt.key != nil {
			require.NoError(t, os.WriteFile(keyFile, tt.key, 0o600))
		}
		_, err := newCertHolder(certFile, keyFile, slog.New(slog.DiscardHandler))
		require.Error(t, err, tt.name)
		require.Contains(t, err.Error(), strings.NewReplacer("%c", certFile, "%k", keyFile).Replace(tt.want), tt.name)
	}
}

// TestTLSConfigBounds: TLS 1.2 at least, Go's default cipher suites,
// HTTP/2 offered first.
func TestTLSConfigBounds(t *testing.T) {
	t.Parallel()
	h, _, _, _ := startHolder(t, testenv.NewCertPair(t, "bounds"), &testenv.LogBuffer{})
	cfg := h.tlsConfig()
	require.Equal(t, uint16(tls.VersionTLS12), cfg.MinVersion)
	require.Nil(t, cfg.CipherSuites)
	require.Equal(t, []string{"h2", "http/1.1"}, cfg.NextProtos)

	// A client that offers no more than TLS 1.1 is refused.
	serverEnd, clientEnd := net.Pipe()
	defer serverEnd.Close()
	defer clientEnd.Close()
	go func() { _ = tls.Server(serverEnd, cfg).Handshake() }()
	err := tls.Client(clientEnd, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS11}).Handshake() //nolint:gosec // the old client under test
	require.Error(t, err)
}

// TestCertHolderConcurrentHandshakes: handshakes at once while a reload
// is due all succeed, each presenting the old pair or the new one (the
// one that reads the files does not hold the others up), and the next
// one presents the new pair.
func TestCertHolderConcurrentHandshakes(t *testing.T) {
	t.Parallel()
	first, second := testenv.NewCertPair(t, "first"), testenv.NewCertPair(t, "second")
	h, clock, certFile, keyFile := startHolder(t, first, &testenv.LogBuffer{})
	second.Write(t, certFile, keyFile)
	clock.Advance(h.every)
	const n = 32
	serials := make([]*big.Int, n)
	errs := make([]error, n)
	testenv.AtOnce(n, func(i int) {
		cert, err := h.GetCertificate(&tls.ClientHelloInfo{})
		errs[i] = err
		if err == nil {
			serials[i] = cert.Leaf.SerialNumber
		}
	})
	for i := range n {
		require.NoError(t, errs[i])
		require.Contains(t, []*big.Int{first.Cert.SerialNumber, second.Cert.SerialNumber}, serials[i])
	}
	require.Equal(t, second.Cert.SerialNumber, handshake(t, h))
}
