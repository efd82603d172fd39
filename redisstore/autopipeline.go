package redisstore

import (
	"errors"

	"github.com/redis/go-redis/v9"
)

// The hot path (Enter, Status, Claim, Complete, Release) can go through
// go-redis's automatic pipelining: the scripts of concurrent requests share
// one write and one read per batch on one connection instead of a pooled
// connection, a write and a read each. Admit, the room admin and Leave stay
// on the plain client; they are rare, and Admit must WAIT on its own
// connection.
//
// Through the deferred face (AsyncAutoPipeline) rather than the blocking
// one: the blocking face waits for a command without looking at the
// caller's context, whereas a request must give up at its deadline (the
// command still runs in its batch, as a command whose reply a plain client
// stopped waiting for may have run). Every caller waits for its own reply
// before its next call, so each caller's calls stay in order, and the
// default single ordered stream (MaxConcurrentBatches 1) keeps batches deep.

// autoPipelineOptions are the options Open gives a client that
// autopipelines. MaxQueuedCommands bounds what waits behind a Redis that
// does not answer: a request beyond it is STORE_UNAVAILABLE at once,
// instead of piling up behind 1 s read timeouts.
func autoPipelineOptions() *redis.AutoPipelineOptions {
	o := redis.DefaultAutoPipelineOptions()
	o.MaxQueuedCommands = maxQueuedCommands
	return o
}

// maxQueuedCommands is far above what a server has in flight (one per
// request being served), far below what would use memory that matters.
const maxQueuedCommands = 10_000

// clientAutoPipelines returns the autopipelining options client was made
// with (Open sets them unless the URL says autopipeline=false), or nil.
func clientAutoPipelines(client redis.UniversalClient) *redis.AutoPipelineOptions {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().AutoPipelineOptions
	case *redis.ClusterClient:
		return c.Options().AutoPipelineOptions
	}
	return nil
}

// newAutoPipeliner returns client's deferred autopipeliner, configured by
// the client's own AutoPipelineOptions or else by autoPipelineOptions.
func newAutoPipeliner(client redis.UniversalClient) (*redis.AutoPipeliner, error) {
	var cfg *redis.AutoPipelineOptions
	if clientAutoPipelines(client) == nil {
		cfg = autoPipelineOptions()
	}
	switch c := client.(type) {
	case *redis.Client:
		return c.AsyncAutoPipelineWithOptions(cfg)
	case *redis.ClusterClient:
		return c.AsyncAutoPipelineWithOptions(cfg)
	}
	return nil, errors.New("redisstore: automatic pipelining needs a *redis.Client or *redis.ClusterClient")
}
