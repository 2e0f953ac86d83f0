--- zklua.handlers.coroutine — the core of the coroutine handlers (zklua.handlers.cqueues,
-- zklua.handlers.ngx): kazoo's handler idea for Lua event loops.
--
-- Under a coroutine handler every zklua call that blocks by default (sync ops, future:get and
-- wait, lock:acquire, election:run and await, barrier waits, a retry's sleep, zk:start) yields
-- the calling coroutine instead, and the host's scheduler resumes it once its result is in or
-- its timeout passed; the host's event loop runs on meanwhile.  What a host adapter supplies
-- (see new()) is how to suspend a coroutine on a signal, how to start a coroutine and how to
-- wait for the clients' fds; this file does the rest, the same for every host.
--
-- Guarantees:
-- * One poller coroutine per handler runs the attached clients' event loops (zk:dispatch(0))
--   while a client is started or a coroutine waits, then ends, so the host's loop can end too.
--   After each round it wakes exactly the waiting coroutines whose condition now holds.
-- * User callbacks (watch functions, rawlinks, recipe hooks) run one at a time, in the order
--   their events came, in a callback coroutine of their own (kazoo's callback greenlet):
--   run_callback queues them and the callback coroutine, started when the queue fills and
--   ending when it is empty, works through it.  One may wait as long as it likes; op results
--   and state changes keep flowing meanwhile, and the next callback waits its turn.  So a
--   burst of 100k watch events makes one queue, not 100k coroutines waiting at once.
-- * State listeners run in the poller's coroutine, at once, as kazoo's (which should not
--   wait); one that waits hands polling to a fresh poller first, so it has its coroutine to
--   itself and later events keep flowing.  The listeners of one state change run one after
--   the other, in order, as kazoo runs them.
-- * A blocking call made where the host cannot resume the caller (cqueues: outside a coroutine
--   of its controller; ngx: init_worker, log, header/body filters), or where Lua cannot yield
--   (inside a C function that calls Lua: a table.sort comparator, a __tostring called by
--   tostring, ...) raises WouldBlockError; the client's plain sync ops raise it before
--   anything is sent.  Nothing ever hangs silently, nor fails with Lua's raw "attempt to
--   yield across a C-call boundary".
-- * When the host shuts down (host.alive() turns false: an nginx worker exits) the poller
--   stops every attached client and wakes every waiter; a wait whose condition does not hold
--   then raises ConnectionClosedError, so no coroutine keeps the host from exiting.
-- * Waiting never changes what a connection loss or an expiry does: SUSPENDED lets waits go on
--   (ops in flight fail with ConnectionLoss, new ones wait for the connection, as under the
--   blocking handler), LOST fails them with
--   SessionExpiredError, zk:stop() fails every op in flight with ConnectionClosedError and wakes
--   the coroutines waiting for them at once.
--
-- A callback that yields through the host directly (cqueues.sleep, ngx.sleep) instead of a
-- zklua call or handler.sleep pauses polling for that long: use handler.sleep.
local core = require "zklua.core"
local errors = require "zklua.errors"

local handlers = {}

-- Whether the running code may yield: not inside a C call Lua cannot yield across (a
-- table.sort comparator, a string.gsub replacement function, a __tostring called by tostring
-- or print, an __index called by table.concat, a load reader, a finalizer...), where a wait
-- would fail with the raw "attempt to yield across a C-call boundary".  Lua 5.4 and LuaJIT 2.1
-- (Debian's luajit2) have coroutine.isyieldable.  ngx_lua replaces the global coroutine table
-- with one of its own that lacks it: package.loaded.coroutine is still the library's.  Where
-- neither has it (LuaJIT 2.0), the stack is read: a C function between the running one and
-- the coroutine's body forbids the yield, pcall and xpcall aside (LuaJIT yields across them).
local library_coroutine = package.loaded.coroutine or coroutine
local isyieldable = library_coroutine.isyieldable or coroutine.isyieldable
local YIELDABLE_C = { [pcall] = true, [xpcall] = true }

local function stack_yieldable()
  if not coroutine.running() then return false end
  local level = 3 -- the caller of the zklua call's check
  while true do
    local info = debug.getinfo(level, "Sf")
    if not info then return true end
    if info.what == "C" and not YIELDABLE_C[info.func] then return false end
    level = level + 1
  end
end

--- Whether the running code may yield (see above).
function handlers.yieldable()
  if isyieldable then return isyieldable() end
  return stack_yieldable()
end

local WEAK = { __mode = "v" } -- a waiter does not keep its coroutine alive
local unpack = table.unpack or rawget(_G, "unpack") -- LuaJIT: the global

--- How often (s) the poller looks at the waiting coroutines even without an event: another
-- coroutine may change what a waiter waits for without an event (lock:cancel()).
local DEFAULT_RECHECK = 0.1

--- A new handler over host, a table of:
--   name                  the handler's name ("cqueues", "ngx")
--   can_wait()            true, or false and why, when the running code cannot be suspended
--   new_signal()          an object with :wait(timeout) (nil: no limit; returns when signalled
--                         or timed out) and :signal() (wakes its waiter; kept if none waits yet)
--   spawn(fn)             runs fn() in a new coroutine the host schedules
--   poll(fds, wake, timeout, waiting)  suspends the running coroutine until one of fds (the
--                         clients' event fds) is readable, wake (a signal) is signalled, or
--                         timeout s pass; waiting: whether a coroutine waits now
--   alive()               optional: false once the host is shutting down (the poller ends)
--   forget(fd)            optional: fd is about to be closed, stop polling it
--   attach(client), detach(client)  optional: a client joins the handler / is about to close
--                         (a host that learns of events another way than through fds)
--   start(handler)        optional: called once with the handler; a host whose own reader
--                         learns of events calls handler.events_ready() from it
--   recheck               optional, seconds between the poller's rounds without events
function handlers.new(host)
  -- timeout_exception: the error a wait that timed out raises (kazoo's handler attribute)
  local handler = { name = host.name, timeout_exception = require("zklua.errors").TimeoutError }
  local clients = {} -- attached client -> true (until close(): the poller uses them)
  local waiters = {}          -- waiter -> true
  local poller = nil          -- the coroutine that polls now, or nil
  local rounds = 0            -- the poller's rounds so far (handler.rounds())
  local wake = host.new_signal()
  local recheck = host.recheck or DEFAULT_RECHECK
  local log = host.log or function(what, err)
    io.stderr:write("zklua: error in ", what, ": ", tostring(err), "\n")
  end
  handler.log_callback_error = log

  local function active(client)
    return client._session ~= nil and not client._stopped
  end

  local function alive()
    return host.alive == nil or host.alive()
  end

  -- Whether the poller has work: a started client, or a coroutine waiting.
  local function busy()
    if not alive() then return false end
    if next(waiters) then return true end
    for client in pairs(clients) do
      if active(client) then return true end
    end
    return false
  end

  -- Signals every waiter whose condition holds (or whose condition raised: it re-raises it).
  -- A waiter whose coroutine died or was collected (its host dropped it: an nginx request
  -- killed) is forgotten.
  local function wake_ready()
    for waiter in pairs(waiters) do
      local co = waiter.owner[1]
      if co == nil or coroutine.status(co) == "dead" then
        waiters[waiter] = nil
      elseif not waiter.woken then
        local ok, done = pcall(waiter.done)
        if not ok or done then
          waiter.woken = true
          waiter.signal:signal()
        end
      end
    end
  end

  local function dispatch_all()
    for client in pairs(clients) do
      local ok, err = pcall(client.dispatch, client, 0)
      if not ok then log("event dispatch", err) end
    end
  end

  -- Sends the reads the clients hold back until their next wait (src/core/ops.c, the cork):
  -- a coroutine about to be suspended would otherwise wait for the poller's next round.
  local function flush_all()
    for client in pairs(clients) do
      local session = client._session
      if session then session:flush() end
    end
  end

  local function fds()
    local list = {}
    for client in pairs(clients) do
      local fd = active(client) and client:fileno()
      if fd then list[#list + 1] = fd end
    end
    return list
  end

  -- The host shuts down (an nginx worker exits): stop every client, so that the ops and
  -- recipes under way fail with ConnectionClosedError, and wake every waiter (a wait that is
  -- not done then raises ConnectionClosedError), so that no coroutine holds the host up.
  local function shut_down()
    for client in pairs(clients) do
      local ok, err = pcall(client.stop, client)
      if not ok then log("stopping a client at shutdown", err) end
    end
    for waiter in pairs(waiters) do
      waiter.woken = true
      waiter.signal:signal()
    end
  end

  -- The user callbacks waiting for the callback coroutine: {fn, n, ...}, FIFO.
  local callbacks, first, last = {}, 1, 0
  local runner = nil -- the callback coroutine (true while it is being started), or nil

  local function run_callbacks()
    while first <= last do
      local item = callbacks[first]
      callbacks[first] = nil
      first = first + 1
      local ok, err = pcall(item[1], unpack(item, 3, item[2] + 2))
      if not ok then log("callback", err) end
    end
    first, last = 1, 0
    runner = nil
  end

  --- Runs fn(...) in the callback coroutine, after the callbacks queued before it (see the
  -- file's opening comment); an error fn raises is logged.
  function handler.run_callback(fn, ...)
    last = last + 1
    callbacks[last] = { fn, select("#", ...), ... }
    if runner == nil then
      runner = true
      local ok, err = pcall(host.spawn, run_callbacks)
      if not ok then
        runner = nil
        log("starting the callback coroutine", err)
      end
    end
  end

  local spawn_poller

  local function poll_loop()
    local me = coroutine.running()
    poller = me
    while poller == me and busy() do
      rounds = rounds + 1
      dispatch_all()
      if poller ~= me then break end -- a callback waited: a new poller took over
      wake_ready()
      local ok, err = pcall(host.poll, fds(), wake, recheck, next(waiters) ~= nil)
      if not ok then
        log("polling", err)
        break
      end
    end
    if poller == me then
      poller = nil
      if not alive() then shut_down() end
    end
  end

  spawn_poller = function()
    if poller == nil and busy() then
      poller = true -- claimed until the new coroutine runs
      local ok, err = pcall(host.spawn, poll_loop)
      if not ok then
        poller = nil
        log("starting the poller", err)
      end
    end
  end

  --- Wakes the poller and the waiters whose condition holds now (after a change made
  -- outside an event: a client stopped or closed).
  function handler.poke()
    wake_ready()
    wake:signal()
    spawn_poller()
  end

  --- Wakes the poller: events may wait (for hosts whose own reader learns of them).
  function handler.events_ready()
    wake:signal()
    spawn_poller()
  end

  function handler.attach(client)
    clients[client] = true
    if host.attach then host.attach(client) end
  end

  --- Called by zk:close() before the client's fd is closed: the host stops polling it.
  function handler.detach(client)
    clients[client] = nil
    if host.detach then host.detach(client) end
    local fd = client:fileno()
    if fd and host.forget then host.forget(fd) end
    handler.poke()
  end

  --- Raises WouldBlockError unless the running code may wait (called before a blocking call
  -- sends anything): the host must be able to resume it (host.can_wait), and Lua to yield
  -- from where it runs (handlers.yieldable: not inside a C call such as a table.sort
  -- comparator).
  function handler.check_wait()
    local ok, why = host.can_wait()
    if ok and not handlers.yieldable() then
      ok, why = false, "Lua cannot yield here, inside a C function that calls Lua (a " ..
        "table.sort comparator, a string.gsub function, a metamethod called by tostring or " ..
        "table.concat...): make the call outside it"
    end
    if not ok then
      errors.raise(errors.WouldBlockError, "this zklua call waits, and the " .. host.name ..
                   " handler cannot suspend the code that made it: " .. why)
    end
  end

  local function finish(waiter, ok, result)
    waiters[waiter] = nil
    if not ok then error(result, 0) end
    return result
  end

  local function suspend(waiter, done, timeout)
    local deadline = timeout and core.monotonic() + timeout
    while true do
      local remaining = deadline and deadline - core.monotonic()
      if remaining and remaining <= 0 then return done() and true or false end
      waiter.signal:wait(remaining)
      waiter.woken = false
      if done() then return true end
      if not alive() then
        errors.raise(errors.ConnectionClosedError, "the " .. host.name .. " host is shutting down")
      end
    end
  end

  --- Suspends the running coroutine until done() is true (true) or timeout seconds pass
  -- (done()'s last answer); nil timeout: no limit.
  function handler.wait(done, timeout)
    if done() then return true end
    if timeout and timeout <= 0 then -- no wait (get_nowait): runs the events there are
      dispatch_all()
      return done() and true or false
    end
    handler.check_wait()
    if not alive() then
      errors.raise(errors.ConnectionClosedError, "the " .. host.name .. " host is shutting down")
    end
    if poller ~= nil and poller == coroutine.running() then
      poller = nil -- a callback run by the poller waits: polling goes on in a new coroutine
    end
    flush_all()
    local waiter = { done = done, signal = host.new_signal(), woken = false,
                     owner = setmetatable({ coroutine.running() }, WEAK) }
    waiters[waiter] = true
    wake_ready() -- the caller may have changed what others wait for
    spawn_poller()
    return finish(waiter, pcall(suspend, waiter, done, timeout))
  end

  --- Suspends the running coroutine for seconds while the event loops run.
  function handler.sleep(seconds)
    handler.wait(function() return false end, seconds)
  end

  --- How many coroutines wait now (for tests and monitoring).
  function handler.waiting()
    local n = 0
    for _ in pairs(waiters) do n = n + 1 end
    return n
  end

  --- How many rounds (wake-ups) the poller made so far (for tests and monitoring).
  function handler.rounds()
    return rounds
  end

  --- Whether a poller runs now.
  function handler.polling()
    return poller ~= nil
  end

  if host.start then host.start(handler) end
  return handler
end

return handlers
