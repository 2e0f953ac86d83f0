-- bench/allocator_bench.lua — PartitionAllocator handover times: N members (each its own
-- client and session, all in this process) sharing M items, on the server at hosts= (bench/run.lua
-- passes its shared one) or else on a throwaway server of its own.
--
--   ./zklua bench/allocator_bench.lua [members=10] [items=1000] [strategy=sticky] [hosts=H:P]
--
-- For a first start, a join, a clean leave and a session closed without leaving (a crash
-- whose session the server ends at once): the time until every member owns exactly its share
-- of the new assignment (wait_settled on every member), and how many items changed owner
-- (ideal on a join or a leave: items/n).  Times include every hook round trip; all members
-- share this one Lua thread.  (A kill -9 adds the session timeout before the server ends the
-- session; the rest is the same.)  Prints, per step (start, join, leave, closed):
--   RESULT alloc_<step> strategy=<name> members=<after> items=<n> ms=<ms> moved=<items>
local zklua = require "zklua"
local core = require "zklua.core"
local testing = require "zklua.testing"


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

-- Runs the four steps on hosts (or a throwaway server); returns {step, members, ms, moved}
-- for each.
local function bench(n, m, strategy, hosts)
  local server = not hosts and testing.server()
  hosts = hosts or server.hosts
  local path = string.format("/bench-allocator-%s-%d-%d", strategy, os.time(), math.random(1e9))
  local set = {}
  for i = 1, m do set[i] = string.format("item-%05d", i) end
  local members, results = {}, {}

  local function join(i)
    local zk = zklua.client{ hosts = hosts, timeout = 10 }
    zk:start()
    local member = zk:PartitionAllocator{ path = path, identifier = string.format("m%02d", i),
                                          strategy = strategy }
    member.zk = zk
    members[#members + 1] = member
    member:start(set)
  end

  local function measure(step, fn)
    local before = owners(members)
    local t0 = core.monotonic()
    fn()
    for _, member in ipairs(members) do
      assert(member:wait_settled(120), member.identifier .. " did not settle")
    end
    local ms = (core.monotonic() - t0) * 1000
    local after, count = owners(members), 0
    for _ in pairs(after) do count = count + 1 end
    assert(count == m, step .. ": " .. count .. " of " .. m .. " items owned")
    results[#results + 1] = { step = step, members = #members, ms = ms,
                              moved = moved(before, after) }
  end

  measure("start", function() for i = 1, n do join(i) end end)
  measure("join", function() join(n + 1) end)
  measure("leave", function()
    local member = table.remove(members, 2)
    member:stop()
    member.zk:close()
  end)
  measure("closed", function()
    table.remove(members, 3).zk:close() -- no leave: the nodes go with the session
  end)

  for _, member in ipairs(members) do
    member:stop()
    member.zk:close()
  end
  local admin = zklua.client(hosts)
  admin:start()
  admin:delete(path, nil, true)
  admin:close()
  if server then server:stop() end
  return results
end

local opts = { members = "10", items = "1000", strategy = "sticky" }
for _, a in ipairs(arg) do
  local k, v = a:match("^(%w+)=(.*)$")
  if not k then error("usage: allocator_bench.lua [members=N] [items=N] [strategy=S] [hosts=H]") end
  opts[k] = v
end
for _, r in ipairs(bench(tonumber(opts.members), tonumber(opts.items), opts.strategy, opts.hosts)) do
  print(string.format("RESULT alloc_%s strategy=%s members=%d items=%s ms=%.1f moved=%d", r.step,
                      opts.strategy, r.members, opts.items, r.ms, r.moved))
end
