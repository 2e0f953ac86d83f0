--- zklua.recipes.turn — one recipe object shared by coroutines: its calls take turns.
--
-- Each recipe object has a turn (a FIFO mutex built on client.handler.wait, so it works under
-- every handler).  A call that must not interleave with another call on the same object
-- (Lock:acquire, Counter:add, Queue:get ...) enters the turn, does its work (waiting as it
-- must), and leaves it; calls from other coroutines meanwhile wait in arrival order, as the
-- threads sharing one kazoo recipe object wait on its lock.
--
-- * Under a coroutine handler (cqueues, ngx) a call made while another coroutine has the turn
--   waits for it: until its deadline (false), or until the client is stopped or closed
--   (ConnectionClosedError) or its auth refused (AuthFailedError).  A non-blocking call
--   (nowait) gets false at once instead.
-- * The blocking handler has one thread and no other caller to wait for: a call made while
--   the turn is taken comes from inside the call that has it (a watch or listener callback run
--   by its wait) and would wait for itself, so it raises KazooException, as does a coroutine
--   calling again into an object whose turn it has.
-- * A coroutine that dies while it has the turn (closed by coroutine.close, or collected once
--   its host dropped it: an nginx request killed while waiting) does not keep it: the turn
--   refers to its holder weakly, and the next waiter takes it over as soon as its wait looks
--   again (the handler looks at its waiters after every event and at least every recheck
--   interval).  The C recipe may be in the middle of the dead call: every call first lets an
--   interrupted operation finish.  A waiting coroutine that died is skipped.
-- * SUSPENDED and LOST change nothing in the turn itself: its waits end only when granted,
--   at their deadline, or when the client is stopped, closed or AUTH_FAILED.
local core = require "zklua.core"
local errors = require "zklua.errors"

local turn = {}

local MAIN = {} -- who the main thread is (coroutine.running() says nil under LuaJIT)
local WEAK = { __mode = "v" } -- a ticket does not keep its coroutine alive

--- The running coroutine (a stand-in for the main thread).
function turn.me()
  local co, main = coroutine.running()
  if co == nil or main then return MAIN end
  return co
end

--- Whether who (a coroutine, MAIN, or nil once collected) can never run again.
function turn.dead(who)
  return who == nil or (who ~= MAIN and coroutine.status(who) == "dead")
end

function turn.new()
  return { holder = nil, queue = {} } -- holder: the ticket that has the turn
end

--- Why the client's waits must end: the error class (ConnectionClosedError when stopped or
-- closed, AuthFailedError when its auth was refused), or nil.
function turn.ended(client)
  if client._stopped or not client._session then return errors.ConnectionClosedError end
  if client.client_state == "AUTH_FAILED" then return errors.AuthFailedError end
  return nil
end

--- Raises the error turn.ended(client) names for a call of fname.
function turn.raise_ended(client, fname, path)
  local class = turn.ended(client)
  if class == errors.AuthFailedError then
    errors.raise(class, fname .. ": the server refused the client's auth", path)
  end
  errors.raise(errors.ConnectionClosedError, fname .. ": the client was stopped or closed", path)
end

--- Wakes the coroutines whose wait may have ended (a coroutine handler's poke).
function turn.poke(client)
  local poke = client.handler.poke
  if poke then poke() end
end

-- Gives the turn to the next live waiter, or frees it.
local function pass_on(t, client)
  t.holder = nil
  while #t.queue > 0 do
    local ticket = table.remove(t.queue, 1)
    if not turn.dead(ticket.who) then
      ticket.granted = true
      t.holder = ticket
      turn.poke(client)
      return
    end
  end
end

-- Hands the turn on when its holder died; true if it did.
local function reclaim(t, client)
  if t.holder and turn.dead(t.holder.who) then
    pass_on(t, client)
    return true
  end
  return false
end

--- Whether the turn is taken (by a coroutine still alive).
function turn.taken(t, client)
  reclaim(t, client)
  return t.holder ~= nil
end

--- Enters t for a call named fname: true; false when nowait and the turn is taken, or when
-- the deadline (core.monotonic() time, nil: none) passed first.  Raises ConnectionClosedError
-- (or AuthFailedError) when the client is stopped or closed (or its auth refused) while
-- waiting, KazooException when waiting would wait for the caller itself.
function turn.enter(t, client, fname, path, deadline, nowait)
  local who = turn.me()
  if not turn.taken(t, client) then
    t.holder = setmetatable({ who = who, granted = true }, WEAK)
    return true
  end
  -- the coroutine handlers (zklua.handlers.coroutine) have poke; the blocking one is one thread
  if t.holder.who == who or client.handler.poke == nil then
    errors.raise(errors.KazooException, fname .. ": a call on this object is already under " ..
                 "way in this coroutine (waiting for it would wait for itself)", path)
  end
  if nowait then return false end
  local ticket = setmetatable({ who = who, granted = false }, WEAK)
  t.queue[#t.queue + 1] = ticket
  local ok, err = pcall(client.handler.wait, function()
    if not ticket.granted then reclaim(t, client) end
    return ticket.granted or turn.ended(client) ~= nil
  end, deadline and math.max(deadline - core.monotonic(), 0))
  if ticket.granted then
    if ok and not turn.ended(client) then return true end
    pass_on(t, client)
  else
    for i, queued in ipairs(t.queue) do
      if queued == ticket then
        table.remove(t.queue, i)
        break
      end
    end
  end
  if not ok then error(err, 0) end
  if turn.ended(client) then turn.raise_ended(client, fname, path) end
  return false
end

--- Leaves t (entered by the running coroutine): the next waiter gets it.
function turn.leave(t, client)
  pass_on(t, client)
end

return turn
