-- kazoo's kazoo/tests/test_lock.py (KazooLockTests, TestSemaphore, TestSequence) in Lua,
-- against a real server: every test and assertion of kazoo's, each `it` named after kazoo's
-- test (test_lock_one, in both classes, with its class).  kazoo's threads sharing one Lock or
-- Semaphore are coroutines sharing one zklua object (support.threads); its Condition waits are
-- waits for the condition they loop on, and its Events support.event.  kazoo waits forever
-- where a thread never comes: here every such wait has an upper bound (GUARD) that fails the
-- test.  TestSequence mocks get_children; here the same children are made on the server and
-- the lock's decision (who blocks it) is observed.
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local support = require "kazoo.support"

local unpack = require("zklua.compat").unpack

local GUARD = 60 -- s: the most any wait for another thread may take before the test fails

local THREAD_COUNT = 20 -- KazooLockTests.thread_count

-- Waits (yielding) until pred() holds; fails after GUARD seconds.
local function wait_until(env, pred, what)
  if not env.handler.wait(pred, GUARD) then
    error("timed out waiting for " .. (what or "a condition"), 2)
  end
end

-- kazoo's test_util.Wait: polls pred until it holds (its 9 s bound raised to GUARD).
local function poll(env, pred, what)
  env.eventually(pred, GUARD, what)
end

