--- zklua.recipes.waits — how the recipes wait on their C state machines, in one place.
--
-- Each runs the client's handler (the event loop, or a coroutine handler's suspension) until
-- the C side got where it must; ud is the recipe's C object (its phase(), checked()).
--
-- SUSPENDED: an acquire's wait ends undecided, a clean-up's wait ends at once, and the other
-- waits go on for at most a session timeout.  LOST (expiry, stop, close): every wait ends;
-- the C recipe has already failed or finished what it was doing.
local core = require "zklua.core"
local turn = require "zklua.recipes.turn"

local waits = {}

--- True once an acquire decided (ud's phase no longer "acquiring"); false when the deadline
-- (a core.monotonic() time; nil: none) passed or the connection is not CONNECTED, but never
-- before the first look at the contenders finished: a timeout of 0 still gets an answer.
function waits.until_decided(client, ud, deadline)
  local handler = client.handler
  local function decided() return ud:phase() ~= "acquiring" end
  while true do
    local remaining = deadline and math.max(deadline - core.monotonic(), 0)
    if handler.wait(decided, remaining) then return true end
    if ud:checked() or client.state ~= "CONNECTED" then return false end
    -- time is up before the first look at the contenders: let that round trip finish
    handler.wait(function()
      return decided() or ud:checked() or client.state ~= "CONNECTED"
    end)
  end
end

--- Returns once a given-up acquire cleaned up after itself (phase no longer "abandoning"),
-- or at once while disconnected: the C recipe finishes the clean-up after reconnecting, or
-- the node goes with the session.
function waits.until_abandoned(client, ud)
  client.handler.wait(function()
    return ud:phase() ~= "abandoning" or client.state ~= "CONNECTED" or not client._session
  end)
end

--- True once done(); waits with no limit while connected (or until deadline, a
-- core.monotonic() time: false, "timeout") and at most a session timeout while disconnected:
-- false then (the server has expired the session by that time; the C recipe finishes its
-- work once reconnected), or when the client is closed or its auth refused.
function waits.while_reachable(client, done, deadline)
  local handler = client.handler
  local function left() return deadline and math.max(deadline - core.monotonic(), 0) end
  while not done() do
    if turn.ended(client) then return false end -- stopped, closed or AUTH_FAILED
    if deadline and deadline <= core.monotonic() then return false, "timeout" end
    if client.state == "CONNECTED" then
      handler.wait(function()
        return done() or client.state ~= "CONNECTED" or turn.ended(client) ~= nil
      end, left())
    else
      local limit = math.max(client:session_timeout(), client._timeout)
      local remaining = left()
      if remaining and remaining < limit then
        handler.wait(function()
          return done() or client.state == "CONNECTED" or turn.ended(client) ~= nil
        end, remaining)
      elseif not handler.wait(function()
        return done() or client.state == "CONNECTED" or turn.ended(client) ~= nil
      end, limit) then
        return false
      end
    end
  end
  return true
end

return waits
