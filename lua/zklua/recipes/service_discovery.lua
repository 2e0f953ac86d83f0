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
--   local sdm = require "zklua.recipes.service_discovery"
--   sdm.build_uri(nil, me)             -- Curator's UriSpec.build: me.uri_spec filled in
--
-- Layout and bytes are Curator's: instance <id> of service <name> is the znode
-- <base>/<name>/<id>, its data the JSON Curator's JsonInstanceSerializer writes (the C codec
-- src/recipes/service_instance.h states the bytes).  An instance is a table:
--   name, id (default: a random UUID, as Curator's builder), address, port, ssl_port,
--   payload (a string) or payload_json (JSON text: a Java object payload with its "@class";
--   instances read back carry one of the two, as their payload is a JSON string or not),
--   registration_time_utc (ms; default now), service_type ("DYNAMIC" (default): an ephemeral
--   znode, "STATIC" or "PERMANENT": persistent; "DYNAMIC_SEQUENTIAL": an ephemeral sequential
--   znode <base>/<name>/<id><sequence>, as Curator, whose JSON "id" stays <id>), uri_spec
--   (Curator's template, e.g. "{scheme}://{address}:{port}"), enabled (default true).
-- A DYNAMIC_SEQUENTIAL registration is an ephemeral sequential PersistentNode: its name is
-- given by its first create and kept (re-made under it after a deletion or an expiry);
-- update and unregister act on that node (Curator's act on <base>/<name>/<id>, which is not
-- it: a Curator bug), and query_for_instance(name, id) finds it too (Curator's reads
-- <base>/<name>/<id> only, and finds none).
-- opts of ServiceDiscovery: with_enabled = true writes the "enabled" member too (Curator's
-- JsonInstanceSerializer(cls, false)); by default it is left out as Curator 5 does, so Curator
-- 4 readers accept the bytes.
--
-- Each registered instance is a PersistentNode (src/recipes/persistent_node.h, the C state
-- machine): register starts it, update is its set_data, unregister its stop (the znode
-- deleted).  This layer builds the bytes (the C codec) and maps the calls.  A node already at
-- the path when registering (left by an earlier process, or another client's) is taken over:
-- the data written over it.
--
-- What the session does to it:
-- * SUSPENDED (connection loss): nothing; the instances' ephemeral znodes live while the
--   session does.  register/update made meanwhile raise ConnectionLoss and are still kept:
--   the znode is written with the latest data once CONNECTED.
-- * LOST (session expired): the ephemeral znodes are gone; the PersistentNodes create them
--   again, with their latest data, once the new session is CONNECTED (no delete-then-create
--   then: nothing is there); a persistent one is looked at and re-created if it went.  Anyone
--   deleting an instance's znode meanwhile sees it come back too.
-- * zk:stop() ends the keeping; after zk:start() the next CONNECTED starts every instance's
--   node again, as it makes the node of a register that raised before it could be made (the
--   session had expired): registered instances are kept until unregister or close.
-- * register/update wait at most the client's timeout for the znode to be written (TimeoutError
--   after it: still kept), unregister at most that for the delete; all end with
--   ConnectionClosedError on stop() and raise what the server refused (NOAUTH...).
--   query_* are plain ZooKeeper calls.
-- * Sharing among coroutines: safe; each call is independent, and the registry of instances is
--   only touched between waits.
local check = require "zklua.check"
local core = require "zklua.core"
local errors = require "zklua.errors"
local base = require "zklua.recipes.base"

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

-- Stops keeping entry's node (at once, whatever the session) and waits at most timeout
-- seconds for its delete (gone already: fine).
local function drop(entry, timeout)
  if not entry.node then return end
  entry.node:_stop_nowait()
  entry.node:stop(timeout)
end

-- Makes entry's PersistentNode when it has none yet, and starts it when it is not kept (new,
-- or ended by the client's stop or by an error); nothing when it runs.
function ServiceDiscovery:_keep(entry)
  local node, instance = entry.node, entry.instance
  if not node then
    local kind = instance.service_type
    node = self.client:PersistentNode(self:_path_for(instance.name, instance.id), entry.bytes,
                                      { ephemeral = kind == "DYNAMIC" or
                                                    kind == "DYNAMIC_SEQUENTIAL",
                                        sequential = kind == "DYNAMIC_SEQUENTIAL",
                                        container = false })
    entry.node = node
  end
  local phase = node.phase
  if phase == "idle" or phase == "failed" then node:start() end
  return node
end

--- register(instance) -> the instance registered (a copy with its id and defaults filled).
-- Registering an id again (through this object) deletes its znode and creates it again with
-- the new data (Curator: "must delete then re-create so that watchers fire").
function ServiceDiscovery:register(instance)
  local copy, bytes = prepare(self, "register", instance)
  local client = self.client
  client:_check_wait()
  local deadline = base.deadline(nil, client._timeout)
  local old = self._entries[copy.id]
  local entry = { instance = copy, bytes = bytes }
  self._entries[copy.id] = entry -- from now on kept: made at the next CONNECTED if not now
  if old then drop(old, base.remaining(deadline)) end
  self:_keep(entry):_wait_written("register", base.remaining(deadline))
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
-- this object: else KazooException "service not registered"); the data kept from now on.
function ServiceDiscovery:update(instance)
  local entry, id = entry_of(self, "update", instance)
  if not entry then
    errors.raise(errors.KazooException, "update: service not registered: " .. id)
  end
  local copy, bytes = prepare(self, "update", instance)
  if copy.name ~= entry.instance.name then
    check.fail("update", "name", "name cannot change (registered as " .. entry.instance.name .. ")")
  end
  if copy.service_type ~= entry.instance.service_type then
    check.fail("update", "service_type", "service_type cannot change (registered as " ..
               entry.instance.service_type .. "; register it again)")
  end
  self.client:_check_wait()
  entry.instance, entry.bytes = copy, bytes
  if entry.node then entry.node:set_data(bytes) end
  self:_keep(entry):_wait_written("update", self.client._timeout)
  return copy
end

--- unregister(instance or id): stops keeping its znode, deletes it (gone already: fine) and
-- forgets it.
function ServiceDiscovery:unregister(instance)
  local entry, id = entry_of(self, "unregister", instance)
  if not entry then return end
  self.client:_check_wait()
  self._entries[id] = nil
  drop(entry)
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

-- The instance id of service name registered DYNAMIC_SEQUENTIAL: the <id><10 digits> child
-- holding it (the first, in name order), or nil.
local function sequential_instance(self, name, id)
  local client, parent = self.client, self:_path_for(name)
  local ok, children = pcall(client.get_children, client, parent)
  if not ok then
    if errors.is(children, errors.NoNodeError) then return nil end
    error(children, 0)
  end
  table.sort(children)
  for _, child in ipairs(children) do
    if #child == #id + 10 and child:sub(1, #id) == id and child:sub(#id + 1):match("^%d+$") then
      local got, data = pcall(client.get, client, parent .. "/" .. child)
      if not got and not errors.is(data, errors.NoNodeError) then error(data, 0) end
      local instance = got and decode(self, parent .. "/" .. child, data)
      if instance and instance.id == id then return instance end
    end
  end
  return nil
end

--- query_for_instance(name, id) -> the instance, or nil when there is none.  An instance
-- registered DYNAMIC_SEQUENTIAL (<base>/<name>/<id><sequence>) is found too.
function ServiceDiscovery:query_for_instance(name, id)
  check_segment("query_for_instance", "name", name)
  check_segment("query_for_instance", "id", id)
  local path = self:_path_for(name, id)
  local ok, data = pcall(self.client.get, self.client, path)
  if not ok then
    if errors.is(data, errors.NoNodeError) then return sequential_instance(self, name, id) end
    error(data, 0)
  end
  return decode(self, path, data)
end

-- CONNECTED: makes or starts again the nodes of instances that are not kept (their register
-- raised before the node could be made, or the client was stopped and started again).  An
-- expired session's nodes are the PersistentNodes' own business.
function ServiceDiscovery:_on_state(state)
  if self._closed then return true end -- removes this listener
  if state ~= "CONNECTED" then return end
  self.client:_callback(function() -- it waits: a user callback, not in the listener
    for id, entry in pairs(self._entries) do
      local ok, err = pcall(self._keep, self, entry)
      if not ok then
        self.client:_log("WARN", "ServiceDiscovery: registering " .. id .. " again failed: " ..
                         tostring(err) .. " (tried again when CONNECTED)")
      end
    end
  end)
end

--- close(): unregisters every instance registered through this object (a failure is logged)
-- and stops registering them again.
function ServiceDiscovery:close()
  if self._closed then return end
  self._closed = true
  local client = self.client
  client:remove_listener(self._listener)
  local deadline = base.deadline(nil, client._timeout)
  local entries = self._entries
  self._entries = {}
  for _, entry in pairs(entries) do -- every delete under way at once
    if entry.node then entry.node:_stop_nowait() end
  end
  for id, entry in pairs(entries) do
    local ok, err = pcall(drop, entry, base.remaining(deadline))
    if not ok then
      client:_log("WARN", "ServiceDiscovery: unregistering " .. id .. ": " .. tostring(err))
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
  base_path = check.kazoo_path("ServiceDiscovery", base_path, "base_path")
  opts = check.options("ServiceDiscovery", opts, { with_enabled = "boolean" })
  local self = setmetatable({ client = client, base_path = base_path == "/" and "" or base_path,
                              _with_enabled = opts.with_enabled == true, _entries = {} },
                            ServiceDiscovery)
  self._listener = function(state) return self:_on_state(state) end
  client:add_listener(self._listener)
  return self
end

--- uri_spec_parts(uri_spec) -> the parts of Curator's UriSpec template, in order: tables
-- {value = text, variable = true|false} ("{scheme}://{address}" -> {scheme, variable},
-- {"://", literal}, {address, variable}); a variable's name is trimmed.  A malformed template
-- ("{" inside a variable, "}" without "{", a variable not closed) raises BadArgumentsError
-- (Curator: IllegalStateException).  The parts are what an instance's JSON "uriSpec" holds.
function M.uri_spec_parts(uri_spec)
  local fname = "uri_spec_parts"
  if type(uri_spec) ~= "string" then
    check.fail(fname, "uri_spec", "uri_spec must be a string (got " .. type(uri_spec) .. ")")
  end
  local parts, inside, i = {}, false, 1
  while i <= #uri_spec do
    local c = uri_spec:sub(i, i)
    if c == "{" then
      if inside then check.fail(fname, "uri_spec", "{ is not allowed inside of a variable") end
      inside, i = true, i + 1
    elseif c == "}" then
      if not inside then check.fail(fname, "uri_spec", "} must be preceded by {") end
      inside, i = false, i + 1
    else
      local j = uri_spec:find("[{}]", i) or #uri_spec + 1
      local token = uri_spec:sub(i, j - 1)
      if inside then token = token:match("^%s*(.-)%s*$") end
      parts[#parts + 1] = { value = token, variable = inside }
      i = j
    end
  end
  if inside then check.fail(fname, "uri_spec", "the last variable is not closed (expected })") end
  return parts
end

-- A variable's value as Curator's StringBuilder appends it (integers without a fraction).
local function uri_text(v)
  if type(v) == "number" and v == math.floor(v) and v > -2^53 and v < 2^53 then
    return string.format("%d", v)
  end
  return tostring(v)
end

--- build_uri(uri_spec, instance, variables) -> the URI Curator's UriSpec.build(instance,
-- variables) makes: each variable of the template replaced by its value, literal parts kept.
-- From instance (optional): name, id, address, port, ssl-port, registration-time-utc,
-- service-type (lower case) — "" when the instance has none — and scheme "https" when it has
-- an ssl_port ("http" otherwise, and without instance); "[" and "]" are "{" and "}" (the
-- template's escapes); variables (optional, a table) add or override values.  A variable
-- with no value is left out.  uri_spec nil: the instance's own uri_spec (Curator's
-- ServiceInstance.buildUriSpec).
function M.build_uri(uri_spec, instance, variables)
  if uri_spec == nil and type(instance) == "table" then uri_spec = instance.uri_spec end
  local parts = M.uri_spec_parts(uri_spec)
  local values = { ["["] = "{", ["]"] = "}", scheme = "http" }
  if instance ~= nil then
    if type(instance) ~= "table" then
      check.fail("build_uri", "instance", "instance must be a table (got " .. type(instance) .. ")")
    end
    local function field(v) if v == nil then return "" end return v end
    values.name, values.id = field(instance.name), field(instance.id)
    values.address, values.port = field(instance.address), field(instance.port)
    values["ssl-port"] = field(instance.ssl_port)
    values["registration-time-utc"] = field(instance.registration_time_utc)
    values["service-type"] = instance.service_type and instance.service_type:lower() or ""
    if instance.ssl_port ~= nil then values.scheme = "https" end
  end
  if variables ~= nil and type(variables) ~= "table" then
    check.fail("build_uri", "variables", "variables must be a table (got " .. type(variables) .. ")")
  end
  for k, v in pairs(variables or {}) do values[k] = v end
  local out = {}
  for _, part in ipairs(parts) do
    if not part.variable then
      out[#out + 1] = part.value
    elseif values[part.value] ~= nil then
      out[#out + 1] = uri_text(values[part.value])
    end
  end
  return table.concat(out)
end

M.class = ServiceDiscovery

return M
