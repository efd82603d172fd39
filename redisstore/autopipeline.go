package redisstore

import (
	"context"
	"errors"
	"slices"

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

// hotPath are the functions every request calls (Enter, Status, Claim,
// Complete, Release, Renew and the per-client limit): run sends them
// through the autopipeliner. The others, the operator's and the ticks',
// go to the plain client.
var hotPath = map[*function]bool{
	enterScript: true, statusScript: true,
	claimScript: true, completeScript: true, releaseScript: true, renewScript: true,
	allowScript: true,
}

// fcall is a function and the keys it runs on. head, when set, is FCALL's
// command line up to the arguments ("fcall", name, number of keys, keys),
// made once (prepare): each key boxed into an interface is an allocation,
// ten of them per Enter or Status otherwise.
type fcall struct {
	f    *function
	keys []string
	head []any
}

// prepare returns the call of f on keys with its head made.
func prepare(f *function, keys ...string) fcall {
	return fcall{f: f, keys: keys, head: fcallHead(f, keys, 0)}
}

// fcallHead is FCALL's command line for f on keys, with room for extra
// arguments.
func fcallHead(f *function, keys []string, extra int) []any {
	head := make([]any, 0, 3+len(keys)+extra)
	head = append(head, "fcall", f.Name(), len(keys))
	for _, k := range keys {
		head = append(head, k)
	}
	return head
}

// run runs c: a hot-path function with FCALL through the autopipeliner
// when the Store has one, waiting no longer than ctx allows, and again
// after loading the library when Redis did not have it; any other, or
// without an autopipeliner, call on the plain client.
func (s *Store) run(ctx context.Context, c fcall, args ...any) (any, error) {
	f := c.f
	if s.ap == nil || !hotPath[f] {
		return s.call(ctx, s.client, f, c.keys, args...).Result()
	}
	args = s.withTestClock(args)
	var cmdArgs []any
	if c.head != nil {
		cmdArgs = slices.Concat(c.head, args) // a copy: the head is shared
	} else {
		cmdArgs = append(fcallHead(f, c.keys, len(args)), args...)
	}
	loads := s.loads.Load()
	for try := 0; ; try++ {
		cmd := redis.NewCmd(ctx, cmdArgs...)
		cmd.SetFirstKeyPos(3) // the cluster routes by the first key
		// On ctx's end WaitContext returns ctx.Err(); the command may still run.
		err := s.ap.Submit(ctx, cmd).WaitContext(ctx)
		if try == 0 && functionMissing(err) {
			if err := s.loadLibrary(ctx, loads); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, needsFunctions(err)
		}
		return cmd.Result()
	}
}
