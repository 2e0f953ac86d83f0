-- kazoo's tests/test_retry.py, translated: zklua.retry is kazoo's KazooRetry (_attempts,
-- _cur_delay, reset(), copy()); kazoo's keyword arguments are a table argument here.
-- max_tries counts retries as kazoo 2.8 does (max_tries + 1 calls at most); kazoo 2.10
-- counts calls.  The reference's test_too_many_tries asserts 2.10's count; kazoo-tests/SOURCE
-- takes either as kazoo, so it asserts 2.8's here (zklua.retry's documented count).
local zklua = require "zklua"
local errors = require "zklua.errors"
local helpers = require "support.helpers"

-- A KazooRetry whose sleep does nothing (kazoo's _make_retry).
local function make_retry(opts)
  opts = opts or {}
  opts.sleep_func = function(_) end
  return zklua.retry(opts)
end

-- A function that raises ForceRetryError `times` times before returning nothing, recording
-- each call's arguments (kazoo's _make_try_func, a mock.Mock).
local function make_try_func(times)
  local mock = { call_count = 0, call_args_list = {} }
  function mock.fn(...)
    mock.call_count = mock.call_count + 1
    mock.call_args_list[mock.call_count] = { ... }
    if mock.call_count <= (times or 1) then error(errors.ForceRetryError("Failed!"), 0) end
  end
  return mock
end

describe("test_retry.py", function()
  it("test_call", function()
    local retry = make_retry{ delay = 0, max_tries = 2 }
    local func = make_try_func()
    retry(func.fn, "foo", { bar = "baz" })
    assert.are.same({ { "foo", { bar = "baz" } }, { "foo", { bar = "baz" } } },
                    func.call_args_list)
  end)

  it("test_reset", function()
    local retry = make_retry{ delay = 0, max_tries = 2 }
    local func = make_try_func()
    retry(func.fn)
    -- "Called 2 times, failed _attempts 1, succeeded 1"
    assert.are.equal(2, func.call_count)
    assert.are.equal(2, retry._attempts + 1)
    retry:reset()
    assert.are.equal(0, retry._attempts)
  end)

  it("test_too_many_tries", function()
    local retry = make_retry{ delay = 0, max_tries = 10 }
    local func = make_try_func(999)
    helpers.raises(errors.RetryFailedError, retry, func.fn)
    -- "failed _attempts 10"; kazoo 2.10 calls 10 times, 2.8 (and zklua) once more
    assert.are.equal(10, retry._attempts)
    assert.are.equal(retry._attempts + 1, func.call_count)
  end)

  it("test_maximum_delay", function()
    local retry = make_retry{ delay = 10, max_tries = 100, max_jitter = 0 }
    local func = make_try_func(2)
    retry(func.fn)
    assert.are.equal(3, func.call_count) -- "Called 3 times, 2 failed _attempts"
    assert.are.equal(10 * 2 ^ 2, retry._cur_delay) -- "Normal exponential backoff"
    retry:reset()
    func = make_try_func(10)
    retry(func.fn)
    assert.are.equal(11, func.call_count) -- "Called 11 times, 10 failed _attempts"
    assert.are.equal(60, retry._cur_delay) -- "Delay capped by maximum"
    -- kazoo: a float (gevent's sleep is picky about the type); LuaJIT has no other number
    assert.is_number(retry._cur_delay)
    if math.type then assert.are.equal("float", math.type(retry._cur_delay)) end
  end)

  it("test_copy", function()
    local retry = make_retry()
    local rcopy = retry:copy()
    assert.are_not.equal(retry, rcopy)
    assert.are.equal(retry.sleep_func, rcopy.sleep_func)
  end)

  it("test_connection_closed", function()
    local retry = make_retry()
    local function testit()
      error(errors.ConnectionClosedError(), 0)
    end
    helpers.raises(errors.ConnectionClosedError, retry, testit)
  end)

  it("test_session_expired", function()
    local retry = make_retry{ max_tries = 1 }
    local function testit()
      error(errors.SessionExpiredError(), 0)
    end
    helpers.raises(errors.RetryFailedError, retry, testit)

    retry = make_retry{ max_tries = 1, ignore_expire = false }
    helpers.raises(errors.SessionExpiredError, retry, testit)
  end)
end)
