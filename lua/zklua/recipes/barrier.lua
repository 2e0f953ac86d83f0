--- zklua.recipes.barrier — kazoo's Barrier and DoubleBarrier (and Curator's
-- DistributedDoubleBarrier).
--
--   local b = zk:Barrier("/app/gate"); b:create(); ...; b:remove()
--   if zk:Barrier("/app/gate"):wait(30) then ... end          -- true once the node is gone
--   local d = zk:DoubleBarrier("/app/round", 3, "worker-1")
--   d:enter(60); ... work ...; d:leave(60)
--   local c = zk:DoubleBarrier("/app/round", 3, "worker-1", {layout = "curator"})
--
-- The waits are the C state machine of src/recipes/barrier.c, on kazoo's nodes (kazoo and
-- zklua processes share a barrier).  Its contract — layout, kazoo's algorithm, and what
-- SUSPENDED (connection lost: the step is repeated) and LOST (session expired: the operation
-- goes on on the new session) do — is stated once, in src/recipes/barrier.h.  What this
-- layer adds:
--
-- * Barrier: create() = ensure_path, remove() = delete (true, or false when it was not
--   there), wait(timeout) -> true once <path> is gone, false on timeout (nil: no limit).
-- * DoubleBarrier(path, num_clients, identifier): the identifier defaults to
--   "<hostname>-<pid>" (as kazoo).  enter(timeout) -> true once entered; false on timeout
--   (its node is deleted in the background).  leave(timeout) -> true once every member has
--   left; false on timeout (its node may already be deleted).  Unlike kazoo, which swallows
--   ZooKeeper errors in enter/leave, errors are raised (after the clean-up).
-- * DoubleBarrier(path, num_clients, identifier, {layout = "kazoo" (default) | "curator"}), or
--   DoubleBarrier(path, num_clients, {layout = ...}): layout = "curator" takes Curator 5.4's
--   DistributedDoubleBarrier nodes and leave algorithm (src/recipes/barrier.h), so zklua and
--   Curator processes enter and leave one barrier together.  SUSPENDED: the step under way
--   is repeated once reconnected and the call goes on (Curator's throws
--   ConnectionLossException); LOST: an enter starts again on the new session, a leave goes
--   on without its node and still waits for every other member; sharing: as below.
--   node_name and create_path name the member's node.
-- * on_lost(fn): fn(barrier) runs when an entered member's node expired (it stays entered).
-- * A waiting call ends with ConnectionClosedError when the client stops or closes and
--   AuthFailedError on AUTH_FAILED.
-- * Sharing (zklua.recipes.base): wait, enter and leave from coroutines sharing one object
--   take turns (a timeout counts the wait for the turn, then false).
local core = require "zklua.core"
local errors = require "zklua.errors"
local check = require "zklua.check"
local compat = require "zklua.compat"

local base = require "zklua.recipes.base"

local recipes = {}


local function usable(client, fname)
  return client:_usable_session(fname)
end

-- Runs op in C, with the object's turn, until the deadline: true done, false gave up.
local function run_in_turn(self, fname, op, deadline)
  local ud, client = self._barrier, self.client
  usable(client, fname)
  if ud:busy() then -- a clean-up of an earlier attempt
    base.wait(self, function() return not ud:busy() end, deadline)
  end
  local started, why = ud:start(op)
  if not started then
    if why == "busy" then return false end -- the clean-up did not finish in time
    errors.raise(errors.ConnectionClosedError, fname .. ": cannot start (" .. why .. ")", self.path)
  end
  local ok, state = pcall(base.wait, self, function() return ud:outcome() ~= "pending" end,
                          deadline)
  if not ok or state ~= "done" then
    ud:give_up()
    if not ok then error(state, 0) end
  end
  local outcome, rc = ud:outcome()
  if outcome == "done" then return true end
  if outcome == "gave_up" then return false end
  if outcome == "pending" then base.raise_closed(fname, self.path) end
  base.raise_rc(fname, rc, self.path)
end

