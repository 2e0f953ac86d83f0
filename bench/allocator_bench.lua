-- bench/allocator_bench.lua — PartitionAllocator handover times on a throwaway server:
-- N members (each its own client and session, all in this process) sharing M items.
--
--   ./zklua bench/allocator_bench.lua [members=10] [items=1000] [strategy=sticky]
--   dofile("bench/allocator_bench.lua")(strategies) -> table lines (bench/run.lua adds them)
--
-- For a first start, a join, a clean leave and a session closed without leaving (a crash
-- whose session the server ends at once): the time until every member owns exactly its share
-- of the new assignment (wait_settled on every member), and how many items changed owner
-- (ideal on a join or a leave: items/n).  Times include every hook round trip; all members
-- share this one Lua thread.  (A kill -9 adds the session timeout before the server ends the
-- session; the rest is the same.)
local zklua = require "zklua"
local core = require "zklua.core"
local testing = require "zklua.testing"

local PATH = "/bench-allocator"

local function owners(members)
  local map = {}
  for _, m in ipairs(members) do
    for _, item in ipairs(m.allocation) do map[item] = m.identifier end
  end
  return map
end

local function moved(before, after)
  local n = 0
  for item, who in pairs(after) do
    if before[item] and before[item] ~= who then n = n + 1 end
  end
  return n
end

-- Runs the four steps; returns {what, members, ms, moved} for each.
local function bench(n, m, strategy)
  local server = testing.server()
  local set = {}
  for i = 1, m do set[i] = string.format("item-%05d", i) end
  local members, results = {}, {}

  local function join(i)
    local zk = zklua.client{ hosts = server.hosts, timeout = 10 }
    zk:start()
    local member = zk:PartitionAllocator{ path = PATH, identifier = string.format("m%02d", i),
                                          strategy = strategy }
    member.zk = zk
    members[#members + 1] = member
    member:start(set)
  end

  local function measure(what, fn)
    local before = owners(members)
    local t0 = core.monotonic()
    fn()
    for _, member in ipairs(members) do
      assert(member:wait_settled(120), member.identifier .. " did not settle")
    end
    local ms = (core.monotonic() - t0) * 1000
    local after, count = owners(members), 0
    for _ in pairs(after) do count = count + 1 end
    assert(count == m, what .. ": " .. count .. " of " .. m .. " items owned")
    results[#results + 1] = { what = what, members = #members, ms = ms,
                              moved = moved(before, after) }
  end

  measure("start", function() for i = 1, n do join(i) end end)
  measure("join (+1)", function() join(n + 1) end)
  measure("clean leave (-1)", function()
    local member = table.remove(members, 2)
    member:stop()
    member.zk:close()
  end)
  measure("session closed (-1)", function()
    table.remove(members, 3).zk:close() -- no leave: the nodes go with the session
  end)

  for _, member in ipairs(members) do
    member:stop()
    member.zk:close()
  end
  local admin = zklua.client(server.hosts)
  admin:start()
  admin:delete(PATH, nil, true)
  admin:close()
  server:stop()
  return results
end

local function run(strategies)
  local lines = {
    "| PartitionAllocator, 10 members x 1000 items | members after | ms until all settled " ..
    "| items moved (ideal ~91) |",
    "|---|---:|---:|---:|",
  }
  for _, strategy in ipairs(strategies or { "sticky", "round_robin" }) do
    io.stderr:write("allocator: " .. strategy .. "\n")
    for _, r in ipairs(bench(10, 1000, strategy)) do
      lines[#lines + 1] = string.format("| %s: %s | %d | %.0f | %d |", strategy, r.what,
                                        r.members, r.ms, r.moved)
    end
  end
  return lines
end

if arg and arg[0] and arg[0]:match("allocator_bench%.lua$") then
  local opts = { members = "10", items = "1000", strategy = "sticky" }
  for _, a in ipairs(arg) do
    local k, v = a:match("^(%w+)=(.*)$")
    if k then opts[k] = v end
  end
  for _, r in ipairs(bench(tonumber(opts.members), tonumber(opts.items), opts.strategy)) do
    print(string.format("RESULT allocator %-20s members=%d items=%s ms=%.0f moved=%d", r.what,
                        r.members, opts.items, r.ms, r.moved))
  end
end

return run
