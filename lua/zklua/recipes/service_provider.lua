--- zklua.recipes.service_provider — Curator x-discovery's ServiceProvider: one instance of a
-- service per call, from a ServiceCache, by a strategy, skipping instances reported failing.
--
--   local provider = sd:ServiceProvider("api", {strategy = "round_robin"})
--   provider:start(timeout)                -- starts its ServiceCache (see service_cache.lua)
--   local inst = provider:get_instance()   -- an instance, or nil when none is usable
--   local inst = provider:get_instance(key) -- with a key strategy: the key's instance
--   provider:note_error(inst)              -- the caller failed to reach inst
--   provider:get_all_instances()           -- the usable ones, sorted by id
--   provider:close()
--
-- opts (all optional):
--   strategy        "round_robin" (default, Curator's), "random", "sticky" (Curator's: the
--                   same instance while it stays usable, picked by sticky_base), or a key
--                   strategy "consistent_hash" | "rendezvous" (the C partition strategies of
--                   src/recipes/partitioning/strategy_*.c: the same key goes to the same instance on every
--                   worker and process; when that instance goes, only its keys move)
--   sticky_base     the strategy sticky picks with: "round_robin" (default) or "random"
--   vnodes          consistent_hash's points per instance (default 160)
--   down_threshold  Curator's DownInstancePolicy: an instance with this many note_error()
--   down_timeout    within down_timeout seconds is skipped until down_timeout seconds after
--                   its first error (defaults 2 and 30, Curator's)
--   cache           a started ServiceCache of the service to use (default: a new one)
--   keep_last       seconds (default 0: off; zklua's, not Curator's): when the cache's list
--                   of instances goes empty (the mass expiry of registrars' old sessions, a
--                   registration being replaced, the last instance leaving), the provider
--                   goes on with the instances it knew before (before the removals that
--                   emptied it; removals less than a second apart count as one) for up to
--                   this long, and provider.stale is true meanwhile; a registration ends it
-- Usable instances: enabled ones (Curator's filter) not held down.  A key strategy given no
-- key picks by round robin.  get_instance never waits and never talks to ZooKeeper: nginx's
-- balancer_by_lua calls it.  SUSPENDED and LOST act through the cache (its instances are
-- kept while disconnected).  Sharing among coroutines: safe (no call waits but start).
local check = require "zklua.check"
local core = require "zklua.core"

local M = {}

local ServiceProvider = { __name = "zklua.ServiceProvider" }
ServiceProvider.__index = ServiceProvider

local STRATEGIES = { round_robin = true, random = true, sticky = true, consistent_hash = true,
                     rendezvous = true }
local KEY_STRATEGIES = { consistent_hash = true, rendezvous = true }

local OPTIONS = { strategy = "string", sticky_base = "string", vnodes = "number",
                  down_threshold = "number", down_timeout = "number", cache = "table",
                  keep_last = "number" }

-- Forgets errors older than down_timeout, at most every down_timeout / 2 (Curator's purge).
local function purge(self, now)
  if now - self._last_purge < self.down_timeout / 2 then return end
  self._last_purge = now
  for id, status in pairs(self._down) do
    if now - status.since >= self.down_timeout then
      self._down[id] = nil
      self._down_count = self._down_count - 1
      self._down_version = self._down_version + 1
    end
  end
end

-- Removals less than this many seconds apart count as one (the server expires sessions in
-- ticks; the cache hears their znodes go one by one): keep_last keeps the list from before.
local BURST = 1

-- The cache changed: remember the list from before the removals that may empty it, and when
-- it went empty (keep_last).
local function cache_changed(self)
  local list, previous, now = self.cache:_list(), self._current, core.monotonic()
  if previous and #list < #previous then -- a removal
    if not self._burst_at or now - self._burst_at >= BURST then
      self._burst_at, self._last_list = now, previous
    end
  else
    self._burst_at, self._last_list = nil, list
  end
  self._current = list
  if #list > 0 then
    self._emptied_at = nil
  elseif self._last_list and #self._last_list > 0 and not self._emptied_at then
    self._emptied_at = now
  end
end

--- The instances known (sorted by id; callers must not change the array): the cache's, or
-- while stale (see keep_last) the last ones it had; and whether they are those last ones.
function ServiceProvider:_known()
  local list = self.cache:_list()
  local emptied = self._emptied_at
  if #list > 0 or not emptied then return list, false end
  if core.monotonic() - emptied < self.keep_last then return self._last_list, true end
  self._last_list, self._emptied_at = nil, nil -- kept long enough
  return list, false
end

--- Seconds since the cache's list went empty while the last instances are kept, else nil.
function ServiceProvider:stale_for()
  local _, stale = self:_known()
  return stale and core.monotonic() - self._emptied_at or nil
end

--- Whether instance id is held down (note_error) and skipped.
function ServiceProvider:is_down(id)
  local status = self._down[id]
  return status ~= nil and status.count >= self.down_threshold
end

--- The usable instances (enabled, not down), sorted by id; the same table until the cache or
-- the down set changes (callers must not change it).
function ServiceProvider:get_all_instances()
  local cache = self.cache
  if self._down_count > 0 then purge(self, core.monotonic()) end -- (next() stops LuaJIT's JIT)
  local known, stale = cache:_list(), false
  if #known == 0 and self._emptied_at then known, stale = self:_known() end
  if self._usable_version == cache.version and self._usable_down == self._down_version and
     self.stale == stale then
    return self._usable
  end
  self.stale = stale
  local usable, ids = {}, {}
  for _, instance in ipairs(known) do
    local status = self._down[instance.id]
    if instance.enabled and not (status and status.count >= self.down_threshold) then
      usable[#usable + 1] = instance
      ids[#ids + 1] = instance.id
    end
  end
  self._usable, self._usable_ids = usable, ids
  self._usable_version, self._usable_down = cache.version, self._down_version
  return usable
end

local function round_robin(self, list)
  local i = self._index % #list + 1
  self._index = i
  return list[i]
end

local function by_key(self, list, key)
  local ids = self._usable_ids
  local owners = core.strategy(self.strategy, ids, { key }, nil, nil, self.vnodes)
  for i, id in ipairs(ids) do
    local items = owners[id]
    if items and items[1] then return list[i] end
  end
  return nil
end

--- The instance of list (get_all_instances()'s, not empty) for key, by the strategy.
function ServiceProvider:_pick(list, key)
  local strategy = self.strategy
  if strategy == "round_robin" then return round_robin(self, list) end
  if KEY_STRATEGIES[strategy] and key ~= nil then
    if type(key) ~= "string" then key = tostring(key) end
    return by_key(self, list, key)
  elseif strategy == "random" then
    return list[math.random(#list)]
  elseif strategy == "sticky" then
    local mine = self._sticky
    if mine then
      for _, instance in ipairs(list) do
        if instance.id == mine then return instance end
      end
    end
    local picked = self.sticky_base == "random" and list[math.random(#list)] or
                   round_robin(self, list)
    self._sticky = picked.id
    self.instance_number = self.instance_number + 1
    return picked
  end
  return round_robin(self, list)
end

--- get_instance(key) -> an instance, or nil when no usable instance is there.
function ServiceProvider:get_instance(key)
  local list = self:get_all_instances()
  if #list == 0 then return nil end
  return self:_pick(list, key)
end

--- note_error(instance or id): one more error for it (see down_threshold).
function ServiceProvider:note_error(instance)
  local id = type(instance) == "table" and instance.id or instance
  if type(id) ~= "string" then
    check.fail("note_error", "instance", "instance must be an instance or its id")
  end
  local now = core.monotonic()
  purge(self, now)
  local status = self._down[id]
  if not status then
    status = { since = now, count = 0 }
    self._down[id] = status
    self._down_count = self._down_count + 1
  end
  status.count = status.count + 1
  self._down_version = self._down_version + 1
end

--- start(timeout): starts the provider's own cache (a cache given in opts is not started).
function ServiceProvider:start(timeout)
  if self._own_cache then
    self.cache:start(timeout)
    -- the first load sends no CACHE_CHANGED: the list keep_last starts from
    if self.keep_last > 0 then cache_changed(self) end
  end
end

--- close(): closes the provider's own cache.
function ServiceProvider:close()
  if self._own_cache then self.cache:close() end
end

function ServiceProvider.__tostring(self)
  return "zklua.ServiceProvider(" .. self.cache.path .. ", " .. self.strategy .. ")"
end

local function positive(fname, opts, field, default)
  local v = opts[field]
  if v == nil then return default end
  if v ~= v or v <= 0 or v == math.huge then
    check.fail(fname, field, field .. " must be a finite number > 0")
  end
  return v
end

function M.new(discovery, name, opts)
  local fname = "ServiceProvider"
  opts = check.options(fname, opts, OPTIONS)
  local strategy = opts.strategy or "round_robin"
  if not STRATEGIES[strategy] then
    check.fail(fname, "strategy", "strategy must be round_robin, random, sticky, " ..
               "consistent_hash or rendezvous (got " .. string.format("%q", strategy) .. ")")
  end
  local sticky_base = opts.sticky_base or "round_robin"
  if sticky_base ~= "round_robin" and sticky_base ~= "random" then
    check.fail(fname, "sticky_base", "sticky_base must be round_robin or random")
  end
  local keep_last = opts.keep_last
  if keep_last ~= nil and not (keep_last >= 0 and keep_last < math.huge) then
    check.fail(fname, "keep_last", "keep_last must be a finite number >= 0")
  end
  local vnodes = positive(fname, opts, "vnodes", 160)
  if vnodes ~= math.floor(vnodes) or vnodes > 10000 then
    check.fail(fname, "vnodes", "vnodes must be a whole number in 1..10000")
  end
  local cache = opts.cache
  if cache ~= nil and getmetatable(cache) ~= require("zklua.recipes.service_cache").class then
    check.fail(fname, "cache", "cache must be a ServiceCache")
  end
  local self = setmetatable({
    strategy = strategy, sticky_base = sticky_base, vnodes = vnodes,
    down_threshold = positive(fname, opts, "down_threshold", 2),
    down_timeout = positive(fname, opts, "down_timeout", 30),
    keep_last = opts.keep_last or 0, stale = false,
    cache = cache or discovery:ServiceCache(name), _own_cache = cache == nil,
    _down = {}, _down_count = 0, _down_version = 0, _last_purge = core.monotonic(), _index = 0,
    _usable = {}, _usable_ids = {}, _usable_version = -1, _usable_down = -1,
    instance_number = -1,
  }, ServiceProvider)
  if self.keep_last > 0 then
    self.cache:listen(function(event)
      if event.type == "CACHE_CHANGED" then cache_changed(self) end
    end)
    cache_changed(self) -- a cache given already started
  end
  return self
end

M.class = ServiceProvider

return M
