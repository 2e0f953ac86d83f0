--- zklua.recipes.atomic_long — Curator's DistributedAtomicLong, its API and its two modes.
--
--   local n = zk:AtomicLong("/app/n", { retries = 3, retry_sleep = 0.005,
--                                      promoted_to_lock = { path = "/app/n-lock" } })
--   local v = n:increment()      -- v.succeeded, v.pre_value, v.post_value, v.stats
--
-- The value is the 8-byte node of Curator 5.4's DistributedAtomicLong (big-endian long), and
-- every read and versioned set is the Counter's C state machine (src/recipes/counter.h, kind
-- ZKL_COUNTER_CURATOR_ATOMIC: DistributedAtomicValue's rules), so Curator and zklua processes
-- share one value.  What this layer adds is Curator's composition:
--
-- * Optimistic mode: an update (increment, decrement, add, subtract, try_set) makes at most
--   retries + 1 tries (a read, then a set at the version read, or the create of a missing
--   node), pausing about retry_sleep (doubling, jittered) between them, as Curator's retry
--   policy; when all fail it returns succeeded = false (Curator's semantics), not an error.
-- * promoted_to_lock = { path, timeout, retries, retry_sleep } (Curator's PromotedToLock):
--   after the optimistic tries failed, takes a Lock with Curator's InterProcessMutex layout
--   at path (zk:Lock(path, nil, {layout = "curator"})), waiting at most timeout seconds
--   (nil: the call's deadline), and makes at most retries + 1 tries under it, then releases
--   it.  Not getting the lock in timeout is succeeded = false.
-- * compare_and_set(expected, new): one try, never promoted (Curator's); a missing node fails
--   it.  force_set(new) sets without a version (creating the node) until done; it returns
--   nothing, as Curator.  initialize(seed) -> true when it created the node, false when it
--   existed.  get() of a missing node is 0 and creates nothing.
-- * Results: { succeeded, pre_value, post_value, stats = { optimistic_tries,
--   promoted_lock_tries, optimistic_time_ms, promoted_time_ms } }, Curator's AtomicValue and
--   AtomicStats: pre_value is the last value read (0 for a missing node); post_value the value
--   written, 0 when not succeeded; get() has pre = post and zero stats, compare_and_set zero
--   stats (Curator counts neither).
-- * Bad input (a non-integer, a value beyond the 64-bit range, bad opts) raises
--   BadArgumentsError before anything is sent.  A sum beyond the range raises
--   BadArgumentsError and writes nothing (Curator's long wraps: atomic-long-overflow).  Data
--   that is not 8 bytes (nor empty: 0) raises KazooException.
-- * Timeouts: every call ends by its timeout (argument, else opts.timeout, else the client's
--   timeout) with TimeoutError; an update that timed out goes on in C and may still be
--   applied, and the next call waits for it to end first.  zk:stop()/close():
--   ConnectionClosedError.
-- * SUSPENDED: the step under way waits for the connection and goes on (a set whose reply
--   was lost counts as applied when the node shows it, counter.h); the lock, when held, is
--   kept as the Lock keeps it.  LOST: the try under way starts again on the new session;
--   the lock of a promoted step is lost with the session (the Lock's contract), so the
--   step's set is still versioned and cannot lose another's update.  None of this counts as
--   a failed try.
-- * Sharing: calls from coroutines sharing one object take turns (zklua.recipes.base); each
--   gets its own result table.
--
-- Numbers: integers (Lua 5.4); under LuaJIT integral numbers in the 64-bit range (exact up to
-- 2^53) or int64 cdata (exact), and values read beyond 2^53 come back as int64 cdata, as the
-- Counter's, so they can be handed back (compare_and_set(v.post_value, ...)).
local core = require "zklua.core"
local errors = require "zklua.errors"
local check = require "zklua.check"
local compat = require "zklua.compat"
local base = require "zklua.recipes.base"

local recipes = {}

local AtomicLong = { __name = "zklua.AtomicLong" }
AtomicLong.__index = AtomicLong

local MAX_TRIES = 1000000

local function usable(client, fname)
  return client:_usable_session(fname)
end

-- LuaJIT's int64 cdata, exact (compat.is_id); the C layer reads its decimal form.
local function is_int64(n)
  return type(n) == "cdata" and compat.is_id(n)
end

local function long_of(fname, argument, n)
  if is_int64(n) then return n end
  if not compat.is_integer(n) then
    check.fail(fname, argument, argument .. " must be an integer (got " ..
               (type(n) == "number" and tostring(n) or type(n)) .. ")")
  end
  if n < compat.mininteger or n >= 2 ^ 63 then
    check.fail(fname, argument, argument .. " is beyond the 64-bit range (got " ..
               tostring(n) .. ")")
  end
  return n
end

local function retries_of(fname, argument, n, default)
  if n == nil then return default end
  if not compat.is_integer(n) or n < 0 or n >= MAX_TRIES then
    check.fail(fname, argument, argument .. " must be an integer 0.." .. (MAX_TRIES - 1) ..
               " (got " .. tostring(n) .. ")")
  end
  return n
end

local function sleep_ms_of(fname, argument, s, default)
  if s == nil then return default end
  if type(s) ~= "number" or s ~= s or s < 0.001 or s > 600 then
    check.fail(fname, argument, argument .. " must be a number of seconds 0.001..600 (got " ..
               tostring(s) .. ")")
  end
  return math.floor(s * 1000 + 0.5)
end

-- The backoff of a retry policy: from sleep_ms, doubling at most retries times.
local function set_policy(ud, sleep_ms, retries)
  local cap = sleep_ms
  for _ = 1, math.min(retries, 20) do
    if cap * 2 > 600000 then break end
    cap = cap * 2
  end
  ud:set_backoff(sleep_ms, cap)
end

local function ms_since(t0)
  return math.floor((core.monotonic() - t0) * 1000 + 0.5)
end

-- One operation in C (op, a, b, max_tries) with the object's turn held: its outcome, pre,
-- post and tries, or an error raised.
local function one(self, fname, op, a, b, max_tries, sleep_ms, retries, timeout, deadline)
  local ud = self._counter
  usable(self.client, fname)
  -- an earlier call that timed out: its operation goes on in C, let it finish
  base.check_wait(base.wait(self, function() return ud:phase() ~= "busy" end, deadline),
                  errors.TimeoutError, fname, self.path, timeout)
  if sleep_ms then set_policy(ud, sleep_ms, retries) end
  if is_int64(a) then a = compat.id_string(a) end
  if is_int64(b) then b = compat.id_string(b) end
  local started, why = ud:start_op(op, a, b, max_tries)
  if not started then
    errors.raise(why == "busy" and errors.KazooException or errors.ConnectionClosedError,
                 fname .. ": cannot start (" .. why .. ")", self.path)
  end
  base.check_wait(base.wait(self, function() return ud:phase() ~= "busy" end, deadline),
                  errors.TimeoutError, fname, self.path, timeout,
                  op == "read" and "the read" or "the update (it may still be applied)")
  local outcome, rc = ud:outcome()
  if outcome == "ok" or outcome == "not_set" then
    return outcome, ud:pre(), ud:post(), ud:tries()
  end
  if outcome == "bad_data" then
    errors.raise(errors.KazooException, fname .. ": the data of " .. self.path ..
                 " is not a DistributedAtomicLong value (8 bytes)", self.path)
  elseif outcome == "overflow" then
    errors.raise(errors.BadArgumentsError, fname .. ": the sum does not fit in a 64-bit " ..
                 "integer (nothing was written)", self.path)
  end
  base.raise_rc(fname, rc, self.path)
end

local function new_stats()
  return { optimistic_tries = 0, promoted_lock_tries = 0, optimistic_time_ms = 0,
           promoted_time_ms = 0 }
end

-- The promoted step: the lock, then at most promoted.retries + 1 tries under it.
local function promoted(self, fname, op, a, b, result, timeout, deadline)
  local p = self._promoted
  local t0 = core.monotonic()
  local lock_timeout = base.remaining(deadline)
  if p.timeout and (lock_timeout == nil or p.timeout < lock_timeout) then
    lock_timeout = p.timeout
  end
  local ok, got = pcall(self._lock.acquire, self._lock, true, lock_timeout)
  if not ok then
    if not errors.is(got, errors.LockTimeout) then error(got, 0) end
    if deadline and base.remaining(deadline) <= 0 then
      base.raise_timeout(errors.TimeoutError, fname, self.path, timeout, "the promoted lock")
    end
    got = false -- Curator: mutex.acquire(maxLockTime) false, not succeeded
  end
  if got then
    local done, outcome, pre, post, tries = pcall(one, self, fname, op, a, b, p.retries + 1,
                                                  p.sleep_ms, p.retries, timeout, deadline)
    local released, rerr = pcall(self._lock.release, self._lock)
    if not done then error(outcome, 0) end
    if not released then error(rerr, 0) end
    result.succeeded = outcome == "ok"
    result.pre_value, result.post_value = pre, post
    result.stats.promoted_lock_tries = tries
  end
  result.stats.promoted_time_ms = ms_since(t0)
end

-- An update: the optimistic tries, then the promoted step when they failed.
local function update_in_turn(self, fname, op, a, b, timeout, deadline)
  local result = { stats = new_stats() }
  local t0 = core.monotonic()
  local outcome, pre, post, tries = one(self, fname, op, a, b, self.retries + 1,
                                        self._sleep_ms, self.retries, timeout, deadline)
  result.succeeded = outcome == "ok"
  result.pre_value, result.post_value = pre, post
  result.stats.optimistic_tries = tries
  result.stats.optimistic_time_ms = ms_since(t0)
  if not result.succeeded and self._promoted then
    promoted(self, fname, op, a, b, result, timeout, deadline)
  end
  return result
end

-- Runs fn(self, fname, ..., timeout, deadline) with the object's turn and the call's deadline.
local function run(self, fname, timeout, fn, ...)
  timeout = check.timeout(fname, timeout)
  usable(self.client, fname)
  self.client:_check_wait() -- a coroutine handler that cannot wait here raises before it
  if timeout == nil then timeout = self.timeout or self.client._timeout end
  local deadline = base.deadline(timeout)
  local args = compat.pack(...)
  return base.serial(self, fname, deadline, false, function()
    base.raise_timeout(errors.TimeoutError, fname, self.path, timeout)
  end, function()
    return fn(self, fname, args[1], args[2], args[3], timeout, deadline)
  end)
end

local function update(self, fname, op, a, b, timeout)
  return run(self, fname, timeout, update_in_turn, op, a, b)
end

--- get(timeout) -> AtomicValue: pre_value = post_value = the value (0: no node).
function AtomicLong:get(timeout)
  return run(self, "get", timeout, function(_, fname, _, _, _, t, deadline)
    local _, pre, post = one(self, fname, "read", nil, nil, 0, nil, 0, t, deadline)
    return { succeeded = true, pre_value = pre, post_value = post, stats = new_stats() }
  end)
end

--- increment(timeout), decrement(timeout) -> AtomicValue.
function AtomicLong:increment(timeout) return update(self, "increment", "add", 1, nil, timeout) end
function AtomicLong:decrement(timeout) return update(self, "decrement", "add", -1, nil, timeout) end

--- add(n, timeout), subtract(n, timeout) -> AtomicValue.
function AtomicLong:add(n, timeout)
  return update(self, "add", "add", long_of("add", "delta", n), nil, timeout)
end

function AtomicLong:subtract(n, timeout)
  n = long_of("subtract", "delta", n)
  local min = is_int64(n) and compat.id_string(n) == "-9223372036854775808"
  if min or n == compat.mininteger then
    check.fail("subtract", "delta", "delta is too small to negate")
  end
  return update(self, "subtract", "add", -n, nil, timeout)
end

--- try_set(new, timeout) -> AtomicValue: sets new whatever the value (optimistic, promoted).
function AtomicLong:try_set(new, timeout)
  return update(self, "try_set", "set", long_of("try_set", "value", new), nil, timeout)
end

--- compare_and_set(expected, new, timeout) -> AtomicValue: one try, never promoted.
function AtomicLong:compare_and_set(expected, new, timeout)
  expected = long_of("compare_and_set", "expected", expected)
  new = long_of("compare_and_set", "value", new)
  return run(self, "compare_and_set", timeout, function(_, fname, _, _, _, t, deadline)
    local outcome, pre, post = one(self, fname, "cas", expected, new, 1, nil, 0, t, deadline)
    return { succeeded = outcome == "ok", pre_value = pre, post_value = post,
             stats = new_stats() }
  end)
end

--- force_set(new, timeout): sets new without a version (creating the node), until done.
function AtomicLong:force_set(new, timeout)
  new = long_of("force_set", "value", new)
  run(self, "force_set", timeout, function(_, fname, _, _, _, t, deadline)
    one(self, fname, "force", new, nil, 0, self._sleep_ms, self.retries, t, deadline)
  end)
end

--- initialize(seed, timeout) -> true when it created the node holding seed, false if it
-- existed.
function AtomicLong:initialize(seed, timeout)
  seed = long_of("initialize", "seed", seed)
  return run(self, "initialize", timeout, function(_, fname, _, _, _, t, deadline)
    return (one(self, fname, "init", seed, nil, 1, nil, 0, t, deadline)) == "ok"
  end)
end

function AtomicLong.__tostring(self)
  return string.format("zklua.AtomicLong(%s)", self.path)
end

--- zk:AtomicLong(path, opts): opts { retries = 3, retry_sleep = 0.001 (seconds), timeout
-- (seconds, every call's default; nil: the client's), promoted_to_lock = { path, timeout,
-- retries = 3, retry_sleep = 0.001 } }.
function recipes.AtomicLong(client, path, opts)
  local fname = "AtomicLong"
  path = check.kazoo_path(fname, path)
  opts = check.options(fname, opts, { retries = "number", retry_sleep = "number",
                                      timeout = "number", promoted_to_lock = "table" }, "opts")
  local retries = retries_of(fname, "retries", opts.retries, 3)
  local sleep_ms = sleep_ms_of(fname, "retry_sleep", opts.retry_sleep, 1)
  local timeout = check.timeout(fname, opts.timeout, "timeout")
  local p
  if opts.promoted_to_lock then
    local po = check.options(fname, opts.promoted_to_lock, { path = "string", timeout = "number",
                                                             retries = "number",
                                                             retry_sleep = "number" },
                             "promoted_to_lock")
    if po.path == nil then
      check.fail(fname, "promoted_to_lock", "promoted_to_lock needs a path")
    end
    p = { path = check.kazoo_path(fname, po.path, "promoted_to_lock.path"),
          timeout = check.timeout(fname, po.timeout, "promoted_to_lock.timeout"),
          retries = retries_of(fname, "promoted_to_lock.retries", po.retries, 3),
          sleep_ms = sleep_ms_of(fname, "promoted_to_lock.retry_sleep", po.retry_sleep, 1) }
  end
  local session = usable(client, fname)
  local ud = core.counter(session, path, "curator_atomic", 0)
  local self = base.init(setmetatable({ client = client, path = path, retries = retries,
                                        timeout = timeout, _sleep_ms = sleep_ms,
                                        _promoted = p, _counter = ud }, AtomicLong))
  if p then self._lock = client:Lock(p.path, nil, { layout = "curator" }) end
  return self
end

recipes.class = AtomicLong

return recipes
