--- examples/nginx/zklua_worker.lua — what each nginx worker of examples/nginx/nginx.conf runs.
--
-- init_worker(): one ZooKeeper session per worker, under zklua.handlers.ngx, started from a
-- timer (init_worker cannot wait).  The worker joins a PartitionAllocator on $ZKLUA_APP/work
-- that divides the items ($ZKLUA_ITEMS, comma-separated; default item-01..item-12) among the
-- live workers, then competes in an Election on $ZKLUA_APP/leader with election:run(): a
-- blocking call that, under the ngx handler, only yields the timer's coroutine — the worker
-- keeps serving requests while it waits for leadership, however long the lock is contended.
-- status(): GET /status answers with this worker's pid, whether it leads, its session's state,
-- its items and the allocation's generation, and the election's contenders (read from
-- ZooKeeper by the request itself, which yields).
-- exit_worker(): closes the session, so the worker's nodes go at once (its items move).
--
-- SUSPENDED (connection lost): the leader stays leader (its node lives while the session
-- does); /status still answers, from what the worker knows, with state SUSPENDED.
-- LOST (session expired, or the worker killed): the nodes go with the session; another
-- worker's run() gets the lock and leads, and the allocator gives the dead worker's items to
-- the others.  A worker whose session expired stops leading (on_lost), loses its items, and
-- competes and joins again on its new session.
local zklua = require "zklua"
local ngx_handler = require "zklua.handlers.ngx"

local M = {}

local APP = os.getenv("ZKLUA_APP") or "/zklua-nginx"
local ELECTION = APP .. "/leader"

local function configured_items()
  local items = {}
  for item in (os.getenv("ZKLUA_ITEMS") or ""):gmatch("[^,]+") do items[#items + 1] = item end
  if #items == 0 then
    for i = 1, 12 do items[i] = string.format("item-%02d", i) end
  end
  return items
end

local zk, handler, election, allocator
local leading = false

local function log(...)
  ngx.log(ngx.NOTICE, "zklua worker ", ngx.worker.pid(), ": ", ...)
end

-- Leads until the worker exits or leadership is lost with the session.
local function lead()
  leading = true
  log("leading")
  handler.wait(function() return ngx.worker.exiting() or not election.is_leader end)
  leading = false
end

-- The worker's coordination loop, in a timer: connect, then compete for leadership forever.
local function main(premature)
  if premature then return end
  while not ngx.worker.exiting() do
    local ok, err = pcall(function()
      if zk.state ~= "CONNECTED" then zk:start(30) end
      local me = tostring(ngx.worker.pid())
      allocator = allocator or zk:PartitionAllocator{ path = APP .. "/work", identifier = me }
      if allocator.state == "idle" then allocator:start(configured_items()) end
      election = election or zk:Election(ELECTION, me)
      election:run(lead)
    end)
    if not ok and not ngx.worker.exiting() then
      log("election: ", tostring(err), "; again in 1 s")
      handler.sleep(1)
    end
  end
end

function M.init_worker()
  handler = ngx_handler.new()
  zk = zklua.client{
    hosts = os.getenv("ZKLUA_HOSTS"),
    timeout = tonumber(os.getenv("ZKLUA_SESSION_TIMEOUT") or "10"),
    handler = handler,
  }
  assert(ngx.timer.at(0, main))
end

function M.status()
  local contenders = "?"
  if zk.state == "CONNECTED" then
    local ok, list = pcall(zk.get_children, zk, ELECTION) -- a ZooKeeper call: yields
    contenders = ok and tostring(#list) or tostring(list)
  end
  ngx.say("pid ", ngx.worker.pid())
  ngx.say("leader ", tostring(leading and election ~= nil and election.is_leader))
  ngx.say("state ", zk.state)
  ngx.say("contenders ", contenders)
  ngx.say("items ", allocator and table.concat(allocator.allocation, ",") or "")
  ngx.say("generation ", tostring(allocator and allocator.generation))
end

function M.exit_worker()
  if zk then zk:close() end
end

return M
