--- zklua.recipes.queue — kazoo's Queue and LockingQueue.
--
--   local q = zk:Queue("/app/jobs")
--   q:put("job-1"); q:put("urgent", 0); q:put_all({"a", "b"}, 200)
--   local job = q:get()                 -- the value, or nil when the queue is empty
--
--   local lq = zk:LockingQueue("/app/work")
--   lq:put("task")
--   local task = lq:get(10)             -- claims an item, waiting up to 10 s (nil: none came)
--   ... process task ...; lq:consume()  -- or lq:release() to hand it back
--
-- The taking sides are the C state machines of src/recipes/item_queue.c and locking_queue.c,
-- on kazoo's nodes (kazoo and zklua processes share a queue); puts are plain creates here.
-- Their contracts — layout, AT LEAST ONCE delivery, and what SUSPENDED (connection lost: the
-- step waits and goes on; a LockingQueue holder keeps its item) and LOST (session expired: a
-- Queue goes on on the new session; a LockingQueue claim is gone) do — are stated once, in
-- src/recipes/item_queue.h and src/recipes/locking_queue.h.  Values are Lua strings,
-- binary-safe; priorities are integers 0..999 (default 100, lower first; 10.0 is refused
-- under Lua 5.4, as kazoo refuses a float).  What this layer adds:
--
-- Queue (kazoo: "does not offer reliable consumption": an item leaves the queue before it is
-- processed):
-- * get(timeout) never waits for items (nil when empty), only for the round trips: at most
--   timeout seconds (nil: the client's timeout), then TimeoutError (the get goes on and the
--   next get() returns its item).  A get interrupted by an error in its wait hands its item
--   to the next get() call.  zk:stop()/close(): a get under way raises ConnectionClosedError,
--   unless its delete may have gone through (then it returns the value).
--
-- LockingQueue (reliable: an item leaves the queue only through consume()):
-- * get(timeout) claims the first unclaimed item and returns its value (nil after timeout
--   seconds with nothing available; nil timeout: no limit).  A held item is returned again
--   by get() until consume() (true: deleted) or release() (true: handed back); both return
--   false when nothing is held.  holds_lock() asks the server whether the claim is still ours.
-- * consume(timeout) and release(timeout) raise TimeoutError after timeout seconds (nil: the
--   client's timeout); the call goes on, and the next one lets it finish and returns its answer.
-- * The timeout of get() only ends it while nothing is available (or the connection is down):
--   a claim under way is finished (or dropped) first.  get() without a timeout waits until an
--   item comes, the client stops (ConnectionClosedError) or its auth is refused
--   (AuthFailedError).
-- * on_lost(fn): fn(queue) runs when a holder learns of LOST (holds_lock() is false, get()
--   claims afresh); zk:stop() is a LOST too.
--
-- Sharing (zklua.recipes.base): the gets (and consume, release) of coroutines sharing one
-- queue object take turns, so each item goes to one of them; a LockingQueue object holds one
-- item at a time (kazoo's), returned by every get() until consume() or release().  put and
-- put_all are independent single requests.
local core = require "zklua.core"
local errors = require "zklua.errors"
local check = require "zklua.check"
local compat = require "zklua.compat"
local join = require("zklua.paths").join
local base = require "zklua.recipes.base"
local waits = base.waits

local recipes = {}

local ENTRY_PREFIX = "entry-"
local ZCLOSING = core.codes.ZCLOSING

local function usable(client, fname)
  return client:_usable_session(fname)
end

local function check_priority(fname, priority)
  if priority == nil then return 100 end
  if not compat.is_integer(priority) or priority < 0 or priority > 999 then -- 10.0 too (kazoo)
    check.fail(fname, "priority", "priority must be an integer from 0 to 999 (got " ..
               (type(priority) == "number" and tostring(priority) or type(priority)) .. ")")
  end
  return priority
end

local function check_item(fname, value, path, argument)
  if type(value) ~= "string" then
    check.fail(fname, argument, argument .. " must be a string (got " .. type(value) .. ")")
  end
  return check.value(fname, value, path, argument)
end

local function check_items(fname, values, path)
  if type(values) ~= "table" then
    check.fail(fname, "values", "values must be a list of strings (got " .. type(values) .. ")")
  end
  local n = #values
  for k in pairs(values) do
    if type(k) ~= "number" or k < 1 or k > n or k ~= math.floor(k) then
      check.fail(fname, "values", "values must be a list of strings (a sequence)")
    end
  end
  for i = 1, n do check_item(fname, values[i], path, "values[" .. i .. "]") end
  return values
end

-- The prefix of an item's node: <dir>/entry-<ppp>- (the server appends the sequence).
local function entry_path(dir, priority)
  return join(dir, ENTRY_PREFIX .. string.format("%03d", priority) .. "-")
end

-- Creates the structure paths once per object (kazoo's _ensure_paths).
local function ensure_paths(self)
  if self._ensured then return end
  for _, p in ipairs(self._structure) do self.client:ensure_path(p) end
  self._ensured = true
end

local function put(self, fname, value, priority)
  priority = check_priority(fname, priority)
  local dir = self._entries_path
  value = check_item(fname, value, dir, "value")
  usable(self.client, fname)
  ensure_paths(self)
  return self.client:create(entry_path(dir, priority), value, { sequence = true, makepath = true })
end

local function commit_puts(self, values, priority)
  local t = self.client:transaction()
  local prefix = entry_path(self._entries_path, priority)
  for _, value in ipairs(values) do t:create(prefix, value, { sequence = true }) end
  local results = t:commit()
  for _, result in ipairs(results) do
    if errors.is_error(result) and not errors.is(result, errors.RolledBackError) then
      return nil, result
    end
  end
  return results
end

-- put_all: one transaction, so all the items go in or none does.
local function put_all(self, fname, values, priority)
  priority = check_priority(fname, priority)
  check_items(fname, values, self._entries_path)
  usable(self.client, fname)
  ensure_paths(self)
  if #values == 0 then return {} end
  local results, err = commit_puts(self, values, priority)
  if not results and errors.is(err, errors.NoNodeError) then -- the path went meanwhile
    self._ensured = false
    ensure_paths(self)
    results, err = commit_puts(self, values, priority)
  end
  if not results then error(err, 0) end
  return results
end

local function length(self)
  usable(self.client, "len")
  ensure_paths(self)
  local stat = self.client:exists(self._entries_path)
  return stat and stat.children_count or 0
end

local function raise_rc(fname, rc, path)
  if rc == ZCLOSING then
    errors.raise(errors.ConnectionClosedError, fname .. ": the client was stopped", path)
  end
  error(errors.from_code(rc, path), 0)
end

---------------------------------------------------------------- Queue

local Queue = { __name = "zklua.Queue" }
Queue.__index = Queue

--- put(value, priority = 100) -> the created node's path.
function Queue:put(value, priority)
  return put(self, "put", value, priority)
end

--- put_all(values, priority = 100) -> the created paths: one transaction, all or nothing.
function Queue:put_all(values, priority)
  return put_all(self, "put_all", values, priority)
end

local function queue_get(self, timeout, deadline)
  local client, ud = self.client, self._queue
  usable(client, "get")
  ensure_paths(self)
  if ud:phase() ~= "getting" and not (self._uncollected and ud:outcome() == "got") then
    local started, why = ud:get()
    if not started then
      errors.raise(errors.ConnectionClosedError, "get: cannot start (" .. why .. ")", self.path)
    end
  end
  self._uncollected = true -- until its result is handed out (a timed-out get keeps it)
  base.check_wait(base.wait(self, function() return ud:phase() ~= "getting" end, deadline),
                  errors.TimeoutError, "get", self.path, timeout)
  self._uncollected = false
  local outcome, rc = ud:outcome()
  if outcome == "got" then return ud:value() end
  if outcome == "empty" then return nil end
  raise_rc("get", rc, self.path)
end

--- get(timeout) -> the value of the first item (taking it out of the queue), or nil when
-- empty.  TimeoutError after timeout seconds (nil: the client's timeout); the get goes on
-- and the next get() returns its item.
function Queue:get(timeout)
  timeout = check.timeout("get", timeout)
  usable(self.client, "get")
  self.client:_check_wait()
  if timeout == nil then timeout = self.client._timeout end
  return base.serial_timed(self, "get", timeout, nil, errors.TimeoutError, queue_get, self,
                           timeout, base.deadline(timeout))
end

--- The number of items (the entries' count).
function Queue:len()
  return length(self)
end

Queue.__len = length

function Queue.__tostring(self)
  return string.format("zklua.Queue(%s)", self.path)
end

function recipes.Queue(client, path)
  path = check.kazoo_path("Queue", path)
  local session = usable(client, "Queue")
  return base.init(setmetatable({ client = client, path = path, _entries_path = path,
                                  _structure = { path },
                                  _queue = core.item_queue(session, path) }, Queue))
end

---------------------------------------------------------------- LockingQueue

local LockingQueue = { __name = "zklua.LockingQueue" }
LockingQueue.__index = LockingQueue

--- put(value, priority = 100) -> the created entry's path.
function LockingQueue:put(value, priority)
  return put(self, "put", value, priority)
end

--- put_all(values, priority = 100) -> the created paths: one transaction, all or nothing.
function LockingQueue:put_all(values, priority)
  return put_all(self, "put_all", values, priority)
end

-- Waits until phase ends (at most until deadline): TimeoutError for fname then,
-- ConnectionClosedError / AuthFailedError when the client went away.
local function wait_phase_ends(self, fname, phase, timeout, deadline)
  local ud = self._lq
  base.check_wait(base.wait(self, function() return ud:phase() ~= phase end, deadline),
                  errors.TimeoutError, fname, self.path, timeout)
end

-- A clean-up (dropping the claim of a get that gave up) is waited for while connected; once
-- disconnected it goes on in the background (or the claim goes with the session).
local function wait_cleanup(self)
  waits.until_abandoned(self.client, self._lq)
end

-- An operation interrupted earlier (timed out, or an error raised in its wait) finishes
-- first (within the call's deadline).
local function settle_earlier(self, fname, timeout, deadline)
  local phase = self._lq:phase()
  if phase == "consuming" or phase == "releasing" then
    wait_phase_ends(self, fname, phase, timeout, deadline)
  elseif phase == "abandoning" then
    wait_cleanup(self)
  end
end

-- Waits until the get under way is decided, or gives up at the deadline while nothing is
-- available (or the connection is down).
local function wait_get(self, deadline)
  local ud, client, handler = self._lq, self.client, self.client.handler
  local function decided() return ud:phase() ~= "getting" or base.closed(client) end
  while true do
    local remaining = deadline and math.max(deadline - core.monotonic(), 0)
    if handler.wait(decided, remaining) then return end
    if ud:waiting() or client.state ~= "CONNECTED" then
      ud:give_up()
      return
    end
    handler.wait(function() -- a claim under way: let it finish
      return decided() or ud:waiting() or client.state ~= "CONNECTED"
    end)
  end
end

local function locking_get(self, timeout, deadline)
  local client, ud = self.client, self._lq
  usable(client, "get")
  ensure_paths(self)
  settle_earlier(self, "get", timeout, deadline)
  if ud:phase() == "holding" then return ud:value() end
  if ud:phase() ~= "getting" then
    local started, why = ud:get()
    if not started then
      errors.raise(errors.ConnectionClosedError, "get: cannot start (" .. why .. ")", self.path)
    end
  end
  wait_get(self, deadline) -- if interrupted, the get goes on: the next get() picks it up
  local phase = ud:phase()
  if phase == "holding" then return ud:value() end
  if phase == "abandoning" then wait_cleanup(self) end
  local outcome, rc = ud:outcome()
  if outcome == "gave_up" then return nil end
  if outcome == "failed" then raise_rc("get", rc, self.path) end
  base.turn.raise_ended(client, "get", self.path)
end

--- get(timeout = nil) -> the value of a claimed item, or nil when none came within timeout
-- (its wait for the object's turn included).  nil: no limit, as kazoo's get(timeout=None)
-- (waiting for an item is what it is for); it still ends with ConnectionClosedError on
-- stop()/close() and AuthFailedError when the client's auth is refused.
function LockingQueue:get(timeout)
  timeout = check.timeout("get", timeout)
  usable(self.client, "get")
  self.client:_check_wait()
  local deadline = base.deadline(timeout)
  return base.serial(self, "get", deadline, false, function() return nil end, locking_get,
                     self, timeout, deadline)
end

-- Runs consume or release on the held item; returns the outcome.
local function finish_held_in_turn(self, fname, busy, timeout, deadline)
  local client, ud = self.client, self._lq
  usable(client, fname)
  local earlier = ud:phase()
  settle_earlier(self, fname, timeout, deadline)
  if ud:phase() ~= "holding" then
    if earlier ~= busy then return "not_held" end
    -- the same call timed out earlier and has now finished: its outcome is this one's
    local outcome, rc = ud:outcome()
    if outcome == "failed" then raise_rc(fname, rc, self.path) end
    return outcome
  end
  local started, why = ud[fname](ud)
  if not started then
    errors.raise(errors.ConnectionClosedError, fname .. ": cannot start (" .. why .. ")",
                 self.path)
  end
  wait_phase_ends(self, fname, busy, timeout, deadline)
  local outcome, rc = ud:outcome()
  if outcome == "failed" then raise_rc(fname, rc, self.path) end
  return outcome
end

local function finish_held(self, fname, busy, timeout)
  timeout = check.timeout(fname, timeout)
  usable(self.client, fname)
  self.client:_check_wait()
  if timeout == nil then timeout = self.client._timeout end
  return base.serial_timed(self, fname, timeout, nil, errors.TimeoutError, finish_held_in_turn,
                           self, fname, busy, timeout, base.deadline(timeout))
end

--- consume(timeout) -> true once the held item is deleted from the queue; false when nothing
-- is held (or its claim was lost, so the item is back in the queue).  TimeoutError after
-- timeout seconds (nil: the client's timeout; the wait for the turn included): the delete
-- goes on, and the next call lets it finish first.
function LockingQueue:consume(timeout)
  return finish_held(self, "consume", "consuming", timeout) == "consumed"
end

--- release(timeout) -> true once the held item's claim is deleted (the item stays in the
-- queue); false when nothing is held.  TimeoutError as consume().
function LockingQueue:release(timeout)
  local outcome = finish_held(self, "release", "releasing", timeout)
  return outcome == "released"
end

--- holds_lock() -> whether the server still has our claim of the held item (kazoo: a sync,
-- then the claim's data compared with our id).
function LockingQueue:holds_lock()
  local ud, client = self._lq, self.client
  if ud:phase() ~= "holding" then return false end
  local claim = join(self._taken_path, ud:entry())
  client:sync(claim)
  local ok, data = pcall(client.get, client, claim)
  if not ok then
    if errors.is(data, errors.NoNodeError) then return false end
    error(data, 0)
  end
  return data == self.id
end

--- The number of items, claimed ones included (as kazoo).
function LockingQueue:len()
  return length(self)
end

LockingQueue.__len = length

function LockingQueue.__tostring(self)
  return string.format("zklua.LockingQueue(%s, %s)", self.path, self._lq:phase())
end

-- on_lost(fn): fn(queue) runs when the claim of a held item was lost with the session.
base.install_lost(LockingQueue, "locking queue")

function recipes.LockingQueue(client, path)
  path = check.kazoo_path("LockingQueue", path)
  local session = usable(client, "LockingQueue")
  local ud = core.locking_queue(session, path, client:_acl())
  local entries, taken = join(path, "entries"), join(path, "taken")
  local self = setmetatable({ client = client, path = path, id = ud:owner_id(),
                              _entries_path = entries, _taken_path = taken,
                              _structure = { taken, entries }, _lq = ud }, LockingQueue)
  base.init(self)
  client:_add_notify_target(ud:id(), self)
  return self
end

recipes.classes = { Queue = Queue, LockingQueue = LockingQueue }

return recipes
