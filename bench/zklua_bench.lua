--- zklua_bench.lua — the zklua twin of raw_c.c and kazoo_bench.py: same workloads, same
-- output.  On a fresh root /bench-zklua-<pid> holding a 64-byte node "get":
--   async_get    N_ASYNC pipelined get_async calls, then every result checked (64 bytes)
--   sync_get     N_SYNC_GET sequential get calls
--   sync_create  N_SYNC_CREATE sequential creates of <root>/c-<i> holding 16 bytes
--   connect      BENCH_N_CONNECT (default 0: none) sequential new clients: start (TCP, the
--                TLS handshake over TLS, the session), then close
-- Each prints: RESULT <workload> ops=<n> seconds=<s> cpu_us_per_op=<us> ops_per_s=<r>
-- (CPU is the whole process's user+sys, library threads included.)
-- Over TLS when BENCH_TLS_CA, BENCH_TLS_CERT and BENCH_TLS_KEY name PEM files (kazoo's ca,
-- certfile and keyfile; HOSTS then names a TLS port): make bench's tls section.
--   ./zklua bench/zklua_bench.lua HOSTS [N_ASYNC=20000] [N_SYNC_GET=2000] [N_SYNC_CREATE=2000]
local zklua = require "zklua"
local core = require "zklua.core"

local hosts = arg[1] or error("usage: zklua_bench.lua HOSTS [N_ASYNC] [N_SYNC_GET] [N_SYNC_CREATE]")
local n_async = tonumber(arg[2] or 20000)
local n_sync_get = tonumber(arg[3] or 2000)
local n_sync_create = tonumber(arg[4] or 2000)

-- Each workload pays for the garbage it made: a full collection ends its measurement, so a
-- workload's leftovers (20000 futures and their results) are not swept on the next one's time.
local function measure(name, ops, fn)
  local cpu0, t0 = core.cpu_time(), core.monotonic()
  fn()
  collectgarbage()
  local seconds, cpu = core.monotonic() - t0, core.cpu_time() - cpu0
  print(string.format("RESULT %s ops=%d seconds=%.6f cpu_us_per_op=%.3f ops_per_s=%.1f",
                      name, ops, seconds, cpu * 1e6 / ops, ops / seconds))
end

local n_connect = tonumber(os.getenv("BENCH_N_CONNECT") or 0)

local options = { hosts = hosts, timeout = 10 }
if os.getenv("BENCH_TLS_CA") then
  options.use_ssl = true
  options.ca = os.getenv("BENCH_TLS_CA")
  options.certfile = assert(os.getenv("BENCH_TLS_CERT"), "BENCH_TLS_CERT is not set")
  options.keyfile = assert(os.getenv("BENCH_TLS_KEY"), "BENCH_TLS_KEY is not set")
end

local zk = zklua.client(options)
zk:start(15)
local root = "/bench-zklua-" .. tostring(os.time()) .. "-" .. tostring(math.random(1e9))
local get_path = root .. "/get"
zk:create(get_path, string.rep("g", 64), { makepath = true })

local ok, err = pcall(function()
  measure("async_get", n_async, function()
    local futures = {}
    for i = 1, n_async do futures[i] = zk:get_async(get_path) end
    for i = 1, n_async do
      local data = futures[i]:get(120)
      if #data ~= 64 then error("async get " .. i .. " returned " .. #data .. " bytes") end
    end
  end)
  measure("sync_get", n_sync_get, function()
    for _ = 1, n_sync_get do
      local data = zk:get(get_path)
      if #data ~= 64 then error("sync get returned " .. #data .. " bytes") end
    end
  end)
  local value = string.rep("c", 16)
  measure("sync_create", n_sync_create, function()
    for i = 1, n_sync_create do zk:create(root .. "/c-" .. i, value) end
  end)
  if n_connect > 0 then
    measure("connect", n_connect, function()
      for _ = 1, n_connect do
        local c = zklua.client(options)
        c:start(15)
        c:close()
      end
    end)
  end
end)
zk:delete(root, nil, true)
zk:close()
if not ok then
  io.stderr:write("zklua_bench: ", tostring(err), "\n")
  os.exit(1)
end
