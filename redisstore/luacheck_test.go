package redisstore

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLuacheck lints the Lua library with luacheck (lua/.luacheckrc):
// each file of lua/, as ./scripts/test does, and the library as Redis
// loads it, one chunk, where a helper no function calls is an unused
// local and a name used before its definition an undefined global. Any
// warning fails.
func TestLuacheck(t *testing.T) {
	bin, err := exec.LookPath("luacheck")
	if err != nil {
		t.Fatalf("luacheck is missing: install Debian's lua-check (./scripts/test does): %v", err)
	}
	lint := func(what, stdin string, args ...string) {
		cmd := exec.Command(bin, append([]string{"--no-color", "--codes"}, args...)...)
		cmd.Dir = "lua"
		cmd.Stdin = strings.NewReader(stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("luacheck on %s: %v\n%s", what, err, out)
		}
	}
	lint("lua/", "", ".")
	lint("the library", lib().code, "--filename", "library", "-")
}

// TestLuaReadsTheClockOnce: clock_us in lua/shared.lua is the library's
// one reading of the time, so a clock for tests, or anything else that
// must see every reading, has one place to go.
func TestLuaReadsTheClockOnce(t *testing.T) {
	files, err := luaFiles.ReadDir("lua")
	if err != nil {
		t.Fatal(err)
	}
	var readings []string
	for _, f := range files {
		code := luaFile(f.Name())
		for _, time := range []string{"'TIME'", `"TIME"`} {
			for range strings.Count(code, time) {
				readings = append(readings, f.Name())
			}
		}
	}
	if len(readings) != 1 || readings[0] != "shared.lua" {
		t.Fatalf("the Lua reads TIME in %v; want once, in shared.lua's clock_us", readings)
	}
	if !strings.Contains(luaFile("shared.lua"), "local function clock_us()\n  local t = redis.call('TIME')\n") {
		t.Fatal("shared.lua's clock_us does not read TIME")
	}
}
