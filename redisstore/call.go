package redisstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/waitroom/waitroom"
)

// The call path of the library's functions, in one place. Every function
// is called by name with FCALL (function.Name); the calls of the hot path
// (hotPath) go through the automatic pipeliner when the Store has one
// (run), the others straight to the client or a given connection (call).
// Either way a call that finds Redis without the library loads it and
// calls once more (loadLibrary). do reads the reply: a code that stands
// for one of waitroom's errors is that error (refusals), anything else is
// the caller's to decode (reply). The user batches of Enter and Status
// (batch.go) make their calls through run as well.

// fcaller is what a function can be called on: the client, Admit's
// connection, a transaction.
type fcaller interface {
	FCall(ctx context.Context, function string, keys []string, args ...any) *redis.Cmd
}

// call runs f on c with FCALL, loading the library first when Redis does
// not have it.
func (s *Store) call(ctx context.Context, c fcaller, f *function, keys []string, args ...any) *redis.Cmd {
	loads := s.loads.Load()
	args = s.withTestClock(args)
	cmd := c.FCall(ctx, f.Name(), keys, args...)
	if functionMissing(cmd.Err()) {
		if err := s.loadLibrary(ctx, loads); err != nil {
			cmd.SetErr(err)
			return cmd
		}
		cmd = c.FCall(ctx, f.Name(), keys, args...)
	}
	cmd.SetErr(needsFunctions(cmd.Err()))
	return cmd
}

// functionMissing reports the reply of an FCALL of a function Redis does
// not have: the library is not loaded there (yet, or any more).
func functionMissing(err error) bool {
	return redis.HasErrorPrefix(err, "Function not found") // after "ERR "
}

// needsFunctions says which Redis the Store needs when Redis does not know
// FCALL or FUNCTION (before 7.0).
func needsFunctions(err error) error {
	if err != nil && redis.HasErrorPrefix(err, "unknown command") { // after "ERR "
		return fmt.Errorf("redisstore needs Redis 7.0 or later (Functions): %w", err)
	}
	return err
}

// loadLibrary loads the library into Redis: on every primary of a
// Cluster, on the primary otherwise. loads is the count of loads the
// caller saw before its call found no function: when another caller has
// loaded the library since, this one does not load it again, so that the
// calls of a whole server finding it gone cause one load, not one each.
func (s *Store) loadLibrary(ctx context.Context, loads uint64) error {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	if s.loads.Load() != loads {
		return nil
	}
	l := lib()
	load := func(ctx context.Context, c redis.Cmdable) error {
		// REPLACE: another instance may have loaded the same library
		// since; its code is the same (the name is its hash).
		return c.FunctionLoadReplace(ctx, l.code).Err()
	}
	var err error
	if cluster, ok := s.client.(*redis.ClusterClient); ok {
		err = cluster.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return load(ctx, node)
		})
	} else {
		err = load(ctx, s.client)
	}
	if err != nil {
		return fmt.Errorf("loading the Lua library %s: %w", l.name, needsFunctions(err))
	}
	s.loads.Add(1)
	s.log.InfoContext(ctx, "redisstore: loaded the Lua library into Redis", "library", l.name)
	return nil
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

// do runs f for op and reads its reply: a failed call is fail's error, a
// code that stands for one of waitroom's errors (refusals) is that error,
// a reply with no code is unexpected. Any other code, with its values, is
// the caller's to decode.
func (s *Store) do(ctx context.Context, op string, f *function, keys []string, args ...any) (reply, error) {
	return s.doCall(ctx, op, fcall{f: f, keys: keys}, args...)
}

// doCall is do for a call already made up (prepare).
func (s *Store) doCall(ctx context.Context, op string, c fcall, args ...any) (reply, error) {
	res, err := s.run(ctx, c, args...)
	return s.reply(ctx, op, res, err)
}

// reply reads what a call of op answered: its result res, or err.
func (s *Store) reply(ctx context.Context, op string, res any, err error) (reply, error) {
	if err != nil {
		return nil, s.fail(op, err)
	}
	r, ok := asReply(res)
	if !ok {
		return nil, s.unexpected(ctx, op, res)
	}
	if err, ok := refusals[r.code()]; ok {
		return nil, err
	}
	return r, nil
}

// refusals are the errors a function answers with their code alone: a
// code means the same error in every function. Not here: NOT_IN_QUEUE
// (a user's standing in a status call, not the call's) and NO_DRAW (no
// error to a tick; Draw decides).
var refusals = func() map[string]error {
	m := make(map[string]error)
	for _, err := range []*waitroom.Error{
		waitroom.ErrRoomNotFound, waitroom.ErrRoomClosed, waitroom.ErrRoomChanged, waitroom.ErrInviteOnly,
		waitroom.ErrQueueFull, waitroom.ErrSoldOut, waitroom.ErrAlreadyOrdered, waitroom.ErrNoFreeSlot,
		waitroom.ErrTokenNotFound, waitroom.ErrTokenInvalid, waitroom.ErrTokenInUse,
		waitroom.ErrPassInvalid, waitroom.ErrPassUsedUp, waitroom.ErrTooManyPasses,
		waitroom.ErrDrawPublished, waitroom.ErrQueueNotEmpty, waitroom.ErrReturnLinkUsed, waitroom.ErrShardsNotEmpty,
	} {
		m[err.Code] = err
	}
	return m
}()

// unexpected reports a script reply the Go side does not know; it means
// the script and the code disagree, so it is logged loudly.
func (s *Store) unexpected(ctx context.Context, op string, reply any) error {
	s.log.ErrorContext(ctx, "redisstore: unexpected script reply", "op", op, "reply", fmt.Sprint(reply))
	return fmt.Errorf("redisstore %s: unexpected script reply %v", op, reply)
}

// reply is a function's reply: a code string followed by values; a bare
// string reply is its code alone.
type reply []any

func asReply(v any) (reply, bool) {
	if code, ok := v.(string); ok {
		return reply{code}, true
	}
	r, ok := v.([]any)
	if !ok || len(r) == 0 {
		return nil, false
	}
	if _, ok := r[0].(string); !ok {
		return nil, false
	}
	return r, true
}

func (r reply) code() string { return r[0].(string) }

// str returns element i as a string, "" when absent or not a string.
func (r reply) str(i int) (string, bool) {
	if i >= len(r) {
		return "", false
	}
	v, ok := r[i].(string)
	return v, ok
}

// int returns element i as an integer; Lua numbers come back as integers.
func (r reply) int(i int) (int64, bool) {
	if i >= len(r) {
		return 0, false
	}
	v, ok := r[i].(int64)
	return v, ok
}

// testClockMark ends a function call's arguments, followed by the test
// clock's offset in µs, in tests only; the tests' library takes both off.
const testClockMark = "\x00testclock"

// withTestClock is args with the test clock's offset added for the tests'
// library; args as they are in production.
func (s *Store) withTestClock(args []any) []any {
	if testClockOffsets == nil {
		return args
	}
	return append(slices.Clip(args), testClockMark, s.testClockOffset().Microseconds())
}
