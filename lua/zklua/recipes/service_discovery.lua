--- zklua.recipes.service_discovery — Curator x-discovery's ServiceDiscovery: services register
-- their instances in ZooKeeper, clients find them; Java (Curator, Spring Cloud Zookeeper) and
-- zklua processes see each other's instances.
--
--   local sd = zk:ServiceDiscovery("/services")
--   local me = sd:register{name = "api", address = "10.0.0.7", port = 8080}
--   sd:query_for_names()               -- {"api", ...} (sorted)
--   sd:query_for_instances("api")      -- {instance, ...} (sorted by id)
--   sd:query_for_instance("api", me.id) -- instance or nil
--   me.payload = "v2"; sd:update(me)
--   sd:unregister(me)                  -- or sd:unregister(me.id)
--   sd:ServiceCache("api"), sd:ServiceProvider("api", opts)  (service_cache.lua,
--   service_provider.lua)
--   sd:close()                         -- unregisters every instance registered through sd
--
-- Layout and bytes are Curator's: instance <id> of service <name> is the znode
-- <base>/<name>/<id>, its data the JSON Curator's JsonInstanceSerializer writes (the C codec
-- src/recipes/service_instance.h states the bytes).  An instance is a table:
--   name, id (default: a random UUID, as Curator's builder), address, port, ssl_port,
--   payload (a string) or payload_json (JSON text: a Java object payload with its "@class";
--   instances read back carry one of the two, as their payload is a JSON string or not),
--   registration_time_utc (ms; default now), service_type ("DYNAMIC" (default): an ephemeral
--   znode, "DYNAMIC_SEQUENTIAL", "STATIC" or "PERMANENT": persistent), uri_spec (Curator's
--   template, e.g. "{scheme}://{address}:{port}"), enabled (default true).
-- opts of ServiceDiscovery: with_enabled = true writes the "enabled" member too (Curator's
-- JsonInstanceSerializer(cls, false)); by default it is left out as Curator 5 does, so Curator
-- 4 readers accept the bytes.
--
-- What the session does to it:
-- * SUSPENDED (connection loss): nothing; the instances' ephemeral znodes live while the
--   session does.  A call made meanwhile raises ConnectionLoss.
-- * LOST (session expired): the ephemeral znodes are gone; every instance registered through
--   this object is registered again (delete-then-create, as Curator) once the new session is
--   CONNECTED, with its latest data.  A re-registration that fails on the connection is tried
--   again at the next CONNECTED; any other failure is logged and tried again then too.
-- * register/update/unregister/query_* are plain ZooKeeper calls: they wait at most the
--   client's timeout, end with ConnectionClosedError on stop(), and raise what the server said.
-- * Sharing among coroutines: safe; each call is independent, and the registry of instances is
--   only touched between waits.
local check = require "zklua.check"
local core = require "zklua.core"
local errors = require "zklua.errors"
local Future = require "zklua.future"

local M = {}

local ServiceDiscovery = { __name = "zklua.ServiceDiscovery" }
ServiceDiscovery.__index = ServiceDiscovery

local INSTANCE_FIELDS = {
  name = "string", id = "string", address = "string", port = "number", ssl_port = "number",
  payload = "string", payload_json = "string", registration_time_utc = "number",
  service_type = "string", uri_spec = "string", enabled = "boolean",
}

local function check_segment(fname, what, value)
  if type(value) ~= "string" or value == "" or value:find("/", 1, true) or value == "." or
     value == ".." then
    check.fail(fname, what, what .. " must be a non-empty string without '/' (got " ..
               (type(value) == "string" and string.format("%q", value) or type(value)) .. ")")
  end
  return value
end

-- A copy of instance with Curator's builder defaults, and its znode bytes.
local function prepare(self, fname, instance)
  if type(instance) ~= "table" then
    check.fail(fname, "instance", "instance must be a table (got " .. type(instance) .. ")")
  end
  check.options(fname, instance, INSTANCE_FIELDS, "instance")
  local copy = {}
  for k, v in pairs(instance) do copy[k] = v end
  check_segment(fname, "name", copy.name)
  copy.id = copy.id or core.service_instance_id()
  check_segment(fname, "id", copy.id)
  copy.registration_time_utc = copy.registration_time_utc or math.floor(core.utcnow() * 1000)
  copy.service_type = copy.service_type or "DYNAMIC"
  if copy.enabled == nil then copy.enabled = true end
  local bytes, field, message = core.service_instance_encode(copy, self._with_enabled)
  if not bytes then check.fail(fname, field, message) end
  return copy, bytes
end

function ServiceDiscovery:_path_for(name, id)
  return self.base_path .. "/" .. name .. (id and ("/" .. id) or "")
end

-- Creates entry's znode (and its parents); a node already there is deleted and created again
-- (Curator: "must delete then re-create so that watchers fire"), once.  A future of the path.
function ServiceDiscovery:_create(entry)
  local client, result = self.client, Future.new(self.client.handler)
  local t = entry.instance.service_type
  local opts = { makepath = true, ephemeral = (t == "DYNAMIC" or t == "DYNAMIC_SEQUENTIAL"),
                 sequence = (t == "DYNAMIC_SEQUENTIAL") }
  local path = self:_path_for(entry.instance.name, entry.instance.id)
  local function settle(attempt)
    if attempt.exception then return result:set_exception(attempt.exception) end
    entry.path = attempt.value
    result:set(attempt.value)
  end
  result:_chain(client:create_async(path, entry.bytes, opts), function(first)
    if not errors.is(first.exception, errors.NodeExistsError) then return settle(first) end
    result:_chain(client:delete_async(path), function(deleted)
      if deleted.exception and not errors.is(deleted.exception, errors.NoNodeError) then
        return result:set_exception(deleted.exception)
      end
      result:_chain(client:create_async(path, entry.bytes, opts), settle)
    end)
  end)
  return result
end

--- register(instance) -> the instance registered (a copy with its id and defaults filled).
-- Registering an id again (through this object) replaces its znode with the new data.
function ServiceDiscovery:register(instance)
  local copy, bytes = prepare(self, "register", instance)
  self.client:_check_wait()
  local entry = self._entries[copy.id] or {}
  entry.instance, entry.bytes, entry.pending = copy, bytes, false
  self._entries[copy.id] = entry
  local ok, err = pcall(self.client._result, self.client, self:_create(entry))
  if not ok then
    entry.pending = true -- not known to exist: a later CONNECTED (re)creates it
    error(err, 0)
  end
  return copy
end

local function entry_of(self, fname, instance)
  local id = type(instance) == "table" and instance.id or instance
  if type(id) ~= "string" then
    check.fail(fname, "instance", "instance must be a registered instance or its id (got " ..
               type(instance) .. ")")
  end
  return self._entries[id], id
end

--- update(instance): writes the instance's new data (it must have been registered through
-- this object: else KazooException "service not registered").
function ServiceDiscovery:update(instance)
  local entry, id = entry_of(self, "update", instance)
  if not entry then
    errors.raise(errors.KazooException, "update: service not registered: " .. id)
  end
  local copy, bytes = prepare(self, "update", instance)
  if copy.name ~= entry.instance.name then
    check.fail("update", "name", "name cannot change (registered as " .. entry.instance.name .. ")")
  end
  entry.instance, entry.bytes = copy, bytes
  self.client:set(entry.path or self:_path_for(copy.name, copy.id), bytes)
  return copy
