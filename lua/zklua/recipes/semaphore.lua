--- zklua.recipes.semaphore — kazoo's Semaphore: at most max_leases holders at once.
--
--   local sem = zk:Semaphore("/app/pool", "worker-1", 3)
--   if sem:acquire(true, 5) then ... sem:release() end    -- LockTimeout after 5 s
--   sem:with(function() ... end)                          -- released even on error
--   sem:on_lost(function(s) ... end)                      -- the session expired
--
-- The state machine is C (src/recipes/semaphore.c), on kazoo 2.8's znodes, so kazoo and
-- zklua processes share a semaphore: <path> holds max_leases (ASCII decimal), each holder has
-- an EPHEMERAL <path>/<uuid4 hex> holding its identifier (every child of <path> counts as a
-- lease), and a kazoo Lock at <path>-__lock__ serialises the acquirers (a blocked acquirer
-- waits for the leases to change while holding it).  Waiting uses the client's handler, so
-- watch callbacks and other clients keep running meanwhile.
--
-- * acquire(blocking = true, timeout = nil) -> true, or false when non-blocking and every
--   lease is taken (or another acquirer holds the internal lock, as kazoo); raises LockTimeout
--   when timeout seconds pass, CancelledError when cancel() ends it (as kazoo), and
--   BadArgumentsError (kazoo's ValueError) when <path> holds another max_leases (checked on
--   the first acquire; non-numeric data there is ignored).  An acquire that does not succeed
--   leaves no lease node behind.  The timeout never ends an acquire before it has looked
--   once, unless the connection is down.  Not re-entrant: acquiring a held semaphore raises
--   (kazoo returns True without taking a second lease).
-- * SUSPENDED (connection lost, session alive): a holder keeps its lease (is_acquired stays
--   true, its ephemeral node lives while the session does); an acquire waits for the
--   reconnection and goes on; a create whose reply was lost is found again by its name.
-- * LOST (session expired): the ephemeral lease is gone: is_acquired becomes false and every
--   on_lost(fn) callback runs fn(sem); its slot is free for others.  An acquire under way
--   starts again on the new session.  stop() is a LOST too.
-- * fencing_token: the czxid of the holder's lease node, a number that grows with every new
--   holder of a lease on the path (nil when not held).
-- * release() waits for the delete; while disconnected it waits at most a session timeout,
--   then counts as released (the node goes with the session, or is deleted once reconnected).
-- * lease_holders() -> the identifiers of the current holders (unordered).
local core = require "zklua.core"
local errors = require "zklua.errors"
local check = require "zklua.check"
local join = require("zklua.paths").join
local waits = require "zklua.recipes.waits"

local recipes = {}

local MAX_LEASES = 2147483647

local Semaphore = { __name = "zklua.Semaphore" }

local fields = {
  is_acquired = function(self) return self._sem:is_held() end,
  fencing_token = function(self) return self._sem:fencing_token() end,
}

function Semaphore.__index(self, key)
  local field = fields[key]
  if field then return field(self) end
  return Semaphore[key]
end

function Semaphore.__tostring(self)
  return string.format("zklua.Semaphore(%s, %d, %s)", self.path, self.max_leases,
                       self._sem:phase())
end

local function usable(client, fname)
  return client:_usable_session(fname)
end

local function pack(...)
  return { n = select("#", ...), ... }
end

local unpack = table.unpack or unpack -- luacheck: ignore

local function timeout_error(self, timeout)
  errors.raise(errors.LockTimeout, string.format(
               "failed to acquire semaphore on %s after %s seconds", self.path,
               tostring(timeout)), self.path)
end

local function raise_outcome(self, outcome, rc, stored, timeout)
  if outcome == "gave_up" then timeout_error(self, timeout) end
  if outcome == "cancelled" then
    errors.raise(errors.CancelledError, "semaphore acquire on " .. self.path .. " cancelled",
                 self.path)
  end
  if outcome == "mismatch" then
    errors.raise(errors.BadArgumentsError, string.format(
                 "Semaphore: inconsistent max leases: %s stores %s, expected: %d", self.path,
                 tostring(stored), self.max_leases), self.path, { argument = "max_leases" })
  end
  if outcome == "pending" then -- the client was closed under the wait
    errors.raise(errors.ConnectionClosedError, "acquire: the client was closed", self.path)
  end
  error(errors.from_code(rc, self.path), 0)
end

