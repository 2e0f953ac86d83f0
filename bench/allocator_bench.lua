-- bench/allocator_bench.lua — PartitionAllocator handover times: N members (each its own
-- client and session, all in this process) sharing M items, on the server at hosts= (bench/run.lua
-- passes its shared one) or else on a throwaway server of its own.
--
--   ./zklua bench/allocator_bench.lua [members=10] [items=1000] [strategy=sticky] [hosts=H:P]
--                                     [session=10] [cap=120] [steps=start,join,leave,closed]
--
-- For a first start, a join, a clean leave and a session closed without leaving (a crash
-- whose session the server ends at once): the time until every member owns exactly its share
-- of the new assignment (wait_settled on every member), and how many items changed owner
-- (ideal on a join or a leave: items/n).  Times include every hook round trip; all members
-- share this one Lua thread.  (A kill -9 adds the session timeout before the server ends the
-- session; the rest is the same.)  Prints, per step (start, join, leave, closed):
--   RESULT alloc_<step> strategy=<name> members=<after> items=<n> ms=<ms> moved=<items>
-- A step that does not settle within cap seconds (session: the members' session timeout)
-- ends the run: its line says dnf_s=<cap> (or error=<message>, to the line's end, when a call
-- failed) instead of
-- ms=, the steps after it not_run=1.  Last, the sessions the members lost meanwhile (LOST
-- heard before their own stop):
--   RESULT alloc_sessions strategy=<name> members=<n> items=<n> lost=<n> suspended=<n>
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
local function bench(n, m, strategy, hosts, opts)
  -- maxClientCnxns=0: more than 60 members connect from this one address
  local server = not hosts and testing.server({ heap = "3g", config = { "maxClientCnxns=0" } })
  hosts = hosts or server.hosts
  local path = string.format("/bench-allocator-%s-%d-%d", strategy, os.time(), math.random(1e9))
  local set = {}
  for i = 1, m do set[i] = string.format("item-%05d", i) end
  local members, results = {}, {}
  local lost, suspended = 0, 0

  local function join(i)
    local zk = zklua.client{ hosts = hosts, timeout = opts.session }
    zk:add_listener(function(state)
      if zk.bench_closing then return end
      if state == "LOST" then lost = lost + 1 elseif state == "SUSPENDED" then
        suspended = suspended + 1 end
    end)
    zk:start()
    local member = zk:PartitionAllocator{ path = path, identifier = string.format("m%02d", i),
                                          strategy = strategy }
    member.zk = zk
    members[#members + 1] = member
    member:start(set, opts.cap) -- (its default: the session timeout, 2 s in bench-scale)
  end

  local failed = false
  local function measure(step, fn)
    if failed then
      results[#results + 1] = { step = step, members = #members, not_run = true }
      return
    end
    local before = owners(members)
    local t0 = core.monotonic()
    local ok, err = pcall(function()
      fn()
      for _, member in ipairs(members) do
        local left = opts.cap - (core.monotonic() - t0)
        if left <= 0 or not member:wait_settled(left) then error("dnf", 0) end
      end
    end)
    if not ok then
      failed = true
      results[#results + 1] = { step = step, members = #members,
                                dnf = err == "dnf", error = err ~= "dnf" and tostring(err) }
      return
    end
    local ms = (core.monotonic() - t0) * 1000
    local after, count = owners(members), 0
    for _ in pairs(after) do count = count + 1 end
    if count ~= m then
      failed = true
      results[#results + 1] = { step = step, members = #members,
                                error = count .. " of " .. m .. " items owned" }
      return
    end
    results[#results + 1] = { step = step, members = #members, ms = ms,
                              moved = moved(before, after) }
  end

  local steps = {
    start = function() for i = 1, n do join(i) end end,
    join = function() join(n + 1) end,
    leave = function()
      local member = table.remove(members, 2)
      member.zk.bench_closing = true
      member:stop(opts.cap) -- (a 100k share takes longer than one session timeout)
      member.zk:close()
    end,
    closed = function()
      local member = table.remove(members, 3)
      member.zk.bench_closing = true
      member.zk:close() -- no leave: the nodes go with the session
    end,
  }
  for step in opts.steps:gmatch("[^,]+") do
    measure(step, assert(steps[step], "steps: start, join, leave, closed"))
  end
  results.lost, results.suspended = lost, suspended
  opts.report(results); io.stdout:flush() -- before the clean-up: a server busy ending 1M owner nodes is slow

  for _, member in ipairs(members) do
    member.zk.bench_closing = true
    pcall(member.stop, member)
    member.zk:close()
  end
  local admin = zklua.client{ hosts = hosts, timeout = 30 }
  admin:start(120)
  pcall(admin.delete, admin, path, nil, true)
  admin:close()
  if server then server:stop() end
  return results
end

local opts = { members = "10", items = "1000", strategy = "sticky", session = "10", cap = "120",
               steps = "start,join,leave,closed" }
for _, a in ipairs(arg) do
  local k, v = a:match("^(%w+)=(.*)$")
  if not k or not opts[k] and k ~= "hosts" then
    error("usage: allocator_bench.lua [members=N] [items=N] [strategy=S] [hosts=H] [session=S] " ..
          "[cap=S] [steps=LIST]")
  end
  opts[k] = v
end
local function report(results)
  for _, r in ipairs(results) do
    local head = string.format("RESULT alloc_%s strategy=%s members=%d items=%s", r.step,
                               opts.strategy, r.members, opts.items)
    if r.not_run then
      print(head .. " not_run=1")
    elseif r.dnf then
      print(head .. " dnf_s=" .. opts.cap)
    elseif r.error then
      print(head .. " error=" .. r.error:gsub("%s+", " "):sub(1, 200)) -- (last: to the line's end)
    else
      print(string.format("%s ms=%.1f moved=%d", head, r.ms, r.moved))
    end
  end
  print(string.format("RESULT alloc_sessions strategy=%s members=%s items=%s lost=%d suspended=%d",
                      opts.strategy, opts.members, opts.items, results.lost, results.suspended))
end

bench(tonumber(opts.members), tonumber(opts.items), opts.strategy, opts.hosts,
      { session = tonumber(opts.session), cap = tonumber(opts.cap), steps = opts.steps,
        report = report })
