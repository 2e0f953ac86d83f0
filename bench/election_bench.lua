--- election_bench.lua — Election failover time, zklua or kazoo members (same driver, same
-- protocol; bench/kazoo_election_worker.py is the kazoo member).
--
--   ./zklua bench/election_bench.lua HOSTS zklua|kazoo [ROUNDS=5] [SESSION_TIMEOUT_S=2]
--
-- Three member processes (one session each) run an Election on a fresh path.  The leader
-- creates the ephemeral node <path>/leaders/<member> holding "<pid> <CLOCK_MONOTONIC>" as soon
-- as it is elected, then waits until <path>/quit-<member> exists and returns from its leader
-- function (a clean hand-over).  The driver, each round:
--   close: notes the time, creates quit-<leader>, and reads the next leader's election time;
--   kill:  notes the time, kill -9's the leader's process, and reads the next one's (this
--          includes the session expiry: SESSION_TIMEOUT_S).
-- A killed or finished member is replaced, so three always compete.  Prints
--   RESULT election_close p50_ms=<ms> rounds=<n>
--   RESULT election_kill p50_ms=<ms> rounds=<n> session_timeout_s=<s>
-- (the worker mode, --worker, is internal).
local zklua = require "zklua"
local core = require "zklua.core"

local function quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- ---------------------------------------------------------------- worker (zklua)

local function worker(hosts, path, member, timeout)
  local zk = zklua.client{ hosts = hosts, timeout = tonumber(timeout) }
  zk:start(15)
  local pid = io.open("/proc/self/stat"):read("l"):match("^(%d+)")
  local election = zk:Election(path, member)
  election:run(function()
    zk:create(path .. "/leaders/" .. member, pid .. " " .. string.format("%.9f", core.monotonic()),
              { ephemeral = true, makepath = true })
    local quit = false
    local function look() quit = zk:exists(path .. "/quit-" .. member, look) ~= nil end
    look()
    zk.handler.wait(function() return quit end)
  end)
  zk:close()
end

if arg[1] == "--worker" then
  worker(arg[2], arg[3], arg[4], arg[5])
  return
end

-- ---------------------------------------------------------------- driver

local hosts = arg[1] or error("usage: election_bench.lua HOSTS zklua|kazoo [ROUNDS] [TIMEOUT_S]")
local kind = arg[2] or "zklua"
local rounds = tonumber(arg[3] or 5)
local session_timeout = tonumber(arg[4] or 2)

local zk = zklua.client{ hosts = hosts, timeout = 10 }
zk:start(15)
local path = "/bench-election-" .. kind .. "-" .. tostring(os.time()) .. "-" ..
             tostring(math.random(1e9))
zk:ensure_path(path .. "/leaders")

local next_member = 0
local function spawn()
  next_member = next_member + 1
  local member = "m" .. next_member
  local cmd
  if kind == "kazoo" then
    cmd = "/usr/bin/python3 bench/kazoo_election_worker.py"
  else
    -- the interpreter running this driver (./zklua, or luajit for bench/run.lua's LuaJIT column)
    cmd = quote(arg[-1] or "./zklua") .. " " .. quote(arg[0]) .. " --worker"
  end
  local line = string.format("%s %s %s %s %s >/dev/null 2>&1 & echo $!", cmd, quote(hosts),
                             quote(path), member, session_timeout)
  local p = assert(io.popen(line))
  local pid = p:read("l")
  p:close()
  return member, tonumber(pid)
end

local pids = {}
for _ = 1, 3 do
  local member, pid = spawn()
  pids[member] = pid
end

-- The current leader: (member, pid, elected_at), waiting for one to show.
local function leader(except)
  local found
  zk.handler.wait(function()
    for _, name in ipairs(zk:get_children(path .. "/leaders")) do
      if name ~= except then
        local data = zk:get(path .. "/leaders/" .. name)
        local pid, at = data:match("^(%d+) (%S+)$")
        found = { name, tonumber(pid), tonumber(at) }
        return true
      end
    end
    return false
  end, 120)
  assert(found, "no leader elected within 120 s")
  return found[1], found[2], found[3]
end

local function median(list)
  table.sort(list)
  local n = #list
  if n == 0 then return 0 end
  if n % 2 == 1 then return list[(n + 1) / 2] end
  return (list[n / 2] + list[n / 2 + 1]) / 2
end

local close_ms, kill_ms = {}, {}
for round = 1, 2 * rounds do
  local member, pid = leader()
  local t0 = core.monotonic()
  if round % 2 == 1 then
    zk:create(path .. "/quit-" .. member, "")
  else
    os.execute("kill -9 " .. pid)
  end
  local _, _, elected = leader(member)
  local list = round % 2 == 1 and close_ms or kill_ms
  list[#list + 1] = (elected - t0) * 1000
  -- the old leader's node goes with its session (at once when it closed, after the timeout
  -- when killed): wait for it so that the next round starts from one leader
  zk.handler.wait(function() return zk:exists(path .. "/leaders/" .. member) == nil end, 60)
  pids[member] = nil
  local new_member, new_pid = spawn()
  pids[new_member] = new_pid
end

for member, pid in pairs(pids) do
  pcall(zk.create, zk, path .. "/quit-" .. member, "")
  os.execute("kill " .. pid .. " 2>/dev/null")
end
zklua.sleep(0.5)
pcall(zk.delete, zk, path, nil, true)
zk:close()
print(string.format("RESULT election_close p50_ms=%.2f rounds=%d", median(close_ms), #close_ms))
print(string.format("RESULT election_kill p50_ms=%.2f rounds=%d session_timeout_s=%g",
                    median(kill_ms), #kill_ms, session_timeout))
