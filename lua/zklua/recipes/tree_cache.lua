--- zklua.recipes.tree_cache — kazoo's TreeCache: an in-memory copy of a znode subtree (every
-- node's data, stat and children), kept up to date by watches.
--
--   local cache = zk:TreeCache("/app/config")
--   cache:listen(function(event)
--     -- event.type: "NODE_ADDED" | "NODE_UPDATED" | "NODE_REMOVED" | "INITIALIZED" |
--     --   "CONNECTION_SUSPENDED" | "CONNECTION_RECONNECTED" | "CONNECTION_LOST"
--     -- event.data: {path =, data =, stat =} for node events, nil for the others
--   end)
--   cache:listen_fault(function(err) ... end)      -- errors met while caching, or raised by
--   cache:start()                                   -- a listener
--   cache:get_data("/app/config/db")    -- {path =, data =, stat =} or nil
--   cache:get_children("/app/config")   -- {"db", ...} (sorted) or nil
--   cache:close()
--
-- The cache itself is C (src/recipes/tree_cache.c); this file runs the listeners.  start()
-- creates the root path when it is missing (as kazoo) and returns at once; NODE_ADDED comes
-- for every node of the first load (parents before their children), then INITIALIZED, once.
-- Listeners run from Lua, one event at a time, in the order the changes happened on the
-- server for each node, while the client waits (a blocking call, handler.wait, dispatch()).
-- An event that comes while a listener itself waits is delivered after that listener
-- returns, so listeners never see events out of order.  A started cache is held by its
-- client (as kazoo's) until close().
--
-- * Consistency: a listener that applies every node event to a tree of its own holds the
--   server's tree whenever the cache is caught up.  A removed subtree is reported children
--   first; a node deleted and created again is reported removed, then added.
-- * SUSPENDED (connection lost): CONNECTION_SUSPENDED; the cache keeps its content (it may be
--   stale).  On reconnection: CONNECTION_RECONNECTED, then the cache reads every node again
--   and reports exactly what changed while it was away (NODE_ADDED / NODE_UPDATED /
--   NODE_REMOVED).
-- * LOST (session expired, or the client stopped): CONNECTION_LOST; the content is kept but
--   no longer watched.  When the client is CONNECTED again on a new session:
--   CONNECTION_RECONNECTED and the same re-read, reporting the differences.
-- * The root deleted: NODE_REMOVED for its subtree and itself; created again: NODE_ADDED.
-- * cache.initialized: true once INITIALIZED was sent; cache.state: "latent", "started" or
--   "closed"; require("zklua.recipes.tree_cache").TreeEvent names the event types.
-- * get_data/get_children answer from memory (nil for a node not in the cache); a path
--   outside the cache's tree is a BadArgumentsError.  After close() the cache is empty, no
--   listener is called again, and it cannot be started again (as kazoo).
local errors = require "zklua.errors"
local check = require "zklua.check"
local core = require "zklua.core"

local recipes = {}

--- kazoo's TreeEvent names (event.type holds the name itself).
recipes.TreeEvent = {
  NODE_ADDED = "NODE_ADDED", NODE_UPDATED = "NODE_UPDATED", NODE_REMOVED = "NODE_REMOVED",
  CONNECTION_SUSPENDED = "CONNECTION_SUSPENDED",
  CONNECTION_RECONNECTED = "CONNECTION_RECONNECTED", CONNECTION_LOST = "CONNECTION_LOST",
  INITIALIZED = "INITIALIZED",
}

local NOTIFY_EVENTS = core.notify.tree_cache.EVENTS

local TreeCache = { __name = "zklua.TreeCache" }

local fields = {
  initialized = function(self) return self._cache:initialized() end,
  state = function(self) return self._cache:phase() end,
}

function TreeCache.__index(self, key)
  local field = fields[key]
  if field then return field(self) end
  return TreeCache[key]
end

function TreeCache.__tostring(self)
  return string.format("zklua.TreeCache(%s, %s)", self.path, self._cache:phase())
end

--- Starts caching: creates the root path when missing, then loads the tree in the
-- background.  Raises KazooException when started already or closed.
function TreeCache:start()
  local phase = self._cache:phase()
  if phase ~= "latent" then
    errors.raise(errors.KazooException, "start: the tree cache is already " ..
                 (phase == "started" and "started" or "closed"), self.path)
  end
  local client = self.client
  client:_usable_session("start")
  client:ensure_path(self.path)
  local ok, why = self._cache:start()
  if not ok then
    errors.raise(errors.ConnectionClosedError, "start: cannot start (" .. why .. ")", self.path)
  end
  client._tree_caches = client._tree_caches or {}
  client._tree_caches[self] = true
end

--- Stops for good: no listener is called after this, and the cache is empty.
function TreeCache:close()
  self._cache:close()
  if self.client._tree_caches then self.client._tree_caches[self] = nil end
end

--- listen(fn): fn(event) for every event; returns fn.
function TreeCache:listen(fn)
  if type(fn) ~= "function" then check.fail("listen", "listener", "listener must be a function") end
  self._listeners[#self._listeners + 1] = fn
  return fn
end

--- listen_fault(fn): fn(err) for every error the cache meets (a read the server refused) or
-- a listener raises; returns fn.  Without one, errors are logged.
function TreeCache:listen_fault(fn)
  if type(fn) ~= "function" then
    check.fail("listen_fault", "listener", "listener must be a function")
  end
  self._fault_listeners[#self._fault_listeners + 1] = fn
  return fn
end

local function in_tree(self, fname, path)
  check.path(fname, path)
  local root = self.path
  if path ~= root and root ~= "/" and path:sub(1, #root + 1) ~= root .. "/" then
    check.fail(fname, "path", "path must be inside the cache's tree " .. root .. " (got " ..
               string.format("%q", path) .. ")")
  end
  return path
end

--- get_data(path, default) -> {path =, data =, stat =}, or default when not cached.
function TreeCache:get_data(path, default)
  in_tree(self, "get_data", path)
  local data, stat = self._cache:get_data(path)
  if data == nil then return default end
  return { path = path, data = data, stat = stat }
end

--- get_children(path, default) -> the cached children's names, sorted, or default.
function TreeCache:get_children(path, default)
  in_tree(self, "get_children", path)
  local names = self._cache:get_children(path)
  if names == nil then return default end
  return names
end

local function copy(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = v end
  return out
end

function TreeCache:_fault(err)
  if #self._fault_listeners == 0 then
    self.client:_log("ERROR", "TreeCache " .. self.path .. ": " .. tostring(err))
    return
  end
  for _, fn in ipairs(copy(self._fault_listeners)) do
    local ok, e = pcall(fn, err)
    if not ok then
      self.client:_log("ERROR", "error in TreeCache fault listener: " .. tostring(e))
    end
  end
end

function TreeCache:_deliver(kind, path, data, stat)
  if kind == "FAULT" then
    self:_fault(errors.from_code(data, path))
    return
  end
  local event = { type = kind }
  if path then event.data = { path = path, data = data, stat = stat } end
  for _, fn in ipairs(copy(self._listeners)) do
    if self._cache:phase() == "closed" then return end
    local ok, err = pcall(fn, event)
    if not ok then self:_fault(err) end
  end
end

-- The C cache says events wait: deliver them all, in order.  A listener that waits makes the
-- client dispatch again; a notify then is left to the loop already running.
function TreeCache:_notified(code)
  if code ~= NOTIFY_EVENTS or self._delivering then return end
  self._delivering = true
  local ud = self._cache
  local ok, err = pcall(function()
    while ud:phase() ~= "closed" do
      local with_data = #self._listeners > 0
      local kind, path, data, stat = ud:next_event(with_data)
      if not kind then break end
      if with_data or kind == "FAULT" then self:_deliver(kind, path, data, stat) end
    end
  end)
  self._delivering = false
  if not ok then error(err, 0) end
end

function recipes.TreeCache(client, path)
  check.path("TreeCache", path)
  local session = client:_usable_session("TreeCache")
  local ud = core.tree_cache(session, path)
  local self = setmetatable({ client = client, path = path, _cache = ud, _listeners = {},
                              _fault_listeners = {} }, TreeCache)
  client:_add_notify_target(ud:id(), self)
  return self
end

recipes.class = TreeCache

return recipes
