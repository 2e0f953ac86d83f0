--- sync_get_latency.lua — the latency of one synchronous get, the reference for GET /get of
-- the nginx bench (bench/nginx_bench.lua): N sequential zk:get calls of a 64-byte node on a
-- fresh root /bench-latency-<...>, each timed alone (CLOCK_MONOTONIC).
-- Prints: RESULT sync_get_latency n=<n> p50_ms=<ms> p90_ms=<ms> p99_ms=<ms>
--   ./zklua bench/sync_get_latency.lua HOSTS [N=2000]
local zklua = require "zklua"
local core = require "zklua.core"

local hosts = arg[1] or error("usage: sync_get_latency.lua HOSTS [N]")
local n = tonumber(arg[2] or 2000)

local zk = zklua.client{ hosts = hosts, timeout = 10 }
zk:start(15)
local root = "/bench-latency-" .. tostring(os.time()) .. "-" .. tostring(math.random(1e9))
local path = root .. "/get"
zk:create(path, string.rep("g", 64), { makepath = true })

local times = {}
local ok, err = pcall(function()
  for _ = 1, 100 do zk:get(path) end -- warm up
  for i = 1, n do
    local t0 = core.monotonic()
    local data = zk:get(path)
    times[i] = core.monotonic() - t0
    if #data ~= 64 then error("sync get returned " .. #data .. " bytes") end
  end
end)
zk:delete(root, nil, true)
zk:close()
if not ok then
  io.stderr:write("sync_get_latency: ", tostring(err), "\n")
  os.exit(1)
end
table.sort(times)
local function at(q) return times[math.max(1, math.floor(q * n + 0.5))] * 1000 end
print(string.format("RESULT sync_get_latency n=%d p50_ms=%.4f p90_ms=%.4f p99_ms=%.4f",
                    n, at(0.5), at(0.9), at(0.99)))
