package redisstore

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// The Lua code of the room is one Redis Functions library (Redis 7.0 or
// later): the shared helpers (lua/shared.lua, lua/draw.lua) are defined once, when Redis
// loads the library, and every operation is a function of it, called with
// FCALL. A script run with EVALSHA would define the helpers again on every
// call before its own code starts.
//
// The library's name carries a hash of its code (waitroom_<hash>, its
// functions waitroom_<hash>_<operation>), so two versions of waitroom on
// one Redis during a rolling deploy each call their own code and never
// replace each other's. Redis does not have the library after a restart
// without persistence or on a node new to a Cluster: a call then finds no
// function ("Function not found"), and the Store loads the library (on
// every primary of a Cluster; a primary's replicas get it by replication)
// and calls once more, as EVALSHA falls back on NOSCRIPT.

// The library's code lives in lua/: the files of libraryTop first, in
// that order (the Go constants, the shared helpers, the draw's), then one
// file per function, lua/<op>.lua, a chunk that returns the function,
// called with KEYS and ARGV as a script is. luacheck lints them
// (lua/.luacheckrc, luacheck_test.go).
//
//go:generate go test -run ^TestConstantsLua$ . -args -update
//go:embed lua/*.lua
var luaFiles embed.FS

// libraryTop are the files every function sees the locals of.
var libraryTop = []string{"constants.lua", "shared.lua", "draw.lua"}

// luaFile is the code of lua/name; the files are embedded, so a missing
// one is a bug of the build.
func luaFile(name string) string {
	b, err := luaFiles.ReadFile("lua/" + name)
	if err != nil {
		panic("redisstore: " + err.Error())
	}
	return string(b)
}

// function is one operation of the library.
type function struct {
	op    string   // the operation: the end of its name in Redis, and its file's
	body  string   // Lua, lua/<op>.lua: returns the function of KEYS and ARGV
	flags []string // Redis function flags, e.g. "no-writes"
	name  string   // its name in Redis; set when the library is built
}

// functions are the library's operations, in the order of their
// declaration: each file's newFunction calls, at package initialization.
var functions []*function

// newFunction declares an operation of the library, its code in
// lua/<op>.lua.
func newFunction(op string, flags ...string) *function {
	return declare(op, luaFile(op+".lua"), flags...)
}

// declare adds the operation op, with body its code, to the library.
func declare(op, body string, flags ...string) *function {
	f := &function{op: op, body: body, flags: flags}
	functions = append(functions, f)
	return f
}

// Name is the function's name in Redis.
func (f *function) Name() string {
	lib()
	return f.name
}

// Test hooks, nil and empty in production: the package's tests give the
// library a test clock (clock_test.go). editTop rewrites a file of
// libraryTop; callPrologue runs at every call before the function.
var (
	editTop      func(name, code string) string
	callPrologue string
)

// library is the code FUNCTION LOAD takes, and its name.
type library struct{ name, code string }

// lib builds the library once every newFunction of the package has run.
var lib = sync.OnceValue(func() library {
	top := make([]string, len(libraryTop))
	for i, name := range libraryTop {
		top[i] = luaFile(name)
		if editTop != nil {
			top[i] = editTop(name, top[i])
		}
	}
	h := sha256.New()
	for _, part := range top {
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	for _, f := range functions {
		fmt.Fprintf(h, "%d:%s%d:%s%d:%s", len(f.op), f.op, len(f.flags), strings.Join(f.flags, ","), len(f.body), f.body)
	}
	fmt.Fprintf(h, "%d:%s", len(callPrologue), callPrologue)
	name := "waitroom_" + hex.EncodeToString(h.Sum(nil))[:16]
	var b strings.Builder
	b.WriteString("#!lua name=" + name + "\n")
	for _, part := range top {
		b.WriteString(part)
	}
	for _, f := range functions {
		f.name = name + "_" + f.op
		flags := make([]string, len(f.flags))
		for i, fl := range f.flags {
			flags[i] = "'" + fl + "'"
		}
		// The file's chunk runs once, when Redis loads the library, and
		// returns the callback; the tests' prologue runs before it.
		callback := "(function()\n" + f.body + "\nend)()"
		if callPrologue != "" {
			callback = "(function()\nlocal callback = " + callback + "\nreturn function(KEYS, ARGV)\n" + callPrologue + "return callback(KEYS, ARGV)\nend\nend)()"
		}
		fmt.Fprintf(&b, "\nredis.register_function{function_name = '%s', flags = {%s}, callback = %s}\n",
			f.name, strings.Join(flags, ", "), callback)
	}
	return library{name: name, code: b.String()}
})

// LibraryName is the name of the Redis Functions library this build of
// waitroom loads (waitroom_ and a hash of its code): an operator removes
// the libraries of versions no longer running by it (OPERATIONS.md).
func LibraryName() string { return lib().name }

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
