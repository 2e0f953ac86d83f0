--- zklua.recipes.counter — kazoo's Counter.
--
--   local c = zk:Counter("/app/hits")              -- int counter, default 0
--   c:add(2); c:sub(1); c = c + 5                  -- c.value, c.pre_value, c.post_value
--   local f = zk:Counter("/app/load", 1.0)         -- float counter ("3.5")
--   local k = zk:Counter("/app/n", 0, { support_curator = true }) -- curator's SharedCount
--   local g = zk:Counter("/app/g", 1, { float = true })  -- a float counter under LuaJIT too
--   local l = zk:Counter("/app/l", 0, { layout = "curator-atomic-long" }) -- DistributedAtomicLong
--
-- The counter is the C state machine of src/recipes/counter.c, on kazoo's node and data
-- format (kazoo and zklua processes share a counter; concurrent adds sum exactly).  Its
-- contract — the data format, BadVersion retries, and what SUSPENDED (connection lost: the
-- operation waits and goes on) and LOST (session expired: it starts again, nothing is lost)
-- do — is stated once, in src/recipes/counter.h.  What this layer adds:
--
-- * The counter's type follows default: an integer default makes an int counter, which
--   takes integers only (add(1.5) raises BadArgumentsError before anything is sent, as kazoo
--   raises TypeError); a float default makes a float counter (an integer delta is converted;
--   kazoo would raise TypeError).  support_curator needs an integer default; its values must
--   fit in 32 bits.  LuaJIT's numbers have no integer subtype: there an integral default
--   (1.0 too) makes an int counter, and opts.float = true makes a float counter in any case.
-- * layout = "curator-atomic-long": Curator 5.4's DistributedAtomicLong (8 bytes, big-endian,
--   in its optimistic mode: a set with the version read; src/recipes/counter.h), so Curator
--   and zklua processes add to one value and read each other's; an int counter (integer
--   default, the seed of a node this counter creates; empty data reads as 0, as Curator).
--   Values are 64-bit: under LuaJIT one beyond 2^53 comes back as int64 cdata.  SUSPENDED,
--   LOST and sharing as for every counter (above and below).  An add retries its BadVersion
--   until done or timed out; Curator's own API on this node (retry counts, succeeded = false,
--   promoted-to-lock, compare-and-set) is zk:AtomicLong (zklua.recipes.atomic_long).
-- * Data that is not a value of the counter's type raises KazooException (kazoo: ValueError);
--   a sum that overflows 64 bits (32 for curator) raises BadArgumentsError and nothing is
--   written.
-- * Timeouts: add(n, timeout), sub(n, timeout), get(timeout) raise TimeoutError after
--   timeout seconds (default: the client's timeout; counter.value uses it); a timed-out add
--   goes on in C and may still be applied, and the next call waits for it to end first.
--   zk:stop()/close() raises ConnectionClosedError, AUTH_FAILED AuthFailedError.
-- * Sharing (zklua.recipes.base): calls from coroutines sharing one counter take turns; add
--   and sub return self, pre, post: the values of that call (the fields show the last one's).
local core = require "zklua.core"
local errors = require "zklua.errors"
local check = require "zklua.check"
local compat = require "zklua.compat"
local base = require "zklua.recipes.base"

local recipes = {}

local Counter = { __name = "zklua.Counter" }

local ATOMIC_LONG = "curator-atomic-long"

local function usable(client, fname)
  return client:_usable_session(fname)
end

-- One read or add in C, with the object's turn: waits for it and returns pre, post.
local function run_in_turn(self, fname, add, delta, timeout, deadline)
  local ud, client = self._counter, self.client
  usable(client, fname)
  -- an earlier call that timed out: its operation goes on in C, let it finish
  base.check_wait(base.wait(self, function() return ud:phase() ~= "busy" end, deadline),
                  errors.TimeoutError, fname, self.path, timeout)
  local started, why = ud:start(add, delta)
  if not started then
    errors.raise(why == "busy" and errors.KazooException or errors.ConnectionClosedError,
                 fname .. ": cannot start (" .. why .. ")", self.path)
  end
  base.check_wait(base.wait(self, function() return ud:phase() ~= "busy" end, deadline),
                  errors.TimeoutError, fname, self.path, timeout,
                  add and "the add (it may still be applied)" or "the read")
  local outcome, rc = ud:outcome()
  if outcome == "ok" then return ud:pre(), ud:post() end
  if outcome == "bad_data" then
    errors.raise(errors.KazooException, fname .. ": the data of " .. self.path ..
                 " is not a value of this " .. self._kind .. " counter", self.path)
  elseif outcome == "overflow" then
    errors.raise(errors.BadArgumentsError, fname .. ": the sum does not fit in a " ..
                 (self._kind == "curator" and "32" or "64") .. "-bit integer (nothing was " ..
                 "written)", self.path)
  end
  base.raise_rc(fname, rc, self.path)
end

-- Runs one read or add (timeout: seconds, nil: the client's timeout); returns pre, post.
local function run(self, fname, add, delta, timeout)
  timeout = check.timeout(fname, timeout)
  usable(self.client, fname)
  self.client:_check_wait() -- a coroutine handler that cannot wait here raises before the add
  if timeout == nil then timeout = self.client._timeout end
  local deadline = base.deadline(timeout)
  return base.serial(self, fname, deadline, false, function()
    base.raise_timeout(errors.TimeoutError, fname, self.path, timeout)
  end, run_in_turn, self, fname, add, delta, timeout, deadline)
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

--- add(n, timeout) -> self, pre, post: adds n atomically; self.pre_value and self.post_value
-- hold the values around it (kazoo's), and so do the second and third results: the values of
-- this call, which a coroutine sharing the counter reads there (the fields show the last
-- call's).  timeout: seconds (nil: the client's timeout); TimeoutError after it.
function Counter:add(n, timeout)
  local delta = delta_of(self, "add", n)
  local pre, post = run(self, "add", true, delta, timeout)
  self.pre_value, self.post_value = pre, post
  return self, pre, post
end

--- sub(n, timeout) -> self, pre, post: adds -n.
function Counter:sub(n, timeout)
  local delta = delta_of(self, "sub", n)
  if self._kind ~= "float" and delta == compat.mininteger then
    check.fail("sub", "value", "value is too small to negate")
  end
  local pre, post = run(self, "sub", true, -delta, timeout)
  self.pre_value, self.post_value = pre, post
  return self, pre, post
end

--- get(timeout) -> the value (counter.value reads it with the client's timeout).
function Counter:get(timeout)
  local _, post = run(self, "get", false, nil, timeout)
  return post
end

Counter.__add = function(self, n) return self:add(n) end
Counter.__sub = function(self, n) return self:sub(n) end

function Counter.__tostring(self)
  return string.format("zklua.Counter(%s, %s)", self.path, self._kind)
end

function recipes.Counter(client, path, default, opts)
  local fname = "Counter"
  path = check.kazoo_path(fname, path)
  if default == nil then default = 0 end
  if type(default) ~= "number" then
    check.fail(fname, "default", "default must be a number (got " .. type(default) .. ")")
  end
  opts = check.options(fname, opts, { support_curator = "boolean", float = "boolean",
                                      layout = "string" }, "opts") or {}
  local curator = opts.support_curator
  if curator ~= nil then curator = check.flag(fname, curator, "support_curator") end
  local kind = (compat.is_integer(default) and not opts.float) and "int" or "float"
  local layout = check.layout(fname, opts.layout, { "kazoo", ATOMIC_LONG },
                              "Curator's SharedCount is support_curator = true")
  if layout == ATOMIC_LONG then
    if curator then
      check.fail(fname, "support_curator", "support_curator (SharedCount, 4 bytes) and layout " ..
                 "= \"" .. ATOMIC_LONG .. "\" (8 bytes) are two layouts: take one")
    end
    if opts.float or kind ~= "int" then
      check.fail(fname, "default", "a " .. ATOMIC_LONG .. " counter holds integers: its " ..
                 "default must be an integer (got " .. tostring(default) .. ")")
    end
    kind = "curator_long"
  elseif curator then
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
  return base.init(setmetatable({ client = client, path = path, default = default,
                                  support_curator = curator and true or false, layout = layout,
                                  _kind = kind,
                                  _counter = ud }, Counter))
end

recipes.class = Counter

return recipes
