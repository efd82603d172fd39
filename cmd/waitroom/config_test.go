package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBadURLsNeverEchoPasswords: an error about a URL setting names it
// without the credential in it.
func TestBadURLsNeverEchoPasswords(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--redis-url", "redis://user:hunter2secret@127.0.0.1:6379/notadb"},
		{"--database-url", "mysql://user:hunter2secret@127.0.0.1/test"},
		{"--amqp-url", "amqp://guest:hunter2secret@"},
		{"--redis-url", "redis://user:hunter2secret@[::1"},
		{"--shop-url", "https://user:hunter2secret@shop.example/"},
		{"--shop-url", "ftp://user:hunter2secret@shop.example/"},
	} {
		_, err := parseServe(args, envOf())
		require.Error(t, err, "%v", args)
		require.NotContains(t, err.Error(), "hunter2secret", "%v", args)
		require.Contains(t, err.Error(), args[0])
	}
}

// TestParseServeShopAddr: --shop-addr serves the built-in shop for a
// proxy's forward auth, so it needs --settle-secret and no --upstream.
func TestParseServeShopAddr(t *testing.T) {
	t.Parallel()
	const secret = "settle-secret-of-at-least-32-bytes!"
	c, err := parseServe([]string{"--shop-addr", "127.0.0.1:8081", "--settle-secret", secret}, envOf())
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:8081", c.ShopAddr)
	c, err = parseServe(nil, envOf("WAITROOM_SHOP_ADDR", "127.0.0.1:8082", "WAITROOM_SETTLE_SECRET", secret))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:8082", c.ShopAddr, "from the environment")
	for _, bad := range [][]string{
		{"--shop-addr", "127.0.0.1:8081"},
		{"--shop-addr", "127.0.0.1:8081", "--settle-secret", secret, "--upstream", "http://127.0.0.1:9000"},
		{"--shop-addr", "no-port", "--settle-secret", secret},
	} {
		_, err := parseServe(bad, envOf())
		require.ErrorContains(t, err, "--shop-addr", "%v", bad)
	}
}
