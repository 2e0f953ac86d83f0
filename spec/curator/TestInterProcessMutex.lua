-- Curator's TestInterProcessMutex and its base class TestInterProcessMutexBase (Curator 5.4,
-- curator-recipes' locks package) in Lua: every test and assertion, against real servers, with
-- zklua's Lock on Curator's InterProcessMutex nodes (makeLock: zk:Lock(LOCK_PATH, nil,
-- {layout = "curator"})).  Curator's threads are coroutines of one cqueues controller
-- (support.threads); two threads on one InterProcessMutex are two coroutines sharing one Lock
-- object.  Java waits that have no bound (acquire(), await()) are bounded here by the
-- helpers' guards, so a hang fails the test.
local errors = require "zklua.errors"
local support = require "curator.support"

local LOCK_BASE_PATH = "/locks"
local LOCK_PATH = LOCK_BASE_PATH .. "/our-lock"

local function make_lock(client)
  return client:Lock(LOCK_PATH, nil, { layout = "curator" })
end

-- ------------------------------------------------------------ TestInterProcessMutexBase

describe("TestInterProcessMutexBase", function()
  local h
  before_each(function() h = support.harness() end)
  after_each(function() h:teardown() end)

  it("testLocker", function()
    local client = h:client()
    local lock = make_lock(client)
    -- Locker: acquire with a timeout for the block, release at its end
    lock:with({ timeout = 10 }, function()
      assert.is_true(lock.is_acquired)
    end)
    assert.is_false(lock.is_acquired)
  end)

  it("testWaitingProcessKilledServer", function()
    local server = h:own_server()
    support.threads(function(env)
      -- a session longer than the server's stop and restart: the holder keeps the lock
      local client = env.client({ hosts = server.hosts, timeout = 30 })
      local latch = support.latch(env, 1)
      client:add_listener(function(state)
        if state ~= "CONNECTED" then latch.count_down() end
      end)
      local is_first = true
      local result = {}
      local function call()
        local lock = make_lock(client)
        assert.is_true(lock:acquire())
        local ok, err = pcall(function()
          if is_first then
            is_first = false
            server:node(1):stop()
            assert.is_true(latch.await(30))
            server:node(1):start()
          end
        end)
        local released, rerr = pcall(lock.release, lock)
        if not released and not errors.is(rerr, errors.SessionExpiredError) then
          error(rerr, 0) -- SessionExpiredException: "happens sometimes", ignored by Curator
        end
        if not ok then error(err, 0) end
        return result
      end
      local threads = { env.spawn(call), env.spawn(call) }
      for _, t in ipairs(threads) do
        assert.are.equal(result, t:join(60))
      end
    end)
  end)

  it("testKilledSession", function()
    support.threads(function(env)
      local client = env.client({ hosts = h.hosts })
      local mutex1 = make_lock(client)
      local mutex2 = make_lock(client)
      local semaphore = support.semaphore(env, 0)
      local forever = support.event(env) -- Thread.sleep(1000000): until the test ends
      env.spawn(function()
        mutex1:acquire()
        semaphore.release()
        forever.wait(120)
      end)
      env.spawn(function()
        mutex2:acquire()
        semaphore.release()
        forever.wait(120)
      end)
      assert.is_true(semaphore.acquire(1, 10))
      h:expire_session(client)
      assert.is_true(semaphore.acquire(1, 30))
      forever.set()
    end)
  end)

  it("testContainerCleanup", function()
    local THREAD_QTY = 10
    support.threads(function(env)
      local client = env.client({ hosts = h.hosts })
      local threads = {}
      for i = 1, THREAD_QTY do
        threads[i] = env.spawn(function()
          local lock = make_lock(client)
          lock:acquire()
          local ok, err = pcall(env.sleep, 0.01) -- Thread.sleep(10): held a moment
          lock:release()
          if not ok then error(err, 0) end
        end)
      end
      for _, t in ipairs(threads) do t:join(60) end
      -- new Timing().sleepABit(): the server deletes empty containers every 500 ms here
      -- (zklua.testing's znode.container.checkIntervalMs, Curator's test sets 10 ms)
      env.eventually(function() return client:exists(LOCK_BASE_PATH) == nil end, 10,
                     "the server to delete the empty containers")
      assert.is_nil(client:exists(LOCK_BASE_PATH))
    end)
  end)

  it("testWithNamespace [difference: namespace-must-exist]", function()
    -- namespace("test"): Curator makes the namespace node on first use; zklua's chroot
    -- (hosts .. "/test") must exist: until it does, the lock's creates fail
    local client = h:client({ hosts = h.hosts .. "/test" })
    local mutex = make_lock(client)
    local ok, err = pcall(mutex.acquire, mutex, true, 10)
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.NoNodeError), tostring(err))
    assert.is_false(mutex.is_acquired)
    h:client():ensure_path("/test")
    assert.is_true(mutex:acquire(true, 10))
    mutex:release()
  end)

  it("testReentrantSingleLock", function()
    local THREAD_QTY = 10
    support.threads(function(env)
      local client = env.client({ hosts = h.hosts })
      local has_lock, is_first = false, true
      local semaphore = support.semaphore(env, 1)
      local mutex = make_lock(client)
      local threads = {}
      for i = 1, THREAD_QTY do
        threads[i] = env.spawn(function()
          assert.is_true(semaphore.acquire(1, 60))
          mutex:acquire()
          local ok, err = pcall(function()
            assert.is_false(has_lock)
            has_lock = true
            if is_first then
              is_first = false
              semaphore.release(THREAD_QTY - 1)
              -- every other thread took its permit and waits for the mutex
              assert.is_true(env.handler.wait(function() return semaphore.available() == 0 end, 60))
            else
              env.sleep(0.1) -- held a moment
            end
          end)
          mutex:release()
          has_lock = false
          if not ok then error(err, 0) end
        end)
      end
      for _, t in ipairs(threads) do t:join(60) end
    end)
  end)

  -- Curator's InterProcessMutex is re-entrant: the holding thread acquires it again and must
  -- release it as many times.  zklua's Lock is kazoo's: a second acquire by the coroutine
  -- that holds it returns false and changes nothing, and one release frees it.  foo, bar and
  -- snafu as Curator's, asserting zklua's side where they differ.
  local function snafu(mutex)
    assert.is_false(mutex:acquire(true, 10)) -- Curator: true (held twice)
    assert.is_true(mutex.is_acquired)
  end

  local function bar(mutex, count_latch, wait_latch)
    assert.is_false(mutex:acquire(true, 10)) -- Curator: true
    assert.is_true(mutex.is_acquired)
    if count_latch then
      count_latch.count_down()
      wait_latch.await(10)
    end
    snafu(mutex)
    assert.is_true(mutex.is_acquired)
  end

  local function foo(mutex, count_latch, wait_latch)
    assert.is_true(mutex:acquire(true, 10))
    assert.is_true(mutex.is_acquired)
    bar(mutex, count_latch, wait_latch)
    assert.is_true(mutex.is_acquired)
    mutex:release() -- Curator: the last of three releases; here the only one
  end

  it("testReentrant2Threads [difference: mutex-reentry]", function()
    support.threads(function(env)
      local client = env.client({ hosts = h.hosts })
      local wait_latch_for_bar = support.latch(env, 1)
      local count_latch_for_bar = support.latch(env, 1)
      local mutex = make_lock(client)
      local other = env.spawn(function()
        assert.is_true(count_latch_for_bar.await(10))
        -- a 2 s timeout instead of Curator's 10 s: it must time out all the same
        local ok, err = pcall(mutex.acquire, mutex, true, 2)
        wait_latch_for_bar.count_down()
        assert.is_false(ok) -- fail() if acquired
        assert.is_true(errors.is(err, errors.LockTimeout), tostring(err))
      end)
      foo(mutex, count_latch_for_bar, wait_latch_for_bar)
      assert.is_false(mutex.is_acquired)
      other:join(30)
    end)
  end)

  it("testReentrant [difference: mutex-reentry]", function()
    local client = h:client()
    local mutex = make_lock(client)
    foo(mutex)
    assert.is_false(mutex.is_acquired)
  end)

  it("test2Clients", function()
    support.threads(function(env)
      local client1 = env.client({ hosts = h.hosts })
      local client2 = env.client({ hosts = h.hosts })
      local mutex_for_client1 = make_lock(client1)
      local mutex_for_client2 = make_lock(client2)
      local latch_for_client1 = support.latch(env, 1)
      local latch_for_client2 = support.latch(env, 1)
      local acquired_latch_for_client1 = support.latch(env, 1)
      local acquired_latch_for_client2 = support.latch(env, 1)
      local exception_ref

      local function holder(mutex, acquired_latch, latch)
        return env.spawn(function()
          local ok, err = pcall(function()
            mutex:acquire(true, 10)
            acquired_latch.count_down()
            latch.await(10)
            mutex:release()
          end)
          if not ok then exception_ref = err end
        end)
      end
      local future1 = holder(mutex_for_client1, acquired_latch_for_client1, latch_for_client1)
      local future2 = holder(mutex_for_client2, acquired_latch_for_client2, latch_for_client2)

      env.eventually(function()
        assert.is_false(future1.done and future2.done)
        return mutex_for_client1.is_acquired or mutex_for_client2.is_acquired
      end, 20, "one holder")

      assert.is_true(mutex_for_client1.is_acquired ~= mutex_for_client2.is_acquired)
      env.sleep(1) -- Curator's second look, a second later: still exactly one holder
      assert.is_true(mutex_for_client1.is_acquired or mutex_for_client2.is_acquired)
      assert.is_true(mutex_for_client1.is_acquired ~= mutex_for_client2.is_acquired)

      if exception_ref then error(exception_ref, 0) end

      if mutex_for_client1.is_acquired then
        latch_for_client1.count_down()
        assert.is_true(acquired_latch_for_client2.await(10))
        assert.is_true(mutex_for_client2.is_acquired)
      else
        latch_for_client2.count_down()
        assert.is_true(acquired_latch_for_client1.await(10))
        assert.is_true(mutex_for_client1.is_acquired)
      end
      -- (the holder waits on its latch, which nobody counts down, for its 10 s as in Curator;
      -- counted down here so the test ends now)
      latch_for_client1.count_down()
      latch_for_client2.count_down()
      future1:join(30)
      future2:join(30)
      if exception_ref then error(exception_ref, 0) end
    end)
  end)
end)

-- ------------------------------------------------------------ TestInterProcessMutex

describe("TestInterProcessMutex", function()
  local h
  before_each(function() h = support.harness() end)
  after_each(function() h:teardown() end)

  it("testPersistentLock", function()
    local client = h:client()
    -- Curator's custom LockInternalsDriver creates the lock node PERSISTENT (withProtection):
    -- zklua's acquire(blocking, timeout, ephemeral = false)
    local lock = make_lock(client)
    lock:acquire(true, 10, false)
    assert.is_true(lock.is_acquired)

    -- Kill the session, check that lock node still exists
    h:expire_session(client)
    assert.is_not_nil(client:exists(LOCK_PATH))

    -- Release the lock and verify that the actual lock node created no longer exists
    local actual_lock_path = LOCK_PATH .. "/" .. lock.node
    assert.is_not_nil(client:exists(actual_lock_path))
    lock:release()
    assert.is_nil(client:exists(actual_lock_path))
  end)
end)
