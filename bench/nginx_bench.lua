--- nginx_bench.lua — zklua inside nginx under load: a 4-worker nginx (Debian's nginx +
-- libnginx-mod-http-lua, zklua's LuaJIT module under zklua.handlers.ngx) on a free loopback
-- port, against HOSTS, loaded with wrk; one handler wake-up MODE per run ("socket" or
-- "timer", passed to the workers as $ZKLUA_NGX_WAKEUP).  The service is the example's,
-- examples/nginx/nginx.conf as it is (its port changed to a free one): GET /get does one
-- zk:get of the config, GET /static no ZooKeeper call, GET /counter one Counter:add(1) on the
-- worker's shared Counter.  Its znodes live under a fresh /bench-nginx-<...> ($ZKLUA_APP),
-- made with a 64-byte config and removed after.
--
--   1. idle: once every worker answered /status (session up, its DataWatch, Counter and
--      Election in place) and a second passed, each worker's wake-ups (voluntary context
--      switches of its event-loop thread, and of all its threads) and CPU time (utime+stime)
--      over IDLE_S seconds, per second, the mean of the workers:
--        RESULT nginx_idle wakeups_per_s=<n> wakeups_all_per_s=<n> cpu_ms_per_s=<ms>
--   2. wrk --latency for SECONDS at each connection count of CONNS, GET /get then GET /static:
--        RESULT nginx_<get|static>_c<conns> rps=<r> p50_ms=<ms> p90_ms=<ms> p99_ms=<ms>
--   3. BURSTS bursts of 200 GET /counter sent at once on 200 connections made beforehand
--      (HTTP/1.0: each answer ends with its connection), each timed from its send to its
--      answer's end; the counter's final value is checked:
--        RESULT nginx_counter n=<n> p50_ms=<ms> p99_ms=<ms> max_ms=<ms>
-- A request that does not answer 200 fails the run.  nginx is stopped by its master's pid
-- (SIGQUIT, then SIGKILL of the master and its workers by pid), whatever happened.
--   ./zklua bench/nginx_bench.lua HOSTS MODE [SECONDS=1] [IDLE_S=4] [BURSTS=2] [CONNS=1,50,200]
package.path = "spec/?.lua;" .. package.path -- support.nginx: nginx run by pid
local zklua = require "zklua"
local core = require "zklua.core"
local socket = require "socket"
local support = require "support.nginx"

local hosts = arg[1]
local mode = arg[2]
if not hosts or (mode ~= "socket" and mode ~= "timer") then
  error("usage: nginx_bench.lua HOSTS socket|timer [SECONDS] [IDLE_S] [BURSTS] [CONNS]")
