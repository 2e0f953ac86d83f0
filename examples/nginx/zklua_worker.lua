--- examples/nginx/zklua_worker.lua — what each nginx worker of examples/nginx/nginx.conf runs.
--
-- init_worker(): one ZooKeeper session per worker, under zklua.handlers.ngx, started from a
-- timer (init_worker cannot wait).  The worker then competes in an Election on
-- $ZKLUA_APP/leader with election:run(): a blocking call that, under the ngx handler, only
-- yields the timer's coroutine — the worker keeps serving requests while it waits for
-- leadership, however long the lock is contended.
-- status(): GET /status answers with this worker's pid, whether it leads, its session's state
-- and the election's contenders (read from ZooKeeper by the request itself, which yields).
-- exit_worker(): closes the session, so the worker's election node goes at once.
--
-- SUSPENDED (connection lost): the leader stays leader (its node lives while the session
-- does); /status still answers, from what the worker knows, with state SUSPENDED.
-- LOST (session expired, or the worker killed): the node goes with the session; another
-- worker's run() gets the lock and leads.  A worker whose session expired stops leading
-- (on_lost), and competes again on its new session.
local zklua = require "zklua"
local ngx_handler = require "zklua.handlers.ngx"

local M = {}

local APP = os.getenv("ZKLUA_APP") or "/zklua-nginx"
local ELECTION = APP .. "/leader"

local zk, handler, election
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
      election = election or zk:Election(ELECTION, tostring(ngx.worker.pid()))
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
end

function M.exit_worker()
  if zk then zk:close() end
end

return M