--- acquire(blocking = true, timeout = nil) -> true | false
function Semaphore:acquire(blocking, timeout)
  if blocking == nil then blocking = true end
  blocking = check.flag("acquire", blocking, "blocking")
  timeout = check.timeout("acquire", timeout)
  usable(self.client, "acquire")
  local ud = self._sem
  local phase = ud:phase()
  if phase == "held" or phase == "releasing" then
    errors.raise(errors.KazooException, "acquire: this semaphore already holds a lease on " ..
                 self.path .. " (semaphores are not re-entrant)", self.path)
  elseif phase == "acquiring" then
    errors.raise(errors.KazooException, "acquire: an acquire of this semaphore is already " ..
                 "under way", self.path)
  end
  local deadline = timeout and core.monotonic() + timeout
  if phase == "abandoning" then -- an earlier attempt still cleans up
    local gone = self.client.handler.wait(function() return ud:phase() ~= "abandoning" end,
                                          timeout)
    if not gone then timeout_error(self, timeout) end
  end
  local started, why = ud:acquire(blocking)
  if not started then
    errors.raise(errors.ConnectionClosedError, "acquire: cannot start (" .. why .. ")", self.path)
  end
  local ok, decided = pcall(waits.until_decided, self.client, self._sem, deadline)
  if not ok then -- interrupted (an error in the wait): abandon the attempt in the background
    ud:give_up()
    error(decided, 0)
  end
  if not decided then ud:give_up() end
  local outcome, rc, stored = ud:outcome()
  if outcome == "got" then return true end
  waits.until_abandoned(self.client, self._sem)
  if outcome == "busy" then return false end
  raise_outcome(self, outcome, rc, stored, timeout)
end

-- Waits for the delete of a release: false after a whole session timeout without a
-- connection (by then the server has expired the node, or the C semaphore deletes it as soon
-- as it reconnects).
local function wait_released(self)
  local ud = self._sem
  return waits.while_reachable(self.client, function() return ud:phase() ~= "releasing" end)
end

--- release() -> true if a lease was held.  Returns once the lease node is deleted (see the
-- module's comment for a release while disconnected).
function Semaphore:release()
  local ud = self._sem
  local phase = ud:phase()
  if phase == "held" then
    ud:release()
  elseif phase ~= "releasing" then
    return false
  end
  if not wait_released(self) then
    ud:release_in_background()
    return true
  end
  if ud:phase() == "held" then
    error(errors.from_code(ud:release_rc(), self.path), 0)
  end
  return true
end

--- Ends an acquire under way: it raises CancelledError (as kazoo's).  Nothing otherwise.
function Semaphore:cancel()
  self._sem:cancel()
end

--- The identifiers (node data) of the current lease holders, unordered; {} when the path
-- does not exist.
function Semaphore:lease_holders()
  local client = self.client
  usable(client, "lease_holders")
  if not client:exists(self.path) then return {} end
  local futures = {}
  for i, name in ipairs(client:get_children(self.path)) do
    futures[i] = client:get_async(join(self.path, name))
  end
  local holders = {}
  for _, f in ipairs(futures) do
    local ok, data = pcall(f.get, f)
    if ok then
      holders[#holders + 1] = data
    elseif not errors.is(data, errors.NoNodeError) then -- a holder left meanwhile: skipped
      error(data, 0)
    end
  end
  return holders
end

--- Acquires (blocking), calls fn(...), releases (even when fn raises) and returns fn's results.
function Semaphore:with(fn, ...)
  if type(fn) ~= "function" then check.fail("with", "fn", "fn must be a function") end
  self:acquire()
  local results = pack(pcall(fn, ...))
  local released, err = pcall(self.release, self)
  if not results[1] then error(results[2], 0) end
  if not released then error(err, 0) end
  return unpack(results, 2, results.n)
end

-- on_lost(fn): fn(sem) runs when the session expired (or stopped) while a lease was held.
require("zklua.recipes.lost").install(Semaphore, "semaphore")

function recipes.Semaphore(client, path, identifier, max_leases)
  local fname = "Semaphore"
  check.path(fname, path)
  if identifier ~= nil and type(identifier) ~= "string" then
    check.fail(fname, "identifier", "identifier must be a string or nil (got " ..
               type(identifier) .. ")")
  end
  if max_leases == nil then max_leases = 1 end
  if type(max_leases) ~= "number" or max_leases ~= math.floor(max_leases) or max_leases < 1
     or max_leases > MAX_LEASES then
    check.fail(fname, "max_leases", "max_leases must be an integer from 1 to " .. MAX_LEASES ..
               " (got " .. tostring(max_leases) .. ")")
  end
  local data = check.value(fname, identifier, path, "identifier")
  local session = usable(client, fname)
  local ud = core.semaphore(session, path, data, math.floor(max_leases), client._default_acl)
  local self = setmetatable({ client = client, path = path, identifier = identifier,
                              data = data, max_leases = math.floor(max_leases),
                              node = ud:node(), lock_path = path .. "-__lock__",
                              _sem = ud, _lost_callbacks = {} }, Semaphore)
  self.create_path = join(path, self.node)
  client:_add_notify_target(ud:id(), self)
  return self
end

recipes.class = Semaphore

return recipes
