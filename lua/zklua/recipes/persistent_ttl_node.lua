--- zklua.recipes.persistent_ttl_node — Curator's PersistentTtlNode: a node kept present while
-- this client runs, which the server deletes about ttl ms after every client keeping it stopped
-- (or died), with no delete of its own.
--
--   local node = zk:PersistentTtlNode("/workers/w1", 10000, "10.0.0.7")
--   node:start()                              -- returns at once: kept from now on
--   assert(node:wait_for_initial_create(5))   -- true once it exists
--   node:set_data("10.0.0.8")                 -- kept with this data from now on
--   node:stop()                               -- stops keeping it; the server deletes it later
--
-- Layout (Curator 5.4's): the node at path is a CONTAINER holding the data, kept by a
-- PersistentNode (src/recipes/persistent_node.h: re-created with its data when deleted, a
-- missing parent path made of containers), and its child <path>/touch is a
-- PERSISTENT_WITH_TTL node with no data, written every ttl / touch_factor ms
-- (src/recipes/ttl_toucher.h).  While the touches go on, the child lives and so does the
-- container; once they stop, the child expires after ttl ms without a write, and the server
-- deletes the then empty container.  Curator's and zklua's nodes are the same nodes: either
-- keeps the other's alive, and a Curator PersistentTtlNode reads zklua's data.
--
-- * zk:PersistentTtlNode(path, ttl, data, {child = "touch", touch_factor = 2, container = true,
--   acl = ...}): ttl in ms (whole, from 1 to 2^40 - 1); child: the touch node's name; acl:
--   both nodes'.  Options are checked before anything is sent.
-- * start(), wait_for_initial_create(timeout), set_data(data), `data`, `present`, `phase`:
--   the container's, as PersistentNode's.  `touches`: the touches answered so far.
-- * stop(): stops touching and keeping; deletes nothing (Curator's close()).  start() may
--   follow.
-- * SUSPENDED: no touch is sent while disconnected (a tick then does nothing); the container's
--   step under way is redone once reconnected.  A disconnection longer than ttl lets the touch
--   node expire and the server delete the empty container: it is made again, with its data,
--   once reconnected, and touched again.  LOST: both nodes are persistent and nothing is lost
--   with the session; the touches go on on the new session.
-- * Sharing: start/stop/set_data never wait and may be called from any coroutine;
--   wait_for_initial_create waits on its own.
local core = require "zklua.core"
local check = require "zklua.check"
local persistent_node = require "zklua.recipes.persistent_node"

local recipes = {}

local PersistentTtlNode = { __name = "zklua.PersistentTtlNode" }

local fields = {
  present = function(self) return self._node.present end,
  phase = function(self) return self._node.phase end,
  data = function(self) return self._node.data end,
  touches = function(self) return self._toucher:touches() end,
}

function PersistentTtlNode.__index(self, key)
  local field = fields[key]
  if field then return field(self) end
  return PersistentTtlNode[key]
end

function PersistentTtlNode.__tostring(self)
  return string.format("zklua.PersistentTtlNode(%s, %s)", self.path, tostring(self._node))
end

--- Starts keeping the container and touching its child (returns at once).
function PersistentTtlNode:start()
  self._node:start()
  self._toucher:start()
end

--- wait_for_initial_create(timeout) -> true once the container is there (PersistentNode's).
function PersistentTtlNode:wait_for_initial_create(timeout)
  return self._node:wait_for_initial_create(timeout)
end

--- set_data(data): the container's data from now on.
function PersistentTtlNode:set_data(data)
  self._node:set_data(data)
end

--- stop(): stops touching and keeping; the nodes are left to the server (ttl, then the
-- container's clean-up).
function PersistentTtlNode:stop()
  self.client:_usable_session("stop")
  self._toucher:stop()
  self._node:_stop_nowait()
end

local OPTIONS = { child = "string", touch_factor = "number", container = "boolean", acl = "table" }
local TTL_MAX = 0xFFFFFFFFFF -- as create's: 40 bits of milliseconds

function recipes.PersistentTtlNode(client, path, ttl, data, opts)
  local fname = "PersistentTtlNode"
  path = check.kazoo_path(fname, path)
  if path == "/" then check.fail(fname, "path", "the root cannot be a persistent TTL node") end
  if type(ttl) ~= "number" or ttl ~= ttl or ttl < 1 or ttl > TTL_MAX or ttl % 1 ~= 0 then
    check.fail(fname, "ttl", "ttl must be a whole number of milliseconds from 1 to " ..
               string.format("%d", TTL_MAX) .. " (got " .. tostring(ttl) .. ")")
  end
  opts = check.options(fname, opts, OPTIONS)
  local child = opts.child or "touch"
  if child == "" or child:find("/", 1, true) or child == "." or child == ".." then
    check.fail(fname, "child", "option 'child' must be one path segment (got " ..
               string.format("%q", child) .. ")")
  end
  local factor = opts.touch_factor or 2
  if factor ~= factor or factor < 1 or factor % 1 ~= 0 then
    check.fail(fname, "touch_factor", "option 'touch_factor' must be a whole number from 1 " ..
               "(got " .. tostring(factor) .. ")")
  end
  local node = persistent_node.PersistentNode(client, path, data,
                                              { ephemeral = false, container = opts.container,
                                                acl = opts.acl }, true, fname)
  local acl = opts.acl and check.acls(fname, opts.acl) or client._default_acl
  local session = client:_usable_session(fname)
  local interval = math.max(math.floor(ttl / factor), 1)
  local toucher = core.ttl_toucher(session, path .. "/" .. child, math.floor(ttl), interval, acl)
  return setmetatable({ client = client, path = path, ttl = ttl, child_path = path .. "/" .. child,
                        _node = node, _toucher = toucher }, PersistentTtlNode)
end

recipes.class = PersistentTtlNode

return recipes
