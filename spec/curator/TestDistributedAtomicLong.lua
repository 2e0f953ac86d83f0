-- Curator's TestDistributedAtomicLong (Curator 5.4, curator-recipes' atomic package) in Lua:
-- every test and assertion, against real servers, with zklua's AtomicLong
-- (zk:AtomicLong(path, opts): DistributedAtomicLong's API, node and modes).  Curator's threads
-- are coroutines of one cqueues controller (support.threads).  RetryOneTime(1) is
-- {retries = 1, retry_sleep = 0.001}; ExponentialBackoffRetry(3, 3) is {retries = 3,
-- retry_sleep = 0.003}; AtomicValue's succeeded(), preValue(), postValue(), getStats() are
-- the result's succeeded, pre_value, post_value, stats.
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local support = require "curator.support"

local RETRY_ONE_TIME = { retries = 1, retry_sleep = 0.001 }

-- DistributedAtomicLong.valueToBytes(n): 8 big-endian bytes (n >= 0 here).
local function to_bytes(n)
  local b = {}
  for i = 8, 1, -1 do
    b[i] = string.char(n % 256)
    n = math.floor(n / 256)
  end
  return table.concat(b)
end

local function dal_of(client, path, opts)
  return client:AtomicLong(path, opts or RETRY_ONE_TIME)
end

describe("TestDistributedAtomicLong", function()
  local h
  before_each(function() h = support.harness() end)
  after_each(function() h:teardown() end)

  it("testCorruptedValue", function()
    local client = h:client()
    client:create("/counter", "foo")
    local dal = dal_of(client, "/counter")
    -- Curator: a RuntimeException, not a BufferUnderflow/OverflowException
    local ok, err = pcall(function() return dal:get().post_value end)
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.KazooException), tostring(err))
    assert.is_falsy(tostring(err):match("underflow") or tostring(err):match("overflow"))
  end)

  it("testCompareAndSetWithFreshInstance", function()
    local client = h:client()
    local dal = dal_of(client, "/counter")
    local result = dal:compare_and_set(0, 1)
    assert.is_false(result.succeeded)

    assert.is_true(dal:initialize(0))
    result = dal:compare_and_set(0, 1)
    assert.is_true(result.succeeded)

    assert.is_false(dal:initialize(0))
  end)

  it("testCompareAndSet", function()
    -- Curator's valueToBytes override increments the node (another DistributedAtomicLong on
    -- the same client) between compareAndSet's read and its set.  Here the fault proxy places
    -- that increment there: the read goes up and its reply is held (cut_reply); the
    -- increment's versioned set goes up on the same session behind it (the server handles a
    -- session's requests in order); then the replies go on and compareAndSet's set meets the
    -- newer version.
    local server = h:own_server()
    local proxy = testing.proxy(server:node(1))
    support.threads(function(env)
      local client = env.client({ hosts = proxy.hosts, timeout = 30 })
      local dal = dal_of(client, "/counter")
      dal:force_set(1)

      assert.is_true(dal:compare_and_set(1, 5).succeeded)
      assert.is_false(dal:compare_and_set(1, 5).succeeded)

      -- doIncrement.set(true)
      local version = select(2, client:get("/counter")).version
      proxy:cut_reply("get")
      local result
      local cas = env.spawn(function() result = dal:compare_and_set(5, 10) end)
      env.eventually(function() return proxy:status().cut end, 60, "the read at the server")
      -- inc.increment(): "this will force a bad version exception"
      local inc = client:set_async("/counter", to_bytes(6), version)
      proxy:resume()
      assert.equals(version + 1, inc:get(60).version)
      cas:join(60)
      assert.is_true(cas.ok, tostring(cas.result))
      assert.is_false(result.succeeded)
      assert.are.equal(5, result.pre_value) -- it read 5: the set failed on the version
      assert.are.equal(6, dal:get().post_value)
    end, { guard = 120 })
    proxy:stop()
  end)

  it("testForceSet", function()
    support.threads(function(env)
      local client = env.client({ hosts = h.hosts })
      local dal = dal_of(client, "/counter")
      local incrementer = env.spawn(function()
        for _ = 1, 1000 do
          dal:increment()
          env.sleep(0.01)
        end
      end)
      local setter = env.spawn(function()
        for _ = 1, 1000 do
          dal:force_set(0)
          env.sleep(0.01)
        end
      end)
      -- Curator reads at once, while its threads run on (its executor is never shut down)
      assert.is_true(dal:get().pre_value < 10)
      incrementer:join(120)
      setter:join(120)
      assert.is_true(incrementer.ok, tostring(incrementer.result))
      assert.is_true(setter.ok, tostring(setter.result))
    end, { guard = 300 })
  end)

  it("testSimulation", function()
    local thread_qty = 20
    local execution_qty = 50
    local optimistic_tries, promoted_lock_tries, failures, errors_ = 0, 0, 0, 0
    local succeeded = 0
    local times = {}
    support.threads(function(env)
      local procs = {}
      for i = 1, thread_qty do
        procs[i] = env.spawn(function()
          local previous_value = -1
          local client = env.client({ hosts = h.hosts })
          -- ExponentialBackoffRetry(3, 3), PromotedToLock on "/lock" with the same policy
          local policy = { retries = 3, retry_sleep = 0.003 }
          local dal = dal_of(client, "/counter", {
            retries = policy.retries, retry_sleep = policy.retry_sleep, timeout = 120,
            promoted_to_lock = { path = "/lock", retries = policy.retries,
                                 retry_sleep = policy.retry_sleep } })
          for _ = 1, execution_qty do
            env.sleep(math.random(0, 9) / 1000)
            local start = os.clock()
            local value = dal:increment()
            times[#times + 1] = os.clock() - start
            if value.succeeded then
              succeeded = succeeded + 1
              if value.post_value <= previous_value then errors_ = errors_ + 1 end
              previous_value = value.post_value
            else
              failures = failures + 1
            end
            optimistic_tries = optimistic_tries + value.stats.optimistic_tries
            promoted_lock_tries = promoted_lock_tries + value.stats.promoted_lock_tries
          end
        end)
      end
      for _, p in ipairs(procs) do
        p:join(600)
        assert.is_true(p.ok, tostring(p.result))
      end
      print(string.format("OptimisticTries: %d PromotedLockTries: %d Failures: %d Errors: %d " ..
                          "Qty: %d", optimistic_tries, promoted_lock_tries, failures, errors_,
                          #times))
      assert.are.equal(errors_, 0)
      assert.is_true(optimistic_tries > 0)
      assert.is_true(promoted_lock_tries > 0)
      -- beyond Curator's assertions: every succeeded increment is in the value, no other
      local client = env.client({ hosts = h.hosts })
      assert.are.equal(succeeded, dal_of(client, "/counter"):get().post_value)
    end, { guard = 900 })
  end)

  it("testBasic", function()
    local client = h:client()
    local dal = dal_of(client, "/foo/bar/counter")

    local value = dal:increment()
    assert.is_true(value.succeeded)
    assert.are.equal(value.stats.optimistic_tries, 1)
    assert.are.equal(value.stats.promoted_lock_tries, 0)
    assert.are.equal(value.pre_value, 0)
    assert.are.equal(value.post_value, 1)

    value = dal:decrement()
    assert.is_true(value.succeeded)
    assert.are.equal(value.stats.optimistic_tries, 1)
    assert.are.equal(value.stats.promoted_lock_tries, 0)
    assert.are.equal(value.pre_value, 1)
    assert.are.equal(value.post_value, 0)

    value = dal:add(10)
    assert.is_true(value.succeeded)
    assert.are.equal(value.stats.optimistic_tries, 1)
    assert.are.equal(value.stats.promoted_lock_tries, 0)
    assert.are.equal(value.pre_value, 0)
    assert.are.equal(value.post_value, 10)

    value = dal:subtract(5)
    assert.is_true(value.succeeded)
    assert.are.equal(value.stats.optimistic_tries, 1)
    assert.are.equal(value.stats.promoted_lock_tries, 0)
    assert.are.equal(value.pre_value, 10)
    assert.are.equal(value.post_value, 5)
  end)
end)
