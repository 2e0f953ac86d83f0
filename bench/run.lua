--- bench/run.lua — `make bench`: raw C, zklua and kazoo doing the same work against one
-- throwaway server, in one run, reported side by side with zklua's ratios.  Tables: client
-- operations (C, zklua, kazoo), the Lock recipe (zklua, kazoo), the partition strategies
-- (bench/strategies_bench.lua, no server) and the TreeCache (zklua, kazoo) on a 10000-node
-- tree: time to INITIALIZED and client RSS; the SetPartitioner (zklua: re-cover times
-- after a leave, a crash and a join).
--
-- Each client runs ROUNDS times, taking turns so that a noisy moment hits all of them; the
-- table shows each figure's median.  ops/s: higher is better; CPU µs/op (the client process's
-- user+sys, library threads included): lower is better.  The table is also written to
-- docs/benchmarks.md with the machine it ran on.
--   ./zklua bench/run.lua [ROUNDS=3] [N_ASYNC=20000] [N_SYNC_GET=2000] [N_SYNC_CREATE=2000]
local testing = require "zklua.testing"

local ROUNDS = tonumber(arg[1] or os.getenv("BENCH_ROUNDS") or 3)
local COUNTS = { arg[2] or "20000", arg[3] or "2000", arg[4] or "2000" }
local WORKLOADS = { "async_get", "sync_get", "sync_create" }

local function shell(cmd)
  local pipe = assert(io.popen(cmd, "r"))
  local out = pipe:read("*a")
  local ok = pipe:close()
  return out, ok
end

local function build_raw_c()
  local _, ok = shell("mkdir -p build && cc -std=c11 -O2 -DTHREADED -Wall -Wextra -Werror " ..
                      "bench/raw_c.c -o build/bench_raw_c -lzookeeper_mt -lpthread 2>&1")
  assert(ok, "could not build bench/raw_c.c")
end

local CLIENTS = {
  { name = "C", cmd = "build/bench_raw_c" },
  { name = "zklua", cmd = "./zklua bench/zklua_bench.lua" },
  { name = "kazoo", cmd = "/usr/bin/python3 bench/kazoo_bench.py" },
}

local LOCK_CLIENTS = {
  { name = "zklua", cmd = "./zklua bench/lock_bench.lua" },
  { name = "kazoo", cmd = "/usr/bin/python3 bench/kazoo_lock_bench.py" },
}

local TREE_CLIENTS = {
  { name = "zklua", cmd = "./zklua bench/tree_cache_bench.lua" },
  { name = "kazoo", cmd = "/usr/bin/python3 bench/kazoo_tree_cache_bench.py" },
}
local TREE_NODES = 10000 -- 100 directories of 99 nodes, and the root

local function parse_results(out)
  local results = {}
  for name, fields in out:gmatch("RESULT (%S+) ([^\n]*)") do
    local r = {}
    for k, v in fields:gmatch("([%w_]+)=(%S+)") do r[k] = tonumber(v) end
    results[name] = r
  end
  return results
end

local function run_client(client, hosts, args)
  local out, ok = shell(client.cmd .. " " .. hosts .. " " .. (args or table.concat(COUNTS, " ")))
  assert(ok, client.name .. " benchmark failed:\n" .. out)
  local results = parse_results(out)
  for _, r in pairs(results) do r.ops_s, r.cpu = r.ops_per_s, r.cpu_us_per_op end
  return results
end

local function median(list)
  table.sort(list)
  local n = #list
  if n % 2 == 1 then return list[(n + 1) / 2] end
  return (list[n / 2] + list[n / 2 + 1]) / 2
end

local function machine()
  local cpu = shell("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"):gsub("^%s+", ""):gsub("%s+$", "")
  local cores = shell("nproc"):gsub("%s+", "")
  return string.format("%s, %s cores", cpu ~= "" and cpu or "unknown CPU", cores)
end

