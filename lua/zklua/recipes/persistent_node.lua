--- zklua.recipes.persistent_node — Curator's PersistentNode: a node this client keeps present.
--
--   local node = zk:PersistentNode("/services/api/host-1", "10.0.0.7:8080")  -- ephemeral
--   node:on_created(function(n) ... end)     -- each time this client's create made it
--   node:start()                             -- returns at once: kept from now on
--   node:wait_for_initial_create(5)          -- true once it exists (false after 5 s)
--   node:set_data("10.0.0.7:8081")           -- kept with this data from now on
--   node:stop()                              -- stops keeping it, deletes it
--
-- The node is the C state machine of src/recipes/persistent_node.c.  Its contract — the node
-- re-created with its current data after anyone deletes it, what SUSPENDED (connection lost:
-- nothing is lost, the step under way is redone) and LOST (session expired: an ephemeral node
-- is gone and is created again on the new session) do — is stated once, in
-- src/recipes/persistent_node.h.  What this layer adds:
--
-- * zk:PersistentNode(path, data, {ephemeral = true, sequential = false, protection = false,
--   container = true, ttl = ms, acl = ...}):
--   ephemeral (default) or persistent; ttl (persistent only): a TTL node, which the server
--   deletes after ttl ms without change and this client then creates again; container
--   (default true, as Curator's creatingParentContainersIfNeeded): a missing parent path is
--   made of container nodes.  sequential (Curator's EPHEMERAL_SEQUENTIAL,
--   PERSISTENT_SEQUENTIAL[_WITH_TTL]): the node is path + a sequence number given by its first
--   create, and keeps that name (re-created under it) for the run; protection (Curator's
--   withProtection): the name is _c_<uuid>-<last segment of path>, so a sequential create
--   whose reply was lost is found again.  `actual_path` is the node's path once created (nil
--   before, and after stop).  Options are checked before anything is sent.
-- * start() returns at once; wait_for_initial_create(timeout) -> true once the node is there
--   (false when timeout seconds pass first: the node is still being made); `present` says
--   whether it is there now, as this client last learnt; `data` is the data kept.
-- * on_created(fn): fn(node) runs each time this client's create made the node (the first
--   time, and after every deletion or expiry); on_lost(fn): fn(node) runs when an ephemeral
--   node went with an expired session (it is created again next).
-- * stop(timeout) -> true when it deleted the node, false when there was none; it waits at
--   most timeout seconds (default: the client's timeout; TimeoutError: the delete goes on).
--   start() may follow to keep it again.  zk:stop() is a LOST: the node is no longer kept.
-- * A node that failed (the server refused for a reason no retry fixes: NOAUTH, a parent that
--   is ephemeral, TTLs disabled...) raises its error from wait_for_initial_create;
--   `phase` is "failed" and start() may try again.
-- * Sharing: start/stop/set_data never wait for a turn and may be called from any coroutine;
--   wait_for_initial_create and stop each wait on their own.
local core = require "zklua.core"
local errors = require "zklua.errors"
local check = require "zklua.check"
local base = require "zklua.recipes.base"
local lost = require "zklua.recipes.lost"

local recipes = {}

local PersistentNode = { __name = "zklua.PersistentNode" }

local fields = {
  present = function(self) return self._ud:present() end,
  phase = function(self) return self._ud:phase() end,
  data = function(self) return self._ud:data() end,
  creations = function(self) return self._ud:creations() end,
  actual_path = function(self) return self._ud:actual_path() end,
}

function PersistentNode.__index(self, key)
  local field = fields[key]
  if field then return field(self) end
  return PersistentNode[key]
end

function PersistentNode.__tostring(self)
  return string.format("zklua.PersistentNode(%s, %s%s)", self.path, self._ud:phase(),
                       self._ud:present() and ", present" or "")
end

local function usable(client, fname)
  return client:_usable_session(fname)
end

--- Starts keeping the node (returns at once); nothing when it is kept already.
function PersistentNode:start()
  usable(self.client, "start")
  local ok, why = self._ud:start()
  if not ok and why ~= "busy" then base.raise_closed("start", self.path) end
  if not ok and self._ud:phase() == "stopping" then
    errors.raise(errors.KazooException, "start: a stop is still deleting the node", self.path)
  end
end

--- wait_for_initial_create(timeout) -> true once the node is there, false when timeout
-- seconds (nil: no limit) pass first.  Raises the node's error when it failed, and
-- ConnectionClosedError when the client stops.
function PersistentNode:wait_for_initial_create(timeout)
  timeout = check.timeout("wait_for_initial_create", timeout)
  self.client:_check_wait()
  local ud = self._ud
  local function settled()
    local phase = ud:phase()
    return ud:present() or phase == "failed" or phase == "idle"
  end
  local state = base.wait(self, settled, base.deadline(timeout))
  if ud:present() then return true end
  if state == "timeout" then return false end
  local ended = base.turn.ended(self.client) -- the client stopped, closed or AUTH_FAILED
  if ended == errors.AuthFailedError then
    state = "auth_failed"
  elseif ended then
    state = "closed"
  end
  base.check_wait(state, errors.TimeoutError, "wait_for_initial_create", self.path, timeout)
  if ud:rc() ~= 0 then base.raise_rc("wait_for_initial_create", ud:rc(), self.path) end
  errors.raise(errors.KazooException, "wait_for_initial_create: the node is not started",
               self.path)
end

--- set_data(data): the data to keep from now on (written at once when the node is there).
function PersistentNode:set_data(data)
  data = check.value("set_data", data, self.path, "data")
  self._ud:set_data(data)
end

-- _wait_written(fname, timeout): waits until the node is there holding the latest set_data's
-- data (ServiceDiscovery's register and update answer as plain calls with it).  Raises the
-- node's error when it failed, ConnectionLoss when the connection is not (or no longer) up —
-- the node is still kept: written once CONNECTED —, TimeoutError after timeout seconds, and
-- ConnectionClosedError when the client stops.
function PersistentNode:_wait_written(fname, timeout)
  local ud, client = self._ud, self.client
  local function settled()
    return ud:written() or ud:phase() ~= "running" or client.state ~= "CONNECTED"
  end
  local state = base.wait(self, settled, base.deadline(timeout))
  if ud:written() then return end
  base.check_wait(state, errors.TimeoutError, fname, self.path, timeout, "writing the node")
  if ud:phase() == "failed" then base.raise_rc(fname, ud:rc(), self.path) end
  if ud:phase() ~= "running" then base.raise_closed(fname, self.path) end
  errors.raise(errors.ConnectionLoss, fname .. ": no connection to a server (the node is " ..
               "written once CONNECTED)", self.path)
end

-- _stop_nowait(): stops keeping the node and starts its delete, without a wait or a check of
-- the session (stop() then waits for the delete).
function PersistentNode:_stop_nowait()
  self._ud:stop()
end

--- stop(timeout) -> true when the node was deleted, false when there was none.
function PersistentNode:stop(timeout)
  timeout = check.timeout("stop", timeout)
  local client = self.client
  usable(client, "stop")
  client:_check_wait()
  if timeout == nil then timeout = client._timeout end
  local ud = self._ud
  local ok = ud:stop()
  if not ok then base.raise_closed("stop", self.path) end
  local state = base.wait(self, function() return ud:phase() ~= "stopping" end,
                          base.deadline(timeout))
  base.check_wait(state, errors.TimeoutError, "stop", self.path, timeout, "deleting the node")
  if ud:rc() ~= 0 then base.raise_rc("stop", ud:rc(), self.path) end
  return ud:deleted()
end

--- on_created(fn): fn(node) runs each time this client's create made the node.
function PersistentNode:on_created(fn)
  if type(fn) ~= "function" then check.fail("on_created", "fn", "fn must be a function") end
  self._created_callbacks[#self._created_callbacks + 1] = fn
  return fn
end

-- on_lost(fn): fn(node) runs when an ephemeral node went with an expired session.
base.install_lost(PersistentNode, "persistent node")

local NOTIFY_CREATED = core.notify.persistent_node.CREATED
local notified_lost = PersistentNode._notified
function PersistentNode:_notified(code)
  if code ~= NOTIFY_CREATED then return notified_lost(self, code) end
  local node = self
  self.client:_callback(function() -- user code: never nested (Client:_callback)
    for _, fn in ipairs(node._created_callbacks) do
      local ok, err = pcall(fn, node)
      if not ok then
        node.client:_log("ERROR", "error in persistent node on_created callback: " ..
                         tostring(err))
      end
    end
  end)
end
assert(lost.NOTIFY_LOST ~= NOTIFY_CREATED)

local OPTIONS = { ephemeral = "boolean", container = "boolean", ttl = "number", acl = "table",
                  sequential = "boolean", protection = "boolean" }
local TTL_MAX = 0xFFFFFFFFFF -- as create's: 40 bits of milliseconds

-- container_kept (for zklua.recipes.persistent_ttl_node only): the node is a CONTAINER and
-- stop() leaves it (Curator's PersistentTtlNode's inner node); fname names the caller in errors.
function recipes.PersistentNode(client, path, data, opts, container_kept, fname)
  fname = fname or "PersistentNode"
  path = check.kazoo_path(fname, path)
  if path == "/" then check.fail(fname, "path", "the root cannot be a persistent node") end
  data = check.value(fname, data, path, "data")
  opts = check.options(fname, opts, OPTIONS)
  local ephemeral = opts.ephemeral ~= false
  local ttl = opts.ttl
  if ttl ~= nil then
    if ttl ~= ttl or ttl < 1 or ttl > TTL_MAX or ttl % 1 ~= 0 then
      check.fail(fname, "ttl", "option 'ttl' must be a whole number of milliseconds from 1 to " ..
                 string.format("%d", TTL_MAX) .. " (got " .. tostring(ttl) .. ")")
    end
    if ephemeral then
      check.fail(fname, "ttl", "a ttl needs ephemeral = false (an ephemeral node ends with its session)")
    end
  end
  local acl = opts.acl and check.acls(fname, opts.acl) or client._default_acl
  local session = usable(client, fname)
  local ud = core.persistent_node(session, path, data, ephemeral, opts.container ~= false,
                                  ttl and math.floor(ttl), acl, opts.sequential == true,
                                  opts.protection == true, container_kept == true)
  local self = setmetatable({ client = client, path = path, ephemeral = ephemeral,
                              sequential = opts.sequential == true,
                              protection = opts.protection == true, _ud = ud,
                              _created_callbacks = {} }, PersistentNode)
  base.init(self)
  client:_add_notify_target(ud:id(), self)
  return self
end

recipes.class = PersistentNode

return recipes
