--- partition_demo.lua — workers dividing a list of queues with SetPartitioner (`make demo`).
--
-- Three worker processes (this script, run as `worker <name>` by ./zklua) split eight queues
-- so that no two own the same queue; each prints what it owns.  The demo then stops one
-- worker by its PID (SIGTERM: its session closes, its party node and locks vanish), the
-- others re-divide the queues, a new worker joins, and they re-divide again.  After each
-- change the demo prints who owns what as ZooKeeper sees it (each queue's lock holder).
-- Run against your own server with: ZKLUA_HOSTS=host:port ./zklua examples/partition_demo.lua
local zklua = require "zklua"
local core = require "zklua.core"

local PATH = "/demo-queues"
local QUEUES = { "queue-1", "queue-2", "queue-3", "queue-4", "queue-5", "queue-6", "queue-7",
                 "queue-8" }
local TIME_BOUNDARY = 0.5 -- how long the party must be stable before the queues are divided

local function say(who, fmt, ...)
  io.write(string.format("%-8s " .. fmt, who, ...), "\n")
  io.flush()
end

-- ---------------------------------------------------------------- a worker

local function worker(name)
  local zk = zklua.client(os.getenv("ZKLUA_HOSTS"))
  zk:start()
  local qp = zk:SetPartitioner{ path = PATH, set = QUEUES, identifier = name,
                                time_boundary = TIME_BOUNDARY,
                                state_change_event = function(state)
                                  if state == "RELEASE" then
                                    say(name, "the workers changed: releasing my queues")
                                  end
                                end }
  say(name, "joined; waiting for the party to settle")
  local announced = false
  while true do -- the seed's loop
    if qp.failed then
      say(name, "lost my partition: %s", tostring(qp.error))
      break
    elseif qp.release then
      qp:release_set()
      announced = false
    elseif qp.acquired then
      if not announced then
        say(name, "owns %s", table.concat(qp:list(), ", "))
        announced = true
      end
      -- work on the queues until the partition changes
      zk.handler.wait(function() return not qp.acquired end, 1)
    elseif qp.allocating then
      qp:wait_for_acquire()
    end
  end
  zk:close()
end

if arg[1] == "worker" then
  worker(arg[2])
  return
end

-- ---------------------------------------------------------------- the demo

local testing = require "zklua.testing"

local server
local hosts = os.getenv("ZKLUA_HOSTS")
if not hosts then
  io.write("starting a throwaway ZooKeeper... ")
  io.flush()
  server = testing.server()
  hosts = server.hosts
  print("serving on " .. hosts)
end

local function quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

-- name -> { pid =, out =, err = file names, seen = bytes of out already printed }
local workers = {}

local function start_worker(name)
  local out, err = os.tmpname(), os.tmpname()
  local cmd = string.format("ZKLUA_HOSTS=%s ./zklua examples/partition_demo.lua worker %s " ..
                            "> %s 2> %s < /dev/null & echo $!", quote(hosts), quote(name),
                            quote(out), quote(err))
  local pipe = assert(io.popen(cmd, "r"))
  local pid = assert(tonumber(pipe:read("a"):match("%d+")), "no pid")
  pipe:close()
  workers[name] = { pid = pid, out = out, err = err, seen = 0 }
  say("demo", "started %s (pid %d)", name, pid)
end

local function read_file(name)
  local f = io.open(name, "r")
  if not f then return "" end
  local text = f:read("a")
  f:close()
  return text
end

-- Prints what the workers wrote since the last call.
local function relay()
  local names = {}
  for name in pairs(workers) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local w = workers[name]
    local complete = read_file(w.out):sub(w.seen + 1):match("^.*\n") or ""
    io.write(complete)
    w.seen = w.seen + #complete
  end
  io.flush()
end

local function running(pid)
  local stat = read_file("/proc/" .. pid .. "/stat")
  return stat ~= "" and not stat:match("%) [ZX]")
end

-- Stops a worker by its PID: SIGTERM ends its script and closes its session (its stderr,
-- which then only says so, is dropped).
local function stop_worker(name)
  local w = workers[name]
  os.execute("kill -TERM " .. w.pid .. " 2>/dev/null")
  for _ = 1, 100 do -- up to 5 s for it to close its session and exit
    if not running(w.pid) then break end
    zklua.sleep(0.05)
  end
  if running(w.pid) then os.execute("kill -KILL " .. w.pid .. " 2>/dev/null") end
  relay()
  os.remove(w.out)
  os.remove(w.err)
  workers[name] = nil
end

local zk = zklua.client(hosts)
zk:start()

-- queue -> the identifier holding its lock (the first contender), as ZooKeeper sees it
local function owners()
  local result = {}
  for _, q in ipairs(QUEUES) do
    local ok, children = pcall(zk.get_children, zk, PATH .. "/locks/" .. q)
    local first = ok and core.lock_contenders(children)[1]
    if first then
      local got, data = pcall(zk.get, zk, PATH .. "/locks/" .. q .. "/" .. first)
      result[q] = got and data or nil
    end
  end
  return result
end

-- Waits (relaying the workers' lines) until every queue is owned and the owners are exactly
-- the live workers; then prints the table.
local function wait_divided(what)
  local deadline = core.monotonic() + 60
  while true do
    relay()
    local own, holders, complete = owners(), {}, true
    for _, q in ipairs(QUEUES) do
      if not own[q] or not workers[own[q]] then complete = false else holders[own[q]] = true end
    end
    for name in pairs(workers) do
      if not holders[name] then complete = false end
    end
    if complete then
      zklua.sleep(0.2)
      relay()
      say("demo", "%s — who owns what, as ZooKeeper sees it:", what)
      for _, q in ipairs(QUEUES) do say("", "  %s -> %s", q, own[q]) end
      return
    end
    for name, w in pairs(workers) do
      assert(running(w.pid), name .. " exited: " .. read_file(w.err))
    end
    assert(core.monotonic() < deadline, "the workers did not divide the queues in time")
    zklua.sleep(0.05)
  end
end

local ok, err = pcall(function()
  say("demo", "%d queues, 3 workers, time_boundary %.1f s", #QUEUES, TIME_BOUNDARY)
  for _, name in ipairs({ "w1", "w2", "w3" }) do start_worker(name) end
  wait_divided("3 workers")
  say("demo", "stopping w2 (pid %d) with SIGTERM", workers.w2.pid)
  stop_worker("w2")
  wait_divided("w2 left")
  start_worker("w4")
  wait_divided("w4 joined")
end)
for _, name in ipairs({ "w1", "w2", "w3", "w4" }) do
  if workers[name] then stop_worker(name) end
end
pcall(zk.delete, zk, PATH, nil, true)
zk:close()
if server then server:stop() end
if not ok then error(err, 0) end
print("done")
