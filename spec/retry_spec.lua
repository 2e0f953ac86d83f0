-- zklua.retry (kazoo's KazooRetry) and zk:retry.
local zklua = require "zklua"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local errors = zklua.errors

local raised = helpers.raised

-- A function failing with the errors in `failures` (one per call), then returning result.
local function flaky(failures, result)
  local counter = { calls = 0 }
  counter.fn = function(...)
    counter.calls = counter.calls + 1
    local failure = failures[counter.calls]
    if failure then error(failure, 0) end
    return result, ...
  end
  return counter
end

local function always(err)
  local counter = { calls = 0 }
  counter.fn = function()
    counter.calls = counter.calls + 1
    error(err, 0)
  end
  return counter
end

describe("zklua.retry", function()
  it("retries ForceRetryError until the function succeeds", function()
    local r = zklua.retry{ max_tries = 3, delay = 0.01 }
    local f = flaky({ errors.ForceRetryError(), errors.ForceRetryError() }, "done")
    assert.are.equal("done", r(f.fn))
    assert.are.equal(3, f.calls)
  end)

  it("retries ConnectionLoss and OperationTimeoutError", function()
    local r = zklua.retry{ max_tries = 3, delay = 0.01 }
    local f = flaky({ errors.ConnectionLoss(), errors.OperationTimeoutError(),
                      errors.ConnectionLoss() }, "done")
    assert.are.equal("done", r(f.fn))
    assert.are.equal(4, f.calls)
  end)

  it("raises RetryFailedError after max_tries retries (kazoo: max_tries + 1 calls)", function()
    local r = zklua.retry{ max_tries = 3, delay = 0.01 }
    local f = always(errors.ConnectionLoss())
    local err = raised(r, f.fn)
    assert.is_true(errors.is(err, errors.RetryFailedError), tostring(err))
    assert.are.equal(4, f.calls)
    assert.is_true(errors.is(err.cause, errors.ConnectionLoss))
  end)

  it("max_tries = 0 calls once", function()
    local f = always(errors.ForceRetryError())
    local err = raised(zklua.retry{ max_tries = 0, delay = 0.01 }, f.fn)
    assert.is_true(errors.is(err, errors.RetryFailedError))
    assert.are.equal(1, f.calls)
  end)

  it("max_tries = -1 retries until the function succeeds", function()
    local failures = {}
    for i = 1, 12 do failures[i] = errors.ForceRetryError() end
    local f = flaky(failures, "finally")
    local r = zklua.retry{ max_tries = -1, delay = 0.001, max_delay = 0.002 }
    assert.are.equal("finally", r(f.fn))
    assert.are.equal(13, f.calls)
  end)

  it("does not retry NoNodeError: it is raised as it is", function()
    local original = errors.NoNodeError("gone", "/x")
    local f = always(original)
    local err = raised(zklua.retry{ max_tries = 3, delay = 0.01 }, f.fn)
    assert.are.equal(original, err)
    assert.are.equal(1, f.calls)
  end)

  it("does not retry plain Lua errors", function()
    local f = always("plain failure")
    local err = raised(zklua.retry{ max_tries = 3, delay = 0.01 }, f.fn)
    assert.are.equal("plain failure", err)
    assert.are.equal(1, f.calls)
  end)

  it("retries SessionExpiredError by default", function()
    local f = flaky({ errors.SessionExpiredError() }, "ok")
    assert.are.equal("ok", zklua.retry{ max_tries = 2, delay = 0.01 }(f.fn))
    assert.are.equal(2, f.calls)
  end)

  it("stops on SessionExpiredError with ignore_expire = false", function()
    local f = always(errors.SessionExpiredError())
    local err = raised(zklua.retry{ max_tries = 3, delay = 0.01, ignore_expire = false }, f.fn)
    assert.is_true(errors.is(err, errors.SessionExpiredError))
    assert.is_false(errors.is(err, errors.RetryFailedError))
    assert.are.equal(1, f.calls)
  end)

  it("never retries ConnectionClosedError", function()
    for _, ignore in ipairs({ true, false }) do
      local f = always(errors.ConnectionClosedError())
      local err = raised(zklua.retry{ max_tries = 5, delay = 0.01, ignore_expire = ignore }, f.fn)
      assert.is_true(errors.is(err, errors.ConnectionClosedError))
      assert.are.equal(1, f.calls)
    end
  end)

  it("gives up at the deadline", function()
    local core = require "zklua.core"
    local f = always(errors.ForceRetryError())
    local r = zklua.retry{ max_tries = -1, delay = 0.01, backoff = 1, deadline = 0.2 }
    local started = core.monotonic()
    local err = raised(r, f.fn)
    local took = core.monotonic() - started
    assert.is_true(errors.is(err, errors.RetryFailedError), tostring(err))
    assert.is_true(f.calls > 1)
    assert.is_true(took < 1, "took " .. took .. " s")
  end)

  it("passes the arguments and returns every result", function()
    local r = zklua.retry{ max_tries = 2, delay = 0.01 }
    local seen
    local a, b, c, n = r(function(...)
      seen = table.pack(...)
      return "a", nil, "c"
    end, 1, nil, 3)
    assert.are.equal(3, seen.n)
    assert.are.same({ 1, nil, 3, n = 3 }, seen)
    assert.are.equal("a", a)
    assert.is_nil(b)
    assert.are.equal("c", c)
    assert.is_nil(n)
  end)

  it("sleeps with exponential backoff capped at max_delay", function()
    local slept = {}
    local r = zklua.retry{ max_tries = 4, delay = 0.1, backoff = 2, max_jitter = 0,
                           max_delay = 0.3, sleep_func = function(s) slept[#slept + 1] = s end }
    raised(r, always(errors.ForceRetryError()).fn)
    assert.are.equal(4, #slept)
    local want = { 0.1, 0.2, 0.3, 0.3 }
    for i = 1, 4 do
      assert.is_true(math.abs(slept[i] - want[i]) < 1e-9, "sleep " .. i .. " was " .. slept[i])
    end
  end)

  it("jitters each sleep within max_jitter", function()
    local slept = {}
    local r = zklua.retry{ max_tries = 20, delay = 1, backoff = 1, max_jitter = 0.5,
                           sleep_func = function(s) slept[#slept + 1] = s end }
    raised(r, always(errors.ForceRetryError()).fn)
    for _, s in ipairs(slept) do assert.is_true(s >= 0.5 and s <= 1.5, "slept " .. s) end
  end)

  it("stops with InterruptedError when interrupt says so", function()
    local f = always(errors.ForceRetryError())
    local r = zklua.retry{ max_tries = 10, delay = 0.001, interrupt = function() return true end }
    local err = raised(r, f.fn)
    assert.is_true(errors.is(err, errors.InterruptedError))
    assert.are.equal(1, f.calls)
  end)

  it("a policy can be used again: every call gets all its tries", function()
    local r = zklua.retry{ max_tries = 2, delay = 0.001 }
    for _ = 1, 3 do
      local f = flaky({ errors.ForceRetryError(), errors.ForceRetryError() }, "ok")
      assert.are.equal("ok", r(f.fn))
      assert.are.equal(3, f.calls)
    end
    local copy = r:copy()
    local f = flaky({ errors.ForceRetryError(), errors.ForceRetryError() }, "ok")
    assert.are.equal("ok", copy(f.fn))
  end)

  describe("options", function()
    local function rejected(argument, opts)
      local err = raised(zklua.retry, opts)
      assert.is_true(errors.is(err, errors.BadArgumentsError), tostring(err))
      assert.are.equal(argument, err.argument)
    end

    it("rejects unknown options and options of the wrong type", function()
      rejected("max_retries", { max_retries = 3 })
      rejected("max_tries", { max_tries = "3" })
      rejected("delay", { delay = "fast" })
      rejected("ignore_expire", { ignore_expire = 1 })
      rejected("sleep_func", { sleep_func = "sleep" })
      rejected("options", "max_tries=3")
    end)

    it("rejects max_jitter outside 0..1", function()
      rejected("max_jitter", { max_jitter = 2 })
      rejected("max_jitter", { max_jitter = -0.1 })
    end)

    it("rejects a max_tries that is not an integer >= -1 (it would retry forever)", function()
      rejected("max_tries", { max_tries = 2.5 })
      rejected("max_tries", { max_tries = -2 })
    end)

    it("rejects a function argument that is not a function", function()
      local err = raised(zklua.retry{ max_tries = 1 }, "not a function")
      assert.is_true(errors.is(err, errors.BadArgumentsError))
    end)

    it("rejects bad command_retry and connection_retry client options", function()
      local err = raised(zklua.client, { hosts = "127.0.0.1:1", command_retry = { tries = 3 } })
      assert.is_true(errors.is(err, errors.BadArgumentsError), tostring(err))
      err = raised(zklua.client, { hosts = "127.0.0.1:1", connection_retry = { delay = "x" } })
      assert.is_true(errors.is(err, errors.BadArgumentsError), tostring(err))
    end)
  end)
end)

describe("zk:retry", function()
  local server, zk

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  before_each(function()
    zk = zklua.client{ hosts = server.hosts, command_retry = { max_tries = 2, delay = 0.01 } }
    zk:start()
  end)

  after_each(function()
    pcall(zk.delete, zk, "/retry", nil, true)
    zk:close()
  end)

  it("passes the arguments and returns the results", function()
    zk:create("/retry", "data")
    local data, stat = zk:retry(zk.get, zk, "/retry")
    assert.are.equal("data", data)
    assert.are.equal(0, stat.version)
    local a, b = zk:retry(function(x, y) return y, x end, 1, 2)
    assert.are.equal(2, a)
    assert.are.equal(1, b)
  end)

  it("uses the client's command_retry policy", function()
    local f = flaky({ errors.ConnectionLoss(), errors.ConnectionLoss() }, "ok")
    assert.are.equal("ok", zk:retry(f.fn))
    assert.are.equal(3, f.calls)
    local g = always(errors.ConnectionLoss())
    local err = raised(zk.retry, zk, g.fn)
    assert.is_true(errors.is(err, errors.RetryFailedError))
    assert.are.equal(3, g.calls)
  end)

  it("raises an operation's own error without retrying it", function()
    local calls = 0
    local err = raised(zk.retry, zk, function()
      calls = calls + 1
      return zk:get("/retry/missing")
    end)
    assert.is_true(errors.is(err, errors.NoNodeError))
    assert.are.equal(1, calls)
  end)

  it("retries an op whose first attempt fails", function()
    zk:create("/retry", "")
    local calls = 0
    local stat = zk:retry(function()
      calls = calls + 1
      if calls == 1 then error(errors.ConnectionLoss(), 0) end
      return zk:set("/retry", "set on try " .. calls)
    end)
    assert.are.equal(2, calls)
    assert.are.equal(1, stat.version)
    assert.are.equal("set on try 2", (zk:get("/retry")))
  end)

  it("does not retry once the client is stopped", function()
    zk:stop()
    local calls = 0
    local err = raised(zk.retry, zk, function()
      calls = calls + 1
      return zk:get("/")
    end)
    assert.is_true(errors.is(err, errors.ConnectionClosedError))
    assert.are.equal(1, calls)
    zk:start()
  end)
end)
