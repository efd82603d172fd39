package redisstore

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
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
var libraryTop = []string{"constants.lua", "shared.lua", "draw.lua", "spread.lua", "spread_draw.lua"}

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
