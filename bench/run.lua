--- bench/run.lua — `make bench`: ONE table comparing raw C (libzookeeper-mt), zklua on Lua 5.4,
-- zklua on LuaJIT and kazoo doing the same work against one throwaway ZooKeeper server, every
-- row measured in this one run; written to docs/benchmarks.md with the machine it ran on.
--
-- Each row is one figure per client: the median of ROUNDS rounds.  In every round each
-- section runs each of its clients once, taking turns (a different client starts each round),
-- so that a noisy moment hits all of them; the client-op workloads run BENCH_OPS_REPEATS times
-- per round (short runs whose CPU per op wanders more), their figure is the best quartile of
-- those samples (see best_quartile), and a sample during which the hypervisor stole CPU time
-- from the VM is run again (stolen time inflates the CPU charged per op).  A ratio column is
-- the quotient of the two figures shown.  Before each client starts, the runner waits until
-- the server has gone idle, so no client pays for the previous one's load.  A cell is empty
-- where a client has no such workload (raw C has no Lock; kazoo has no PartitionAllocator) or
-- could not run it (then a note under the table says why, and the run exits non-zero after
-- writing the table).
--
-- Every workload is a script of its own, runnable alone (see its opening comment), printing
-- "RESULT <name> key=value ..." lines that this runner reads:
--   client ops   bench/raw_c.c, bench/zklua_bench.lua, bench/kazoo_bench.py
--   Lock         bench/lock_bench.lua, bench/kazoo_lock_bench.py
--   Election     bench/election_bench.lua (zklua or kazoo members: kazoo_election_worker.py)
--   SetPartitioner      bench/partitioner_bench.lua (zklua or kazoo members:
--                       kazoo_partitioner_member.py)
--   PartitionAllocator  bench/allocator_bench.lua (hosts= the shared server)
--   strategies   bench/strategies_bench.lua --results (no server)
--   TreeCache    bench/tree_cache_bench.lua, bench/kazoo_tree_cache_bench.py
--   nginx        bench/nginx_bench.lua (a 4-worker nginx under wrk, once per handler wake-up
--                mode), bench/sync_get_latency.lua (its reference), bench/kazoo_counter_bench.py
--   balancer     bench/balancer_bench.lua (zklua.ngx.balancer against a static upstream, the
--                same backends, the same nginx)
--   tls          bench/zklua_bench.lua, bench/kazoo_bench.py over a TLS port and a plain one
-- The LuaJIT column runs the same zklua scripts under `luajit` with build/luajit/zklua/core.so
-- (`make luajit`), the way scripts/run-specs --lua=luajit loads it; their worker processes
-- run under luajit too.
--
--   ./zklua bench/run.lua [ROUNDS] [N_ASYNC] [N_SYNC_GET] [N_SYNC_CREATE]
-- Knobs (environment; defaults are the issues' workloads): BENCH_ROUNDS (3),
-- BENCH_OPS_REPEATS (3 client-op samples per round), BENCH_STEAL_MAX (0.02: rerun a client-op
-- sample when more of the machine's CPU time was stolen during one of its runs),
-- BENCH_STEAL_RETRIES (2), BENCH_N_ASYNC
-- (20000), BENCH_N_SYNC_GET (2000), BENCH_N_SYNC_CREATE (2000), BENCH_LOCK_CYCLES (500),
-- BENCH_LOCK_WAITERS (10), BENCH_LOCK_ROUNDS (30 acquisitions per waiter), BENCH_FAILOVERS (3
-- of each kind per round), BENCH_SESSION_S (2: the members' session timeout), BENCH_SP_MEMBERS
-- (10), BENCH_SP_ITEMS (1000), BENCH_SP_TB (0.1 s time_boundary), BENCH_ALLOC_MEMBERS (10),
-- BENCH_ALLOC_ITEMS (1000), BENCH_STRATEGY_RUNS (3 allocations timed per round),
-- BENCH_TREE_NODES (10000), BENCH_ONLY (a comma list of sections to run: ops, lock,
-- election, partitioner, allocator, strategies, tree_cache, nginx, balancer, tls; for trying one
-- out), BENCH_BALANCER_SECONDS (2: each wrk run), BENCH_BALANCER_ROUNDS (3 pairs of wrk runs),
-- BENCH_BALANCER_UPDATES (20 registrations timed), BENCH_TLS_CONNECTS (20 connects per client
-- and port in the tls section),
-- BENCH_NGINX_SECONDS (1: each wrk run), BENCH_NGINX_IDLE_S (4: the idle workers watched),
-- BENCH_COUNTER_BURSTS (2 bursts of 200 concurrent Counter increments per client),
-- BENCH_DOC (where the report goes: docs/benchmarks.md after a run of every section, no file
-- after a BENCH_ONLY run unless named; "-": no file).
local testing = require "zklua.testing"
local core = require "zklua.core"


local function env_number(name, default)
  local text = os.getenv(name)
  if text == nil or text == "" then return default end
  return assert(tonumber(text), name .. " must be a number, got " .. text)
end

local ROUNDS = tonumber(arg[1]) or env_number("BENCH_ROUNDS", 3)
-- The client-op workloads run this many times per round: each is short and its CPU per op
-- wanders by tens of percent from one run to the next on a shared VM, so their figures need
-- more samples than the other sections' to settle.
local OPS_REPEATS = env_number("BENCH_OPS_REPEATS", 3)
local N = {
  async = tonumber(arg[2]) or env_number("BENCH_N_ASYNC", 20000),
  sync_get = tonumber(arg[3]) or env_number("BENCH_N_SYNC_GET", 2000),
  sync_create = tonumber(arg[4]) or env_number("BENCH_N_SYNC_CREATE", 2000),
  lock_cycles = env_number("BENCH_LOCK_CYCLES", 500),
  lock_waiters = env_number("BENCH_LOCK_WAITERS", 10),
  lock_rounds = env_number("BENCH_LOCK_ROUNDS", 30),
  failovers = env_number("BENCH_FAILOVERS", 3),
  session = env_number("BENCH_SESSION_S", 2),
  sp_members = env_number("BENCH_SP_MEMBERS", 10),
  sp_items = env_number("BENCH_SP_ITEMS", 1000),
  sp_tb = env_number("BENCH_SP_TB", 0.1),
  alloc_members = env_number("BENCH_ALLOC_MEMBERS", 10),
  alloc_items = env_number("BENCH_ALLOC_ITEMS", 1000),
  strategy_runs = env_number("BENCH_STRATEGY_RUNS", 3),
  tree_dirs = math.max(1, math.floor(env_number("BENCH_TREE_NODES", 10000) / 100)),
  nginx_seconds = env_number("BENCH_NGINX_SECONDS", 1),
  nginx_idle = env_number("BENCH_NGINX_IDLE_S", 4),
  counter_bursts = env_number("BENCH_COUNTER_BURSTS", 2),
  balancer_seconds = env_number("BENCH_BALANCER_SECONDS", 2),
  balancer_rounds = env_number("BENCH_BALANCER_ROUNDS", 3),
  balancer_updates = env_number("BENCH_BALANCER_UPDATES", 20),
  tls_connects = env_number("BENCH_TLS_CONNECTS", 20),
}
N.tree_nodes = 1 + 100 * N.tree_dirs -- the root and tree_dirs directories of 99 nodes each
local ALLOC_STRATEGIES = { "sticky", "round_robin" }
local DOC = os.getenv("BENCH_DOC") -- default: docs/benchmarks.md after a full run

local function shell(cmd)
  local pipe = assert(io.popen(cmd, "r"))
  local out = pipe:read("*a")
  local ok = pipe:close()
  return out, ok
end

local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

-- ---------------------------------------------------------------- clients

local LUAJIT_MODULE = "build/luajit/zklua/core.so"
local CLIENTS = {
  { id = "c", label = "raw C" },
  { id = "lua54", label = "zklua (Lua 5.4)", lua = "./zklua" },
  { id = "luajit", label = "zklua (LuaJIT)",
    lua = "env LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/luajit/?.so;;' luajit" },
  { id = "kazoo", label = "kazoo", python = "/usr/bin/python3" },
}
local CLIENT = {}
for _, c in ipairs(CLIENTS) do CLIENT[c.id] = c end

local notes = {}     -- lines under the table (why a cell is empty, what failed)
local failures = 0

local function note(text)
  for _, n in ipairs(notes) do if n == text then return end end
  notes[#notes + 1] = text
end

local function luajit_missing()
  if not shell("command -v luajit"):match("%S") then return "luajit is not installed" end
  local f = io.open(LUAJIT_MODULE, "r")
  if not f then return LUAJIT_MODULE .. " is not built (`make luajit`)" end
  f:close()
  return nil
end
local LUAJIT_MISSING = luajit_missing()
if LUAJIT_MISSING then note("zklua (LuaJIT) column empty: " .. LUAJIT_MISSING .. ".") end

-- ---------------------------------------------------------------- samples and results

local samples = {} -- samples[row id][client id][sample] = figure
local current_sample = 1 -- the round, or in the ops section (round - 1) * OPS_REPEATS + repeat

local function record(row, client, value)
  if value == nil then return end
  samples[row] = samples[row] or {}
  samples[row][client] = samples[row][client] or {}
  samples[row][client][current_sample] = value
end

local function parse_results(out)
  local results = {}
  for name, fields in out:gmatch("RESULT (%S+) ([^\n]*)") do
    local r = {}
    for k, v in fields:gmatch("([%w_]+)=(%S+)") do r[k] = tonumber(v) or v end
    results[name] = r
  end
  return results
end

-- The line that says why a script failed: the last one that is not part of a traceback
-- (Lua: "lua: file:line: message" before "stack traceback:"; Python: the exception, last).
local function error_line(text)
  local found
  for line in text:gmatch("[^\n]+") do
    if line == "stack traceback:" then break end
    if not line:match("^%s") and not line:match("^RESULT ") then found = line end
  end
  return found or "no output"
end

-- The server's CPU time so far in clock ticks (utime + stime of /proc/PID/stat), or nil.
local function server_ticks(pid)
  local f = pid and io.open("/proc/" .. pid .. "/stat")
  if not f then return nil end
  local stat = f:read("a")
  f:close()
  -- after the ")" closing the command name: state is field 3, utime 14, stime 15
  local fields = {}
  for field in stat:match("%) (.*)"):gmatch("%S+") do fields[#fields + 1] = field end
  return tonumber(fields[12]) + tonumber(fields[13])
end

local QUIET_WINDOW_S, QUIET_MAX_TICKS, QUIET_LIMIT_S = 0.2, 1, 5
local SERVER_PID -- the benchmark server's, once it runs

-- Waits (at most QUIET_LIMIT_S) until the server has been idle for a window: each client
-- then starts on a server that is not still busy with the previous one's work (a JVM
-- collecting kazoo's or a 10000-node tree's garbage), which would tilt the comparison.
local function wait_server_quiet(pid)
  local deadline = core.monotonic() + QUIET_LIMIT_S
  local before = server_ticks(pid)
  while before and core.monotonic() < deadline do
    core.sleep(QUIET_WINDOW_S)
    local now = server_ticks(pid)
    if not now or now - before <= QUIET_MAX_TICKS then return end
    before = now
  end
end

-- Runs one workload of one client; returns its RESULT lines parsed, or nil after noting why.
local function run(what, client, cmd)
  wait_server_quiet(SERVER_PID)
  io.stderr:write(string.format("  %s: %s\n", client.label, what))
  local out, ok = shell(cmd .. " 2>&1")
  if ok then return parse_results(out) end
  failures = failures + 1
  note(string.format("%s, %s: failed: %s", what, client.label, error_line(out)))
  io.stderr:write(out, "\n")
  return nil
end

-- The clients of a section that can run, the list rotated so a different one starts each round.
local function turns(ids, round)
  local list = {}
  for _, id in ipairs(ids) do
    if not (id == "luajit" and LUAJIT_MISSING) then list[#list + 1] = CLIENT[id] end
  end
  local rotated = {}
  for i = 1, #list do rotated[i] = list[(i + round - 2) % #list + 1] end
  return rotated
end

-- ---------------------------------------------------------------- sections

local function build_raw_c()
  local _, ok = shell("mkdir -p build && cc -std=c11 -O2 -DTHREADED -Wall -Wextra -Werror " ..
                      "bench/raw_c.c -o build/bench_raw_c -lzookeeper_mt -lpthread 2>&1")
  assert(ok, "could not build bench/raw_c.c")
end

local WORKLOADS = { "async_get", "sync_get", "sync_create" }

-- Logs this sample's zklua/C ratios of the client-op rows (CPU, then throughput), so a run
-- shows how much the samples behind each figure spread.
local function log_sample_ratios(sample)
  for _, z in ipairs({ "lua54", "luajit" }) do
    local parts = {}
    for _, m in ipairs({ "cpu", "ops" }) do
      for _, w in ipairs(WORKLOADS) do
        local by_client = samples[w .. "_" .. m] or {}
        local mine, c = (by_client[z] or {})[sample], (by_client.c or {})[sample]
        parts[#parts + 1] = string.format("%s %s %s", w, m,
                                          mine and c and string.format("%.2f", mine / c) or "-")
      end
    end
    io.stderr:write(string.format("  sample %d, %s/C: %s\n", sample, z, table.concat(parts, ", ")))
  end
end

local SECTIONS = {}

-- The machine's stolen CPU time so far (the hypervisor ran something else while this VM
-- wanted to run), in clock ticks: the steal column of /proc/stat's "cpu" line.
local function steal_ticks()
  local f = io.open("/proc/stat")
  if not f then return 0 end
  local line = f:read("l")
  f:close()
  local fields = {}
  for n in line:gmatch("%d+") do fields[#fields + 1] = tonumber(n) end
  return fields[8] or 0
end

local CPUS = tonumber((shell("nproc") or ""):match("%d+")) or 1
local TICKS_PER_S = 100 -- USER_HZ

-- One sample of the client-op workloads: every client once, a different one starting each
-- sample.  Returns the largest share of the machine's CPU time the hypervisor stole while one
-- of them ran.
local function run_client_ops(ctx, sample)
  local counts = table.concat({ N.async, N.sync_get, N.sync_create }, " ")
  local worst_steal = 0
  for _, c in ipairs(turns({ "c", "lua54", "luajit", "kazoo" }, sample)) do
    local cmd = c.id == "c" and "build/bench_raw_c" or
                c.python and c.python .. " bench/kazoo_bench.py" or c.lua .. " bench/zklua_bench.lua"
    local steal0, t0 = steal_ticks(), core.monotonic()
    local r = run("client ops", c, cmd .. " " .. ctx.hosts .. " " .. counts)
    local stolen = (steal_ticks() - steal0) / ((core.monotonic() - t0) * TICKS_PER_S * CPUS)
    worst_steal = math.max(worst_steal, stolen)
    local cpu = {}
    for _, w in ipairs(WORKLOADS) do
      if r and r[w] then
        record(w .. "_ops", c.id, r[w].ops_per_s)
        record(w .. "_cpu", c.id, r[w].cpu_us_per_op)
        cpu[#cpu + 1] = string.format("%s %.1f", w, r[w].cpu_us_per_op)
      end
    end
    io.stderr:write(string.format("    CPU µs/op: %s; stolen: %.1f %%\n", table.concat(cpu, ", "),
                                  stolen * 100))
  end
  return worst_steal
end

-- Client-op samples during which the hypervisor stole more than STEAL_MAX of the machine's
-- CPU time are run again (at most STEAL_RETRIES times): on a shared VM, stolen time inflates
-- the CPU a process is charged per op by tens of percent, and it comes in bursts that hit one
-- client of a sample and not the next.
local STEAL_MAX = env_number("BENCH_STEAL_MAX", 0.02)
local STEAL_RETRIES = env_number("BENCH_STEAL_RETRIES", 2)
local steal_reruns, steal_kept = 0, 0

SECTIONS[#SECTIONS + 1] = { id = "ops", run = function(ctx, round)
  for k = 1, OPS_REPEATS do
    current_sample = (round - 1) * OPS_REPEATS + k
    local tries = 0
    while run_client_ops(ctx, current_sample) > STEAL_MAX do
      if tries == STEAL_RETRIES then
        steal_kept = steal_kept + 1
        break
      end
      tries = tries + 1
      steal_reruns = steal_reruns + 1
      io.stderr:write(string.format("  sample %d: CPU time stolen by the hypervisor, run again\n",
                                    current_sample))
    end
    log_sample_ratios(current_sample)
  end
  current_sample = round
end }

SECTIONS[#SECTIONS + 1] = { id = "lock", run = function(ctx, round)
  local args = table.concat({ ctx.hosts, N.lock_cycles, N.lock_waiters, N.lock_rounds }, " ")
  for _, c in ipairs(turns({ "lua54", "luajit", "kazoo" }, round)) do
    local cmd = c.python and c.python .. " bench/kazoo_lock_bench.py" or c.lua .. " bench/lock_bench.lua"
    local r = run("Lock", c, cmd .. " " .. args)
    if r and r.lock_cycles then
      record("lock_cycles", c.id, r.lock_cycles.ops_per_s)
      record("lock_cpu", c.id, r.lock_cycles.cpu_us_per_op)
    end
    if r and r.lock_handoff then
      record("lock_p50", c.id, r.lock_handoff.p50_ms)
      record("lock_p99", c.id, r.lock_handoff.p99_ms)
    end
  end
end }

-- election_bench.lua drives both kinds of members; the kazoo one is driven from Lua 5.4.
SECTIONS[#SECTIONS + 1] = { id = "election", run = function(ctx, round)
  for _, c in ipairs(turns({ "lua54", "luajit", "kazoo" }, round)) do
    local driver = c.lua or CLIENT.lua54.lua
    local kind = c.python and "kazoo" or "zklua"
    local r = run("Election", c, table.concat({ driver, "bench/election_bench.lua", ctx.hosts, kind,
                                                N.failovers, N.session }, " "))
    if r and r.election_close then record("election_close", c.id, r.election_close.p50_ms) end
    if r and r.election_kill then record("election_kill", c.id, r.election_kill.p50_ms) end
  end
end }

SECTIONS[#SECTIONS + 1] = { id = "partitioner", run = function(ctx, round)
  for _, c in ipairs(turns({ "lua54", "luajit", "kazoo" }, round)) do
    local driver = c.lua or CLIENT.lua54.lua
    local kind = c.python and "kazoo" or "zklua"
    local r = run("SetPartitioner", c, table.concat({ driver, "bench/partitioner_bench.lua",
      ctx.hosts, 1, N.sp_members, N.sp_items, N.sp_tb, N.session, kind }, " "))
    for _, event in ipairs({ "leave", "crash", "join" }) do
      local x = r and r["sp_" .. event]
      if x then record("sp_" .. event, c.id, x.ms) end
      if x and not x.ms then -- did not finish (dnf_s=), or not reached after one that did not
        note(string.format("SetPartitioner %s, %s: %s", event, c.label,
                           x.dnf_s and "not covered again within " .. x.dnf_s .. " s" or "not reached"))
      end
    end
  end
end }

SECTIONS[#SECTIONS + 1] = { id = "allocator", run = function(ctx, round)
  for _, strategy in ipairs(ALLOC_STRATEGIES) do
    for _, c in ipairs(turns({ "lua54", "luajit" }, round)) do
      local r = run("PartitionAllocator " .. strategy, c, table.concat({ c.lua,
        "bench/allocator_bench.lua", "hosts=" .. ctx.hosts, "strategy=" .. strategy,
        "members=" .. N.alloc_members, "items=" .. N.alloc_items }, " "))
      for _, step in ipairs({ "join", "leave", "closed" }) do
        local x = r and r["alloc_" .. step]
        if x then record(string.format("alloc_%s_%s", strategy, step), c.id, x.ms) end
        if x and not x.ms then -- did not settle (dnf_s=), failed (error=) or not reached
          note(string.format("PartitionAllocator %s %s, %s: %s", strategy, step, c.label,
               x.dnf_s and "not settled within " .. x.dnf_s .. " s" or
               x.error and "failed: " .. tostring(x.error) or "not reached"))
        end
      end
      if r and r.alloc_join then
        record(string.format("alloc_%s_moved", strategy), c.id, r.alloc_join.moved)
      end
    end
  end
end }

local STRATEGIES = {
  { "round_robin", "round_robin (C; kazoo's stride)" },
  { "round_robin_lua", "round_robin (the same in plain Lua)" },
  { "consistent_hash", "consistent_hash (C, 160 vnodes)" },
  { "rendezvous", "rendezvous (C)" },
  { "sticky", "sticky (C)" },
  { "weighted", "weighted (C, weights 1-4)" },
  { "least_loaded", "least_loaded (Lua script, examples/strategies)" },
}

SECTIONS[#SECTIONS + 1] = { id = "strategies", run = function(_, round)
  for _, c in ipairs(turns({ "lua54", "luajit" }, round)) do
    local r = run("strategies", c, c.lua .. " bench/strategies_bench.lua --results " ..
                                   N.strategy_runs)
    for _, s in ipairs(STRATEGIES) do
      local x = r and r["strategy_" .. s[1]]
      if x then
        record("strategy_ms_" .. s[1], c.id, x.ms)
        record("strategy_moved_" .. s[1], c.id, x.moved)
      end
    end
  end
end }

local function connect(hosts)
  local zk = require("zklua").client{ hosts = hosts, timeout = 30 }
  zk:start(15)
  return zk
end

-- The tree the caches load: made once with pipelined creates (removed by finish()).
local function make_tree(hosts)
  local zk = connect(hosts)
  local root = "/bench-tree-" .. tostring(os.time()) .. "-" .. tostring(math.random(1e9))
  local futures = { zk:create_async(root) }
  for i = 1, N.tree_dirs do
    local dir = string.format("%s/d%03d", root, i)
    futures[#futures + 1] = zk:create_async(dir, string.rep("d", 32))
    for j = 1, 99 do
      futures[#futures + 1] = zk:create_async(string.format("%s/n%03d", dir, j), string.rep("v", 32))
    end
  end
  for _, f in ipairs(futures) do f:get(120) end
  assert(#futures == N.tree_nodes)
  zk:close()
  return root
end

SECTIONS[#SECTIONS + 1] = { id = "tree_cache", run = function(ctx, round)
  if not ctx.tree then ctx.tree = make_tree(ctx.hosts) end
  for _, c in ipairs(turns({ "lua54", "luajit", "kazoo" }, round)) do
    local cmd = c.python and c.python .. " bench/kazoo_tree_cache_bench.py" or
                c.lua .. " bench/tree_cache_bench.lua"
    local r = run("TreeCache", c, cmd .. " " .. ctx.hosts .. " " .. ctx.tree)
    local t = r and r.tree_cache
    if t and t.nodes ~= N.tree_nodes then
      failures = failures + 1
      note(string.format("TreeCache, %s: cached %s of %d nodes", c.label, tostring(t.nodes),
                         N.tree_nodes))
    elseif t then
      record("tree_seconds", c.id, t.seconds)
      record("tree_rss", c.id, t.rss_kb / 1024)
      record("tree_growth", c.id, (t.rss_kb - t.base_kb) / 1024)
      record("tree_peak", c.id, t.peak_kb / 1024)
    end
  end
end, finish = function(ctx)
  if ctx.tree then
    local zk = connect(ctx.hosts)
    zk:delete(ctx.tree, nil, true)
    zk:close()
  end
end }

-- zklua inside nginx (bench/nginx_bench.lua: a 4-worker nginx loaded with wrk, its workers on
-- the LuaJIT module), once per handler wake-up mode, next to its references measured in the
-- same round: ./zklua's sync get latency (bench/sync_get_latency.lua) and kazoo sharing the
-- same 200 concurrent Counter increments over 4 client processes (kazoo_counter_bench.py).
local NGINX_MODES = { "socket", "timer" }
local NGINX_CONNS = { 1, 50, 200 }
local NGINX_WORKERS, COUNTER_BURST = 4, 200

local function nginx_missing()
  if LUAJIT_MISSING then return LUAJIT_MISSING end
  if not io.open("/usr/sbin/nginx", "r") then return "nginx is not installed" end
  if not io.open("/usr/lib/nginx/modules/ngx_http_lua_module.so", "r") then
    return "libnginx-mod-http-lua is not installed"
  end
  if not shell("command -v wrk"):match("%S") then return "wrk is not installed" end
  return nil
end

-- Whether this tree's ngx handler has the wakeup option (before it, every handler polled).
local function ngx_handler_has_wakeup()
  local f = io.open("lua/zklua/handlers/ngx.lua", "r")
  if not f then return false end
  local text = f:read("a")
  f:close()
  return text:find("wakeup", 1, true) ~= nil
end

SECTIONS[#SECTIONS + 1] = { id = "nginx", run = function(ctx, round)
  local missing = nginx_missing()
  if missing then
    note("nginx rows empty: " .. missing .. ".")
    return
  end
  if not ngx_handler_has_wakeup() then
    note("nginx rows: lua/zklua/handlers/ngx.lua has no `wakeup` option in this tree, so " ..
         "both modes ran its timer poller.")
  end
  local r = run("sync get latency", CLIENT.lua54, table.concat({ CLIENT.lua54.lua,
    "bench/sync_get_latency.lua", ctx.hosts, N.sync_get }, " "))
  if r and r.sync_get_latency then
    record("nginx_ref_p50", "lua54", r.sync_get_latency.p50_ms)
    record("nginx_ref_p90", "lua54", r.sync_get_latency.p90_ms)
  end
  local jobs = {}
  for _, mode in ipairs(NGINX_MODES) do
    jobs[#jobs + 1] = function()
      local client = { label = "zklua in nginx (LuaJIT), wakeup=" .. mode }
      local x = run("nginx", client, table.concat({ CLIENT.lua54.lua, "bench/nginx_bench.lua",
        ctx.hosts, mode, N.nginx_seconds, N.nginx_idle, N.counter_bursts,
        table.concat(NGINX_CONNS, ",") }, " "))
      if not x then return end
      local idle = x.nginx_idle or {}
      record("nginx_idle_wakeups_" .. mode, "luajit", idle.wakeups_per_s)
      record("nginx_idle_wakeups_all_" .. mode, "luajit", idle.wakeups_all_per_s)
      record("nginx_idle_cpu_" .. mode, "luajit", idle.cpu_ms_per_s)
      local get1 = x.nginx_get_c1 or {}
      record("nginx_get_p50_" .. mode, "luajit", get1.p50_ms)
      record("nginx_get_p90_" .. mode, "luajit", get1.p90_ms)
      for _, c in ipairs(NGINX_CONNS) do
        for _, path in ipairs({ "get", "static" }) do
          local w = x[string.format("nginx_%s_c%d", path, c)]
          record(string.format("nginx_%s_rps_%d_%s", path, c, mode), "luajit", w and w.rps)
        end
      end
      local counter = x.nginx_counter or {}
      record("nginx_counter_p50_" .. mode, "luajit", counter.p50_ms)
      record("nginx_counter_p99_" .. mode, "luajit", counter.p99_ms)
    end
  end
  jobs[#jobs + 1] = function()
    local x = run("Counter, 200 concurrent increments", CLIENT.kazoo, table.concat({
      CLIENT.kazoo.python, "bench/kazoo_counter_bench.py", ctx.hosts, NGINX_WORKERS,
      COUNTER_BURST // NGINX_WORKERS, N.counter_bursts }, " "))
    local k = x and x.kazoo_counter
    if k then
      for _, mode in ipairs(NGINX_MODES) do
        record("nginx_counter_p50_" .. mode, "kazoo", k.p50_ms)
        record("nginx_counter_p99_" .. mode, "kazoo", k.p99_ms)
      end
    end
  end
  for i = 1, #jobs do jobs[(i + round - 2) % #jobs + 1]() end
end }

-- zklua.ngx.balancer (bench/balancer_bench.lua): proxied requests/s through the balancer and
-- through a static upstream of the same backends in the same nginx, and how long a new
-- registration takes to reach every worker.
local BALANCER_CONNS = 50

SECTIONS[#SECTIONS + 1] = { id = "balancer", run = function(ctx)
  local missing = nginx_missing()
  if missing then
    note("balancer rows empty: " .. missing .. ".")
    return
  end
  local x = run("balancer", { label = "zklua.ngx.balancer (LuaJIT)" }, table.concat({
    CLIENT.lua54.lua, "bench/balancer_bench.lua", ctx.hosts, N.balancer_seconds,
    N.balancer_rounds, N.balancer_updates, BALANCER_CONNS }, " "))
  if not x then return end
  local b, u = x.balancer or {}, x.balancer_update or {}
  record("balancer_rps", "luajit", b.rps)
  record("balancer_static_rps", "luajit", b.static_rps)
  record("balancer_ratio", "luajit", b.ratio)
  record("balancer_update_p50", "luajit", u.p50_ms)
  record("balancer_update_p99", "luajit", u.p99_ms)
end }

-- TLS (issue 22): the client-op workloads and BENCH_TLS_CONNECTS connects of each client, over
-- the TLS port and over the plain port of one server that serves both (Netty, zklua.testing's
-- tls option; started for this section, so the other sections keep their NIO server).  The
-- cost rows divide a client's CPU per op over TLS by its own over plaintext: what TLS costs
-- it, relatively.  raw C has no cell: Debian's libzookeeper-mt is built without TLS.
local function tls_cost(tls, plain, workload)
  local t, p = tls[workload], plain[workload]
  return t and p and p.cpu_us_per_op > 0 and t.cpu_us_per_op / p.cpu_us_per_op or nil
end

SECTIONS[#SECTIONS + 1] = { id = "tls", run = function(ctx, round)
  if not ctx.tls_server then ctx.tls_server = testing.server({ tls = true }) end
  local server, o = ctx.tls_server, ctx.tls_server:tls_options()
  local tls_env = string.format("BENCH_TLS_CA=%s BENCH_TLS_CERT=%s BENCH_TLS_KEY=%s", o.ca,
                                o.certfile, o.keyfile)
  local counts = table.concat({ N.async, N.sync_get, N.sync_create }, " ")
  for _, c in ipairs(turns({ "lua54", "luajit", "kazoo" }, round)) do
    local script = c.python and c.python .. " bench/kazoo_bench.py" or
                   c.lua .. " bench/zklua_bench.lua"
    local got = {}
    for _, mode in ipairs({ "plain", "tls" }) do
      wait_server_quiet(server:node(1).pid)
      local tls = mode == "tls"
      got[mode] = run(tls and "client ops over TLS" or "client ops over plaintext (TLS server)",
                      c, string.format("env BENCH_N_CONNECT=%d %s %s %s %s", N.tls_connects,
                                       tls and tls_env or "", script,
                                       tls and server.secure_hosts or server.hosts, counts))
    end
    local p, t = got.plain, got.tls
    if p and t then
      record("tls_async_get_ops", c.id, (t.async_get or {}).ops_per_s)
      record("tls_async_get_cpu", c.id, (t.async_get or {}).cpu_us_per_op)
      record("tls_async_get_cost", c.id, tls_cost(t, p, "async_get"))
      record("tls_sync_get_cpu", c.id, (t.sync_get or {}).cpu_us_per_op)
      record("tls_sync_get_cost", c.id, tls_cost(t, p, "sync_get"))
      if t.connect and p.connect then
        record("tls_connect_ms", c.id, t.connect.seconds * 1000 / t.connect.ops)
        record("tls_connect_cpu", c.id, t.connect.cpu_us_per_op / 1000)
        record("tls_connect_plain_ms", c.id, p.connect.seconds * 1000 / p.connect.ops)
      end
    end
  end
end, finish = function(ctx)
  if ctx.tls_server then ctx.tls_server:stop() end
end }

-- ---------------------------------------------------------------- the table's rows

-- The values of a sample -> figure table, sorted (nil when there are none).
local function sorted_values(by_sample)
  if not by_sample then return nil end
  local list = {}
  for _, v in pairs(by_sample) do list[#list + 1] = v end
  if #list == 0 then return nil end
  table.sort(list)
  return list
end

-- The value at fraction q of a sorted list (nearest rank).
local function at_fraction(list, q)
  return list[math.max(1, math.min(#list, math.floor(q * #list + 0.5)))]
end

-- The median of a round -> figure table (rounds a client could not run are missing).
local function median(by_round)
  local list = sorted_values(by_round)
  if not list then return nil end
  local n = #list
  if n % 2 == 1 then return list[(n + 1) / 2] end
  return (list[n / 2] + list[n / 2 + 1]) / 2
end

-- A client-op figure: the best quartile of the client's samples (the 25th percentile of its
-- CPU per op, the 75th of its ops/s).  What disturbs a run on a shared VM (stolen time, other
-- tenants, a thread woken on a cold core) only ever adds CPU and wall time, never removes
-- any, so the better samples are the nearer to a client's own cost; a quartile rather than
-- the single best keeps one lucky run from deciding.
local function best_quartile(by_sample, higher_is_better)
  local list = sorted_values(by_sample)
  if not list then return nil end
  return at_fraction(list, higher_is_better and 0.75 or 0.25)
end

-- A row's figure for one client: the best quartile of the client-op samples, elsewhere the
-- median of the rounds.
local function figure(r, by_sample)
  if r.section == "ops" then return best_quartile(by_sample, r.unit == "ops/s") end
  return median(by_sample)
end

-- The ratios of a zklua figure to another client's, sample by sample (both ran back to back
-- in each sample), as a list; nil when either client has no figures.
local function sample_ratios(mine, other)
  if not (mine and other) then return nil end
  local list = {}
  for sample, v in pairs(mine) do
    local w = other[sample]
    if w and w ~= 0 then list[#list + 1] = v / w end
  end
  return list
end

-- The 25th and 75th percentiles of the per-sample ratios: how much the samples disagree.
local function ratio_quartiles(mine, other)
  local list = sorted_values(sample_ratios(mine, other))
  if not list or #list < 4 then return nil end
  return at_fraction(list, 0.25), at_fraction(list, 0.75)
end

-- A note line per zklua column: how far the client-op ratios to raw C spread over the samples.
local function spread_notes()
  local lines = {}
  for _, z in ipairs({ { "lua54", "Lua 5.4" }, { "luajit", "LuaJIT" } }) do
    local parts = {}
    for _, w in ipairs(WORKLOADS) do
      for _, m in ipairs({ "ops", "cpu" }) do
        local s = samples[w .. "_" .. m] or {}
        local lo, hi = ratio_quartiles(s[z[1]], s.c)
        if lo then
          parts[#parts + 1] = string.format("%s %s %.2f-%.2f", w:gsub("_", " "),
                                            m == "ops" and "ops/s" or "CPU", lo, hi)
        end
      end
    end
    if #parts > 0 then
      lines[#lines + 1] = string.format("zklua (%s)/C per sample, 25th-75th percentile: %s.",
                                        z[2], table.concat(parts, "; "))
    end
  end
  return lines
end

-- Targets (issues 2, 3 and 4).  check(m, r) gets the figure of one zklua column (m.z) and
-- its ratios to the other clients' (r.c, r.kazoo): true (met), false (missed), nil (a
-- figure is missing).
local function at_least_c(f)
  return function(_, r) return r.c and r.c >= f end
end
local function at_most_c(f)
  return function(_, r) return r.c and r.c <= f end
end
local function at_most(x)
  return function(m) return m.z and m.z <= x end
end
local IDEAL_JOIN_MOVES = 1000 / 11 -- the strategies bench: 10 -> 11 members sharing 1000 items
local TARGETS = {
  async_get_ops = { "≥ 0.95× C and ≥ kazoo", function(_, r)
    return r.c and r.kazoo and r.c >= 0.95 and r.kazoo >= 1 end },
  sync_get_ops = { "≥ 0.9× C", at_least_c(0.9) },
  sync_create_ops = { "≥ 0.9× C", at_least_c(0.9) },
  async_get_cpu = { "≤ 1.3× C", at_most_c(1.3) },
  sync_get_cpu = { "≤ 1.3× C", at_most_c(1.3) },
  sync_create_cpu = { "≤ 1.3× C", at_most_c(1.3) },
  lock_cycles = { "≥ 2× kazoo", function(_, r) return r.kazoo and r.kazoo >= 2 end },
  lock_p50 = { "≤ 2 ms", at_most(2) },
  sp_leave = { "≤ 500 ms", at_most(500) },
  strategy_moved_sticky = { "≤ 1.2× ideal", at_most(1.2 * IDEAL_JOIN_MOVES) },
  strategy_moved_rendezvous = { "≤ 1.2× ideal", at_most(1.2 * IDEAL_JOIN_MOVES) },
}
-- The nginx targets are the new wake-ups' (wakeup=socket, the default); the timer rows show
-- the poller they replace.
TARGETS.nginx_get_p50_socket = { "≤ 1.3× sync get p50", function(_, r)
  return r.ref and r.ref <= 1.3 end }
TARGETS.nginx_idle_wakeups_socket = { "near zero (≤ 2/s)", at_most(2) }
TARGETS.nginx_idle_cpu_socket = { "near zero (≤ 1 ms/s)", at_most(1) }
TARGETS.nginx_counter_p99_socket = { "≤ kazoo", function(_, r) return r.kazoo and r.kazoo <= 1 end }
TARGETS.balancer_ratio = { "≥ 0.95", function(m) return m.z and m.z >= 0.95 end }
for _, id in ipairs({ "tls_async_get_cost", "tls_sync_get_cost" }) do
  TARGETS[id] = { "≤ kazoo's", function(_, r) return r.kazoo and r.kazoo <= 1 end }
end
for _, s in ipairs(ALLOC_STRATEGIES) do
  TARGETS["alloc_" .. s .. "_leave"] = { "≤ 500 ms", at_most(500) }
  if s == "sticky" or s == "rendezvous" then
    TARGETS["alloc_" .. s .. "_moved"] = { "≤ 1.2× ideal",
                                           at_most(1.2 * N.alloc_items / (N.alloc_members + 1)) }
  end
end

-- The table's rows in order: group headings ({group, section}) and figures ({id, measure,
-- unit, fmt}), each group's rows those of one section.
local function rows()
  local list = {}
  local section
  local function group(id, text)
    section = id
    list[#list + 1] = { group = text, section = id }
  end
  -- opts.col: the zklua column the ratios use (default lua54); opts.ref: { row =, client =,
  -- name = } a figure of the same run this row's is divided by (shown in the target cell).
  local function row(id, measure, unit, fmt, opts)
    opts = opts or {}
    list[#list + 1] = { id = id, measure = measure, unit = unit, fmt = fmt, section = section,
                        col = opts.col, ref = opts.ref }
  end
  group("ops", string.format("Client operations: %d pipelined async gets, %d sync gets, %d sync " ..
                      "creates per round", N.async, N.sync_get, N.sync_create))
  row("async_get_ops", "async get throughput", "ops/s", "%.0f")
  row("async_get_cpu", "async get client CPU", "µs/op", "%.1f")
  row("sync_get_ops", "sync get throughput", "ops/s", "%.0f")
  row("sync_get_cpu", "sync get client CPU", "µs/op", "%.1f")
  row("sync_create_ops", "sync create throughput", "ops/s", "%.0f")
  row("sync_create_cpu", "sync create client CPU", "µs/op", "%.1f")
  group("lock", string.format("Lock: %d uncontended cycles; hand-off among %d waiter processes",
                      N.lock_cycles, N.lock_waiters))
  row("lock_cycles", "uncontended acquire+release", "cycles/s", "%.0f")
  row("lock_cpu", "client CPU per uncontended cycle", "µs", "%.0f")
  row("lock_p50", "hand-off, release → next acquire, p50", "ms", "%.2f")
  row("lock_p99", "hand-off, release → next acquire, p99", "ms", "%.2f")
  group("election", string.format("Election: 3 member processes, failover to the next leader elected " ..
                      "(median of %d per round)", N.failovers))
  row("election_close", "leader returns from its function", "ms", "%.1f")
  row("election_kill", string.format("leader kill -9'd (session timeout %g s)", N.session),
      "ms", "%.0f")
  group("partitioner", string.format("SetPartitioner: %d member processes × %d items, time_boundary %g s; " ..
                      "until every item is owned again", N.sp_members, N.sp_items, N.sp_tb))
  row("sp_leave", "clean leave (finish)", "ms", "%.0f")
  row("sp_crash", string.format("crash: kill -9 (session timeout %g s)", N.session), "ms", "%.0f")
  row("sp_join", "join", "ms", "%.0f")
  group("allocator", string.format("PartitionAllocator: %d members (one process, a session each) × %d " ..
                      "items; until every member settled", N.alloc_members, N.alloc_items))
  for _, s in ipairs(ALLOC_STRATEGIES) do
    row("alloc_" .. s .. "_leave", s .. ": clean leave (stop)", "ms", "%.0f")
    row("alloc_" .. s .. "_closed", s .. ": crash (session closed without leaving)", "ms", "%.0f")
    row("alloc_" .. s .. "_join", s .. ": join", "ms", "%.0f")
    row("alloc_" .. s .. "_moved", string.format("%s: items moved on that join (ideal %.1f)", s,
        N.alloc_items / (N.alloc_members + 1)), "items", "%.0f")
  end
  group("strategies", string.format("Strategies (no server): items moved when an 11th member joins 10 " ..
                      "sharing 1000 items (ideal %.1f)", IDEAL_JOIN_MOVES))
  for _, s in ipairs(STRATEGIES) do row("strategy_moved_" .. s[1], s[2], "items", "%.0f") end
  group("strategies", "Strategies (no server): one allocation, 100 members × 10000 items, Lua tables in " ..
        "and out (sticky, weighted, least_loaded: 99 owners + 1 joining)")
  for _, s in ipairs(STRATEGIES) do row("strategy_ms_" .. s[1], s[2], "ms", "%.1f") end
  group("tree_cache", string.format("TreeCache: %d nodes under a root (32-byte values)",
                                    N.tree_nodes - 1))
  row("tree_seconds", "start() → INITIALIZED", "s", "%.2f")
  row("tree_rss", "client RSS after the load (after a full GC)", "MiB", "%.1f")
  row("tree_growth", "RSS growth for the cache", "MiB", "%.1f")
  row("tree_peak", "client peak RSS (VmHWM)", "MiB", "%.1f")
  group("nginx", string.format("nginx: %d workers (zklua's LuaJIT module, zklua.handlers.ngx, " ..
                      "wakeup=socket or the timer poller), wrk on loopback for %g s per figure; " ..
                      "the reference: ./zklua's sync get", NGINX_WORKERS, N.nginx_seconds))
  local jit = { col = "luajit" }
  row("nginx_ref_p50", "./zklua sync get latency, p50 (no nginx)", "ms", "%.3f")
  row("nginx_ref_p90", "./zklua sync get latency, p90 (no nginx)", "ms", "%.3f")
  for _, q in ipairs({ "p50", "p90" }) do
    for _, mode in ipairs(NGINX_MODES) do
      row(string.format("nginx_get_%s_%s", q, mode), string.format("GET /get, 1 connection, " ..
          "%s (wakeup=%s)", q, mode), "ms", "%.3f", { col = "luajit", ref = {
          row = "nginx_ref_" .. q, client = "lua54", name = "sync get " .. q } })
    end
  end
  for _, c in ipairs(NGINX_CONNS) do
    for _, mode in ipairs(NGINX_MODES) do
      row(string.format("nginx_get_rps_%d_%s", c, mode), string.format("GET /get, %d " ..
          "connection%s (wakeup=%s)", c, c == 1 and "" or "s", mode), "req/s", "%.0f",
          { col = "luajit", ref = { row = string.format("nginx_static_rps_%d_%s", c, mode),
            client = "luajit", name = "/static" } })
    end
  end
  for _, c in ipairs(NGINX_CONNS) do
    for _, mode in ipairs(NGINX_MODES) do
      row(string.format("nginx_static_rps_%d_%s", c, mode), string.format("GET /static (no " ..
          "ZooKeeper call), %d connection%s (wakeup=%s)", c, c == 1 and "" or "s", mode),
          "req/s", "%.0f", jit)
    end
  end
  for _, mode in ipairs(NGINX_MODES) do
    row("nginx_idle_wakeups_" .. mode, string.format("idle worker (DataWatch + Election): " ..
        "event-loop wake-ups (wakeup=%s)", mode), "/s", "%.1f", jit)
  end
  for _, mode in ipairs(NGINX_MODES) do
    row("nginx_idle_wakeups_all_" .. mode, string.format("idle worker: wake-ups of all its " ..
        "threads (wakeup=%s)", mode), "/s", "%.1f", jit)
  end
  for _, mode in ipairs(NGINX_MODES) do
    row("nginx_idle_cpu_" .. mode, string.format("idle worker: CPU (wakeup=%s)", mode),
        "ms/s", "%.2f", jit)
  end
  for _, q in ipairs({ "p50", "p99" }) do
    for _, mode in ipairs(NGINX_MODES) do
      row(string.format("nginx_counter_%s_%s", q, mode), string.format("%d concurrent " ..
          "Counter increments over %d workers, %s (wakeup=%s; kazoo: %d processes × %d " ..
          "threads)", COUNTER_BURST, NGINX_WORKERS, q, mode, NGINX_WORKERS,
          COUNTER_BURST // NGINX_WORKERS), "ms", "%.1f", jit)
    end
  end
  group("balancer", string.format("zklua.ngx.balancer: a %d-worker nginx proxying to 3 backend " ..
        "nginx servers, wrk at %d connections for %g s per figure, balancer and static upstream " ..
        "back to back", NGINX_WORKERS, BALANCER_CONNS, N.balancer_seconds))
  row("balancer_rps", "GET / through zklua.ngx.balancer (round robin)", "req/s", "%.0f", jit)
  row("balancer_static_rps", "GET / through a static upstream, the same backends", "req/s",
      "%.0f", jit)
  row("balancer_ratio", "balancer / static, median of the pairs' quotients", "×", "%.2f", jit)
  row("balancer_update_p50", "a registration → every worker's cache has it, p50", "ms",
      "%.1f", jit)
  row("balancer_update_p99", "a registration → every worker's cache has it, p99", "ms",
      "%.1f", jit)
  group("tls", string.format("TLS: the client operations above and %d connects, over the TLS " ..
        "port and the plain port of one server serving both (Netty); raw C has no TLS (Debian's " ..
        "libzookeeper-mt)", N.tls_connects))
  row("tls_async_get_ops", "async get throughput over TLS", "ops/s", "%.0f")
  row("tls_async_get_cpu", "async get client CPU over TLS", "µs/op", "%.1f")
  row("tls_async_get_cost", "async get client CPU, TLS ÷ plaintext", "×", "%.2f")
  row("tls_sync_get_cpu", "sync get client CPU over TLS", "µs/op", "%.1f")
  row("tls_sync_get_cost", "sync get client CPU, TLS ÷ plaintext", "×", "%.2f")
  row("tls_connect_ms", "connect (TCP, TLS handshake, session), then close", "ms", "%.1f")
  row("tls_connect_cpu", "client CPU per TLS connect", "ms", "%.1f")
  row("tls_connect_plain_ms", "connect over plaintext, then close", "ms", "%.1f")
  return list
end

-- A figure over another client's (nil when either is missing).
local function ratio(mine, other)
  if not (mine and other) or other == 0 then return nil end
  return mine / other
end

-- "target: met", or "target: met (LuaJIT missed)" when the two zklua columns differ.
-- f: the row's figures by client.
-- ref: the row's figure over its reference's (nil without one); only_luajit: a row of the
-- LuaJIT column alone (zklua in nginx), whose verdict needs no column named.
local function target_cell(id, f, ref, only_luajit)
  local target = TARGETS[id]
  if not target then return "" end
  local function verdict(client)
    local z = f[client]
    if z == nil then return nil end
    local ok = target[2]({ z = z }, { c = ratio(z, f.c), kazoo = ratio(z, f.kazoo), ref = ref })
    if ok == nil then return "?" end
    return ok and "met" or "**missed**"
  end
  local v54, vjit = verdict("lua54"), verdict("luajit")
  if v54 == nil and vjit == nil then return target[1] end
  if vjit == nil or vjit == v54 or only_luajit then return target[1] .. ": " .. (v54 or vjit) end
  if v54 == nil then return target[1] .. ": LuaJIT " .. vjit end
  return string.format("%s: %s (LuaJIT %s)", target[1], v54, vjit)
end

local function ratio_cell(x)
  return x and string.format("%.2f", x) or ""
end

-- One table row: each client's figure, the Lua 5.4 column's ratios to C and kazoo (the
-- quotients of the figures shown) and the target's verdict.
local function figure_line(r)
  local s = samples[r.id] or {}
  local f, cells = {}, {}
  for _, c in ipairs(CLIENTS) do
    f[c.id] = figure(r, s[c.id])
    cells[#cells + 1] = f[c.id] and string.format(r.fmt, f[c.id]) or ""
  end
  local z = f[r.col or "lua54"]
  local ref -- the row's figure over its reference's
  if r.ref then
    ref = ratio(z, figure({ section = r.section }, (samples[r.ref.row] or {})[r.ref.client]))
  end
  local target = target_cell(r.id, f, ref, r.col == "luajit")
  if ref then
    target = string.format("%.2f× %s%s", ref, r.ref.name, target ~= "" and "; " .. target or "")
  end
  return string.format("| %s | %s | %s | %s | %s | %s |", r.measure, r.unit,
                       table.concat(cells, " | "), ratio_cell(ratio(z, f.c)),
                       ratio_cell(ratio(z, f.kazoo)), target)
end

-- The table of the sections that ran (ran[section id] = true).
local function table_lines(ran)
  local lines = { "| measure | unit | raw C | zklua (Lua 5.4) | zklua (LuaJIT) | kazoo | " ..
                  "zklua/C | zklua/kazoo | target |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---|" }
  for _, r in ipairs(rows()) do
    if ran[r.section] then
      lines[#lines + 1] = r.group and "| **" .. r.group .. "** | | | | | | | | |" or figure_line(r)
    end
  end
  return lines
end

-- ---------------------------------------------------------------- the machine

local function first_line(cmd)
  return trim((shell(cmd .. " 2>&1") or ""):match("[^\n]*"))
end

local function machine()
  local cpu = first_line("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2")
  local mem = tonumber(first_line("awk '/MemTotal/ {print $2}' /proc/meminfo")) or 0
  local function pkg(name) return first_line("dpkg-query -W -f '${Version}' " .. name) end
  return {
    string.format("%s, %s cores, %.1f GiB RAM; Linux %s; Debian %s", cpu ~= "" and cpu or
                  "unknown CPU", CPUS, mem / 1048576, first_line("uname -r"),
                  first_line("cat /etc/debian_version")),
    string.format("ZooKeeper %s (one standalone server on loopback, the project's harness); " ..
                  "libzookeeper-mt %s; Lua %s; LuaJIT %s; kazoo %s on Python %s",
                  pkg("zookeeper"), pkg("libzookeeper-mt2"), pkg("liblua5.4-0"),
                  LUAJIT_MISSING and "(not run)" or string.format("%s (luajit2 %s)",
                    first_line("luajit -v"):match("LuaJIT (%S+)") or "?", pkg("luajit2")),
                  first_line("/usr/bin/python3 -c 'import kazoo.version as v; print(v.__version__)'"),
                  first_line("/usr/bin/python3 -c 'import platform; print(platform.python_version())'")),
    "load average at the start: " .. first_line("cut -d' ' -f1-3 /proc/loadavg"),
  }
end

-- ---------------------------------------------------------------- main

local only = {}
for id in (os.getenv("BENCH_ONLY") or ""):gmatch("[%w_]+") do only[id] = true end
local sections = {}
for _, s in ipairs(SECTIONS) do
  if next(only) == nil or only[s.id] then sections[#sections + 1] = s end
end
assert(#sections > 0, "BENCH_ONLY names no section (ops, lock, election, partitioner, " ..
                      "allocator, strategies, tree_cache, nginx, balancer, tls)")

local machine_lines = machine()
build_raw_c()
local server = testing.server()
local ctx = { hosts = server.hosts }
SERVER_PID = server:node(1).pid
local started = os.time()
local ok, err = pcall(function()
  for round = 1, ROUNDS do
    current_sample = round
    for _, s in ipairs(sections) do
      io.stderr:write(string.format("round %d/%d: %s\n", round, ROUNDS, s.id))
      s.run(ctx, round)
    end
  end
end)
for _, s in ipairs(sections) do
  if s.finish then pcall(s.finish, ctx) end
end
server:stop()
if not ok then error(err, 0) end

local ran = {}
for _, s in ipairs(sections) do ran[s.id] = true end
local table_text = table.concat(table_lines(ran), "\n")
local header = {
  "Machine: " .. machine_lines[1] .. ".",
  machine_lines[2] .. ".",
  string.format("Each figure: the median of %d round%s (clients taking turns; client ops: " ..
                "the best quartile of %d samples, %d per round), %s; %s.", ROUNDS,
                ROUNDS == 1 and "" or "s",
                ROUNDS * OPS_REPEATS, OPS_REPEATS, os.date("!%Y-%m-%d %H:%M UTC"), machine_lines[3]),
}
local note_lines = {}
if ran.ops then
  for _, line in ipairs(spread_notes()) do note(line) end
  note(string.format("Client-op samples run again because the hypervisor stole more than " ..
                     "%.0f %% of the machine's CPU time during one of their runs: %d; kept " ..
                     "although still disturbed after %d tries: %d.", STEAL_MAX * 100,
                     steal_reruns, STEAL_RETRIES, steal_kept))
end
for _, n in ipairs(notes) do note_lines[#note_lines + 1] = "- " .. n end
print(table.concat(header, "\n") .. "\n\n" .. table_text)
if #note_lines > 0 then print("\n" .. table.concat(note_lines, "\n")) end
io.stderr:write(string.format("bench: %d s\n", os.time() - started))

if DOC == nil and #sections == #SECTIONS then DOC = "docs/benchmarks.md" end
if DOC and DOC ~= "-" then
  local doc = assert(io.open(DOC, "w"))
  doc:write(dofile("bench/report.lua")({
    header = header, table_text = table_text, notes = note_lines, rounds = ROUNDS, ops_repeats = OPS_REPEATS, n = N,
    sections = sections, all_sections = #sections == #SECTIONS,
  }))
  doc:close()
  io.stderr:write("bench: wrote " .. DOC .. "\n")
end
if failures > 0 then
  io.stderr:write(string.format("bench: %d workload(s) failed (see the notes)\n", failures))
  os.exit(1)
end
