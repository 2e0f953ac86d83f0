--- zklua.handlers.blocking — the default way to wait: block the calling thread.
--
-- Waiting (a sync op, a future's get, a retry's sleep) runs the event loop of every client
-- attached here, so watch callbacks, listeners and other clients' futures progress while a
-- script waits, as kazoo's threads would make them.  Callbacks run from Lua, one event at a
-- time; a callback may itself wait (the loop re-enters).
local core = require "zklua.core"

-- timeout_exception: the error a wait that timed out raises (kazoo's handler attribute)
local blocking = { name = "blocking", timeout_exception = require("zklua.errors").TimeoutError }

local POLL_SLICE = 0.2 -- seconds

local clients = setmetatable({}, { __mode = "k" }) -- attached client -> true
local fd_list = nil -- the attached clients' fds, rebuilt after attach/detach

-- The client attached alone carries client._waits_alone = true: its sync ops may wait on its
-- own session (Client:_call), and a field read per op costs less than asking here.  Set anew
-- on every attach and detach; a client collected without close() leaves the flag false on the
-- one left, which is only slower.
local function mark_lone_client()
  local first = next(clients)
  local lone = first ~= nil and next(clients, first) == nil and first or nil
  for client in pairs(clients) do client._waits_alone = client == lone end
end

function blocking.attach(client)
  clients[client] = true
  fd_list = nil
  mark_lone_client()
end

function blocking.detach(client)
  clients[client] = nil
  client._waits_alone = false
  fd_list = nil
  mark_lone_client()
end

--- Runs every attached client's pending events; returns how many were handled.
local function dispatch_all()
  local handled = 0
  for client in pairs(clients) do
    handled = handled + client:dispatch(0)
  end
  return handled
end

local function fds()
  if not fd_list then
    fd_list = {}
    for client in pairs(clients) do
      local fd = client:fileno()
      if fd then fd_list[#fd_list + 1] = fd end
    end
  end
  return fd_list
end

local function only_client()
  return next(clients)
end

--- Runs the event loops until done() is true or timeout seconds pass (nil: no limit).
-- Returns done()'s final answer.
function blocking.wait(done, timeout)
  if done() then return true end
  local deadline = timeout and core.monotonic() + timeout
  while true do
    if dispatch_all() == 0 then
      if done() then return true end
      local remaining = deadline and deadline - core.monotonic()
      if remaining and remaining <= 0 then return false end
      fd_list = nil -- a client collected without close() leaves the cached list stale
      local list = fds()
      if #list == 1 then
        only_client():wait_for_events(remaining) -- a condition variable: the cheapest wake-up
      elseif #list == 0 then
        core.sleep(math.min(remaining or 0.05, 0.05)) -- nothing to wait on: keep time moving
      else
        -- in slices, as a lone client's wait: Lua hooks (the runner's signal hook, a
        -- script's own deadline) get control back at least every 0.2 s
        core.poll(list, math.min(remaining or POLL_SLICE, POLL_SLICE))
      end
    end
    if done() then return true end
  end
end

--- Sleeps seconds while running the event loops.
function blocking.sleep(seconds)
  blocking.wait(function() return false end, seconds)
end

--- How errors in user callbacks are reported when the client has no logger.
function blocking.log_callback_error(what, err)
  io.stderr:write("zklua: error in ", what, ": ", tostring(err), "\n")
end

return blocking
