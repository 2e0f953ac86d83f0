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
-- ever blocks on ZooKeeper, not even while a lock is contended.  Waiting coroutines sleep on
-- ngx.semaphore and are posted as soon as their result is in.
--
-- How the worker learns that ZooKeeper has something for it (opts.wakeup):
-- * "socket" (the default): event-driven.  ngx_lua cannot watch an arbitrary fd, but it can
--   read its own cosockets, so the handler makes a wake-up socket (core.waker: a unix-domain
--   socket at a private path in opts.socket_dir, default /tmp, removed as soon as it is
--   connected) and a reader, running in an ngx.timer, connects a cosocket to it.  Each
--   attached client's session writes one byte to it whenever events start waiting (a reply, a
--   watch, a state change, a recipe's timer), so the worker sleeps in epoll until then and
--   wakes at once: no polling, the same latency as the blocking handler.  While coroutines
--   wait, the handler also looks at them every opts.check_interval seconds (default 1: a
--   cancel() made elsewhere is not an event); an idle worker wakes about once a minute.
-- * "timer": the fallback, and what the handler uses if the wake-up socket cannot be made or
--   connected (it says so in error.log): a poller in an ngx.timer dispatches every
--   opts.interval seconds while something waits (default 0.002) and every
--   opts.idle_interval seconds otherwise (default 0.05).
--
-- Where ngx_lua cannot yield (init_by_lua, init_worker_by_lua, set_by_lua, header_filter,
-- body_filter, log_by_lua, exit_worker) a call that waits raises WouldBlockError; start the
-- work from there with ngx.timer.at(0, fn).  So does one made inside a C function that calls
-- Lua (a table.sort comparator, a string.gsub function), where LuaJIT cannot yield.  Never
-- fork with a live session: make the client in init_worker, not init.  When the worker exits
-- the poller ends; close the client in exit_worker_by_lua_block so its ephemeral nodes go at
-- once.
--
-- SUSPENDED and LOST are what they are under the blocking handler: waits go on through a
-- connection loss, ops fail with SessionExpiredError on an expiry (DataWatch, ChildrenWatch and
-- Election latches re-arm on the new session), and zk:stop()/close() fails every op in flight
-- with ConnectionClosedError, posting the coroutines that wait for them.
local coroutine_handler = require "zklua.handlers.coroutine"
local check = require "zklua.check"
local core = require "zklua.core"
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

local function positive(value, name, default)
  if value == nil then return default end
  if type(value) ~= "number" or value ~= value or value <= 0 or value == math.huge then
    check.fail("zklua.handlers.ngx.new", name, name .. " must be a positive number of seconds")
  end
  return value
end

-- The wake-up socket (opts.wakeup = "socket"): host.attach/detach hand each client's session
-- to the waker; the reader, in its own timer, turns bytes on the socket into
-- handler.events_ready().  Until the reader is connected, and for good if it fails, the host
-- polls as the timer fallback does (host.fallback).
--
-- No timeout of the reader's ever fires (ngx_lua would log each as an error): a guard timer
-- writes a byte every KEEPALIVE seconds, and at once when the worker exits (ngx_lua runs
-- pending timers early, "premature", then), so the reader wakes, sees the worker exiting and
-- ends, and the worker's exit is never held up.
local KEEPALIVE = 300 -- s

