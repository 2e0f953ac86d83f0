--- zklua.handlers.ngx — the coroutine handler for nginx with ngx_lua (LuaJIT).
--
--   -- init_worker_by_lua_block: one session per worker, made after the fork
--   local handler = require("zklua.handlers.ngx").new()
--   zk = zklua.client{hosts = "127.0.0.1:2181", handler = handler}
--   ngx.timer.at(0, function() zk:start() end)        -- start() waits: not in init_worker
--   -- content_by_lua_block: zk calls yield the request, the worker serves others meanwhile
--   ngx.say(zk:get("/app/config"))
--   -- exit_worker_by_lua_block
--   zk:close()
--
-- Every zklua call that blocks by default yields the request's (or timer's) coroutine instead
-- (see zklua.handlers.coroutine for what that covers and guarantees), so no worker's event loop
-- ever blocks on ZooKeeper, not even while a lock is contended.  ngx_lua cannot watch an
-- arbitrary fd, so a poller running in an ngx.timer dispatches the worker's clients every
-- `interval` seconds while something waits (default 0.002) and every `idle_interval` seconds
-- otherwise (default 0.05: watch callbacks, elections and state changes); waiting coroutines
-- sleep on ngx.semaphore and are posted as soon as the poller sees their result.
--
-- Where ngx_lua cannot yield (init_by_lua, init_worker_by_lua, set_by_lua, header_filter,
-- body_filter, log_by_lua, exit_worker) a call that waits raises WouldBlockError; start the
-- work from there with ngx.timer.at(0, fn).  Never fork with a live session: make the
-- client in init_worker, not init.  When the worker exits the poller ends; close the client in
-- exit_worker_by_lua_block so its ephemeral nodes go at once.
--
-- SUSPENDED and LOST are what they are under the blocking handler: waits go on through a
-- connection loss, ops fail with SessionExpiredError on an expiry (DataWatch, ChildrenWatch and
-- Election latches re-arm on the new session), and zk:stop()/close() fails every op in flight
-- with ConnectionClosedError, posting the coroutines that wait for them.
local coroutine_handler = require "zklua.handlers.coroutine"
local semaphore = require "ngx.semaphore"

local ngx = ngx -- luacheck: ignore (the ngx_lua global)

local M = {}

local LONG_WAIT = 60 -- s: a wait without a timeout is a loop of these (ngx needs a number)

-- The phases in which ngx_lua lets a Lua thread yield.
local YIELDABLE = { rewrite = true, access = true, content = true, timer = true,
                    ssl_cert = true, ssl_session_fetch = true, ssl_client_hello = true,
                    preread = true }

local Signal = {}
Signal.__index = Signal

local function new_signal()
  return setmetatable({ sema = assert(semaphore.new(0)) }, Signal)
end

function Signal:wait(timeout)
  if timeout then
    self.sema:wait(timeout)
    return
  end
  repeat
    local ok, err = self.sema:wait(LONG_WAIT)
  until ok or err ~= "timeout"
end

-- At most one pending post: a signal sent while nobody waits is kept, not counted twice.
function Signal:signal()
  if self.sema:count() < 1 then self.sema:post(1) end
end

local function can_wait()
  local phase = ngx.get_phase()
  if YIELDABLE[phase] then return true end
  return false, "ngx_lua cannot yield in the " .. phase .. " phase (run the code from a " ..
         "request handler, or from ngx.timer.at(0, fn))"
end

local function log(what, err)
  ngx.log(ngx.ERR, "zklua: error in ", what, ": ", tostring(err))
end

--- A handler for this worker.  opts.interval / opts.idle_interval: the poller's period (s)
-- while a coroutine waits / otherwise.
function M.new(opts)
  opts = opts or {}
  local interval = opts.interval or 0.002
  local idle_interval = opts.idle_interval or 0.05
  local host = { name = "ngx", new_signal = new_signal, can_wait = can_wait, log = log,
                 recheck = idle_interval }

  function host.spawn(fn)
    local ok, err = ngx.timer.at(0, function(premature)
      if not premature then fn() end
    end)
    if not ok then error("cannot start the zklua poller timer: " .. tostring(err)) end
  end

  function host.alive()
    return not ngx.worker.exiting()
  end

  -- ngx_lua cannot wait for an fd: sleep a period (or until poked), then dispatch.
  function host.poll(_, wake, _, waiting)
    wake.sema:wait(waiting and interval or idle_interval)
  end

  return coroutine_handler.new(host)
end

return M
