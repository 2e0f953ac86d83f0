--- zklua.recipes.base — what every Lua recipe object shares, written once: waiting on its C
-- state machine with a deadline, the outcome -> error mapping, cancel, with(), on_lost, and
-- sharing one object between coroutines.  Its parts: zklua.recipes.turn (the per-object FIFO
-- turn), zklua.recipes.waits (the waits on a C recipe's phase), zklua.recipes.lost (on_lost).
--
-- Guarantees every recipe gets from it:
-- * Sharing: calls on one object that must not interleave take the object's turn (see
--   zklua.recipes.turn): under a coroutine handler (cqueues, ngx) they run one after the
--   other in arrival order, each seeing its own results; under the blocking handler there is
--   one thread and nothing to queue.
-- * Timeouts: every call that can wait has a deadline, counted from the call (its wait for
--   the turn included); when it passes the call raises its named error (LockTimeout for the
--   locks and the semaphore, TimeoutError otherwise) and the object stays usable.
-- * A call waiting ends with ConnectionClosedError when the client is stopped or closed.
-- * cancel() (the locks and the semaphore, kazoo's): the acquire under way, or the one that
--   has the turn next, raises CancelledError; `cancelled` says a cancel is pending.
-- * with(fn, ...): acquires, runs fn, releases even when fn raises; fn never runs without
--   the lock (an acquire that raises, is cancelled or did not get it raises).
-- * SUSPENDED and LOST: what they do to a recipe is its own (its C header, src/recipes/*.h);
--   the base adds only that no wait outlives the client: stop()/close() end every wait with
--   ConnectionClosedError, AUTH_FAILED with AuthFailedError.
local core = require "zklua.core"
local errors = require "zklua.errors"
local check = require "zklua.check"
local compat = require "zklua.compat"
local turn = require "zklua.recipes.turn"
local waits = require "zklua.recipes.waits"
local lost = require "zklua.recipes.lost"

local base = { turn = turn, waits = waits }

--- Gives a new recipe object its shared parts (the turn, the on_lost callbacks); returns it.
function base.init(self)
  self._turn = turn.new()
  self._lost_callbacks = self._lost_callbacks or {}
  return self
end

--- The deadline (a core.monotonic() time) of a call given timeout seconds (nil: default;
-- nil default or math.huge: none).
function base.deadline(timeout, default)
  local seconds = timeout
  if seconds == nil then seconds = default end
  if seconds == nil or seconds == math.huge then return nil end
  return core.monotonic() + seconds
end

--- Seconds left until deadline (nil: no limit), never negative.
function base.remaining(deadline)
  return deadline and math.max(deadline - core.monotonic(), 0)
end

local function closed(client)
  return turn.ended(client) ~= nil
end

--- Whether the client is stopped or closed, or its auth was refused (AUTH_FAILED): no wait
-- may go on then.
base.closed = closed

--- Waits until done() or the deadline or the client is stopped/closed or AUTH_FAILED:
-- "done", "timeout", "closed" or "auth_failed".
function base.wait(self, done, deadline)
  local client = self.client
  client.handler.wait(function() return done() or closed(client) end, base.remaining(deadline))
  if done() then return "done" end
  local ended = turn.ended(client)
  if ended == errors.AuthFailedError then return "auth_failed" end
  if ended then return "closed" end
  return "timeout"
end

-- ---------------------------------------------------------------- errors, in one place

--- Raises ConnectionClosedError for fname.
function base.raise_closed(fname, path)
  errors.raise(errors.ConnectionClosedError, fname .. ": the client was stopped or closed", path)
end

--- Raises the error of a ZooKeeper rc a C recipe failed with: ZCLOSING (the client stopped)
-- and ZSESSIONEXPIRED (the session ended under the call) as ConnectionClosedError.
function base.raise_rc(fname, rc, path)
  if rc == core.codes.ZCLOSING or rc == core.codes.ZSESSIONEXPIRED then
    base.raise_closed(fname, path)
  end
  error(errors.from_code(rc, path), 0)
end

--- Raises class (LockTimeout, TimeoutError) for a call of fname that waited timeout seconds.
function base.raise_timeout(class, fname, path, timeout, what)
  errors.raise(class, string.format("%s: %s on %s did not finish within %s seconds", fname,
               what or fname, path, tostring(timeout)), path, { timeout = timeout })
end

--- Raises AuthFailedError for fname (the client is AUTH_FAILED).
function base.raise_auth_failed(fname, path)
  errors.raise(errors.AuthFailedError, fname .. ": the server refused the client's auth", path)
end

--- What a wait's answer ("done", "timeout", "closed", "auth_failed") means for a call:
-- nothing when done, else its error raised.
function base.check_wait(state, class, fname, path, timeout, what)
  if state == "closed" then base.raise_closed(fname, path) end
  if state == "auth_failed" then base.raise_auth_failed(fname, path) end
  if state == "timeout" then base.raise_timeout(class, fname, path, timeout, what) end
end

-- ---------------------------------------------------------------- sharing

--- Runs fn(...) with self's turn and returns its results.  When the turn could not be had
-- (nowait and taken, or the deadline passed) returns on_busy()'s results instead.
function base.serial(self, fname, deadline, nowait, on_busy, fn, ...)
  local client = self.client
  if not turn.enter(self._turn, client, fname, self.path, deadline, nowait) then
    return on_busy()
  end
  local results = compat.pack(pcall(fn, ...))
  turn.leave(self._turn, client)
  if not results[1] then error(results[2], 0) end
  return compat.unpack(results, 2, results.n)
end

--- base.serial with a deadline of timeout (default: default) that raises class on timeout.
function base.serial_timed(self, fname, timeout, default, class, fn, ...)
  local deadline = base.deadline(timeout, default)
  return base.serial(self, fname, deadline, false, function()
    base.raise_timeout(class, fname, self.path, timeout or default)
  end, fn, ...)
end

-- ---------------------------------------------------------------- acquire, release, cancel

--- Whether the running coroutine holds ud (acquired it through self).
function base.held_by_me(self, ud)
  return ud:is_held() and self._holder == turn.me()
end

local function raise_cancelled(self, fname)
  self.cancelled = false
  errors.raise(errors.CancelledError, fname .. ": the " .. self._what .. " on " .. self.path ..
               " was cancelled", self.path)
end

local function acquire_in_turn(self, ud, blocking, timeout, deadline, start, raise_outcome)
  local client = self.client
  client:_usable_session("acquire")
  if self._reset_cancel then self.cancelled = false end -- Semaphore: as kazoo's acquire
  if self.cancelled then raise_cancelled(self, "acquire") end
  -- held by another coroutine through this object, or an earlier attempt still cleans up
  local function free() return ud:phase() == "idle" or self.cancelled end
  if not free() then
    if not blocking and ud:is_held() then return false end
    base.check_wait(base.wait(self, free, deadline), errors.LockTimeout, "acquire", self.path,
                    timeout, "acquiring the " .. self._what)
    if self.cancelled then raise_cancelled(self, "acquire") end
  end
  local started, why = start()
  if not started then
    errors.raise(errors.ConnectionClosedError, "acquire: cannot start (" .. tostring(why) .. ")",
                 self.path)
  end
  local ok, decided = pcall(waits.until_decided, client, ud, deadline)
  if not ok then -- interrupted (an error in the wait): abandon the attempt in the background
    ud:give_up()
    error(decided, 0)
  end
  if not decided then ud:give_up() end
  local outcome, rc, extra = ud:outcome()
  if outcome == "got" then
    self._holder = turn.me()
    return true
  end
  waits.until_abandoned(client, ud)
  if outcome == "busy" then return false end
  if outcome == "cancelled" then raise_cancelled(self, "acquire") end
  if outcome == "gave_up" then
    base.raise_timeout(errors.LockTimeout, "acquire", self.path, timeout,
                       "acquiring the " .. self._what)
  end
  if outcome == "pending" then base.raise_closed("acquire", self.path) end
  if raise_outcome then raise_outcome(outcome, rc, extra) end
  base.raise_rc("acquire", rc, self.path)
end

--- The acquire of the locks and the semaphore (self._what names it): start() starts the C
-- acquire of ud; raise_outcome(outcome, rc, extra) raises the recipe's own outcomes.
-- Returns reacquired (the caller already holds it: Lock false, Semaphore true, as kazoo),
-- true once held, false when non-blocking and taken; raises LockTimeout, CancelledError,
-- ConnectionClosedError or the ZooKeeper error.
function base.acquire(self, ud, blocking, timeout, reacquired, start, raise_outcome)
  local client = self.client
  client:_usable_session("acquire")
  client:_check_wait() -- a coroutine handler that cannot wait here raises before the node
  if base.held_by_me(self, ud) then return reacquired end
  local deadline = base.deadline(timeout)
  return base.serial(self, "acquire", deadline, not blocking, function()
    if not blocking then return false end
    base.raise_timeout(errors.LockTimeout, "acquire", self.path, timeout,
                       "acquiring the " .. self._what)
  end, acquire_in_turn, self, ud, blocking, timeout, deadline, start, raise_outcome)
end

--- The release of the locks and the semaphore: true once ud's node is deleted, false if not
-- held.  While disconnected it waits at most a session timeout; then a lock counts as
-- released (keep_when_unreachable false: its node goes with the session, or is deleted in the
-- background once reconnected) or raises ConnectionLoss (keep_when_unreachable: a persistent
-- lock, still held and being released).
function base.release(self, ud, keep_when_unreachable)
  local phase = ud:phase()
  if phase == "held" then
    ud:release()
  elseif phase ~= "releasing" then
    return false
  end
  local released = waits.while_reachable(self.client, function()
    return ud:phase() ~= "releasing"
  end)
  if not released then
    if not keep_when_unreachable then
      ud:release_in_background()
      self._holder = nil
      return true
    end
    errors.raise(errors.ConnectionLoss, "release: no connection for a session timeout; " ..
                 "the node is deleted once reconnected", self.path)
  end
  if ud:phase() == "held" then
    error(errors.from_code(ud:release_rc(), self.path), 0)
  end
  self._holder = nil
  turn.poke(self.client) -- a coroutine waiting for this object to be free goes on
  return true
end

--- kazoo's cancel(): the acquire under way (or the next one to start) raises CancelledError.
function base.cancel(self, ud)
  self.cancelled = true
  if ud:phase() == "acquiring" then ud:cancel() end
  turn.poke(self.client)
end

--- with(fn, ...): acquires (blocking), calls fn(...), releases (even when fn raises) and
-- returns fn's results.  fn never runs without the lock: a cancelled acquire raises
-- CancelledError, and the holder itself calling with() raises KazooException.
local function with_held(self, timeout, fn, ...)
  if not check.callable(fn) then
    check.fail("with", "fn", "fn must be a function or a callable table (got " .. type(fn) .. ")")
  end
  if base.held_by_me(self, self._ud) then
    errors.raise(errors.KazooException, "with: this coroutine already holds the " ..
                 self._what .. " on " .. self.path, self.path)
  end
  if self:acquire(true, timeout) ~= true then
    errors.raise(errors.KazooException, "with: the " .. self._what .. " on " .. self.path ..
                 " was not acquired", self.path)
  end
  local results = compat.pack(pcall(fn, ...))
  local released, err = pcall(self.release, self)
  if not results[1] then error(results[2], 0) end
  if not released then error(err, 0) end
  return compat.unpack(results, 2, results.n)
end

--- with(fn, ...), or with({timeout = seconds}, fn, ...): the acquire waits at most timeout
-- seconds (default: no limit, as kazoo's `with lock:`), then raises LockTimeout.
function base.with(self, fn, ...)
  if type(fn) == "table" and not check.callable(fn) then
    for key in pairs(fn) do
      if key ~= "timeout" then
        check.fail("with", "opts", "unknown option '" .. tostring(key) .. "' (timeout only)")
      end
    end
    return with_held(self, check.timeout("with", fn.timeout), ...)
  end
  return with_held(self, nil, fn, ...)
end

--- Gives class on_lost(fn) and _notified(code) (zklua.recipes.lost).
base.install_lost = lost.install

return base
