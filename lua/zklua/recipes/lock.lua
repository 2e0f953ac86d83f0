--- zklua.recipes.lock — kazoo's Lock, WriteLock and ReadLock.
--
--   local lock = zk:Lock("/app/lock", "worker-1")
--   local mixed = zk:Lock("/app/lock", "worker-1", { "-lock-" })  -- go-zookeeper holders too
--   if lock:acquire(true, 5) then ... lock:release() end   -- LockTimeout after 5 s
--   lock:with(function() ... end)                          -- released even on error
--   lock:on_lost(function(l) ... end)                       -- the session expired
--
-- The lock is the C state machine of src/recipes/lock.c, on kazoo's nodes (kazoo and zklua
-- processes share a lock path).  Its contract — layout, ordering, fencing token, and what
-- SUSPENDED (connection lost: a holder keeps the lock) and LOST (session expired: an ephemeral
-- holder no longer holds it) do — is stated once, in src/recipes/lock.h.  What this layer adds:
--
-- * acquire(blocking = true, timeout = nil, ephemeral = true) -> true, or false when
--   non-blocking and held elsewhere, or when the caller already holds it (kazoo); raises
--   LockTimeout (its node deleted) when timeout seconds pass, CancelledError when cancel()
--   ends it (kazoo's; `cancelled` says one is pending: a cancel with no acquire under way
--   cancels the next one), ConnectionClosedError when the client stops, AuthFailedError on
--   AUTH_FAILED, and a ZooKeeper error that retries cannot fix (after its node is deleted).
--   The timeout never ends an acquire before it has looked at the contenders once, unless
--   the connection is down.
-- * extra_lock_patterns (kazoo's third argument): marks of other implementations' contender
--   nodes, e.g. go-zookeeper's "-lock-" (<anything><mark>-?<10 digits>): such a node blocks
--   this lock (readers too) and is listed by contenders().  Matched literally: a mark with a
--   regular expression character raises BadArgumentsError.
-- * The third argument may instead be an options table {layout = "kazoo" (default) |
--   "curator", container = bool, extra_lock_patterns = {...}}.  layout = "curator": Curator's
--   InterProcessMutex nodes for a Lock (_c_<uuid>-lock-<seq>), InterProcessReadWriteLock's for
--   a ReadLock (_c_<uuid>-__READ__<seq>) and a WriteLock (_c_<uuid>-__WRIT__<seq>), so zklua
--   and Curator processes exclude each other on one path: a writer (either side's) excludes
--   every other holder, readers share.  SUSPENDED, LOST, timeouts and sharing among
--   coroutines are every Lock's (src/recipes/lock.h and below).  container = true makes a missing lock path of
--   container nodes, which the server deletes once the last contender left (default: true
--   with layout = "curator", as Curator; false with kazoo's).
-- * on_lost(fn): fn(lock) runs when a holder learns of LOST (is_acquired turns false);
--   zk:stop() is a LOST too.
-- * release() waits for the delete.  While disconnected it waits at most a session timeout:
--   then an ephemeral lock counts as released (the node goes with the session, or is deleted
--   in the background once reconnected); a persistent one raises ConnectionLoss.
-- * Sharing (zklua.recipes.base): coroutines sharing one lock object queue for it in
--   arrival order and hold it in turn, never two at once; the timeout counts the queueing.
local core = require "zklua.core"
local errors = require "zklua.errors"
local check = require "zklua.check"

local recipes = {}


local Lock = { __name = "zklua.Lock" }

local fields = {
  is_acquired = function(self) return self._lock:is_held() end,
  fencing_token = function(self) return self._lock:fencing_token() end,
  node = function(self) return self._lock:node() end,
}

function Lock.__index(self, key)
  local field = fields[key]
  if field then return field(self) end
  return Lock[key]
end

function Lock.__tostring(self)
  return string.format("zklua.%s(%s, %s)", self._class, self.path,
                       self._lock:is_held() and "held" or self._lock:phase())
end

local join = require("zklua.paths").join
local base = require "zklua.recipes.base"

local function usable(client, fname)
  return client:_usable_session(fname)
end

local function flag(fname, value, argument, default)
  if value == nil then return default end
  return check.flag(fname, value, argument)
end

-- kazoo's extra_lock_patterns: a list of literal marks (kazoo compiles them into a regular
-- expression; zklua matches them literally, and refuses what would mean more as a pattern).
local function patterns_of(fname, patterns)
  if patterns == nil then return {} end
  if type(patterns) ~= "table" then
    check.fail(fname, "extra_lock_patterns", "extra_lock_patterns must be a list of strings " ..
               "(got " .. type(patterns) .. ")")
  end
  local marks = {}
  for key, mark in pairs(patterns) do
    if type(key) ~= "number" or key < 1 or key > #patterns or key ~= math.floor(key) then
      check.fail(fname, "extra_lock_patterns", "extra_lock_patterns must be a list (got the key " ..
                 tostring(key) .. ")")
    end
    if type(mark) ~= "string" or mark == "" or mark:find("%z") then
      check.fail(fname, "extra_lock_patterns", string.format("extra_lock_patterns[%d] must " ..
                 "be a non-empty string without NUL (got %s)", key,
                 type(mark) == "string" and string.format("%q", mark) or type(mark)))
    end
    if mark:find("[%.%^%$%*%+%?%(%)%[%]{}|\\]") then
      check.fail(fname, "extra_lock_patterns", string.format("extra_lock_patterns[%d] %q has " ..
                 "a regular expression character: zklua matches these marks literally", key, mark))
    end
    marks[key] = mark
  end
  return marks
end

local OPTIONS = { layout = "string", container = "boolean", extra_lock_patterns = "table" }

-- Whether the third argument is an options table (string keys) rather than kazoo's list.
local function is_options(arg)
  return type(arg) == "table" and type(next(arg)) == "string"
end

--- The C lock kind, layout and container choice for fname's opts, checked; curator_kind:
--- the Curator kind of this class, nil when it has none.
local function kind_of(fname, kind, opts, curator_kind)
  local layout = check.layout(fname, opts.layout, { "kazoo", "curator" })
  if layout == "curator" then
    if not curator_kind then
      check.fail(fname, "layout", fname .. " has no Curator layout")
    end
    kind = curator_kind
  end
  return kind, layout, opts.container
end

local function new(class, kind, client, path, identifier, arg, curator_kind, fname)
  fname = fname or class
  path = check.kazoo_path(fname, path)
  if identifier ~= nil and type(identifier) ~= "string" then
    check.fail(fname, "identifier", "identifier must be a string or nil (got " ..
               type(identifier) .. ")")
  end
  local opts = is_options(arg) and check.options(fname, arg, OPTIONS)
               or { extra_lock_patterns = arg }
  local marks = patterns_of(fname, opts.extra_lock_patterns)
  local data = check.value(fname, identifier, path, "identifier")
  local layout, container
  kind, layout, container = kind_of(fname, kind, opts, curator_kind)
  local session = usable(client, fname)
  local ud = core.lock(session, path, data, kind, client:_acl(), marks, container)
  local self = setmetatable({ client = client, path = path, identifier = identifier,
                              data = data, prefix = ud:prefix(), cancelled = false,
                              extra_lock_patterns = marks, layout = layout, _kind = kind,
                              _class = class, _lock = ud, _ud = ud, _what = "lock" }, Lock)
  base.init(self)
  self.create_path = join(path, self.prefix)
  client:_add_notify_target(ud:id(), self)
  return self
end

--- acquire(blocking = true, timeout = nil, ephemeral = true) -> true | false
function Lock:acquire(blocking, timeout, ephemeral)
  blocking = flag("acquire", blocking, "blocking", true)
  timeout = check.timeout("acquire", timeout)
  ephemeral = flag("acquire", ephemeral, "ephemeral", true)
  local ud = self._lock
  return base.acquire(self, ud, blocking, timeout, false, function()
    self._ephemeral = ephemeral
    return ud:acquire(blocking, ephemeral)
  end)
end

--- release() -> true if the lock was held.  Returns once its node is deleted; while
-- disconnected it waits at most a session timeout, then an ephemeral lock counts as
-- released (the node is deleted in the background once reconnected, or expires with the
-- session) and a persistent one raises ConnectionLoss (still held, still being released).
function Lock:release()
  return base.release(self, self._lock, self._ephemeral == false)
end

--- Ends the acquire under way (it raises CancelledError); with none under way, the next one.
function Lock:cancel()
  base.cancel(self, self._lock)
end

--- The identifiers of the contenders (each node's data), in lock order.
function Lock:contenders()
  local client = self.client
  usable(client, "contenders")
  client:ensure_path(self.path)
  local names = core.lock_contenders(client:get_children(self.path), self.extra_lock_patterns,
                                     self._kind)
  local futures = {}
  for i, name in ipairs(names) do futures[i] = client:get_async(join(self.path, name)) end
  local identifiers = {}
  for _, f in ipairs(futures) do
    local ok, data = pcall(f.get, f)
    if ok then
      identifiers[#identifiers + 1] = data
    elseif not errors.is(data, errors.NoNodeError) then -- a contender left meanwhile: skipped
      error(data, 0)
    end
  end
  return identifiers
end

--- Acquires, calls fn(...), releases (even when fn raises) and returns fn's results.
Lock.with = base.with

-- on_lost(fn): fn(lock) runs when the session expired while the lock was held.
base.install_lost(Lock, "lock")

-- The C lock also says when an acquire is decided (ZKL_LOCK_NOTIFY_DECIDED): an owner that
-- does not wait in acquire() (the Election latch) sets lock._on_decided to hear it.
local NOTIFY_DECIDED = core.notify.lock.DECIDED
local notified_lost = Lock._notified
function Lock:_notified(code)
  if code == NOTIFY_DECIDED then
    if self._on_decided then self._on_decided(self) end
  else
    notified_lost(self, code)
  end
end

function recipes.Lock(client, path, identifier, extra_lock_patterns)
  return new("Lock", "exclusive", client, path, identifier, extra_lock_patterns, "curator-mutex")
end

--- The Lock an Election is (opts checked as the Election's; layout = "curator": LeaderLatch).
function recipes.ElectionLock(client, path, identifier, opts)
  if opts ~= nil and not is_options(opts) then
    check.options("Election", opts, OPTIONS) -- a list: its keys are refused as unknown options
  end
  return new("Lock", "exclusive", client, path, identifier, opts or {}, "curator-latch",
             "Election")
end

--- The Lock of an Election with layout = "curator-selector": Curator's LeaderSelector,
--- whose leader holds an InterProcessMutex on the path (opts as the Election's, layout
--- "curator").
function recipes.SelectorLock(client, path, identifier, opts)
  return new("Lock", "exclusive", client, path, identifier, opts, "curator-mutex", "Election")
end

function recipes.WriteLock(client, path, identifier, extra_lock_patterns)
  return new("WriteLock", "exclusive", client, path, identifier, extra_lock_patterns,
             "curator-write")
end

function recipes.ReadLock(client, path, identifier, extra_lock_patterns)
  return new("ReadLock", "shared", client, path, identifier, extra_lock_patterns, "curator-read")
end

recipes.class = Lock

return recipes
