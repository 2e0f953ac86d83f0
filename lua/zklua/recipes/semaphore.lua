--- zklua.recipes.semaphore — kazoo's Semaphore: at most max_leases holders at once.
--
--   local sem = zk:Semaphore("/app/pool", "worker-1", 3)
--   local cur = zk:Semaphore("/app/pool", "worker-1", 3, {layout = "curator"})  -- with Java
--   if sem:acquire(true, 5) then ... sem:release() end    -- LockTimeout after 5 s
--   sem:with(function() ... end)                          -- released even on error
--   sem:on_lost(function(s) ... end)                      -- the session expired
--
-- The semaphore is the C state machine of src/recipes/semaphore.c, on kazoo 2.8's znodes
-- (kazoo and zklua processes share it).  Its contract — layout, the internal lock, fencing
-- token, and what SUSPENDED (connection lost: a holder keeps its lease) and LOST (session
-- expired: the lease is gone) do — is stated once, in src/recipes/semaphore.h.  What this
-- layer adds:
--
-- * acquire(blocking = true, timeout = nil) -> true, or false when non-blocking and every
--   lease is taken (or another acquirer holds the internal lock, as kazoo); raises LockTimeout
--   when timeout seconds pass, CancelledError when cancel() ends it (as kazoo; `cancelled`
--   is reset by the next acquire), ConnectionClosedError when the client stops,
--   AuthFailedError on AUTH_FAILED, and BadArgumentsError (kazoo's ValueError) when <path>
--   holds another max_leases.  The timeout never ends an acquire before it has looked once,
--   unless the connection is down.  The holder's acquire returns true without a second
--   lease (kazoo).
-- * opts (fifth argument) {layout = "kazoo" (default) | "curator"}: layout = "curator" takes
--   Curator's InterProcessSemaphoreV2 nodes (<path>/locks, <path>/leases/_c_<uuid>-lease-<seq>)
--   so zklua and Java processes using Curator share one semaphore (layout in semaphore.h);
--   nothing is stored in <path>, so no max_leases mismatch is raised (as Curator).
-- * on_lost(fn): fn(sem) runs when a holder learns of LOST (is_acquired turns false);
--   zk:stop() is a LOST too.
-- * release() waits for the delete; while disconnected it waits at most a session timeout,
--   then counts as released (the node goes with the session, or is deleted once reconnected).
-- * lease_holders() -> the identifiers of the current holders (unordered); with Curator's
--   layout the node of an acquirer still waiting (the newest, when there are more than
--   max_leases) is left out.
-- * Sharing (zklua.recipes.base): one object holds one lease; coroutines sharing it queue in
--   arrival order and hold it in turn; the timeout counts the queueing.
local core = require "zklua.core"
local errors = require "zklua.errors"
local check = require "zklua.check"
local join = require("zklua.paths").join
local base = require "zklua.recipes.base"

local recipes = {}

local MAX_LEASES = 2147483647

local Semaphore = { __name = "zklua.Semaphore" }

local fields = {
  is_acquired = function(self) return self._sem:is_held() end,
  fencing_token = function(self) return self._sem:fencing_token() end,
  -- the lease node's name (Curator's: sequential, known while it exists)
  node = function(self) return self._sem:node() end,
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

-- The semaphore's own outcome: <path> holds another max_leases.
local function raise_mismatch(self, outcome, stored)
  if outcome == "mismatch" then
    errors.raise(errors.BadArgumentsError, string.format(
                 "Semaphore: inconsistent max leases: %s stores %s, expected: %d", self.path,
                 tostring(stored), self.max_leases), self.path, { argument = "max_leases" })
  end
end

--- acquire(blocking = true, timeout = nil) -> true | false
function Semaphore:acquire(blocking, timeout)
  if blocking == nil then blocking = true end
  blocking = check.flag("acquire", blocking, "blocking")
  timeout = check.timeout("acquire", timeout)
  local ud = self._sem
  return base.acquire(self, ud, blocking, timeout, true, function()
    local started, why = ud:acquire(blocking)
    -- Curator's layout: each acquire creates under a new protected id (semaphore.h)
    self.create_path = join(self.leases_path, ud:prefix())
    return started, why
  end, function(outcome, _, stored) raise_mismatch(self, outcome, stored) end)
end

--- release() -> true if a lease was held.  Returns once the lease node is deleted (see the
-- module's comment for a release while disconnected).
function Semaphore:release()
  return base.release(self, self._sem, false)
end

--- Ends the acquire under way: it raises CancelledError (as kazoo's); sets `cancelled`,
-- which the next acquire resets (as kazoo's).
function Semaphore:cancel()
  base.cancel(self, self._sem)
end

--- The identifiers (node data) of the current lease holders, unordered; {} when the path
-- does not exist.
function Semaphore:lease_holders()
  local client = self.client
  usable(client, "lease_holders")
  local leases = self.leases_path
  if not client:exists(leases) then return {} end
  local names = client:get_children(leases)
  if self.layout == "curator" and #names > self.max_leases then
    -- Curator's waiter creates its node before counting: the newest one does not hold
    table.sort(names, function(x, y) return x:sub(-10) < y:sub(-10) end)
    names[#names] = nil
  end
  local futures = {}
  for i, name in ipairs(names) do
    futures[i] = client:get_async(join(leases, name))
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
Semaphore.with = base.with

-- on_lost(fn): fn(sem) runs when the session expired (or stopped) while a lease was held.
base.install_lost(Semaphore, "semaphore")

local OPTIONS = { layout = "string" }

function recipes.Semaphore(client, path, identifier, max_leases, opts)
  local fname = "Semaphore"
  path = check.kazoo_path(fname, path)
  opts = check.options(fname, opts, OPTIONS)
  local layout = check.layout(fname, opts.layout, { "kazoo", "curator" })
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
  local ud = core.semaphore(session, path, data, math.floor(max_leases), client:_acl(), layout)
  local curator = layout == "curator"
  local leases = curator and join(path, "leases") or path
  local self = setmetatable({ client = client, path = path, identifier = identifier,
                              data = data, max_leases = math.floor(max_leases), layout = layout,
                              leases_path = leases,
                              lock_path = curator and join(path, "locks") or path .. "-__lock__",
                              create_path = join(leases, ud:prefix()),
                              cancelled = false, _sem = ud, _ud = ud, _what = "semaphore",
                              _reset_cancel = true }, Semaphore)
  base.init(self)
  client:_add_notify_target(ud:id(), self)
  return self
end

recipes.class = Semaphore

return recipes
