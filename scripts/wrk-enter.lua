-- wrk script: POST /rooms/default/enter with a new X-User-Id per request,
-- so that every ENTER takes a new place (BENCHMARKS.md, "HTTP ENTER from outside").
--
-- "-- status N" polls instead: GET /rooms/default/status by a fixed crowd,
-- each thread's users "wrkst<thread>-<k>" for k < N taken in turn, so each
-- user polls every N × threads ÷ (requests/s) s, far under serve's default
-- per-user limit. "-- crowd N" enters that crowd first (run it long enough
-- to go once round).
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
  mode, crowd = args[1], tonumber(args[2] or "20000")
  local urandom = assert(io.open("/dev/urandom", "rb"))
  local bytes = urandom:read(8)
  urandom:close()
  local hex = bytes:gsub(".", function(c) return string.format("%02x", c:byte()) end)
  prefix = "wrk" .. tid .. "-" .. hex .. "-"
end
function request()
  counter = counter + 1
  if mode == "status" then
    return wrk.format("GET", "/rooms/default/status", {["X-User-Id"] = "wrkst" .. tid .. "-" .. (counter % crowd)})
  elseif mode == "crowd" then
    return wrk.format("POST", "/rooms/default/enter", {["X-User-Id"] = "wrkst" .. tid .. "-" .. (counter % crowd), ["Content-Length"] = "0"})
  end
  return wrk.format("POST", "/rooms/default/enter", {["X-User-Id"] = prefix .. counter, ["Content-Length"] = "0"})
end
