package redisstore

import (
	"testing"

	"github.com/waitroom/waitroom/internal/testenv"
	"github.com/waitroom/waitroom/storetest"
)

// TestPageConformance: a room's own page on the test Redis.
func TestPageConformance(t *testing.T) {
	t.Parallel()
	storetest.RunPages(t, func(t *testing.T) storetest.Harness {
		c := openURL(t, testenv.RedisURL())
		return storetest.Harness{Store: New(c, Options{Prefix: testPrefix(t, c)})}
	})
}