local function use_socket(host, opts)
  local waker = core.waker(opts.socket_dir or "/tmp")
  local clients = {}   -- attached client -> true
  local connected = false
  local handler

  local function attach_session(client)
    local session = client._session
    if session then waker:attach(session) end
  end

  function host.attach(client)
    clients[client] = true
    if connected then attach_session(client) end
  end

  function host.detach(client)
    clients[client] = nil
    if connected and client._session then waker:detach(client._session) end
  end

  local function give_up(what, err)
    log(what .. " (zklua.handlers.ngx falls back to polling from a timer)", err)
    connected = false
    host.fallback = true
    waker:close()
    handler.events_ready()
  end

  local guard
  guard = function(premature)
    if not connected then return end
    waker:signal()
    if premature or ngx.worker.exiting() then return end
    local ok, err = ngx.timer.at(KEEPALIVE, guard)
    if not ok then log("re-arming the wake-up socket's guard timer", err) end
  end

  local function read_loop(sock)
    sock:settimeout(KEEPALIVE * 2 * 1000)
    while not ngx.worker.exiting() do
      local data, err = sock:receiveany(4096)
      if data then
        handler.events_ready()
      else
        return give_up("reading the wake-up socket", err)
      end
    end
    handler.events_ready() -- the poller sees the worker exiting and stops its clients
  end

  local function reader(premature)
    if premature then return waker:close() end
    local sock = ngx.socket.tcp()
    local ok, err = sock:connect("unix:" .. waker:path())
    if ok then ok, err = waker:accept() end
    if ok then ok, err = ngx.timer.at(KEEPALIVE, guard) end
    if not ok then
      sock:close()
      return give_up("connecting the wake-up socket", err)
    end
    connected = true
    host.fallback = false
    for client in pairs(clients) do attach_session(client) end
    handler.events_ready() -- events that queued before the socket was there
    read_loop(sock)
    connected = false
    sock:close()
    waker:close()
  end

  function host.start(h)
    handler = h
    local ok, err = ngx.timer.at(0, reader)
    if not ok then give_up("starting the wake-up socket's reader", err) end
  end
end

--- A handler for this worker.  opts (all optional):
--   wakeup          "socket" (default: event-driven) or "timer" (polling; see above)
--   socket_dir      where the wake-up socket is made for a moment (default "/tmp")
--   check_interval  s between looks at the waiting coroutines, socket mode (1)
--   interval        s between polls while a coroutine waits, timer mode (0.002)
--   idle_interval   s between polls otherwise, timer mode (0.05)
function M.new(opts)
  opts = check.options("zklua.handlers.ngx.new", opts,
                       { wakeup = "string", socket_dir = "string", check_interval = "number",
                         interval = "number", idle_interval = "number" }, "opts") or {}
  local wakeup = opts.wakeup or "socket"
  if wakeup ~= "socket" and wakeup ~= "timer" then
    check.fail("zklua.handlers.ngx.new", "wakeup", 'wakeup must be "socket" or "timer" (got "' ..
               wakeup .. '")')
  end
  local interval = positive(opts.interval, "interval", 0.002)
  local idle_interval = positive(opts.idle_interval, "idle_interval", 0.05)
  local check_interval = positive(opts.check_interval, "check_interval", 1)
  local host = { name = "ngx", new_signal = new_signal, can_wait = can_wait, log = log,
                 wakeup = wakeup, fallback = true }

  function host.spawn(fn)
    local ok, err = ngx.timer.at(0, function(premature)
      if not premature then fn() end
    end)
    if not ok then error("cannot start the zklua poller timer: " .. tostring(err)) end
  end

  function host.alive()
    return not ngx.worker.exiting()
  end

  -- Socket mode: sleep until the reader says events wait (or the recheck passes).  Timer mode
  -- (or the fallback): sleep a period (or until poked), then dispatch.
  function host.poll(_, wake, timeout, waiting)
    if host.fallback then
      timeout = waiting and interval or idle_interval
    elseif not waiting then
      timeout = LONG_WAIT -- nothing to recheck: sleep until an event
    end
    wake.sema:wait(timeout)
  end

  if wakeup == "socket" then
    host.recheck = check_interval
    use_socket(host, opts)
  else
    host.recheck = idle_interval
  end
  local handler = coroutine_handler.new(host)
  --- "socket" when the wake-up socket works, else "timer" (chosen, or fallen back to).
  function handler.wakeup()
    return host.fallback and "timer" or "socket"
  end
  return handler
end

return M