end

--- unregister(instance or id): deletes its znode (gone already: fine) and forgets it.
function ServiceDiscovery:unregister(instance)
  local entry, id = entry_of(self, "unregister", instance)
  if not entry then return end
  self._entries[id] = nil
  local ok, err = pcall(self.client.delete, self.client,
                        entry.path or self:_path_for(entry.instance.name, id))
  if not ok and not errors.is(err, errors.NoNodeError) then error(err, 0) end
end

--- query_for_names() -> the services' names, sorted ({} when the base path is missing).
function ServiceDiscovery:query_for_names()
  local ok, names = pcall(self.client.get_children, self.client, self.base_path)
  if not ok then
    if errors.is(names, errors.NoNodeError) then return {} end
    error(names, 0)
  end
  table.sort(names)
  return names
end

local function decode(self, path, data)
  local instance, why = core.service_instance_decode(data or "")
  if not instance then
    self.client:_log("WARN", "ServiceDiscovery: " .. path .. " is not a service instance: " .. why)
  end
  return instance
end

--- query_for_instances(name) -> the instances of name, sorted by id ({} when none).  A znode
-- whose data is not an instance is left out (and logged).
function ServiceDiscovery:query_for_instances(name)
  check_segment("query_for_instances", "name", name)
  local client, parent = self.client, self:_path_for(name)
  local ok, ids = pcall(client.get_children, client, parent)
  if not ok then
    if errors.is(ids, errors.NoNodeError) then return {} end
    error(ids, 0)
  end
  table.sort(ids)
  local reads = {}
  for i, id in ipairs(ids) do reads[i] = client:get_async(parent .. "/" .. id) end
  local out = {}
  for i, read in ipairs(reads) do
    local got, data = pcall(client._result, client, read)
    if got then
      out[#out + 1] = decode(self, parent .. "/" .. ids[i], data)
    elseif not errors.is(data, errors.NoNodeError) then
      error(data, 0)
    end
  end
  return out
end

--- query_for_instance(name, id) -> the instance, or nil when there is none.
function ServiceDiscovery:query_for_instance(name, id)
  check_segment("query_for_instance", "name", name)
  check_segment("query_for_instance", "id", id)
  local path = self:_path_for(name, id)
  local ok, data = pcall(self.client.get, self.client, path)
  if not ok then
    if errors.is(data, errors.NoNodeError) then return nil end
    error(data, 0)
  end
  return decode(self, path, data)
end

-- The session's news: LOST marks every instance to register again; CONNECTED does it.
function ServiceDiscovery:_on_state(state)
  if self._closed then return true end -- removes this listener
  if state == "LOST" then
    for _, entry in pairs(self._entries) do entry.pending = true end
  elseif state == "CONNECTED" then
    for id, entry in pairs(self._entries) do
      if entry.pending then
        entry.pending = false
        local function failed(why)
          if self._entries[id] ~= entry then return end -- unregistered meanwhile
          entry.pending = true
          self.client:_log("WARN", "ServiceDiscovery: registering " .. id .. " again failed: " ..
                           tostring(why) .. " (tried again when CONNECTED)")
        end
        local ok, made = pcall(self._create, self, entry)
        if ok then
          made:rawlink(function(done) if done.exception then failed(done.exception) end end)
        else
          failed(made)
        end
      end
    end
  end
end

--- close(): unregisters every instance registered through this object (a failure is logged)
-- and stops registering them again.
function ServiceDiscovery:close()
  if self._closed then return end
  self._closed = true
  self.client:remove_listener(self._listener)
  for id in pairs(self._entries) do
    local ok, err = pcall(self.unregister, self, id)
    if not ok then
      self.client:_log("WARN", "ServiceDiscovery: unregistering " .. id .. ": " .. tostring(err))
    end
  end
end

--- A ServiceCache of the service name (zklua.recipes.service_cache).
function ServiceDiscovery:ServiceCache(name)
  return require("zklua.recipes.service_cache").new(self, name)
end

--- A ServiceProvider of the service name (zklua.recipes.service_provider).
function ServiceDiscovery:ServiceProvider(name, opts)
  return require("zklua.recipes.service_provider").new(self, name, opts)
end

function ServiceDiscovery.__tostring(self)
  return "zklua.ServiceDiscovery(" .. self.base_path .. ")"
end

function M.ServiceDiscovery(client, base_path, opts)
  check.path("ServiceDiscovery", base_path, "base_path")
  opts = check.options("ServiceDiscovery", opts, { with_enabled = "boolean" })
  local self = setmetatable({ client = client, base_path = base_path == "/" and "" or base_path,
                              _with_enabled = opts.with_enabled == true, _entries = {} },
                            ServiceDiscovery)
  self._listener = function(state) return self:_on_state(state) end
  client:add_listener(self._listener)
  return self
end

M.class = ServiceDiscovery

return M
