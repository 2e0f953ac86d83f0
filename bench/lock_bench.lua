--- lock_bench.lua — zklua's Lock under load; bench/kazoo_lock_bench.py is its kazoo twin (same
-- workloads, same output).  On a fresh root /bench-lock-zklua-<time>-<rand>:
--   lock_cycles   CYCLES uncontended acquire() + release() of one Lock by one client
--   lock_handoff  WAITERS worker processes (./zklua, one session each) take turns on one
--                 Lock, ROUNDS times each, re-queueing right after each release, so about
--                 WAITERS contenders always wait.  Hand-off latency = time from the holder
--                 calling release() to the next holder's acquire() returning, on the
--                 machine's CLOCK_MONOTONIC (shared by all processes); p50 and p99.
-- Prints:
--   RESULT lock_cycles ops=<n> seconds=<s> cpu_us_per_op=<us> ops_per_s=<r>
--   RESULT lock_handoff p50_ms=<ms> p99_ms=<ms> handoffs=<n> waiters=<w>
--   ./zklua bench/lock_bench.lua HOSTS [CYCLES=500] [WAITERS=10] [ROUNDS=30]
-- (the worker mode, --worker, is internal).
local zklua = require "zklua"
local core = require "zklua.core"

local function quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

-- ---------------------------------------------------------------- worker process

local function worker(hosts, path, rounds, index)
  local zk = zklua.client{ hosts = hosts, timeout = 20 }
  zk:start(15)
  local lock = zk:Lock(path .. "/lock", "w" .. index)
  zk:create(path .. "/ready/w" .. index, "", { ephemeral = true })
  local go = false
  local function look() go = zk:exists(path .. "/go", function() look() end) ~= nil end
  look()
  zk.handler.wait(function() return go end, 120)
  local lines = {}
  for _ = 1, rounds do
    lock:acquire()
    lines[#lines + 1] = string.format("A %.9f", core.monotonic())
    lines[#lines + 1] = string.format("R %.9f", core.monotonic())
    lock:release()
  end
  io.write(table.concat(lines, "\n"), "\n")
  zk:close()
end

if arg[1] == "--worker" then
  worker(arg[2], arg[3], tonumber(arg[4]), arg[5])
  return
end

-- ---------------------------------------------------------------- driver

local hosts = arg[1] or error("usage: lock_bench.lua HOSTS [CYCLES] [WAITERS] [ROUNDS]")
local cycles = tonumber(arg[2] or 500)
local waiters = tonumber(arg[3] or 10)
local rounds = tonumber(arg[4] or 30)

local zk = zklua.client{ hosts = hosts, timeout = 10 }
zk:start(15)
local root = "/bench-lock-zklua-" .. tostring(os.time()) .. "-" .. tostring(math.random(1e9))

local function percentile(sorted, q)
  local i = math.max(1, math.ceil(q * #sorted))
  return sorted[i]
end

local function bench_cycles()
  local lock = zk:Lock(root .. "/cycles", "bench")
  lock:acquire() -- the path exists from here on, as in a long-running process
  lock:release()
  local cpu0, t0 = core.cpu_time(), core.monotonic()
  for _ = 1, cycles do
    lock:acquire()
    lock:release()
  end
  local seconds, cpu = core.monotonic() - t0, core.cpu_time() - cpu0
  print(string.format("RESULT lock_cycles ops=%d seconds=%.6f cpu_us_per_op=%.3f ops_per_s=%.1f",
                      cycles, seconds, cpu * 1e6 / cycles, cycles / seconds))
end

local function bench_handoff()
  local path = root .. "/handoff"
  zk:ensure_path(path .. "/ready")
  zk:ensure_path(path .. "/lock")
  local exe = arg[-1] or "./zklua"
  local pipes = {}
  for i = 1, waiters do
    pipes[i] = assert(io.popen(table.concat({ quote(exe), quote(arg[0]), "--worker", quote(hosts),
                                              quote(path), rounds, i }, " "), "r"))
  end
  local deadline = core.monotonic() + 60
  while #zk:get_children(path .. "/ready") < waiters do
    assert(core.monotonic() < deadline, "workers did not start")
    zklua.sleep(0.05)
  end
  zk:create(path .. "/go", "")
  local events = {}
  for i = 1, waiters do
    for kind, t in pipes[i]:read("a"):gmatch("([AR]) (%S+)") do
      events[#events + 1] = { t = tonumber(t), kind = kind }
    end
    assert(pipes[i]:close(), "worker " .. i .. " failed")
  end
  assert(#events == 2 * waiters * rounds, "workers reported " .. #events .. " events")
  table.sort(events, function(x, y) return x.t < y.t end)
  local latencies, released_at = {}, nil
  for _, e in ipairs(events) do
    if e.kind == "R" then
      released_at = e.t
    elseif released_at then
      latencies[#latencies + 1] = (e.t - released_at) * 1000
      released_at = nil
    end
  end
  table.sort(latencies)
  print(string.format("RESULT lock_handoff p50_ms=%.3f p99_ms=%.3f handoffs=%d waiters=%d",
                      percentile(latencies, 0.50), percentile(latencies, 0.99), #latencies,
                      waiters))
end

local ok, err = pcall(function()
  bench_cycles()
  bench_handoff()
end)
pcall(zk.delete, zk, root, nil, true)
zk:close()
if not ok then
  io.stderr:write("lock_bench: ", tostring(err), "\n")
  os.exit(1)
end
