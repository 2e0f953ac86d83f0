-- bench/allocator_bench.lua — PartitionAllocator handover times on a throwaway server:
-- N members (each its own client and session, all in this process) sharing M items.
--   ./zklua bench/allocator_bench.lua [members=10] [items=1000] [strategy=sticky]
-- Prints, for a first start, a join, a clean leave and a session closed without leaving (a
-- crash whose session the server ends at once): the time until every member owns exactly its
-- share of the new assignment, and how many items changed owner (ideal on a join: items/n).
-- Times include every hook round trip; all members share this one Lua thread.
local zklua = require "zklua"
local core = require "zklua.core"
local testing = require "zklua.testing"

local opts = { members = "10", items = "1000", strategy = "sticky" }
for _, a in ipairs({ ... }) do
  local k, v = a:match("^(%w+)=(.*)$")
  if k then opts[k] = v end
end
local N, M = tonumber(opts.members), tonumber(opts.items)

local server = testing.server()
local path = "/bench-allocator"
local set = {}
for i = 1, M do set[i] = string.format("item-%05d", i) end

local members = {}
local function join(i)
  local zk = zklua.client{ hosts = server.hosts, timeout = 10 }
  zk:start()
  local m = zk:PartitionAllocator{ path = path, identifier = string.format("m%02d", i),
                                   strategy = opts.strategy }
  m.zk = zk
  members[#members + 1] = m
  m:start(set)
  return m
end

local function all_settled()
  for _, m in ipairs(members) do
    if not m:wait_settled(120) then error(m.identifier .. " did not settle") end
  end
end

local function owners()
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

local function measure(what, fn)
  local before = owners()
  local t0 = core.monotonic()
  fn()
  all_settled()
  local ms = (core.monotonic() - t0) * 1000
  local after = owners()
  local count = 0
  for _ in pairs(after) do count = count + 1 end
  assert(count == M, what .. ": " .. count .. " of " .. M .. " items owned")
  print(string.format("RESULT allocator %-28s members=%d items=%d ms=%.0f moved=%d",
                      what, #members, M, ms, moved(before, after)))
end

measure("start (" .. N .. " members)", function()
  for i = 1, N do join(i) end
end)
measure("join (+1)", function() join(N + 1) end)
measure("clean leave (-1)", function()
  local m = table.remove(members, 2)
  m:stop()
  m.zk:close()
end)
measure("session closed (-1)", function()
  local m = table.remove(members, 3)
  m.zk:close() -- no leave: the server deletes its nodes with the session
end)

for _, m in ipairs(members) do
  m:stop()
  m.zk:close()
end
local admin = zklua.client(server.hosts)
admin:start()
admin:delete(path, nil, true)
admin:close()
server:stop()
