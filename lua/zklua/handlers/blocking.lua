--- zklua.handlers.blocking — the default way to wait: block the calling thread.
--
-- Waiting (a sync op, a future's get, a retry's sleep) runs the event loop of every client
-- attached here, so watch callbacks, listeners and other clients' futures progress while a
-- script waits, as kazoo's threads would make them.
--
-- User callbacks (watch functions, rawlinks, recipe hooks) never nest, as on kazoo's one
-- callback thread: run_callback runs one at once when none is running, and queues it
-- otherwise; the callback that runs then works through the queue, in order, after it
-- returns.  A callback may wait: its wait resolves op results, state changes and recipe
-- steps, and the callbacks that come meanwhile wait their turn.  So the C stack is the same
-- depth however many events arrive at once (a burst of 100k watch events), and a callback
-- that waits for another callback to run first waits until its own timeout: do that work
-- after it returns.  State listeners run at once, also while a callback waits (kazoo calls
-- them from its connection thread): run_listener is a lane of its own, so a listener that
-- waits defers the next state change's listeners, not the callbacks, and the depth stays two.
--
-- A lane never holds a waiting caller longer than one callback: between two queued callbacks
-- it checks the innermost wait's condition, and once that holds it leaves the rest queued and
-- the caller returns (kazoo's caller never waits for its callback thread at all).  What is
-- left runs at the next wait, dispatch or callback, in order.  So a stream of slow callbacks
-- (a watch re-arming on every reconnect of a flapping connection) cannot starve a call.
local core = require "zklua.core"
local unpack = require("zklua.compat").unpack

-- timeout_exception: the error a wait that timed out raises (kazoo's handler attribute)
local blocking = { name = "blocking", timeout_exception = require("zklua.errors").TimeoutError }

local POLL_SLICE = 0.2 -- seconds

local clients = setmetatable({}, { __mode = "k" }) -- attached client -> true
-- The attached clients as a list (weak: a client nothing else holds is still collected) and
-- their fds, made again after attach/detach and after a garbage collection cycle: a client
-- collected without close() has its fd closed by its session's finalizer, which runs after
-- the cycle that empties probe (whose key nothing else holds), so a list made since the last
-- cycle names no closed (or reused) fd.  Made once per change, not per wait: a process with
-- 5000 clients paid for the walk on every wake-up.
local client_list, client_n, fd_list = nil, 0, nil
local probe = setmetatable({}, { __mode = "k" })

local function lists()
  if client_list == nil or next(probe) == nil then
    local list, n, fd_of = setmetatable({}, { __mode = "v" }), 0, {}
    for client in pairs(clients) do
      n = n + 1
      list[n] = client
      local fd = client:fileno()
      if fd then fd_of[#fd_of + 1] = fd end
    end
    client_list, client_n, fd_list = list, n, fd_of
    probe[{}] = true
  end
  return client_list, client_n, fd_list
end

local function changed() client_list = nil end

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
  changed()
  mark_lone_client()
end

function blocking.detach(client)
  clients[client] = nil
  client._waits_alone = false
  changed()
  mark_lone_client()
end

--- Runs every attached client's pending events, then what the lanes left queued; returns
-- how many were handled.  The clients are listed first: a callback may close a client or make
-- a new one while the walk goes on.
local function dispatch_all()
  local list, n = lists() -- a change makes a new list: this walk keeps its own
  local handled = 0
  for i = 1, n do
    local client = list[i]
    if client then handled = handled + client:dispatch(0) end
  end
  return handled + blocking.drain()
end

local function report(err)
  blocking.log_callback_error("callback", err)
end

-- The condition of the innermost wait in progress (nil: none): a lane pauses once it holds.
local wait_done = nil

local function caller_done()
  return wait_done ~= nil and wait_done()
end

--- A lane: a function run(fn, ...) that runs fn(...) now when nothing of its lane runs or
-- waits in its queue, else after them (see the file's opening comment), protected: an error
-- fn raises is logged and the queue goes on.  running() tells whether one runs; drain() runs
-- what waits (pausing as run does) and returns how many ran.
local function lane()
  local running = false
  local queue, head, tail = {}, 1, 0 -- the calls waiting: {fn, n, ...}, FIFO
  local function drain()
    if running then return 0 end
    running = true
    local ran = 0
    while head <= tail do
      local item = queue[head]
      queue[head] = nil
      head = head + 1
      local ok, err = pcall(item[1], unpack(item, 3, item[2] + 2))
      if not ok then pcall(report, err) end
      ran = ran + 1
      if caller_done() then break end
    end
    if head > tail then head, tail = 1, 0 end
    running = false
    return ran
  end
  local function run(fn, ...)
    if running or head <= tail then
      tail = tail + 1
      queue[tail] = { fn, select("#", ...), ... }
      if not running then drain() end
      return
    end
    running = true
    local ok, err = pcall(fn, ...)
    if not ok then pcall(report, err) end
    running = false
    if head <= tail and not caller_done() then drain() end
  end
  return run, function() return running end, drain
end

local in_callback, drain_callbacks, drain_listeners, _
blocking.run_callback, in_callback, drain_callbacks = lane()
blocking.run_listener, _, drain_listeners = lane()

--- Whether a user callback runs now (its waits run no other callback).
function blocking.in_callback()
  return in_callback()
end

--- Runs the listeners and callbacks a wait that ended left queued (Client:dispatch calls it);
-- returns how many ran.
function blocking.drain()
  return drain_listeners() + drain_callbacks()
end

local function fds()
  return (select(3, lists()))
end

local function only_client()
  return next(clients)
end

local function wait_loop(done, timeout)
  local deadline = timeout and core.monotonic() + timeout
  while true do
    if dispatch_all() == 0 then
      if done() then return true end
      local remaining = deadline and deadline - core.monotonic()
      if remaining and remaining <= 0 then return false end
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

--- Runs the event loops until done() is true or timeout seconds pass (nil: no limit).
-- Returns done()'s final answer.
function blocking.wait(done, timeout)
  if done() then return true end
  local outer = wait_done
  wait_done = done
  local ok, result = pcall(wait_loop, done, timeout)
  wait_done = outer
  if not ok then error(result, 0) end
  return result
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
