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
-- The cache is the C state machine of src/recipes/tree_cache.c.  Its contract — which
-- events come, in which order, INITIALIZED once, and what SUSPENDED (CONNECTION_SUSPENDED;
-- the content is kept, and on reconnection exactly what changed is reported) and LOST
-- (CONNECTION_LOST; the same re-read once a new session is CONNECTED) do — is stated once, in
-- src/recipes/tree_cache.h.  What this layer adds:
--
-- * start(timeout) creates the root path when it is missing (as kazoo), then returns; the
--   first load goes on in the background and reports NODE_ADDED for every node (parents
--   before their children).  Making sure of the root waits at most timeout seconds (default:
--   the client's timeout), then raises TimeoutError (the cache stays latent: start again); it
--   ends with ConnectionClosedError on zk:stop()/close() and AuthFailedError on AUTH_FAILED.
--   Nothing else here waits: listen, get_data, get_children and close return at once.
-- * Listeners run from Lua, one event at a time, in the order the C cache queued them, while
--   the client waits (a blocking call, handler.wait, dispatch()).  An event that comes while
--   a listener itself waits is delivered after that listener returns, so listeners never see
--   events out of order.  A listener that applies every node event to a tree of its own
--   holds the server's tree whenever the cache is caught up.  A FAULT (a read the server
--   refused) and an error a listener raises go to the listen_fault listeners.
-- * A started cache is held by its client (as kazoo's) until close().
-- * cache.initialized: true once INITIALIZED was sent; cache.state: "latent", "started" or
--   "closed"; require("zklua.recipes.tree_cache").TreeEvent names the event types.
-- * get_data/get_children answer from memory (nil for a node not in the cache); a path
--   outside the cache's tree is a BadArgumentsError.  After close() the cache is empty, no
--   listener is called again, and it cannot be started again (as kazoo).
-- * Sharing: safe without a turn.  start() marks the cache as starting before it waits, so
--   a second start() from another coroutine raises KazooException at once (kazoo's start
--   moves to STARTED first) and the tree is loaded once.  Events are delivered by one loop at
--   a time (a notify that comes while listeners run is left to the loop already running), so
--   coroutines never see an event twice or out of order; the reads answer from memory.
local errors = require "zklua.errors"
local check = require "zklua.check"
local core = require "zklua.core"
local base = require "zklua.recipes.base"

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

-- Makes sure the root exists before the C cache starts.  A connection lost under the
-- request is no answer (kazoo's cache starts again on the reconnection): it is asked again,
-- and waits for the reconnection, until the deadline, a stop or AUTH_FAILED.
local function ensure_root(self, deadline, timeout)
  local client = self.client
  while true do
    local made = client:ensure_path_async(self.path)
    local state = base.wait(self, function() return made.done end, deadline)
    base.check_wait(state, errors.TimeoutError, "start", self.path,
                    timeout or client._timeout, "making sure of the root")
    local ok, err = pcall(made.get, made)
    if ok then return end
    if not errors.is(err, errors.ConnectionLoss) then error(err, 0) end
  end
end

--- Starts caching: creates the root path when missing (waiting at most timeout seconds,
-- default the client's timeout), then loads the tree in the background.  Raises
-- KazooException when started already (or being started) or closed, TimeoutError when the
-- root could not be made sure of in time (the cache stays latent: start again),
-- ConnectionClosedError on stop()/close() and AuthFailedError on AUTH_FAILED.  A connection
-- loss meanwhile is waited out.
function TreeCache:start(timeout)
  if timeout ~= nil then check.timeout("start", timeout) end
  local phase = self._cache:phase()
  if phase ~= "latent" or self._starting then
    errors.raise(errors.KazooException, "start: the tree cache is already " ..
                 ((phase == "closed" and "closed") or "started"), self.path)
  end
  local client = self.client
  client:_usable_session("start")
  client:_check_wait()
  self._starting = true -- a second start() meanwhile raises at once, as kazoo's (STARTED)
  local made, err = pcall(ensure_root, self, base.deadline(timeout, client._timeout), timeout)
  self._starting = nil
  if not made then error(err, 0) end
  if self._cache:phase() == "closed" then
    errors.raise(errors.KazooException, "start: the tree cache was closed meanwhile", self.path)
  end
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
  path = check.kazoo_path(fname, path)
  local root = self.path
  if path ~= root and root ~= "/" and path:sub(1, #root + 1) ~= root .. "/" then
    check.fail(fname, "path", "path must be inside the cache's tree " .. root .. " (got " ..
               string.format("%q", path) .. ")")
  end
  return path
end

--- get_data(path, default) -> {path =, data =, stat =}, or default when not cached.
function TreeCache:get_data(path, default)
  path = in_tree(self, "get_data", path)
  local data, stat = self._cache:get_data(path)
  if stat == nil then return default end -- not cached (data nil with a stat: a null value)
  return { path = path, data = data, stat = stat }
end

--- get_children(path, default) -> the cached children's names, sorted, or default.
function TreeCache:get_children(path, default)
  path = in_tree(self, "get_children", path)
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

-- Delivers every event the C cache holds, in order.  A listener that waits makes the client
-- dispatch again; a notify then is left to the loop already running.
local function deliver_all(self)
  if self._delivering then return end
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

-- The C cache says events wait: the listeners are user code, so the delivery runs as a user
-- callback (Client:_callback: never nested in another callback's wait).
function TreeCache:_notified(code)
  if code == NOTIFY_EVENTS and not self._delivering then
    self.client:_callback(deliver_all, self)
  end
end

function recipes.TreeCache(client, path)
  path = check.kazoo_path("TreeCache", path)
  local session = client:_usable_session("TreeCache")
  local ud = core.tree_cache(session, path)
  local self = setmetatable({ client = client, path = path, _cache = ud, _listeners = {},
                              _fault_listeners = {} }, TreeCache)
  client:_add_notify_target(ud:id(), self)
  return self
end

recipes.class = TreeCache

return recipes
