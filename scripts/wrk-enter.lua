-- wrk script: POST /rooms/default/enter with a new X-User-Id per request,
-- so that every ENTER takes a new place (BENCHMARKS.md, "HTTP ENTER from outside").
local counter = 0
local thread_id = 0
function setup(thread)
  thread_id = thread_id + 1
  thread:set("tid", thread_id)
end
function init(args)
  prefix = "wrk" .. tid .. "-" .. math.random(1, 1000000000) .. "-"
end
function request()
  counter = counter + 1
  return wrk.format("POST", "/rooms/default/enter", {["X-User-Id"] = prefix .. counter, ["Content-Length"] = "0"})
end
