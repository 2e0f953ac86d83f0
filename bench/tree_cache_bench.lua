--- tree_cache_bench.lua — zklua's TreeCache on a big tree; bench/kazoo_tree_cache_bench.py is
-- its kazoo twin (same steps, same output).  PATH must hold the tree already (bench/run.lua
-- makes it: 100 directories of 99 nodes, 10000 nodes with the root, 32-byte values).
--   tree_cache  a listener counts the events; the time is from start() to INITIALIZED;
--               RSS (VmRSS, after a full garbage collection) before the cache and after the
--               load, and the peak (VmHWM); CPU is the process's user+sys during the load.
-- Prints:
--   RESULT tree_cache nodes=<n> seconds=<s> cpu_s=<s> base_kb=<kb> rss_kb=<kb> peak_kb=<kb>
--   ./zklua bench/tree_cache_bench.lua HOSTS PATH
local zklua = require "zklua"
local core = require "zklua.core"

local hosts = arg[1] or error("usage: tree_cache_bench.lua HOSTS PATH")
local path = arg[2] or error("usage: tree_cache_bench.lua HOSTS PATH")

local function status_kb(field)
  local f = assert(io.open("/proc/self/status", "r"))
  local text = f:read("a")
  f:close()
  return tonumber(text:match(field .. ":%s*(%d+)"))
end

local zk = zklua.client{ hosts = hosts, timeout = 30 }
zk:start(15)
collectgarbage()
local base = status_kb("VmRSS")

local cache = zk:TreeCache(path)
local added, initialized = 0, false
cache:listen(function(event)
  if event.type == "NODE_ADDED" then
    added = added + 1
  elseif event.type == "INITIALIZED" then
    initialized = true
  end
end)
local cpu0, t0 = core.cpu_time(), core.monotonic()
cache:start()
assert(zk.handler.wait(function() return initialized end, 600), "no INITIALIZED")
local seconds, cpu = core.monotonic() - t0, core.cpu_time() - cpu0
collectgarbage()
local rss = status_kb("VmRSS")
assert(cache:get_data(path .. "/d001/n001"), "the cache lacks a node")
print(string.format("RESULT tree_cache nodes=%d seconds=%.6f cpu_s=%.6f base_kb=%d rss_kb=%d peak_kb=%d",
                    added, seconds, cpu, base, rss, status_kb("VmHWM")))
cache:close()
zk:close()
