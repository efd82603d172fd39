package main

import (
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/waitroom/waitroom/internal/testenv"
)

// tlsClient trusts pair and speaks the protocols given (HTTP/2 and
// HTTP/1.1 by ALPN, or HTTP/1.1 alone).
func tlsClient(t *testing.T, pair testenv.CertPair, http2 bool) *http.Client {
	t.Helper()
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(http2)
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pair.Pool()}, Protocols: protocols}
	t.Cleanup(transport.CloseIdleConnections)
	return &http.Client{Transport: transport}
}

// TestServeTLS: with --tls-cert and --tls-key every listener serves TLS,
// HTTP/2 to a client that offers it and HTTP/1.1 to one that does not;
// plain HTTP on the TLS port is refused.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	pair := testenv.NewCertPair(t, "waitroom-test")
	certFile, keyFile := testenv.CertFiles(t)
	pair.Write(t, certFile, keyFile)
	logs := &testenv.LogBuffer{}
	m := startMainLogging(t, []string{"--metrics-addr", "127.0.0.1:0", "--admin-token", testAdminToken, "--admin-addr", "127.0.0.1:0"},
		envOf("WAITROOM_TLS_CERT", certFile, "WAITROOM_TLS_KEY", keyFile), logs)
	require.Regexp(t, `msg="waiting room listening" addr=\S+ tls=true `, logs.String())

	for _, url := range []string{"https://" + m.Addr() + "/healthz", "https://" + m.MetricsAddr() + "/metrics"} {
		for _, http2 := range []bool{true, false} {
			resp, body := testenv.Get(t, tlsClient(t, pair, http2), url)
			require.Equal(t, http.StatusOK, resp.StatusCode, url)
			require.NotEmpty(t, body, url)
			require.Equal(t, map[bool]int{true: 2, false: 1}[http2], resp.ProtoMajor, "%s, HTTP/2 offered: %v", url, http2)
			require.NotNil(t, resp.TLS, url)
			require.GreaterOrEqual(t, resp.TLS.Version, uint16(tls.VersionTLS12))
		}
	}
	require.Equal(t, http.StatusOK, bearerStatusWith(t, tlsClient(t, pair, true), "https://"+m.AdminAddr()+"/admin/rooms"), "the admin listener")

	// A browser typing http:// reaches a TLS port: Go answers 400.
	resp, err := http.Get("http://" + m.Addr() + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)

}

// bearerStatusWith is bearerStatus with client.
func bearerStatusWith(t *testing.T, client *http.Client, url string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := client.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestServeRefusesBadTLS: half a pair is a usage error naming the flag;
// a pair that does not load refuses the start, naming the file.
func TestServeRefusesBadTLS(t *testing.T) {
	t.Parallel()
	pair, other := testenv.NewCertPair(t, "pair"), testenv.NewCertPair(t, "other")
	certFile, keyFile := testenv.CertFiles(t)
	pair.Write(t, certFile, keyFile)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", certFile}, `--tls-cert="` + certFile + `": needs --tls-key`},
		{[]string{"--tls-key", keyFile}, `--tls-key="` + keyFile + `": needs --tls-cert`},
	} {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), append([]string{"serve", "--addr", "127.0.0.1:0"}, tt.args...), envOf(), &stdout, &stderr)
		require.Equal(t, exitUsage, code, tt.args)
		require.Contains(t, stderr.String(), tt.want)
	}

	require.NoError(t, os.WriteFile(keyFile, other.KeyPEM, 0o600))
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"serve", "--addr", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile}, envOf(), &stdout, &stderr)
	require.Equal(t, exitFailure, code)
	require.Contains(t, stderr.String(), `msg="start failed"`)
	require.Contains(t, stderr.String(), "--tls-key "+keyFile)
	require.True(t, strings.Contains(stderr.String(), "private key does not match public key"), stderr.String())
}
