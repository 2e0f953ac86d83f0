--- bench/run.lua — `make bench`: raw C, zklua and kazoo doing the same work against one
-- throwaway server, in one run, reported side by side with zklua's ratios.
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

local function run_client(client, hosts)
  local out, ok = shell(client.cmd .. " " .. hosts .. " " .. table.concat(COUNTS, " "))
  assert(ok, client.name .. " benchmark failed:\n" .. out)
  local results = {}
  for name, cpu, ops_s in out:gmatch("RESULT (%S+) ops=%d+ seconds=%S+ cpu_us_per_op=(%S+) ops_per_s=(%S+)") do
    results[name] = { ops_s = tonumber(ops_s), cpu = tonumber(cpu) }
  end
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

build_raw_c()
local server = testing.server()
local samples = {} -- samples[client][workload] = { ops_s = {...}, cpu = {...} }
for _, c in ipairs(CLIENTS) do
  samples[c.name] = {}
  for _, w in ipairs(WORKLOADS) do samples[c.name][w] = { ops_s = {}, cpu = {} } end
end
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
end
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
local table_text = table.concat(lines, "\n")
print(table_text)

local doc = io.open("docs/benchmarks.md", "w")
if doc then
  doc:write("# Benchmarks\n\n",
    "Written by `make bench` (bench/run.lua) on ", os.date("!%Y-%m-%d"), ", ", machine(), ".\n",
    "One throwaway standalone ZooKeeper 3.8.0 server on loopback (the project's harness) ",
    "served all clients, which took turns; each figure is the median of ", ROUNDS, " rounds.\n",
    "Work per round: ", COUNTS[1], " pipelined async gets, ", COUNTS[2], " sync gets, ",
    COUNTS[3], " sync creates (64-byte and 16-byte values).\n",
    "CPU is the client process's user+sys time, library threads included. The server ",
    "runs on the same 2 cores, so throughput is partly the server's; CPU per op is the ",
    "client's own cost.\n\n", table_text, "\n\nRerun: `make bench` ",
    "(`BENCH_ROUNDS=5 make bench` for more rounds).\n")
  doc:close()
end
