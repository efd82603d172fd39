package redisstore

import (
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// tagCalls records the commands a client sends (its record, as a
// cmdHook), by the hash tag of their first key: "fcall NAME" for a
// function, the command's name otherwise.
type tagCalls struct {
	mu    sync.Mutex
	calls map[string][]string
}

func (c *tagCalls) record(cmd redis.Cmder) {
	args := cmd.Args()
	name, key := strings.ToLower(cmd.Name()), ""
	switch {
	case name == "fcall" && len(args) > 3:
		name, key = "fcall "+fmt.Sprint(args[1]), fmt.Sprint(args[3])
	case len(args) > 1:
		key = fmt.Sprint(args[1])
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls != nil {
		c.calls[hashTag(key)] = append(c.calls[hashTag(key)], name)
	}
}

// during returns the commands sent while fn ran, by hash tag.
func (c *tagCalls) during(fn func()) map[string][]string {
	c.mu.Lock()
	c.calls = map[string][]string{}
	c.mu.Unlock()
	fn()
	c.mu.Lock()
	defer c.mu.Unlock()
	got := c.calls
	c.calls = nil
	return got
}
