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
