-- wrk script: POST /rooms/default/enter with a new X-User-Id per request,
-- so that every ENTER takes a new place (BENCHMARKS.md, "HTTP ENTER from outside").
local counter = 0
local thread_id = 0
function setup(thread)
  thread_id = thread_id + 1
  thread:set("tid", thread_id)
end
-- The prefix is random per run: math.random is not seeded in wrk, so it
-- would name the same users every run, and a run after the first would
-- measure re-entries of users already queued, not new places.
function init(args)
  local urandom = assert(io.open("/dev/urandom", "rb"))
  local bytes = urandom:read(8)
  urandom:close()
  local hex = bytes:gsub(".", function(c) return string.format("%02x", c:byte()) end)
  prefix = "wrk" .. tid .. "-" .. hex .. "-"
end
function request()
  counter = counter + 1
  return wrk.format("POST", "/rooms/default/enter", {["X-User-Id"] = prefix .. counter, ["Content-Length"] = "0"})
end
