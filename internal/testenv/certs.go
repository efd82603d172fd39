package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// CertPair is a self-signed certificate for 127.0.0.1 and localhost and
// its ECDSA key, as PEM, and the certificate parsed (its serial tells
// one pair from another in a handshake).
type CertPair struct {
	CertPEM, KeyPEM []byte
	Cert            *x509.Certificate
}

// NewCertPair makes a fresh pair named name (its common name), valid
// from an hour ago for a day.
func NewCertPair(tb testing.TB, name string) CertPair {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(tb, err)
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	require.NoError(tb, err)
	template := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	require.NoError(tb, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(tb, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(tb, err)
	return CertPair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		Cert:    cert,
	}
}

// Write writes the pair to certFile and keyFile.
func (p CertPair) Write(tb testing.TB, certFile, keyFile string) {
	tb.Helper()
	require.NoError(tb, os.WriteFile(certFile, p.CertPEM, 0o600))
	require.NoError(tb, os.WriteFile(keyFile, p.KeyPEM, 0o600))
}

// CertFiles are the paths of a certificate and its key in a test's
// temporary directory, not written yet.
func CertFiles(tb testing.TB) (certFile, keyFile string) {
	dir := tb.TempDir()
	return filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
}

// Pool is a certificate pool that trusts the pair, for a client.
func (p CertPair) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.Cert)
	return pool
}
