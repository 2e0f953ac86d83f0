--- zklua.handlers.cqueues — the coroutine handler for cqueues (Debian's lua-cqueues).
--
--   local cqueues = require "cqueues"
--   local cq = cqueues.new()
--   local handler = require("zklua.handlers.cqueues").new(cq)
--   local zk = zklua.client{hosts = "127.0.0.1:2181", handler = handler}
--   cq:wrap(function()
--     zk:start()                    -- yields this coroutine until CONNECTED
--     print(zk:get("/app/config"))  -- yields until the reply is in
--     zk:stop()
--   end)
--   assert(cq:loop())
--
-- Every zklua call that blocks by default yields its coroutine to the controller instead
-- (see zklua.handlers.coroutine for what that covers and guarantees); other coroutines of the
-- controller run meanwhile.  A poller coroutine, wrapped into cq, polls the clients'
-- zk:fileno() with cqueues.poll and runs zk:dispatch(0) when one is readable; waiting
-- coroutines sleep on cqueues condition variables, with the call's timeout as cqueues'.  The
-- poller ends once no client is started and nothing waits, so cq:loop() returns.
--
-- A zklua call that waits must run in a coroutine the controller resumes (cq:wrap), where Lua
-- can yield; made elsewhere (the main chunk, a plain coroutine.wrap), or inside a C function
-- that calls Lua (a table.sort comparator, a string.gsub function, a __tostring called by
-- tostring: coroutine.isyieldable() is false there), it raises WouldBlockError before
-- anything is sent.
-- SUSPENDED and LOST are what they are under the blocking handler: waits go on through a
-- connection loss (ops in flight fail with ConnectionLoss), fail with SessionExpiredError on
-- an expiry, and zk:stop() fails every op in flight with ConnectionClosedError, waking the
-- coroutines that wait for them.
local cqueues = require "cqueues"
local condition = require "cqueues.condition"
local coroutine_handler = require "zklua.handlers.coroutine"

local M = {}

local unpack = table.unpack or unpack

-- A condition variable that remembers a signal sent while nobody waited.
local Signal = {}
Signal.__index = Signal

local function new_signal()
  return setmetatable({ cond = condition.new(), pending = false }, Signal)
end

function Signal:wait(timeout)
  if not self.pending then self.cond:wait(timeout) end
  self.pending = false
end

function Signal:signal()
  self.pending = true
  self.cond:signal()
end

local function can_wait()
  local controller, managed = cqueues.running()
  if not controller then
    return false, "not inside a cqueues coroutine (start the code with cq:wrap(fn))"
  end
  if not managed then
    return false, "inside a plain coroutine that cqueues does not resume (use cq:wrap(fn))"
  end
  return true
end

--- A handler running its poller in controller cq (default: the controller of the coroutine
-- that first waits).  opts.recheck: seconds between the poller's rounds without events.
function M.new(cq, opts)
  opts = opts or {}
  local poll_objects = {} -- fd -> the object cqueues.poll takes for it
  local host = { name = "cqueues", new_signal = new_signal, can_wait = can_wait,
                 recheck = opts.recheck, log = opts.log }

  local used = cq -- the controller the poller runs in

  function host.spawn(fn)
    used = cq or cqueues.running()
    if not used then error("no cqueues controller to run the zklua poller in") end
    used:wrap(fn)
  end

  -- cqueues must drop an fd before it is closed (as its own sockets do), or its next step
  -- fails on the stale registration.
  function host.forget(fd)
    poll_objects[fd] = nil
    if used then used:cancel(fd) end
  end

  function host.poll(fds, wake, timeout)
    if wake.pending then
      wake.pending = false
      return
    end
    local objects = {}
    for i, fd in ipairs(fds) do
      local object = poll_objects[fd]
      if not object then
        object = { pollfd = fd, events = "r" }
        poll_objects[fd] = object
      end
      objects[i] = object
    end
    objects[#objects + 1] = wake.cond
    objects[#objects + 1] = timeout
    cqueues.poll(unpack(objects))
    wake.pending = false
  end

  return coroutine_handler.new(host)
end

return M