-- kazoo's expire_session(): the server expires zk's session; returns once zk is CONNECTED on
-- a new session (yielding: zk is on env's handler).
local function expire_session(env, zk)
  testing.expire_session(zk, 30)
  wait_until(env, function() return zk.state == "CONNECTED" end, "the new session")
end

-- KazooLockTests' setUp and _thread_lock_acquire_til_event.
local function lock_tests(env)
  local t = { active_thread = nil, cancelled_threads = {}, released = support.event(env) }

  function t.acquire_til_event(name, lock, event)
    local ok, err = pcall(lock.with, lock, function()
      assert.is_nil(t.active_thread)
      t.active_thread = name
      env.handler.poke()
      event.wait()
      assert.are.equal(name, t.active_thread)
      t.active_thread = nil
      env.handler.poke()
    end)
    if ok then
      t.released.set()
    elseif errors.is(err, errors.CancelledError) then
      t.cancelled_threads[#t.cancelled_threads + 1] = name
      env.handler.poke()
    else
      error(err, 0)
    end
  end

  function t.cancelled(name)
    for _, n in ipairs(t.cancelled_threads) do
      if n == name then return true end
    end
    return false
  end

  return t
end

local function sum(list)
  local total = 0
  for _, v in ipairs(list) do total = total + v end
  return total
end

local function as_set(list)
  local set = {}
  for _, v in ipairs(list) do set[v] = true end
  return set
end

describe("test_lock.py", function()
  local h, lockpath

  before_each(function()
    h = support.harness()
    lockpath = support.unique_path()
  end)
  after_each(function() h:teardown() end)

  -- A client of the harness on env's handler (started).
  local function client_on(env)
    return env.client({ hosts = h.hosts })
  end

  -- ------------------------------------------------------------ KazooLockTests

  it("KazooLockTests::test_lock_one", function()
    support.threads(function(env)
      local client = client_on(env)
      local t = lock_tests(env)
      local lock_name = support.uuid()
      local lock = client:Lock(lockpath, lock_name)
      local event = support.event(env)
      local thread = env.spawn(t.acquire_til_event, lock_name, lock, event)

      local lock2_name = support.uuid()
      local anotherlock = client:Lock(lockpath, lock2_name)

      -- wait for any contender to show up on the lock
      poll(env, function() return #anotherlock:contenders() > 0 end, "a contender")
      assert.are.same({ lock_name }, anotherlock:contenders())

      wait_until(env, function() return t.active_thread == lock_name end, "the holder")

      -- release the lock
      event.set()

      wait_until(env, function() return not t.active_thread end, "the release")
      t.released.wait()
      thread:join()
    end)
  end)

  it("test_lock", function()
    support.threads(function(env)
      local client = client_on(env)
      local t = lock_tests(env)
      local threads, names, contender_bits = {}, {}, {}
      for i = 0, 4 do names[#names + 1] = "contender" .. i end

      local lock = client:Lock(lockpath, "test")
      local events = {}
      for _, name in ipairs(names) do
        events[name] = support.event(env)
      end

      -- acquire the lock ourselves first to make the others line up
      lock:acquire()

      for _, name in ipairs(names) do
        local thread = env.spawn(t.acquire_til_event, name, client:Lock(lockpath, name),
                                 events[name])
        contender_bits[name] = { thread, events[name] }
        threads[#threads + 1] = thread
      end

      -- wait for everyone to line up on the lock
      poll(env, function() return #lock:contenders() == 6 end, "6 contenders")
      local contenders = lock:contenders()

      assert.are.equal("test", contenders[1])
      contenders = { unpack(contenders, 2) }
      local remaining = { unpack(contenders) }

      -- release the lock and contenders should claim it in order
      lock:release()

      for _, contender in ipairs(contenders) do
        local event = contender_bits[contender][2]
        wait_until(env, function() return t.active_thread end, "a holder")
        assert.are.equal(contender, t.active_thread)

        assert.are.same(remaining, lock:contenders())
        remaining = { unpack(remaining, 2) }

        event.set()

        wait_until(env, function() return not t.active_thread end, "the release")
      end
      for _, thread in ipairs(threads) do thread:join() end
    end)
  end)

  it("test_lock_reconnect", function()
    support.threads(function(env)
      local client = client_on(env)
      local t = lock_tests(env)
      local event = support.event(env)
      local other_lock = client:Lock(lockpath, "contender")

      -- acquire the lock ourselves first to make the contender line up
      local lock = client:Lock(lockpath, "test")
      lock:acquire()

      local thread = env.spawn(t.acquire_til_event, "contender", other_lock, event)
      -- wait for the contender to line up on the lock
      poll(env, function() return #lock:contenders() == 2 end, "2 contenders")
      assert.are.same({ "test", "contender" }, lock:contenders())

      expire_session(env, client)

      lock:release()

      wait_until(env, function() return t.active_thread end, "a holder")
      assert.are.equal("contender", t.active_thread)

      event.set()
      thread:join()
    end)
  end)

  it("test_lock_non_blocking", function()
    support.threads(function(env)
      local client = client_on(env)
      local t = lock_tests(env)
      local lock_name = support.uuid()
      local lock = client:Lock(lockpath, lock_name)
      local event = support.event(env)

      local thread = env.spawn(t.acquire_til_event, lock_name, lock, event)

      local lock1 = client:Lock(lockpath, lock_name)

      -- wait for the thread to acquire the lock
      wait_until(env, function() return t.active_thread end, "the holder")

      assert.is_false(lock1:acquire(false))
      assert.are.same({ lock_name }, lock:contenders()) -- just one - itself

      event.set()
      thread:join()
    end)
  end)

  it("test_lock_fail_first_call", function()
    support.threads(function(env)
      local client = client_on(env)
      local t = lock_tests(env)
      local event1 = support.event(env)
      local lock1 = client:Lock(lockpath, "one")
      local thread1 = env.spawn(t.acquire_til_event, "one", lock1, event1)

      -- wait for this thread to acquire the lock
      wait_until(env, function() return t.active_thread end, "the holder")
      assert.are.equal("one", t.active_thread)
      assert.are.same({ "one" }, lock1:contenders())
      event1.set()
      thread1:join()
    end)
  end)

  it("test_lock_cancel", function()
    support.threads(function(env)
      local client = client_on(env)
      local t = lock_tests(env)
      local event1 = support.event(env)
      local lock1 = client:Lock(lockpath, "one")
      local thread1 = env.spawn(t.acquire_til_event, "one", lock1, event1)

      -- wait for this thread to acquire the lock
      wait_until(env, function() return t.active_thread end, "the holder")
      assert.are.equal("one", t.active_thread)

      local client2 = client_on(env)
      local event2 = support.event(env)
      local lock2 = client2:Lock(lockpath, "two")
      local thread2 = env.spawn(t.acquire_til_event, "two", lock2, event2)

      -- this one should block in acquire. check that it is a contender
      poll(env, function() return #lock2:contenders() > 1 end, "2 contenders")
      assert.are.same({ "one", "two" }, lock2:contenders())

      lock2:cancel()
      wait_until(env, function() return t.cancelled("two") end, "the cancelled acquire")
      assert.is_true(t.cancelled("two"))

      assert.are.same({ "one" }, lock2:contenders())

      thread2:join()
      event1.set()
      thread1:join()
      client2:stop()
    end)
  end)

  it("test_lock_no_double_calls", function()
    local lock1 = h.client:Lock(lockpath, "one")
    lock1:acquire()
    assert.is_true(lock1.is_acquired)
    assert.is_false(lock1:acquire(true, 0.5))
    assert.is_true(lock1.is_acquired)
    lock1:release()
    assert.is_false(lock1.is_acquired)
  end)

  it("test_lock_same_thread_no_block", function()
    local lock = h.client:Lock(lockpath, "one")
    local gotten = lock:acquire(false)
    assert.is_true(gotten)
    assert.is_true(lock.is_acquired)
    gotten = lock:acquire(false)
    assert.is_false(gotten)
  end)

  it("test_lock_many_threads_no_block", function()
    support.threads(function(env)
      local client = client_on(env)
      local lock = client:Lock(lockpath, "one")
      local attempts = {}

      local function acquire()
        attempts[#attempts + 1] = lock:acquire(false) and 1 or 0
      end

      local threads = {}
      for _ = 1, THREAD_COUNT do threads[#threads + 1] = env.spawn(acquire) end
      for _, thread in ipairs(threads) do thread:join() end

      assert.are.equal(1, sum(attempts))
    end)
  end)

  it("test_lock_many_threads", function()
    support.threads(function(env)
      local client = client_on(env)
      local sleep_func = env.sleep
      local lock = client:Lock(lockpath, "one")
      local acquires, differences = {}, {}
      local arrived = 0 -- kazoo's SleepBarrier(thread_count)

      local function acquire()
        -- Wait until all threads are ready to go...
        arrived = arrived + 1
        wait_until(env, function() return arrived >= THREAD_COUNT end, "every thread")
        lock:with(function()
          -- Ensure that no two threads enter here and cause the count to differ by more
          -- than one, do this by recording the count that was captured and examining it
          -- post run.
          local starting_count = #acquires
          acquires[#acquires + 1] = 1
          sleep_func(0.01)
          local end_count = #acquires
          differences[#differences + 1] = end_count - starting_count
        end)
        arrived = arrived - 1
      end

      local threads = {}
      for _ = 1, THREAD_COUNT do threads[#threads + 1] = env.spawn(acquire) end
      for _, thread in ipairs(threads) do thread:join(GUARD) end

      assert.are.equal(THREAD_COUNT, #acquires)
      local ones = {}
      for i = 1, THREAD_COUNT do ones[i] = 1 end
      assert.are.same(ones, differences)
    end)
  end)

  it("test_lock_reacquire", function()
    local lock = h.client:Lock(lockpath, "one")
    lock:acquire()
    lock:release()
    lock:acquire()
    lock:release()
  end)

  it("test_lock_ephemeral", function()
    local client1 = h:get_client()
    client1:start()
    local lock = client1:Lock(lockpath, "ephemeral")
    lock:acquire(true, nil, false)
    local znode = lockpath .. "/" .. lock.node
    client1:stop()
    local ok, err = pcall(h.client.get, h.client, znode)
    assert(ok, "NoNodeError raised unexpectedly! " .. tostring(err))
  end)

  it("test_lock_timeout", function()
    support.threads(function(env)
      local client = client_on(env)
      local timeout = 3
      local e = support.event(env)
      local started = support.event(env)

      -- In the background thread, acquire the lock and wait thrice the time that the main
      -- thread is going to wait to acquire the lock.
      local lock1 = client:Lock(lockpath, "one")

      local function thread(lock, event, wait)
        lock:with(function()
          started.set()
          event.wait(wait)
          if not event.is_set() then
            -- Eventually fail to avoid hanging the tests
            error("lock2 never timed out")
          end
        end)
      end

      local t = env.spawn(thread, lock1, e, timeout * 3)

      -- Start the main thread's client and try to acquire the lock but give up after
      -- `timeout` seconds
      local client2 = client_on(env)
      started.wait(GUARD)
      assert.is_true(started.is_set())
      local lock2 = client2:Lock(lockpath, "two")
      local ok, err = pcall(lock2.acquire, lock2, true, timeout)
      -- Cleanup
      e.set()
      t:join()
      client2:stop()
      -- A timeout is the behavior we're expecting, since the background thread should still
      -- be holding onto the lock
      assert(not ok, "Main thread unexpectedly acquired the lock")
      assert.is_true(errors.is(err, errors.LockTimeout), tostring(err))
    end)
  end)

  it("test_read_lock", function()
    -- Test that we can obtain a read lock
    local lock = h.client:ReadLock(lockpath, "reader one")
    local gotten = lock:acquire(false)
    assert.is_true(gotten)
    assert.is_true(lock.is_acquired)
    -- and that it's still not reentrant.
    gotten = lock:acquire(false)
    assert.is_false(gotten)
    -- Test that a second client we can share the same read lock
    local client2 = h:get_client()
    client2:start()
    local lock2 = client2:ReadLock(lockpath, "reader two")
    gotten = lock2:acquire(false)
    assert.is_true(gotten)
    assert.is_true(lock2.is_acquired)
    gotten = lock2:acquire(false)
    assert.is_false(gotten)
    -- Test that a writer is unable to share it
    local client3 = h:get_client()
    client3:start()
    local lock3 = client3:WriteLock(lockpath, "writer")
    gotten = lock3:acquire(false)
    assert.is_false(gotten)
  end)

  it("test_write_lock", function()
    -- Test that we can obtain a write lock
    local lock = h.client:WriteLock(lockpath, "writer")
    local gotten = lock:acquire(false)
    assert.is_true(gotten)
    assert.is_true(lock.is_acquired)
    gotten = lock:acquire(false)
    assert.is_false(gotten)

    -- Test that we are unable to obtain a read lock while the write lock is held.
    local client2 = h:get_client()
    client2:start()
    local lock2 = client2:ReadLock(lockpath, "reader")
    gotten = lock2:acquire(false)
    assert.is_false(gotten)
  end)

  it("test_rw_lock", function()
    support.threads(function(env)
      local client = client_on(env)
      local t = lock_tests(env)
      local reader_event = support.event(env)
      local reader_lock = client:ReadLock(lockpath, "reader")
      local writer_event = support.event(env)
      local writer_lock = client:WriteLock(lockpath, "writer")

      -- acquire a write lock ourselves first to make the others line up
      local lock = client:WriteLock(lockpath, "test")
      lock:acquire()

      local reader_thread = env.spawn(t.acquire_til_event, "reader", reader_lock, reader_event)
      -- make sure reader_thread is a contender before writer_thread
      poll(env, function() return #lock:contenders() == 2 end, "the reader")
      local writer_thread = env.spawn(t.acquire_til_event, "writer", writer_lock, writer_event)

      -- wait for everyone to line up on the lock
      poll(env, function() return #lock:contenders() == 3 end, "the writer")
      local contenders = lock:contenders()

      assert.are.equal("test", contenders[1])
      local remaining = { unpack(contenders, 2) }

      local contender_bits = {
        { "reader", reader_thread, reader_event },
        { "writer", writer_thread, writer_event },
      }

      -- release the lock and contenders should claim it in order
      lock:release()

      for _, bits in ipairs(contender_bits) do
        local contender, event = bits[1], bits[3]
        wait_until(env, function() return t.active_thread end, "a holder")
        assert.are.equal(contender, t.active_thread)

        assert.are.same(remaining, lock:contenders())
        remaining = { unpack(remaining, 2) }

        event.set()

        wait_until(env, function() return not t.active_thread end, "the release")
      end

      reader_thread:join()
      writer_thread:join()
    end)
  end)

  -- ------------------------------------------------------------ TestSemaphore

  it("test_basic", function()
    local sem1 = h.client:Semaphore(lockpath)
    sem1:acquire()
    sem1:release()
  end)

  it("TestSemaphore::test_lock_one", function()
    support.threads(function(env)
      local client = client_on(env)
      local sem1 = client:Semaphore(lockpath, nil, 1)
      local sem2 = client:Semaphore(lockpath, nil, 1)
      local started = support.event(env)
      local event = support.event(env)

      sem1:acquire()

      local thread = env.spawn(function()
        started.set()
        sem2:with(function() event.set() end)
      end)
      started.wait(GUARD)

      assert.is_false(event.is_set())

      sem1:release()
      event.wait(GUARD)
      assert.is_true(event.is_set())
      thread:join()
    end)
  end)

  it("test_non_blocking", function()
    local sem1 = h.client:Semaphore(lockpath, "sem1", 2)
    local sem2 = h.client:Semaphore(lockpath, "sem2", 2)
    local sem3 = h.client:Semaphore(lockpath, "sem3", 2)

    sem1:acquire()
    sem2:acquire()
    assert.is_false(sem3:acquire(false))
    assert.are.same(as_set({ "sem1", "sem2" }), as_set(sem1:lease_holders()))
    sem2:release()
    -- the next line isn't required, but avoids timing issues in tests
    sem3:acquire()
    assert.are.same(as_set({ "sem1", "sem3" }), as_set(sem1:lease_holders()))
    sem1:release()
    sem3:release()
  end)

  it("test_non_blocking_release", function()
    local sem1 = h.client:Semaphore(lockpath, "sem1", 1)
    local sem2 = h.client:Semaphore(lockpath, "sem2", 1)
    sem1:acquire()
    sem2:acquire(false)

    -- make sure there's no shutdown / cleanup error
    sem1:release()
    sem2:release()
  end)

  it("test_holders", function()
    support.threads(function(env)
      local client = client_on(env)
      local started = support.event(env)
      local event = support.event(env)

      local thread = env.spawn(function()
        client:Semaphore(lockpath, "fred", 1):with(function()
          started.set()
          event.wait()
        end)
      end)
      started.wait()
      local sem1 = client:Semaphore(lockpath)
      local holders = sem1:lease_holders()
      assert.are.same({ "fred" }, holders)
      event.set()
      thread:join()
    end)
  end)

  it("test_semaphore_cancel", function()
    support.threads(function(env)
      local client = client_on(env)
      local sem1 = client:Semaphore(lockpath, "fred", 1)
      local sem2 = client:Semaphore(lockpath, "george", 1)
      sem1:acquire()
      local started = support.event(env)
      local event = support.event(env)

      local thread = env.spawn(function()
        started.set()
        local ok, err = pcall(sem2.with, sem2, function() started.set() end)
        if not ok then
          if not errors.is(err, errors.CancelledError) then error(err, 0) end
          event.set()
        end
      end)
      started.wait()
      assert.are.same({ "fred" }, sem1:lease_holders())
      assert.is_false(event.is_set())
      sem2:cancel()
      event.wait()
      assert.is_true(event.is_set())
      thread:join()
    end)
  end)

  it("test_multiple_acquire_and_release", function()
    local sem1 = h.client:Semaphore(lockpath, "fred", 1)
    sem1:acquire()
    sem1:acquire()

    assert.is_true(sem1:release())
    assert.is_false(sem1:release())
  end)

  it("test_handle_session_loss", function()
    support.threads(function(env)
      local client = client_on(env)
      local expire_semaphore = client:Semaphore(lockpath, "fred", 1)

      local client2 = client_on(env)
      local lh_semaphore = client2:Semaphore(lockpath, "george", 1)
      lh_semaphore:acquire()

      local started = support.event(env)
      local event = support.event(env)
      local event2 = support.event(env)

      local thread1 = env.spawn(function()
        started.set()
        expire_semaphore:with(function()
          event.set()
          event2.wait()
        end)
      end)

      started.wait()
      assert.are.same({ "george" }, lh_semaphore:lease_holders())

      -- Fired in a separate thread to make sure we can see the effect
      local expired = support.event(env)
      local thread2 = env.spawn(function()
        expire_session(env, client)
        expired.set()
      end)
      -- (kazoo also waits for the semaphore's internal wake_event here: the expiry it sees)
      expired.wait()

      lh_semaphore:release()
      client2:stop()

      event.wait(GUARD)
      assert.are.same({ "fred" }, expire_semaphore:lease_holders())
      event2.set()

      thread1:join()
      thread2:join()
    end)
  end)

  it("test_inconsistent_max_leases", function()
    local sem1 = h.client:Semaphore(lockpath, nil, 1)
    local sem2 = h.client:Semaphore(lockpath, nil, 2)

    sem1:acquire()
    local ok, err = pcall(sem2.acquire, sem2) -- kazoo: ValueError
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.BadArgumentsError), tostring(err))
  end)

  it("test_inconsistent_max_leases_other_data", function()
    local sem1 = h.client:Semaphore(lockpath, nil, 1)
    local sem2 = h.client:Semaphore(lockpath, nil, 2)

    h.client:ensure_path(lockpath)
    h.client:set(lockpath, "a$")

    sem1:acquire()
    -- sem2 thinks it's ok to have two lease holders
    assert.is_true(sem2:acquire(false))
  end)

  it("test_reacquire", function()
    local lock = h.client:Semaphore(lockpath)
    lock:acquire()
    lock:release()
    lock:acquire()
    lock:release()
  end)

  it("test_acquire_after_cancelled", function()
    local lock = h.client:Semaphore(lockpath)
    assert.is_true(lock:acquire())
    assert.is_true(lock:release())
    lock:cancel()
    assert.is_true(lock.cancelled)
    assert.is_true(lock:acquire())
  end)

  it("test_timeout", function()
    support.threads(function(env)
      local client = client_on(env)
      local timeout = 3
      local e = support.event(env)
      local started = support.event(env)

      -- In the background thread, acquire the lock and wait thrice the time that the main
      -- thread is going to wait to acquire the lock.
      local sem1 = client:Semaphore(lockpath, "one")

      local function thread(sem, event, wait)
        sem:with(function()
          started.set()
          event.wait(wait)
          if not event.is_set() then
            -- Eventually fail to avoid hanging the tests
            error("sem2 never timed out")
          end
        end)
      end

      local t = env.spawn(thread, sem1, e, timeout * 3)

      -- Start the main thread's client and try to acquire the lock but give up after
      -- `timeout` seconds
      local client2 = client_on(env)
      started.wait(GUARD)
      assert.is_true(started.is_set())
      local sem2 = client2:Semaphore(lockpath, "two")
      local ok, err = pcall(sem2.acquire, sem2, true, timeout)
      if not ok and errors.is(err, errors.LockTimeout) then
        -- A timeout is the behavior we're expecting, since the background thread will still
        -- be holding onto the lock
        e.set()
      end
      -- Cleanup
      t:join()
      client2:stop()
      if not ok and not errors.is(err, errors.LockTimeout) then error(err, 0) end
    end)
  end)

  -- ------------------------------------------------------------ TestSequence

  -- kazoo's children: a go-zookeeper lock node and two other nodes, made on the server (the
  -- go node first, sequential, as go-zookeeper makes it, so it comes before ours).
  local GO_PREFIX = "_c_8eb60557ba51e0da67eefc47467d3f34-lock-"

  local function foreign_children(client)
    client:ensure_path(lockpath)
    client:create(lockpath .. "/hello")
    local go_lock = client:create(lockpath .. "/" .. GO_PREFIX, "go", { sequence = true })
    client:create(lockpath .. "/world")
    return go_lock:match("[^/]+$")
  end

  it("test_get_predecessor", function()
    -- Validate selection of predecessors.
    foreign_children(h.client)
    local lock = h.client:Lock(lockpath, "test")
    -- our node has no predecessor: the go node is not a contender of a plain Lock
    assert.is_true(lock:acquire(false))
    assert.are.same({ "test" }, lock:contenders())
    lock:release()
  end)

  it("test_get_predecessor_go", function()
    -- Test selection of predecessor when instructed to consider go-zk locks.
    local go_lock = foreign_children(h.client)
    support.threads(function(env)
      local client = client_on(env)
      local lock = client:Lock(lockpath, "test", { "-lock-" })
      local got = env.spawn(lock.acquire, lock)
      -- the go node is our predecessor: we wait behind it, until it goes
      poll(env, function() return #lock:contenders() == 2 end, "our node")
      assert.are.same({ "go", "test" }, lock:contenders())
      assert.is_false(got.done)
      client:delete(lockpath .. "/" .. go_lock)
      assert.is_true(got:join(GUARD))
      lock:release()
    end)
  end)
end)