-- Runs op and waits at most timeout seconds (its wait for the object's turn included): true
-- done, false gave up.  Coroutines sharing the object take turns.
local function run(self, fname, op, timeout)
  usable(self.client, fname)
  self.client:_check_wait()
  local deadline = base.deadline(timeout)
  return base.serial(self, fname, deadline, false, function() return false end, run_in_turn,
                     self, fname, op, deadline)
end

---------------------------------------------------------------- Barrier

local Barrier = { __name = "zklua.Barrier" }
Barrier.__index = Barrier

function Barrier:create()
  usable(self.client, "create")
  self.client:ensure_path(self.path)
end

function Barrier:remove()
  usable(self.client, "remove")
  local ok, err = pcall(self.client.delete, self.client, self.path)
  if ok then return true end
  if errors.is(err, errors.NoNodeError) then return false end
  error(err, 0)
end

--- wait(timeout) -> true once the barrier node is gone, false on timeout.
function Barrier:wait(timeout)
  timeout = check.timeout("wait", timeout)
  return run(self, "wait", "wait", timeout)
end

function Barrier.__tostring(self)
  return string.format("zklua.Barrier(%s)", self.path)
end

function recipes.Barrier(client, path)
  path = check.kazoo_path("Barrier", path)
  local session = usable(client, "Barrier")
  return base.init(setmetatable({ client = client, path = path,
                        _barrier = core.barrier(session, path, 0) }, Barrier))
end

---------------------------------------------------------------- DoubleBarrier

local DoubleBarrier = { __name = "zklua.DoubleBarrier" }

local fields = {
  participating = function(self) return self._barrier:entered() end,
}

function DoubleBarrier.__index(self, key)
  local field = fields[key]
  if field then return field(self) end
  return DoubleBarrier[key]
end

--- enter(timeout) -> true once entered, false on timeout.
function DoubleBarrier:enter(timeout)
  timeout = check.timeout("enter", timeout)
  return run(self, "enter", "enter", timeout)
end

--- leave(timeout) -> true once every member left, false on timeout.
function DoubleBarrier:leave(timeout)
  timeout = check.timeout("leave", timeout)
  return run(self, "leave", "leave", timeout)
end

-- on_lost(fn): fn(barrier) runs when the session expired (or stopped) while entered.
base.install_lost(DoubleBarrier, "barrier")

function DoubleBarrier.__tostring(self)
  return string.format("zklua.DoubleBarrier(%s, %d%s)", self.path, self.num_clients,
                       self.layout == "curator" and ", curator" or "")
end

local function default_identifier()
  local f = io.open("/proc/sys/kernel/hostname")
  local host = f and f:read("l") or "localhost"
  if f then f:close() end
  local s = io.open("/proc/self/stat")
  local pid = s and s:read("l"):match("^%d+") or "0"
  if s then s:close() end
  return host .. "-" .. pid
end

local OPTIONS = { layout = "string" }

function recipes.DoubleBarrier(client, path, num_clients, identifier, opts)
  local fname = "DoubleBarrier"
  path = check.kazoo_path(fname, path)
  if type(identifier) == "table" and opts == nil then identifier, opts = nil, identifier end
  opts = check.options(fname, opts, OPTIONS)
  local layout = check.layout(fname, opts.layout, { "kazoo", "curator" })
  if not compat.is_integer(num_clients) or num_clients < 1 or num_clients > 2147483647 then
    check.fail(fname, "num_clients", "num_clients must be a positive integer (got " ..
               tostring(num_clients) .. ")")
  end
  if identifier ~= nil and type(identifier) ~= "string" then
    check.fail(fname, "identifier", "identifier must be a string or nil (got " ..
               type(identifier) .. ")")
  end
  if identifier == nil or identifier == "" then identifier = default_identifier() end
  local data = check.value(fname, identifier, path, "identifier")
  local session = usable(client, fname)
  local ud = core.barrier(session, path, num_clients, data, client:_acl(), layout)
  local self = setmetatable({ client = client, path = path, num_clients = num_clients,
                              identifier = identifier, node_name = ud:node(), _barrier = ud,
                              layout = layout,
                              _lost_callbacks = {} }, DoubleBarrier)
  base.init(self)
  self.create_path = (path == "/" and "" or path) .. "/" .. self.node_name
  client:_add_notify_target(ud:id(), self)
  return self
end

recipes.classes = { Barrier = Barrier, DoubleBarrier = DoubleBarrier }

return recipes
