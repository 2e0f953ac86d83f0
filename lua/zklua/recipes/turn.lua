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
--   (ConnectionClosedError).  A non-blocking call (nowait) gets false at once instead.
-- * The blocking handler has one thread and no other caller to wait for: a call made while
--   the turn is taken comes from inside the call that has it (a watch or listener callback run
--   by its wait) and would wait for itself, so it raises KazooException, as does a coroutine
--   calling again into an object whose turn it has.
-- * A coroutine that has the turn and is never resumed again (killed by its host) keeps it;
--   a waiting coroutine that died is skipped.
local core = require "zklua.core"
local errors = require "zklua.errors"

local turn = {}

local MAIN = {} -- who the main thread is (coroutine.running() says nil under LuaJIT)

--- The running coroutine (a stand-in for the main thread).
function turn.me()
  local co, main = coroutine.running()
  if co == nil or main then return MAIN end
  return co
end

function turn.new()
  return { owner = nil, queue = {} }
end

local function closed(client)
  return client._stopped or not client._session
end

--- Wakes the coroutines whose wait may have ended (a coroutine handler's poke).
function turn.poke(client)
  local poke = client.handler.poke
  if poke then poke() end
end

-- Gives the turn to the next live waiter, or frees it.
local function pass_on(t, client)
  t.owner = nil
  while #t.queue > 0 do
    local ticket = table.remove(t.queue, 1)
    if ticket.who == MAIN or coroutine.status(ticket.who) ~= "dead" then
      ticket.granted = true
      t.owner = ticket.who
      turn.poke(client)
      return
    end
  end
end

--- Enters t for a call named fname: true; false when nowait and the turn is taken, or when
-- the deadline (core.monotonic() time, nil: none) passed first.  Raises ConnectionClosedError
-- when the client is stopped or closed while waiting, KazooException when waiting would wait
-- for the caller itself.
function turn.enter(t, client, fname, path, deadline, nowait)
  local who = turn.me()
  if t.owner == nil then
    t.owner = who
    return true
  end
  -- the coroutine handlers (zklua.handlers.coroutine) have poke; the blocking one is one thread
  if t.owner == who or client.handler.poke == nil then
    errors.raise(errors.KazooException, fname .. ": a call on this object is already under " ..
                 "way in this coroutine (waiting for it would wait for itself)", path)
  end
  if nowait then return false end
  local ticket = { who = who, granted = false }
  t.queue[#t.queue + 1] = ticket
  local ok, err = pcall(client.handler.wait, function()
    return ticket.granted or closed(client)
  end, deadline and math.max(deadline - core.monotonic(), 0))
  if ticket.granted then
    if ok and not closed(client) then return true end
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
  if closed(client) then
    errors.raise(errors.ConnectionClosedError, fname .. ": the client was stopped", path)
  end
  return false
end

--- Leaves t (entered by the running coroutine): the next waiter gets it.
function turn.leave(t, client)
  pass_on(t, client)
end

return turn
