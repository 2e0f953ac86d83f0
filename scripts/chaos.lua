--- scripts/chaos.lua — `make chaos`: PartitionAllocator workers under random faults, and a
-- checker proving that no item was ever owned twice at once and that every item is owned
-- again once the faults stop.
--
--   ./zklua scripts/chaos.lua [SECONDS=60] [WORKERS=6] [ITEMS=60]
--
-- WORKERS member processes (spec/fixtures/allocator_child.lua, one session each, 2 s session
-- timeout) run different strategies (sticky, rendezvous, round_robin, and two that disagree
-- with everyone: reverse and random) on one throwaway server.  Every worker logs each item it
-- owns with its fencing token (acquire / release / lost lines).  For SECONDS, every 0.5-2 s one
-- fault: kill -9 of a worker (a new one takes its place), an expiry of a worker's session, a
-- clean leave (and a new worker), or a change of the item set.  Then the faults stop and the
-- run waits for every item of the final set to be owned exactly once.  The checker
-- (spec/support/ownership.lua) then proves from the logs: no overlap of two owners of an item
-- (except the documented window of a member whose session was expired, which learns it late),
-- and fencing tokens that grow with every new owner.  Ends with "chaos: ok ..." or exits 1.
package.path = "spec/?.lua;" .. package.path
local zklua = require "zklua"
local core = require "zklua.core"
local testing = require "zklua.testing"
local child = require "fixtures.child"
local ownership = require "support.ownership"

local SECONDS = tonumber(arg[1] or 60)
local WORKERS = tonumber(arg[2] or 6)
local ITEMS = tonumber(arg[3] or 60)
local WAIT = 90
local STRATEGIES = { "sticky", "rendezvous", "round_robin", "reverse", "random" }
local PATH = "/chaos"

math.randomseed(tonumber(os.getenv("CHAOS_SEED") or os.time()))

local server = testing.server()
local hosts = server.hosts
local admin = zklua.client{ hosts = hosts, timeout = 10 }
admin:start()
local logdir = os.tmpname()
os.remove(logdir)
os.execute("mkdir -p " .. logdir)

local live, all_kids, logs, ended, window = {}, {}, {}, {}, {}
local serial, faults = 0, { kill = 0, expire = 0, leave = 0, set = 0 }

local items = {}
for i = 1, ITEMS do items[i] = string.format("q%03d", i) end
local next_item = ITEMS

