-- luacheck's settings for the Redis Functions library (library.go), run
-- from this directory by ./scripts/test and luacheck_test.go.
--
-- Redis runs Lua 5.1 and gives a library these globals. KEYS and ARGV are
-- no globals in Functions: each callback takes them as parameters.
std = 'lua51'
read_globals = {'redis', 'cjson', 'cmsgpack', 'bit', 'struct'}
-- The longest lines are HMGET field lists, kept whole so a reader sees
-- the fields a call reads in one line.
max_line_length = 160

-- Redis loads the library as one chunk: the top files (library.go's
-- libraryTop, in this order) first, whose top-level locals every function
-- file reads, then each function's file. luacheck sees one file at a
-- time, so the names the top files define are read-only globals of the
-- *.lua files, and in the top file that defines one it is not unused:
-- other files use it. luacheck_test.go lints the library as Redis loads
-- it too (a file named library, where none of this applies): there a
-- helper no function calls is an unused local, and a name used before
-- its definition an undefined global.
local top = {'constants.lua', 'shared.lua', 'draw.lua', 'spread.lua', 'spread_draw.lua'}
local shared = {}
for _, file in ipairs(top) do
  local defined = {}
  for line in io.lines(file) do
    local name = line:match('^local function ([%w_]+)') or line:match('^local ([%w_]+) =')
    if name then
      shared[#shared + 1] = name
      defined[#defined + 1] = '211/' .. name
    end
  end
  files[file] = {ignore = defined}
end
files['*.lua'] = {read_globals = shared}
