--- zklua.recipes.service_cache — Curator x-discovery's ServiceCache: the instances of one
-- service, kept in memory by watches, with change listeners.
--
--   local cache = sd:ServiceCache("api")
--   cache:listen(function(event) ... end) -- event.type: "CACHE_CHANGED" (an instance came,
--                                         -- went or changed after the first load, as
--                                         -- Curator's cacheChanged), "CONNECTION_SUSPENDED",
--                                         -- "CONNECTION_RECONNECTED" or "CONNECTION_LOST"
--   cache:start(timeout)                  -- returns once the instances there are loaded
--   cache:get_instances()                 -- {instance, ...} sorted by id (a new table)
--   cache:close()
--
-- The watching is the C TreeCache (src/recipes/tree_cache.c) on <base>/<name>: one child watch
-- and one data watch per znode, re-armed by C on the session's owner thread; each znode's
-- bytes are read by the C codec (src/recipes/service_instance.c).  A znode whose data is not
-- an instance is left out (and logged), as Curator's cache does.  Its contract carries over:
-- * SUSPENDED: CONNECTION_SUSPENDED; the cache keeps its instances (a balancer goes on
--   routing to them).  When the connection comes back, what changed meanwhile is applied
--   (CONNECTION_RECONNECTED, then a CACHE_CHANGED per change).
-- * LOST: CONNECTION_LOST; the cache keeps its instances and, on the new session, re-reads
--   them and applies the differences (instances whose session died are removed once the
--   server removed their znodes).
-- * start(timeout) waits at most timeout seconds (default: the client's timeout) for the first
--   load: TimeoutError (the cache goes on loading), ConnectionClosedError on stop().  Nothing
--   else waits.  Listeners run from Lua (never from C), one event at a time, in order; one
--   that raises is logged.
-- * Sharing among coroutines: safe; reads answer from memory.  A cache starts once: a second
--   start() (from any coroutine) raises KazooException, as its TreeCache's.
local base = require "zklua.recipes.base"
local check = require "zklua.check"
local core = require "zklua.core"
local errors = require "zklua.errors"

local M = {}

local ServiceCache = { __name = "zklua.ServiceCache" }
ServiceCache.__index = ServiceCache

local function notify(self, kind)
  local event = { type = kind }
  local listeners = {}
  for i, fn in ipairs(self._listeners) do listeners[i] = fn end
  for _, fn in ipairs(listeners) do
    local ok, err = pcall(fn, event)
    if not ok then
      self.client:_log("ERROR", "error in ServiceCache listener: " .. tostring(err))
    end
  end
end

function ServiceCache:_on_tree(event)
  local kind = event.type
  if kind == "INITIALIZED" then
    self.initialized = true
    return
  end
  if kind:sub(1, 11) == "CONNECTION_" then return notify(self, kind) end
  local path = event.data and event.data.path
  if not path or path:sub(1, #self.path + 1) ~= self.path .. "/" then return end
  local id = path:sub(#self.path + 2)
  if id:find("/", 1, true) then return end -- deeper nodes are not instances
  local instance
  if kind ~= "NODE_REMOVED" then
    local why
    instance, why = core.service_instance_decode(event.data.data or "")
    if not instance then
      self.client:_log("WARN", "ServiceCache: " .. path .. " is not a service instance: " .. why)
    end
  end
  if instance == nil and self._instances[id] == nil then return end
  self._instances[id] = instance
  self._sorted = nil
  self.version = self.version + 1
  -- the first load (what start() waits for) is not a change: as Curator's cacheChanged
  if self.initialized then notify(self, "CACHE_CHANGED") end
end

--- The instances, sorted by id: the cache's own array (callers must not change it); a new
-- array after every change.
function ServiceCache:_list()
  local sorted = self._sorted
  if sorted then return sorted end
  sorted = {}
  local ids = {}
  for id in pairs(self._instances) do ids[#ids + 1] = id end
  table.sort(ids)
  for i, id in ipairs(ids) do sorted[i] = self._instances[id] end
  self._sorted = sorted
  return sorted
end

--- get_instances() -> the instances, sorted by id (a new table).
function ServiceCache:get_instances()
  local out = {}
  for i, instance in ipairs(self:_list()) do out[i] = instance end
  return out
end

--- listen(fn): fn(event) on every change and connection event; returns fn.
function ServiceCache:listen(fn)
  if type(fn) ~= "function" then check.fail("listen", "listener", "listener must be a function") end
  self._listeners[#self._listeners + 1] = fn
  return fn
end

--- start(timeout): starts watching; returns once the first load is in (see the top).
function ServiceCache:start(timeout)
  if timeout ~= nil then check.timeout("start", timeout) end
  self._tree:start(timeout)
  local client = self.client
  local state = base.wait(self, function() return self.initialized end,
                          base.deadline(timeout, client._timeout))
  base.check_wait(state, errors.TimeoutError, "start", self.path, timeout or client._timeout,
                  "loading the instances")
end

--- close(): stops watching; the cache is empty and no listener is called again.
function ServiceCache:close()
  self._tree:close()
  self._instances, self._sorted, self._listeners = {}, nil, {}
  self.version = self.version + 1
end

function ServiceCache.__tostring(self)
  return "zklua.ServiceCache(" .. self.path .. ")"
end

function M.new(discovery, name)
  if type(name) ~= "string" or name == "" or name:find("/", 1, true) then
    check.fail("ServiceCache", "name", "name must be a non-empty string without '/'")
  end
  local path = discovery:_path_for(name)
  local client = discovery.client
  local self = setmetatable({ client = client, discovery = discovery, name = name, path = path,
                              _tree = client:TreeCache(path), _instances = {}, _listeners = {},
                              version = 0, initialized = false }, ServiceCache)
  self._tree:listen(function(event) self:_on_tree(event) end)
  self._tree:listen_fault(function(err)
    client:_log("WARN", "ServiceCache " .. path .. ": " .. tostring(err))
  end)
  return self
end

M.class = ServiceCache

return M