local function spawn()
  serial = serial + 1
  local ident = "w" .. serial
  local log = logdir .. "/" .. ident .. ".log"
  logs[#logs + 1] = log
  local strategy = STRATEGIES[(serial - 1) % #STRATEGIES + 1]
  local argv = { "./zklua", "spec/fixtures/allocator_child.lua", "hosts=" .. hosts,
                 "path=" .. PATH, "ident=" .. ident, "log=" .. log, "strategy=" .. strategy,
                 "timeout=2", "seed=" .. table.concat(items, ",") }
  local kid = child.spawn(argv)
  all_kids[#all_kids + 1] = kid
  kid.ident = ident
  kid.ready = kid:wait_line("^ready", WAIT)
  kid.member_pid = kid.ready:match("^ready (%d+)")
  kid:wait_line("^started", WAIT)
  live[#live + 1] = kid
  return kid
end

local function take(index)
  local kid = table.remove(live, index)
  return kid
end

local function kill_one()
  local kid = take(math.random(#live))
  kid:signal("KILL")
  ended[kid.member_pid] = core.monotonic()
  kid:wait_exit(10)
  faults.kill = faults.kill + 1
  spawn()
end

-- Writes a command to a worker's control node: false when the node is gone (it is
-- ephemeral: the worker's session expired, by expire_one or on its own on a slow machine,
-- sessions being 2 s); the worker then counts as expired.
local function command(kid, text)
  local ok, err = pcall(admin.set, admin, PATH .. "-ctl/" .. kid.ident, text)
  if ok then return true end
  if not zklua.errors.is(err, zklua.errors.NoNodeError) then error(err, 0) end
  kid.expired = true
  return false
end

-- The indexes in live of the workers whose session never expired.
local function unexpired()
  local indexes = {}
  for i, k in ipairs(live) do
    if not k.expired then indexes[#indexes + 1] = i end
  end
  return indexes
end

local function leave_one()
  local candidates = unexpired()
  if #candidates == 0 then return end
  local index = candidates[math.random(#candidates)]
  if not command(live[index], "stop") then return end
  local kid = take(index)
  kid:wait_exit(WAIT)
  faults.leave = faults.leave + 1
  spawn()
end

-- As testing.expire_session: take the session over with a second handle and close it, until
-- the member hears LOST (it often wins its session back first).
local function expire_one()
  local kid = live[math.random(#live)]
  local _, id, hex = kid.ready:match("^ready (%d+) (%S+) (%x+)")
  local passwd = hex:gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end)
  local before = select(2, kid:stdout():gsub("state LOST", ""))
  window[kid.ident] = true
  kid.expired = true -- its control node was ephemeral: it went with the session
  child.poll_until(function()
    local other = core.session(hosts, 2000, false, id, passwd)
    other:start()
    local deadline = core.monotonic() + 2
    repeat
      other:wait(0.05)
      local kind, state = other:next()
    until (kind == "state" and state == "CONNECTED") or core.monotonic() > deadline
    other:stop()
    other:close()
    return select(2, kid:stdout():gsub("state LOST", "")) > before
  end, 20)
  faults.expire = faults.expire + 1
end

-- Changes the set through a worker's control node (one whose session never expired: the
-- node goes with the session).
local function change_set()
  local candidates = unexpired()
  if #candidates == 0 then return end
  local kid = live[candidates[math.random(#candidates)]]
  if math.random(2) == 1 or #items < ITEMS / 2 then
    local item = string.format("q%03d", next_item + 1)
    if not command(kid, "add " .. item) then return end
    next_item = next_item + 1
    items[#items + 1] = item
  else
    local index = math.random(#items)
    if not command(kid, "remove " .. items[index]) then return end
    table.remove(items, index)
  end
  faults.set = faults.set + 1
end

local function report()
  return ownership.check(ownership.read(logs), { ended = ended, window = window })
end

local ok, err = pcall(function()
  for _ = 1, WORKERS do spawn() end
  local stop_at = core.monotonic() + SECONDS
  while core.monotonic() < stop_at do
    zklua.sleep(0.5 + math.random() * 1.5)
    local pick = math.random(10)
    if pick <= 3 then kill_one()
    elseif pick <= 5 then expire_one()
    elseif pick <= 7 then leave_one()
    else change_set() end
  end
  -- (the logs are checked once the faults stop: an expired member's items overlap the next
  -- owners' until it hears LOST and logs them "lost", the documented window)
  -- the faults stopped: every item of the final set owned exactly once, still never two owners
  local last
  local covered = child.poll_until(function()
    last = report()
    ownership.assert_safe(last)
    return pcall(ownership.assert_cover, last, items)
  end, WAIT)
  if not covered then
    ownership.assert_cover(last, items) -- raises with what is missing
  end
  print(string.format("chaos: ok %d s, %d workers, %d items at the end; faults: %d kills, " ..
                      "%d expiries, %d clean leaves, %d set changes; %d acquisitions, " ..
                      "%d expiry windows", SECONDS, WORKERS, #items, faults.kill, faults.expire,
                      faults.leave, faults.set, last.acquisitions, #last.windows))
end)

for _, kid in ipairs(all_kids) do kid:cleanup() end
pcall(admin.close, admin)
server:stop()
os.execute("rm -rf " .. logdir)
if not ok then
  io.stderr:write("chaos: FAILED: ", tostring(err), "\n")
  os.exit(1)
end
