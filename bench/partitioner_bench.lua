--- partitioner_bench.lua — a SetPartitioner re-covering a set after membership changes, with
-- zklua members or kazoo members (KIND; bench/kazoo_partitioner_member.py is the kazoo member,
-- same protocol).  MEMBERS member processes (one session each, session timeout SESSION s)
-- split ITEMS items with time_boundary TB, each running the seed's loop (release_set as soon
-- as RELEASE).  zklua members run under the interpreter running this driver (./zklua, or
-- luajit for bench/run.lua's LuaJIT column).
-- Three events, each timed from the event to the moment every item is owned again (every
-- live member ACQUIRED its share of the new split; times on the machine's CLOCK_MONOTONIC,
-- shared by all processes):
--   leave   a member finish()es (clean leave): from its finish() call
--   crash   a member is killed with SIGKILL: from the kill; includes waiting for the server
--           to expire its session (SESSION s), which no client can shorten
--   join    a new member starts: from the moment its party node exists
-- Prints, per event:
--   RESULT sp_<event> ms=<median ms> min_ms=<ms> max_ms=<ms> members=<n> items=<n> tb_ms=<ms>
-- and, last, the first cover of the set by the MEMBERS members started together, and how
-- many members heard their session LOST, went SUSPENDED, or failed (the partitioner failed,
-- or the process exited on its own) over the whole run:
--   RESULT sp_build ms=<ms> ... lost=<n> suspended=<n> failed=<n> failed_why=<classes or ->
-- An event not covered within CAP seconds (default 120) ends the run: its line says
-- "dnf_s=<CAP>" instead of ms=, and those of the events not reached "not_run=1" (so do all
-- when the first cover took longer than CAP: sp_build dnf_s=<CAP>).
--   ./zklua bench/partitioner_bench.lua HOSTS [ROUNDS=3] [MEMBERS=10] [ITEMS=1000] [TB=0.1]
--                                       [SESSION=2] [KIND=zklua|kazoo] [CAP=120]
--                                       [EVENTS=leave,join,crash,join] [BUILDS=1]
-- (BUILDS: the first cover is timed that many times, each by new members on a new path,
-- the others leaving first; its line gives the median, min_ms, max_ms and builds=).
-- (EVENTS: the events of one round, in order; the member mode, --member, is internal).
package.path = "spec/?.lua;" .. package.path -- fixtures.child: processes handled by PID
local zklua = require "zklua"
local core = require "zklua.core"
local child = require "fixtures.child"
local unpack = table.unpack or unpack -- (LuaJIT)

-- ---------------------------------------------------------------- member process

local function member(hosts, path, n_items, ident, tb, session)
  local zk = zklua.client{ hosts = hosts, timeout = session }
  local function say(...)
    io.write(table.concat({ ... }, " "), "\n")
    io.flush()
  end
  local closing = false -- (stop() and close() make the listeners hear LOST: not a loss)
  zk:add_listener(function(state)
    if state ~= "CONNECTED" and not closing then
      say(state:lower(), string.format("%.6f", core.monotonic()))
    end
  end)
  zk:start(15)
  local leave = false
  local function look()
    if zk:exists(path .. "-ctl/" .. ident, function() look() end) then leave = true end
  end
  look()
  local set = {}
  for i = 1, n_items do set[i] = string.format("item-%05d", i) end
  local qp = zk:SetPartitioner{ path = path, set = set, identifier = ident, time_boundary = tb }
  say("joined", string.format("%.6f", core.monotonic()))
  local announced = false
  while true do
    if leave then
      say("leaving", string.format("%.6f", core.monotonic()))
      qp:finish()
      break
    end
    if qp.failed then -- the error's class: "LockTimeout: item ..." says LockTimeout
      say("failed", string.format("%.6f", core.monotonic()),
          tostring(qp.error):match("^(%w+)") or "?")
      break
    elseif qp.release then
      qp:release_set()
    elseif qp.acquired then
      if not announced then
        say("acquired", #qp:list(), string.format("%.6f", core.monotonic()))
        announced = true
      end
      zk.handler.wait(function() return not qp.acquired or leave end, 1)
    elseif qp.allocating then
      announced = false
      qp:wait_for_acquire(1)
    end
  end
  closing = true
  zk:close()
end

if arg[1] == "--member" then
  member(arg[2], arg[3], tonumber(arg[4]), arg[5], tonumber(arg[6]), tonumber(arg[7]))
  return
end

-- ---------------------------------------------------------------- driver

local hosts = arg[1] or
  error("usage: partitioner_bench.lua HOSTS [ROUNDS] [MEMBERS] [ITEMS] [TB] [SESSION] [KIND]")
local ROUNDS = tonumber(arg[2]) or 3
local MEMBERS = tonumber(arg[3]) or 10
local ITEMS = tonumber(arg[4]) or 1000
local TB = tonumber(arg[5]) or 0.1
local SESSION = tonumber(arg[6]) or 2
local KIND = arg[7] or "zklua"
local CAP = tonumber(arg[8]) or 120
local BUILDS = tonumber(arg[10]) or 1
local EVENTS = {}
for e in (arg[9] or "leave,join,crash,join"):gmatch("[^,]+") do
  assert(e == "leave" or e == "join" or e == "crash", "EVENTS: leave, join or crash")
  EVENTS[#EVENTS + 1] = e
end
assert(KIND == "zklua" or KIND == "kazoo", "KIND must be zklua or kazoo")
local admin = zklua.client{ hosts = hosts, timeout = 10 }
admin:start()
local path -- each first cover's own (build())

local EVENTS_HAS = {}
for _, e in ipairs(EVENTS) do EVENTS_HAS[e] = true end
local kids, serial = {}, 0
local everyone = {} -- every member started, gone ones too (their sessions' fates)

local function spawn()
  serial = serial + 1
  local ident = string.format("m%03d", serial)
  local argv = { "/usr/bin/python3", "bench/kazoo_partitioner_member.py" }
  if KIND == "zklua" then argv = { arg[-1] or "./zklua", arg[0], "--member" } end
  for _, a in ipairs({ hosts, path, tostring(ITEMS), ident, tostring(TB), tostring(SESSION) }) do
    argv[#argv + 1] = a
  end
  local kid = child.spawn(argv)
  kid.ident = ident
  kids[ident] = kid
  everyone[#everyone + 1] = kid
  return kid
end

-- The member's last "acquired <count> <T>" line after time since, or nil.
local function last_acquired(kid, since)
  local count, at
  for c, t in kid:stdout():gmatch("acquired (%d+) (%S+)") do
    if tonumber(t) >= since then count, at = tonumber(c), tonumber(t) end
  end
  return count, at
end

-- Waits until every live member acquired after since and their shares sum to ITEMS; returns
-- the latest of those acquisitions, or nil when the set was not covered within CAP s.
local function covered_after(since)
  local latest
  local ok = child.poll_until(function()
    local total
    total, latest = 0, since
    for _, kid in pairs(kids) do
      local count, at = last_acquired(kid, since)
      if not count then return false end
      total = total + count
      if at > latest then latest = at end
    end
    return total == ITEMS
  end, CAP)
  return ok and latest or nil
end

local function any_member()
  local names = {}
  for ident in pairs(kids) do names[#names + 1] = ident end
  table.sort(names)
  return kids[names[#names]]
end

local function leave()
  local kid = any_member()
  admin:create(path .. "-ctl/" .. kid.ident, "")
  kid:wait_line("^leaving", 30)
  local t0 = tonumber(kid:stdout():match("leaving (%S+)"))
  kids[kid.ident] = nil
  local t1 = covered_after(t0)
  kid:wait_exit(30)
  kid:cleanup()
  return t1 and t1 - t0
end

local function crash()
  local kid = any_member()
  kids[kid.ident] = nil
  kid:signal("KILL")
  local t0 = core.monotonic()
  local t1 = covered_after(t0)
  kid:cleanup()
  return t1 and t1 - t0
end

local function join()
  local kid = spawn()
  kid:wait_line("^joined", 30)
  local t0 = tonumber(kid:stdout():match("joined (%S+)"))
  local t1 = covered_after(t0)
  return t1 and t1 - t0
end

-- Starts MEMBERS members on a path of their own and waits for the first cover: its seconds
-- from the first start, or nil when the set was not covered within CAP s.
local function build()
  path = string.format("/bench-sp-%s-%d-%d", KIND, os.time(), math.random(1e6))
  admin:ensure_path(path .. "-ctl")
  local t0 = core.monotonic()
  for _ = 1, MEMBERS do spawn() end
  local built = covered_after(t0)
  return built and built - t0
end

-- Every member leaves (finish()) and exits; their path goes.
local function dismiss()
  for ident in pairs(kids) do admin:create(path .. "-ctl/" .. ident, "") end
  for ident, kid in pairs(kids) do
    kid:wait_exit(30)
    kid:cleanup()
    kids[ident] = nil
  end
  pcall(admin.delete, admin, path, nil, true)
  pcall(admin.delete, admin, path .. "-ctl", nil, true)
end

local function median(list)
  local copy = { unpack(list) }
  table.sort(copy)
  local n = #copy
  return n % 2 == 1 and copy[(n + 1) / 2] or (copy[n / 2] + copy[n / 2 + 1]) / 2
end

-- The members that heard their session LOST, that went SUSPENDED, and that failed (printed
-- "failed", or exited on their own while still listed), each member counted once; and why
-- they failed: "LockTimeout,exited" (the error classes zklua members printed, "exited" for
-- a member that ended on its own, "-" for none).
local function fates()
  local lost, suspended, failed, why = 0, 0, 0, {}
  for _, kid in ipairs(everyone) do
    local out = "\n" .. kid:stdout()
    if out:find("\nlost ") then lost = lost + 1 end
    if out:find("\nsuspended ") then suspended = suspended + 1 end
    local reason = out:match("\nfailed %S+ (%w+)") or out:find("\nfailed ") and "?" or
                   kids[kid.ident] and kid:exited() and "exited"
    if reason then
      failed = failed + 1
      why[#why + 1] = reason
    end
  end
  return lost, suspended, failed, #why > 0 and table.concat(why, ",") or "-"
end

local ok, err = pcall(function()
  local builds = {} -- BUILDS first covers, each by new members on a new path: the median
  for b = 1, BUILDS do
    builds[b] = build()
    if not builds[b] then builds = nil; break end
    if b < BUILDS then dismiss() end
  end
  local built = builds and median(builds)
  local tail = string.format("members=%d items=%d tb_ms=%.0f session_ms=%.0f", MEMBERS, ITEMS,
                             TB * 1000, SESSION * 1000)
  local times, stopped = { leave = {}, crash = {}, join = {} }, nil
  local run = { leave = leave, join = join, crash = crash }
  for round = 1, built and ROUNDS or 0 do
    io.stderr:write(string.format("partitioner round %d/%d\n", round, ROUNDS))
    for _, event in ipairs(EVENTS) do
      local took = run[event]()
      if not took then stopped = event; break end
      table.insert(times[event], took)
    end
    if stopped then break end
  end
  for _, event in ipairs({ "leave", "crash", "join" }) do
    local list = times[event]
    if #list > 0 then
      print(string.format("RESULT sp_%s ms=%.1f min_ms=%.1f max_ms=%.1f %s", event,
                          median(list) * 1000, math.min(unpack(list)) * 1000,
                          math.max(unpack(list)) * 1000, tail))
    elseif event == stopped then
      print(string.format("RESULT sp_%s dnf_s=%g %s", event, CAP, tail))
    elseif EVENTS_HAS[event] then -- not reached: an earlier event (or the build) did not end
      print(string.format("RESULT sp_%s not_run=1 %s", event, tail))
    end
  end
  local lost, suspended, failed, why = fates()
  print(string.format("RESULT sp_build %s %s lost=%d suspended=%d failed=%d failed_why=%s",
                      built and string.format("ms=%.1f min_ms=%.1f max_ms=%.1f builds=%d",
                                              built * 1000, math.min(unpack(builds)) * 1000,
                                              math.max(unpack(builds)) * 1000, BUILDS) or
                      string.format("dnf_s=%g", CAP), tail, lost, suspended, failed, why))
end)
for _, kid in pairs(kids) do kid:cleanup() end
if path then
  pcall(admin.delete, admin, path, nil, true)
  pcall(admin.delete, admin, path .. "-ctl", nil, true)
end
admin:close()
if not ok then error(err, 0) end