-- The TreeCache rows: both caches load the same 10000-node tree (made here with pipelined
-- creates) ROUNDS times, taking turns; medians of the time from start() to INITIALIZED, of
-- the client's RSS after the load and its growth over the client alone, and of the peak RSS.
local function tree_cache_rows(hosts)
  local zk = require("zklua").client{ hosts = hosts, timeout = 30 }
  zk:start(15)
  local root = "/bench-tree-" .. tostring(os.time()) .. "-" .. tostring(math.random(1e9))
  local futures = { zk:create_async(root) }
  for i = 1, TREE_NODES / 100 do
    local dir = string.format("%s/d%03d", root, i)
    futures[#futures + 1] = zk:create_async(dir, string.rep("d", 32))
    for j = 1, 99 do
      futures[#futures + 1] = zk:create_async(string.format("%s/n%03d", dir, j), string.rep("v", 32))
    end
  end
  for _, f in ipairs(futures) do f:get() end
  local got = {}
  for _, c in ipairs(TREE_CLIENTS) do got[c.name] = { seconds = {}, rss = {}, growth = {}, peak = {} } end
  for round = 1, ROUNDS do
    for _, c in ipairs(TREE_CLIENTS) do
      io.stderr:write(string.format("round %d/%d: %s TreeCache\n", round, ROUNDS, c.name))
      local r = assert(run_client(c, hosts, root).tree_cache, c.name .. " reported no tree_cache")
      assert(r.nodes == #futures, c.name .. " cached " .. tostring(r.nodes) .. " nodes")
      local g = got[c.name]
      table.insert(g.seconds, r.seconds)
      table.insert(g.rss, r.rss_kb / 1024)
      table.insert(g.growth, (r.rss_kb - r.base_kb) / 1024)
      table.insert(g.peak, r.peak_kb / 1024)
    end
  end
  zk:delete(root, nil, true)
  zk:close()
  local rows = { "", string.format("| TreeCache, %d nodes | zklua | kazoo | zklua/kazoo |", #futures),
                 "|---|---:|---:|---:|" }
  for _, row in ipairs({ { "seconds from start() to INITIALIZED", "seconds", "%.2f" },
                         { "client RSS after the load (MiB)", "rss", "%.1f" },
                         { "RSS growth for the cache (MiB)", "growth", "%.1f" },
                         { "client peak RSS (MiB)", "peak", "%.1f" } }) do
    local z, k = median(got.zklua[row[2]]), median(got.kazoo[row[2]])
    rows[#rows + 1] = string.format("| %s | " .. row[3] .. " | " .. row[3] .. " | %.2f |",
                                    row[1], z, k, z / k)
  end
  return rows
end

build_raw_c()
local server = testing.server()
local samples = {} -- samples[client][workload] = { ops_s = {...}, cpu = {...} }
for _, c in ipairs(CLIENTS) do
  samples[c.name] = {}
  for _, w in ipairs(WORKLOADS) do samples[c.name][w] = { ops_s = {}, cpu = {} } end
end
local lock_samples = {} -- lock_samples[client] = { cycles = {...}, p50 = {...}, p99 = {...} }
for _, c in ipairs(LOCK_CLIENTS) do lock_samples[c.name] = { cycles = {}, p50 = {}, p99 = {} } end
for round = 1, ROUNDS do
  for _, c in ipairs(CLIENTS) do
    io.stderr:write(string.format("round %d/%d: %s\n", round, ROUNDS, c.name))
    local results = run_client(c, server.hosts)
    for _, w in ipairs(WORKLOADS) do
      local r = assert(results[w], c.name .. " reported no " .. w)
      table.insert(samples[c.name][w].ops_s, r.ops_s)
      table.insert(samples[c.name][w].cpu, r.cpu)
    end
  end
  for _, c in ipairs(LOCK_CLIENTS) do
    io.stderr:write(string.format("round %d/%d: %s Lock\n", round, ROUNDS, c.name))
    local results = run_client(c, server.hosts, "")
    local cycles = assert(results.lock_cycles, c.name .. " reported no lock_cycles")
    local handoff = assert(results.lock_handoff, c.name .. " reported no lock_handoff")
    table.insert(lock_samples[c.name].cycles, cycles.ops_per_s)
    table.insert(lock_samples[c.name].p50, handoff.p50_ms)
    table.insert(lock_samples[c.name].p99, handoff.p99_ms)
  end
end
-- The SetPartitioner (bench/partitioner_bench.lua, its own ROUNDS rounds on the same server):
-- 10 member processes x 1000 items; the time from a clean leave, a crash (kill -9) and a join
-- to every item owned again.  Returns the table's rows.
local function partitioner_rows(hosts)
  io.stderr:write("partitioner: 10 members x 1000 items, " .. ROUNDS .. " rounds\n")
  local out, ok = shell("./zklua bench/partitioner_bench.lua " .. hosts .. " " .. ROUNDS .. " 2>&1")
  assert(ok, "partitioner benchmark failed:\n" .. out)
  local r = parse_results(out)
  local leave = assert(r.sp_leave, "no sp_leave result:\n" .. out)
  local rows = {
    "",
    string.format("| SetPartitioner, %d members × %d items, time_boundary %.1f s | median ms | " ..
                  "min ms | max ms |", leave.members, leave.items, leave.tb_ms / 1000),
    "|---|---:|---:|---:|",
  }
  local events = {
    { "sp_leave", "clean leave (finish) → every item owned again" },
    { "sp_crash", string.format("kill -9 → every item owned again (its %.0f s session must " ..
                                "expire first)", leave.session_ms / 1000) },
    { "sp_join", "join → every item owned again" },
  }
  for _, e in ipairs(events) do
    local x = assert(r[e[1]], "no " .. e[1] .. " result")
    rows[#rows + 1] = string.format("| %s | %.0f | %.0f | %.0f |", e[2], x.ms, x.min_ms, x.max_ms)
  end
  return rows
end
local partitioner_lines = partitioner_rows(server.hosts)
local tree_rows = tree_cache_rows(server.hosts)
server:stop()

local lines = {
  "| workload | C ops/s | zklua ops/s | kazoo ops/s | zklua/C | zklua/kazoo | C CPU µs/op | zklua CPU µs/op | kazoo CPU µs/op | zklua/C CPU |",
  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
}
for _, w in ipairs(WORKLOADS) do
  local m = {}
  for _, c in ipairs(CLIENTS) do
    m[c.name] = { ops_s = median(samples[c.name][w].ops_s), cpu = median(samples[c.name][w].cpu) }
  end
  lines[#lines + 1] = string.format("| %s | %.0f | %.0f | %.0f | %.2f | %.2f | %.1f | %.1f | %.1f | %.2f |",
    w, m.C.ops_s, m.zklua.ops_s, m.kazoo.ops_s, m.zklua.ops_s / m.C.ops_s,
    m.zklua.ops_s / m.kazoo.ops_s, m.C.cpu, m.zklua.cpu, m.kazoo.cpu, m.zklua.cpu / m.C.cpu)
end
lines[#lines + 1] = ""
lines[#lines + 1] = "| Lock | zklua | kazoo | zklua/kazoo |"
lines[#lines + 1] = "|---|---:|---:|---:|"
local z, k = lock_samples.zklua, lock_samples.kazoo
local zc, kc = median(z.cycles), median(k.cycles)
lines[#lines + 1] = string.format("| uncontended acquire+release cycles/s | %.0f | %.0f | %.2f |", zc, kc, zc / kc)
local z50, k50 = median(z.p50), median(k.p50)
lines[#lines + 1] = string.format("| hand-off p50 ms (10 waiters) | %.2f | %.2f | %.2f |", z50, k50, z50 / k50)
local z99, k99 = median(z.p99), median(k.p99)
lines[#lines + 1] = string.format("| hand-off p99 ms (10 waiters) | %.2f | %.2f | %.2f |", z99, k99, z99 / k99)
-- partition strategies (no server): bench/strategies_bench.lua's rows
lines[#lines + 1] = ""
for _, line in ipairs(dofile("bench/strategies_bench.lua")(math.max(ROUNDS, 5))) do
  lines[#lines + 1] = line
end
for _, row in ipairs(tree_rows) do lines[#lines + 1] = row end
for _, row in ipairs(partitioner_lines) do lines[#lines + 1] = row end
-- PartitionAllocator handover (its own throwaway server): bench/allocator_bench.lua's rows
lines[#lines + 1] = ""
for _, line in ipairs(dofile("bench/allocator_bench.lua")()) do lines[#lines + 1] = line end
local table_text = table.concat(lines, "\n")
print(table_text)

local doc = io.open("docs/benchmarks.md", "w")
if doc then
  doc:write("# Benchmarks\n\n",
    "Written by `make bench` (bench/run.lua) on ", os.date("!%Y-%m-%d"), ", ", machine(), ".\n",
    "One throwaway standalone ZooKeeper 3.8.0 server on loopback (the project's harness) ",
    "served all clients, which took turns; each figure is the median of ", ROUNDS, " rounds.\n",
    "Work per round: ", COUNTS[1], " pipelined async gets, ", COUNTS[2], " sync gets, ",
    COUNTS[3], " sync creates (64-byte and 16-byte values); for the Lock, uncontended ",
    "acquire+release cycles and the hand-off latency from one holder's release() to the next ",
    "holder's acquire() returning, with 10 waiting processes. Partition strategies ",
    "(bench/strategies_bench.lua, no server): the median time of one allocation, Lua tables ",
    "in and out included, and the items moved when an 11th member joins 10 sharing 1000 ",
    "items (ideal 1000/11). TreeCache: the time from start() to INITIALIZED on a tree of ",
    TREE_NODES, " nodes (32-byte values) and the client's RSS (after a full garbage ",
    "collection). PartitionAllocator (bench/allocator_bench.lua, its own server): ",
    "10 members, each its own session, sharing 1000 items; the time from a start, a join, a ",
    "clean leave and a closed session until every member owns exactly its new share.\n",
    "SetPartitioner: 10 member processes split 1000 items; each event is timed from the ",
    "leave, the kill or the join to the moment every live member holds its new share ",
    "(median of ", ROUNDS, " leaves and crashes, ", 2 * ROUNDS, " joins).\n",
    "CPU is the client process's user+sys time, library threads included. The server ",
    "runs on the same 2 cores, so throughput is partly the server's; CPU per op is the ",
    "client's own cost.\n\n", table_text, "\n\nRerun: `make bench` ",
    "(`BENCH_ROUNDS=5 make bench` for more rounds).\n")
  doc:close()
end