end
local SECONDS = tonumber(arg[3] or 1)
local IDLE_S = tonumber(arg[4] or 4)
local BURSTS = tonumber(arg[5] or 2)
local CONNS = {}
for c in (arg[6] or "1,50,200"):gmatch("%d+") do CONNS[#CONNS + 1] = tonumber(c) end
local BURST = 200
local WORKERS = 4
local shell, read_file = support.shell, support.read_file

-- ---------------------------------------------------------------- the service

local CONF = "examples/nginx/nginx.conf"

local conf_text = assert(read_file(CONF), "no " .. CONF .. " (run from a checkout)")
for _, endpoint in ipairs({ "/get", "/static", "/counter", "/status" }) do
  assert(conf_text:find("location%s*=%s*" .. endpoint .. "%s"), CONF .. " serves no " .. endpoint)
end

local app = string.format("/bench-nginx-%d-%d", os.time(), math.random(1e9))
local zk = zklua.client{ hosts = hosts, timeout = 10 }
zk:start(15)
zk:create(app .. "/config", string.rep("c", 64), { makepath = true })

local nginx, port -- once started
local workers = {}

local function start_nginx()
  nginx = support.start_text(conf_text, { ZKLUA_ROOT = support.cwd(), ZKLUA_HOSTS = hosts,
                                          ZKLUA_APP = app, ZKLUA_NGX_WAKEUP = mode }, nil, nil, CONF)
  port = nginx.port
end

-- Waits until each of the master's WORKERS workers answered /status with its session up
-- (and, where the status says, ready); returns their pids.
local function wait_workers(timeout)
  local answers = nginx:every_worker("/status", function(status, body)
    return status == 200 and body:find("CONNECTED", 1, true) ~= nil and
           not body:find('"ready":%s*false')
  end, "every worker's session up", timeout, nginx:wait_workers(WORKERS, timeout))
  local pids = {}
  for pid in pairs(answers) do pids[#pids + 1] = pid end
  return pids
end

-- ---------------------------------------------------------------- measures

-- CPU ticks (utime+stime, all threads) of a process.
local function cpu_ticks(pid)
  local stat = assert(read_file("/proc/" .. pid .. "/stat"), "worker " .. pid .. " is gone")
  local fields = {}
  for field in stat:match("%) (.*)"):gmatch("%S+") do fields[#fields + 1] = field end
  return tonumber(fields[12]) + tonumber(fields[13])
end

local function voluntary(path)
  local status = assert(read_file(path), path .. " is gone")
  return tonumber(status:match("voluntary_ctxt_switches:%s*(%d+)"))
end

-- The voluntary context switches of a process's main thread and of all its threads.
local function wakeups(pid)
  local main = voluntary("/proc/" .. pid .. "/status")
  local all = 0
  for tid in shell("ls /proc/" .. pid .. "/task"):gmatch("%d+") do
    all = all + (voluntary("/proc/" .. pid .. "/task/" .. tid .. "/status") or 0)
  end
  return main, all
end

local function measure_idle()
  local before = {}
  local t0 = core.monotonic()
  for i, pid in ipairs(workers) do
    local main, all = wakeups(pid)
    before[i] = { main = main, all = all, cpu = cpu_ticks(pid) }
  end
  core.sleep(IDLE_S)
  local seconds = core.monotonic() - t0
  local main, all, cpu = 0, 0, 0
  for i, pid in ipairs(workers) do
    local m, a = wakeups(pid)
    main = main + m - before[i].main
    all = all + a - before[i].all
    cpu = cpu + cpu_ticks(pid) - before[i].cpu
  end
  local per = seconds * #workers
  print(string.format("RESULT nginx_idle wakeups_per_s=%.2f wakeups_all_per_s=%.2f " ..
                      "cpu_ms_per_s=%.3f", main / per, all / per, cpu * 10 / per))
end

local UNIT_MS = { us = 0.001, ms = 1, s = 1000, m = 60000 }

local function wrk(path, conns)
  local threads = math.min(conns, 2)
  local out, ok = shell(string.format("wrk -t%d -c%d -d%gs --timeout 10s --latency " ..
                                      "http://127.0.0.1:%d%s 2>&1", threads, conns, SECONDS,
                                      port, path))
  if not ok then error("wrk failed: " .. out) end
  local function pct(p)
    local v, unit = out:match("\n%s*" .. p .. "%%%s+([%d.]+)(%a+)")
    return v and tonumber(v) * UNIT_MS[unit]
  end
  local rps = tonumber(out:match("Requests/sec:%s*([%d.]+)"))
  local bad = tonumber(out:match("Non%-2xx or 3xx responses:%s*(%d+)") or 0)
  local socket_errors = out:match("Socket errors:[^\n]*")
  if not rps or bad > 0 or (socket_errors and conns <= 200) then
    -- what the listening sockets and the workers were doing, to find out why
    local state = shell(string.format("ss -Htlnp 'sport = :%d' 2>&1; for p in $(pgrep -P %d); " ..
                                      "do echo worker $p $(cat /proc/$p/wchan 2>&1) " ..
                                      "$(grep State /proc/$p/status 2>&1); done", port, nginx.master))
    error(string.format("wrk %s at %d connections: %s, %d non-2xx answers\n%s\n%s", path,
                        conns, socket_errors or "no Requests/sec", bad, out, state))
  end
  print(string.format("RESULT nginx_%s_c%d rps=%.1f p50_ms=%.4f p90_ms=%.4f p99_ms=%.4f",
                      path:sub(2), conns, rps, pct(50), pct(90), pct(99)))
end

-- BURST requests of path at once, on connections made beforehand; each one's latency (s).
local function burst(path, latencies)
  local conns = {}
  for i = 1, BURST do
    local s = assert(socket.tcp())
    s:settimeout(5)
    assert(s:connect("127.0.0.1", port))
    s:settimeout(0)
    conns[i] = s
  end
  local request = "GET " .. path .. " HTTP/1.0\r\nHost: localhost\r\n\r\n"
  local sent, buffers, pending = {}, {}, {}
  for _, s in ipairs(conns) do
    sent[s] = core.monotonic()
    assert(s:send(request) == #request, "a short send")
    buffers[s] = {}
    pending[#pending + 1] = s
  end
  local deadline = core.monotonic() + 60
  while #pending > 0 do
    if core.monotonic() > deadline then
      error(#pending .. " " .. path .. " requests unanswered")
    end
    local readable = socket.select(pending, nil, 1)
    for _, s in ipairs(readable) do
      local data, err, partial = s:receive("*a")
      local buf = buffers[s]
      buf[#buf + 1] = data or partial
      if data or err == "closed" then
        latencies[#latencies + 1] = core.monotonic() - sent[s]
        local response = table.concat(buf)
        local status = response:match("^HTTP/1%.%d (%d+)")
        if status ~= "200" then
          error(path .. " answered " .. tostring(status) .. ": " .. response)
        end
        s:close()
        for k, p in ipairs(pending) do
          if p == s then table.remove(pending, k) break end
        end
      end
    end
  end
end

local function measure_counter()
  local latencies = {}
  local before = tonumber((zk:exists(app .. "/counter") and zk:get(app .. "/counter")) or 0) or 0
  for _ = 1, BURSTS do burst("/counter", latencies) end
  local value = tonumber((zk:get(app .. "/counter")))
  if value ~= before + BURST * BURSTS then
    error(string.format("the counter holds %s after %d increments from %s", tostring(value),
                        BURST * BURSTS, tostring(before)))
  end
  table.sort(latencies)
  local n = #latencies
  local function at(q)
    return latencies[math.max(1, math.min(n, math.floor(q * n + 0.5)))] * 1000
  end
  print(string.format("RESULT nginx_counter n=%d p50_ms=%.3f p99_ms=%.3f max_ms=%.3f", n,
                      at(0.5), at(0.99), latencies[n] * 1000))
end

-- ---------------------------------------------------------------- main

local ok, err = pcall(function()
  start_nginx()
  workers = wait_workers(30)
  core.sleep(1) -- the elections and watches the last /status requests raced with settle
  measure_idle()
  for _, conns in ipairs(CONNS) do
    wrk("/get", conns)
    wrk("/static", conns)
  end
  measure_counter()
end)
local log = nginx and nginx:error_log() or ""
if nginx then
  nginx:stop()
  nginx:remove()
end
zk:delete(app, nil, true)
zk:close()
if not ok then
  -- the error last: bench/run.lua's note quotes a failed script's last unindented line
  io.stderr:write("error.log:\n", log:sub(-3000), "\n", "nginx_bench: ",
                  tostring(err):gsub("\n", "\n  "), "\n")
  os.exit(1)
end
