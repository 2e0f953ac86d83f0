--- zklua.retry — kazoo's KazooRetry: call a function until it stops failing for a reason
-- worth retrying.
--
--   local r = zklua.retry{max_tries = 5, delay = 0.1, backoff = 2, max_jitter = 0.4,
--                         max_delay = 60, ignore_expire = true, deadline = nil}
--   local value = r(fn, ...)
--
-- Retries ConnectionLoss, OperationTimeoutError and ForceRetryError, and SessionExpiredError
-- unless ignore_expire is false; never ConnectionClosedError (the client was stopped).
-- max_tries = -1 retries forever.  Raises RetryFailedError when tries or the deadline run out.
-- Sleeping between tries runs the event loop (sleep_func defaults to the handler's sleep).
-- max_tries counts retries, as kazoo 2.8: max_tries + 1 calls at most (kazoo 2.10 counts
-- calls; either is kazoo).  As kazoo's, r._attempts and r._cur_delay show the last call's
-- failed attempts and next delay (r:reset() zeroes them); the loop itself keeps its own
-- count, so calls of one policy from several coroutines at once do not disturb each other.
local errors = require "zklua.errors"

local Retry = {}
Retry.__index = Retry

local OPTIONS = { max_tries = "number", delay = "number", backoff = "number",
                  max_jitter = "number", max_delay = "number", ignore_expire = "boolean",
                  deadline = "number", sleep_func = "function", interrupt = "function" }

local function check_options(opts)
  if opts == nil then return {} end
  if type(opts) ~= "table" then
    errors.raise(errors.BadArgumentsError, "retry: options must be a table", nil,
                 { argument = "options" })
  end
  for k, v in pairs(opts) do
    local want = OPTIONS[k]
    if not want then
      errors.raise(errors.BadArgumentsError, "retry: unknown option '" .. tostring(k) .. "'",
                   nil, { argument = tostring(k) })
    end
    if type(v) ~= want then
      errors.raise(errors.BadArgumentsError,
                   "retry: option '" .. k .. "' must be a " .. want, nil, { argument = k })
    end
  end
  local tries = opts.max_tries
  if tries and (tries ~= math.floor(tries) or tries < -1) then
    errors.raise(errors.BadArgumentsError, "retry: max_tries must be an integer >= -1 " ..
                 "(-1: no limit)", nil, { argument = "max_tries" })
  end
  for _, name in ipairs({ "delay", "backoff", "max_delay", "deadline" }) do
    local v = opts[name]
    if v and (v ~= v or v < 0) then -- v ~= v: NaN
      errors.raise(errors.BadArgumentsError, "retry: " .. name .. " must be >= 0", nil,
                   { argument = name })
    end
  end
  if opts.max_jitter and (opts.max_jitter < 0 or opts.max_jitter > 1) then
    errors.raise(errors.BadArgumentsError, "retry: max_jitter must be within 0 and 1", nil,
                 { argument = "max_jitter" })
  end
  return opts
end

--- A new retry policy; default_sleep is used when opts has no sleep_func.
function Retry.new(opts, default_sleep)
  opts = check_options(opts)
  local self = setmetatable({
    max_tries = opts.max_tries or 1,
    delay = opts.delay or 0.1,
    backoff = opts.backoff or 2,
    max_jitter = opts.max_jitter or 0.4,
    max_delay = (opts.max_delay or 60) + 0.0, -- a float, as kazoo's
    ignore_expire = opts.ignore_expire ~= false,
    deadline = opts.deadline,
    sleep_func = opts.sleep_func or default_sleep,
    interrupt = opts.interrupt,
  }, Retry)
  self:reset()
  return self
end

--- Zeroes the attempt counter and the current delay (kazoo's reset(); every call starts so).
function Retry:reset()
  self._attempts = 0
  self._cur_delay = self.delay
end

--- A copy with the same settings (kazoo's copy()).
function Retry:copy()
  local other = setmetatable({}, Retry)
  for k, v in pairs(self) do other[k] = v end
  return other
end

function Retry:is_retryable(err)
  if errors.is(err, errors.ConnectionClosedError) then return false end
  if errors.is(err, errors.ConnectionLoss) or errors.is(err, errors.OperationTimeoutError)
     or errors.is(err, errors.ForceRetryError) then
    return true
  end
  return self.ignore_expire and errors.is(err, errors.SessionExpiredError)
end

local unpack = table.unpack or unpack

local function pack(...)
  return { n = select("#", ...), ... }
end

function Retry:__call(fn, ...)
  if type(fn) ~= "function" and not require("zklua.check").callable(fn) then
    errors.raise(errors.BadArgumentsError, "retry: first argument must be a function or a callable table")
  end
  local clock = require("zklua.core").monotonic
  local attempts, delay = 0, self.delay
  self:reset()
  local stop_at = self.deadline and clock() + self.deadline
  while true do
    local result = pack(pcall(fn, ...))
    if result[1] then return unpack(result, 2, result.n) end
    local err = result[2]
    if not self:is_retryable(err) then error(err, 0) end
    if attempts == self.max_tries then
      errors.raise(errors.RetryFailedError, "too many retry attempts", nil, { cause = err })
    end
    attempts = attempts + 1
    self._attempts = attempts
    local jitter = 1 + self.max_jitter * (2 * math.random() - 1)
    local sleep = math.min(delay * jitter, self.max_delay)
    if stop_at and clock() + sleep >= stop_at then
      errors.raise(errors.RetryFailedError, "exceeded retry deadline", nil, { cause = err })
    end
    self.sleep_func(sleep)
    if self.interrupt and self.interrupt() then
      errors.raise(errors.InterruptedError, "retry interrupted")
    end
    delay = math.min(delay * self.backoff, self.max_delay)
    self._cur_delay = delay
  end
end

return Retry
