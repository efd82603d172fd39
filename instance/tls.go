package instance

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// certCheckEvery is how often a handshake looks whether the certificate
// files have changed: a renewal is served within seconds, and a crowd's
// handshakes read the files at most this often.
const certCheckEvery = 5 * time.Second

// certHolder serves the certificate pair in two files and takes a new pair
// when the files change (a renewal by certbot or cert-manager), without a
// restart. A new pair that fails to load leaves the previous one served:
// a half-written renewal must not take the site off TLS.
type certHolder struct {
	certFile, keyFile string
	every             time.Duration
	now               func() time.Time
	log               *slog.Logger

	current atomic.Pointer[tls.Certificate]
	// checking is held by the one handshake that reads the files; the
	// others are served the current pair without waiting for it.
	checking sync.Mutex
	next     time.Time // no look at the files before it
	// The fingerprints of the files' pair served and of the last one
	// that failed to load.
	served, failed string
}

// newCertHolder loads the pair at start; an error names the file at fault.
func newCertHolder(certFile, keyFile string, log *slog.Logger) (*certHolder, error) {
	h := &certHolder{certFile: certFile, keyFile: keyFile, every: certCheckEvery, now: time.Now, log: log}
	certPEM, keyPEM, err := h.read()
	if err != nil {
		return nil, err
	}
	cert, err := h.parse(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	h.current.Store(cert)
	h.served = fingerprint(certPEM, keyPEM, nil)
	h.next = h.now().Add(h.every)
	h.warnValidity(cert)
	return h, nil
}

// GetCertificate is tls.Config's: the current pair, after a look at the
// files when one is due.
func (h *certHolder) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if h.checking.TryLock() {
		if now := h.now(); !now.Before(h.next) {
			h.next = now.Add(h.every)
			h.reload()
		}
		h.checking.Unlock()
	}
	return h.current.Load(), nil
}

// reload takes the pair in the files if they changed and load; a pair that
// fails is logged once and the current one kept.
func (h *certHolder) reload() {
	certPEM, keyPEM, err := h.read()
	seen := fingerprint(certPEM, keyPEM, err)
	if seen == h.served || seen == h.failed {
		return
	}
	var cert *tls.Certificate
	if err == nil {
		cert, err = h.parse(certPEM, keyPEM)
	}
	if err != nil {
		h.failed = seen
		h.log.Error("the changed TLS certificate files do not load; still serving the previous certificate", "err", err)
		return
	}
	h.current.Store(cert)
	h.served, h.failed = seen, ""
	h.log.Info("TLS certificate reloaded", "cert", h.certFile, "subject", cert.Leaf.Subject.String(),
		"not_after", cert.Leaf.NotAfter.Format(time.RFC3339))
	h.warnValidity(cert)
}

// fingerprint names what the files held (or why they could not be read),
// so that a change is seen and each one loaded or told once.
func fingerprint(certPEM, keyPEM []byte, err error) string {
	if err != nil {
		return "unread: " + err.Error()
	}
	c, k := sha256.Sum256(certPEM), sha256.Sum256(keyPEM)
	return string(c[:]) + string(k[:])
}

// read reads both files; an error names the file by its flag.
func (h *certHolder) read() (certPEM, keyPEM []byte, err error) {
	if certPEM, err = os.ReadFile(h.certFile); err != nil {
		return nil, nil, fmt.Errorf("--tls-cert: %w", err)
	}
	if keyPEM, err = os.ReadFile(h.keyFile); err != nil {
		return nil, nil, fmt.Errorf("--tls-key: %w", err)
	}
	return certPEM, keyPEM, nil
}

// parse makes the pair of certPEM and keyPEM, telling a certificate that
// does not parse apart from a key that does not (or does not match).
func (h *certHolder) parse(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	block, _ := pem.Decode(certPEM)
	for block != nil && block.Type != "CERTIFICATE" {
		block, _ = pem.Decode(nil)
	}
	if block == nil {
		return nil, fmt.Errorf("--tls-cert %s: no PEM CERTIFICATE block in it", h.certFile)
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		return nil, fmt.Errorf("--tls-cert %s: %w", h.certFile, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// The leaf parsed, so what is wrong is the key or the match.
		return nil, fmt.Errorf("--tls-key %s (for --tls-cert %s): %w", h.keyFile, h.certFile, err)
	}
	return &cert, nil
}

// warnValidity tells a certificate that clients refuse by its dates; it is
// still served (a restart must not fail on it), but someone should know.
func (h *certHolder) warnValidity(cert *tls.Certificate) {
	now := h.now()
	switch leaf := cert.Leaf; {
	case now.After(leaf.NotAfter):
		h.log.Warn("the TLS certificate has expired; clients will refuse it", "cert", h.certFile, "not_after", leaf.NotAfter.Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		h.log.Warn("the TLS certificate is not valid yet; clients will refuse it", "cert", h.certFile, "not_before", leaf.NotBefore.Format(time.RFC3339))
	}
}

// tlsConfig is what every listener of the instance serves TLS with: the
// holder's pair, TLS 1.2 at least, Go's default cipher suites, HTTP/2 and
// HTTP/1.1 by ALPN.
func (h *certHolder) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: h.GetCertificate,
		NextProtos:     []string{"h2", "http/1.1"},
	}
}
