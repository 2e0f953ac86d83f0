--- zklua.recipes.counter — kazoo's Counter.
--
--   local c = zk:Counter("/app/hits")              -- int counter, default 0
--   c:add(2); c:sub(1); c = c + 5                  -- c.value, c.pre_value, c.post_value
--   local f = zk:Counter("/app/load", 1.0)         -- float counter ("3.5")
--   local k = zk:Counter("/app/n", 0, { support_curator = true }) -- curator's SharedCount
--   local g = zk:Counter("/app/g", 1, { float = true })  -- a float counter under LuaJIT too
--
-- The state machine is C (src/recipes/counter.c); the node and its data are kazoo's, so kazoo
-- and zklua processes share a counter: data = the ASCII repr of the value ("3" for an int
-- counter, never "3.0"; "3.5" for a float one), empty data = the default, and with
-- support_curator a 4-byte big-endian signed int.  An update is a set at the version read,
-- read again and retried on BadVersion, so concurrent adds sum exactly.
--
-- * The counter's type follows default: an integer default makes an int counter, which
--   takes integers only (add(1.5) raises BadArgumentsError before anything is sent, as kazoo
--   raises TypeError); a float default makes a float counter (an integer delta is converted;
--   kazoo would raise TypeError).  support_curator needs an integer default; its values must
--   fit in 32 bits.  LuaJIT's numbers have no integer subtype: there an integral default
--   (1.0 too) makes an int counter, and opts.float = true makes a float counter in any case.
-- * Data that is not a value of the counter's type raises KazooException (kazoo: ValueError);
--   a sum that overflows 64 bits (32 for curator) raises BadArgumentsError and nothing is
--   written.
-- * SUSPENDED (connection lost, session alive): add/value wait for the reconnection and go
--   on.  A set whose reply was lost counts as applied when the node then holds exactly what
--   it wrote at exactly the next version (kazoo re-adds blindly).
-- * LOST (session expired): the operation under way starts again on the new session; the
--   counter is a persistent node, so nothing is lost.  stop()/close() during an operation
--   raises ConnectionClosedError.
-- * Waiting uses the client's handler, so callbacks and other clients keep running.
local core = require "zklua.core"
local errors = require "zklua.errors"
local check = require "zklua.check"
local compat = require "zklua.compat"

local recipes = {}

local Counter = { __name = "zklua.Counter" }

local function usable(client, fname)
  return client:_usable_session(fname)
end

-- Runs one read or add in C and waits for it; returns pre, post.
local function run(self, fname, add, delta)
  usable(self.client, fname)
  self.client:_check_wait() -- a coroutine handler that cannot wait here raises before the add
  local ud, client = self._counter, self.client
  if ud:phase() == "busy" then -- an earlier call interrupted in its wait: let it finish
    client.handler.wait(function() return ud:phase() ~= "busy" or not client._session end)
  end
  local started, why = ud:start(add, delta)
  if not started then
    errors.raise(why == "busy" and errors.KazooException or errors.ConnectionClosedError,
                 fname .. ": cannot start (" .. why .. ")", self.path)
  end
  client.handler.wait(function() return ud:phase() ~= "busy" or not client._session end)
  if ud:phase() == "busy" then
    errors.raise(errors.ConnectionClosedError, fname .. ": the client was closed", self.path)
  end
  local outcome, rc = ud:outcome()
  if outcome == "ok" then return ud:pre(), ud:post() end
  if outcome == "bad_data" then
    errors.raise(errors.KazooException, fname .. ": the data of " .. self.path ..
                 " is not a value of this " .. self._kind .. " counter", self.path)
  elseif outcome == "overflow" then
    errors.raise(errors.BadArgumentsError, fname .. ": the sum does not fit in a " ..
                 (self._kind == "curator" and "32" or "64") .. "-bit integer", self.path)
  end
  if rc == -116 or rc == -112 then -- ZCLOSING (stopped) / ZSESSIONEXPIRED
    errors.raise(errors.ConnectionClosedError, fname .. ": the client was stopped", self.path)
  end
  error(errors.from_code(rc, self.path), 0)
end

local function delta_of(self, fname, n)
  if type(n) ~= "number" then
    check.fail(fname, "value", "value must be a number (got " .. type(n) .. ")")
  end
  if self._kind == "float" then return n + 0.0 end
  if not compat.is_integer(n) then
    check.fail(fname, "value", "value must be an integer for an int counter (got " ..
               tostring(n) .. ")")
  end
  return n
end

local fields = {
  value = function(self)
    local _, post = run(self, "value", false)
    return post
  end,
}

function Counter.__index(self, key)
  local field = fields[key]
  if field then return field(self) end
  return Counter[key]
end

--- add(n) -> self: adds n atomically; pre_value and post_value hold the values around it.
function Counter:add(n)
  local delta = delta_of(self, "add", n)
  self.pre_value, self.post_value = nil, nil
  self.pre_value, self.post_value = run(self, "add", true, delta)
  return self
end

--- sub(n) -> self: adds -n.
function Counter:sub(n)
  local delta = delta_of(self, "sub", n)
  if self._kind ~= "float" and delta == compat.mininteger then
    check.fail("sub", "value", "value is too small to negate")
  end
  self.pre_value, self.post_value = nil, nil
  self.pre_value, self.post_value = run(self, "sub", true, -delta)
  return self
end

Counter.__add = function(self, n) return self:add(n) end
Counter.__sub = function(self, n) return self:sub(n) end

function Counter.__tostring(self)
  return string.format("zklua.Counter(%s, %s)", self.path, self._kind)
end

function recipes.Counter(client, path, default, opts)
  local fname = "Counter"
  check.path(fname, path)
  if default == nil then default = 0 end
  if type(default) ~= "number" then
    check.fail(fname, "default", "default must be a number (got " .. type(default) .. ")")
  end
  opts = check.options(fname, opts, { support_curator = "boolean", float = "boolean" },
                       "opts") or {}
  local curator = opts.support_curator
  if curator ~= nil then curator = check.flag(fname, curator, "support_curator") end
  local kind = (compat.is_integer(default) and not opts.float) and "int" or "float"
  if curator then
    if kind ~= "int" then
      check.fail(fname, "default", "when support_curator is enabled the default must be an integer")
    end
    if default < -2147483648 or default > 2147483647 then
      check.fail(fname, "default", "a curator counter's default must fit in 32 bits")
    end
    kind = "curator"
  end
  local session = usable(client, fname)
  local ud = core.counter(session, path, kind, default)
  return setmetatable({ client = client, path = path, default = default,
                        support_curator = curator and true or false, _kind = kind,
                        _counter = ud }, Counter)
end

recipes.class = Counter

return recipes
