-- Curator's TestInterProcessSemaphore (Curator 5.4, curator-recipes' locks package: it tests
-- InterProcessSemaphoreV2) in Lua: every test and assertion, against real servers, with
-- zklua's Semaphore on Curator's nodes (zk:Semaphore(path, nil, max, {layout = "curator"})).
-- Curator's threads are coroutines of one cqueues controller (support.threads).  A Curator
-- Lease is the lease of one zklua Semaphore object (an object holds at most one: where Curator
-- takes several leases from one InterProcessSemaphoreV2, here each comes from an object of its
-- own, the difference semaphore-lease-per-object); returnLease / lease.close() is release().
-- Curator's acquire(time) returns null when the time passed; zklua's raises LockTimeout
-- (semaphore-timeout-raises): a "null" is that error here.  Curator's waits of
-- timing.forWaiting() for a lease that must not come are 1 s here: the outcome is the same.
local errors = require "zklua.errors"
local support = require "curator.support"

local function semaphore_of(client, path, max)
  return client:Semaphore(path, nil, max, { layout = "curator" })
end

-- Curator's acquire(time, unit): true (a lease) or false (null: LockTimeout).
local function acquire(sem, timeout)
  local ok, err = pcall(sem.acquire, sem, true, timeout)
  if ok then return err end
  if errors.is(err, errors.LockTimeout) then return false end
  error(err, 0)
end

describe("TestInterProcessSemaphore", function()
  local h
  before_each(function() h = support.harness() end)
  after_each(function() h:teardown() end)

  it("testAcquireAfterLostServer", function()
    -- CURATOR-335.  Curator also holds one semaphore between its create and its getChildren
    -- (static test hooks) so that getChildren fails during the outage; here the runners keep
    -- acquiring through the outage, wherever each of them is
    local SEMAPHORE_PATH = "/test"
    local MAX_SEMAPHORES = 1
    local NUM_CLIENTS = 10
    local server = h:own_server()
    support.threads(function(env)
      -- a session outlived by the outage (Curator: timing.forWaiting(), "long on purpose"):
      -- LOST comes after it, as Curator's own timer says LOST
      local client = env.client({ hosts = server.hosts, timeout = 3 })
      local is_ready_latch = support.latch(env, NUM_CLIENTS)
      local acquired_queue = {}
      local stop = false
      local function runner()
        local ready = false
        while not stop do
          local semaphore = semaphore_of(client, SEMAPHORE_PATH, MAX_SEMAPHORES)
          if not ready then
            ready = true
            is_ready_latch.count_down()
          end
          local ok, err = pcall(function()
            semaphore:acquire(true, 30)
            acquired_queue[#acquired_queue + 1] = true
            env.handler.poke()
            env.sleep(0.05) -- holds it a moment (Curator's sleepABit)
          end)
          pcall(semaphore.release, semaphore)
          if not ok and not stop then
            -- a ZooKeeper error (the outage): try again a moment later, as Curator's runner
            if not (errors.is(err, errors.ZookeeperError) or errors.is(err, errors.LockTimeout)
                    or errors.is(err, errors.ConnectionLoss)) then
              error(err, 0)
            end
            env.sleep(0.1)
          end
        end
      end
      local runners = {}
      for i = 1, NUM_CLIENTS do runners[i] = env.spawn(runner) end
      assert.is_true(is_ready_latch.await(30))

      local lost, restarted = false, false
      client:add_listener(function(state)
        if state == "LOST" then lost = true
        elseif state == "CONNECTED" and lost then restarted = true end
      end)
      server:node(1):stop()
      assert.is_true(env.handler.wait(function() return lost end, 30))
      server:node(1):start()
      assert.is_true(env.handler.wait(function() return restarted end, 60))
      acquired_queue = {}
      for _ = 1, NUM_CLIENTS do
        -- acquires should continue as normal after server restart
        local polled = env.handler.wait(function() return #acquired_queue > 0 end, 30)
        if not polled then error("Semaphores not reacquired after restart") end
        table.remove(acquired_queue, 1)
      end
      stop = true
      for _, t in ipairs(runners) do t:join(60) end
    end)
  end)

  it("testClientClose", function()
    local client1 = h:client()
    local client2 = h:client()
    local semaphore1 = semaphore_of(client1, "/test", 1)
    local semaphore2 = semaphore_of(client2, "/test", 1)
    assert.is_true(acquire(semaphore2, 10))
    semaphore2:release()
    assert.is_true(acquire(semaphore1, 10))
    client1:close() -- should release any held leases
    assert.is_true(acquire(semaphore2, 10))
  end)

  it("testMaxPerSession [difference: semaphore-lease-per-object]", function()
    local CLIENT_QTY = 10
    local LOOP_QTY = 10 -- Curator: 100 (here each lease is an object: 10 keeps the run short)
    local SESSION_MAX = math.random(0, 74) + 25
    support.threads(function(env)
      local counter = { current_count = 0, max_count = 0 }
      local available = SESSION_MAX
      local threads = {}
      for c = 1, CLIENT_QTY do
        threads[c] = env.spawn(function()
          local client = env.client({ hosts = h.hosts })
          for _ = 1, LOOP_QTY do
            assert.is_true(env.handler.wait(function() return available > 0 end, 60))
            local this_qty = available > 1 and math.random(1, available) or 1
            available = available - this_qty
            assert.is_true(available >= 0)
            -- Curator's semaphore.acquire(thisQty, ...): thisQty leases, here thisQty objects
            local leases = {}
            for i = 1, this_qty do
              leases[i] = semaphore_of(client, "/test", SESSION_MAX)
              assert.is_true(acquire(leases[i], 60))
            end
            counter.current_count = counter.current_count + this_qty
            if counter.current_count > counter.max_count then
              counter.max_count = counter.current_count
            end
            env.sleep(math.random(0, 24) / 1000)
            counter.current_count = counter.current_count - this_qty
            for _, lease in ipairs(leases) do lease:release() end -- returnAll
            available = available + this_qty
            env.handler.poke()
          end
          return c
        end)
      end
      for _, t in ipairs(threads) do t:join(300) end
      assert.is_true(counter.current_count == 0)
      assert.is_true(counter.max_count > 0)
      assert.is_true(counter.max_count <= SESSION_MAX)
    end, { guard = 300 })
  end)

  it("testRelease1AtATime", function()
    local CLIENT_QTY = 10
    local MAX = math.floor(CLIENT_QTY / 2)
    support.threads(function(env)
      local max_leases, active_qty, uses = 0, 0, 0
      local threads = {}
      for i = 1, CLIENT_QTY do
        threads[i] = env.spawn(function()
          local client = env.client({ hosts = h.hosts })
          local semaphore = semaphore_of(client, "/test", MAX)
          assert.is_true(acquire(semaphore, 30))
          uses = uses + 1
          local ok, err = pcall(function()
            active_qty = active_qty + 1
            if active_qty > max_leases then max_leases = active_qty end
            env.sleep(1) -- sleepABit: held a while
          end)
          active_qty = active_qty - 1
          semaphore:release()
          client:close()
          if not ok then error(err, 0) end
        end)
      end
      for _, t in ipairs(threads) do t:join(60) end
      assert.are.equal(CLIENT_QTY, uses)
      assert.are.equal(MAX, max_leases)
    end)
  end)

  it("testReleaseInChunks", function()
    local MAX_LEASES = 11
    local THREADS = 100
    support.threads(function(env)
      local client = env.client({ hosts = h.hosts })
      local stepper = support.semaphore(env, 0) -- Curator's Stepper: countDown(n) lets n go
      local counter = { current_count = 0, max_count = 0 }
      local threads = {}
      for i = 1, THREADS do
        threads[i] = env.spawn(function()
          local semaphore = semaphore_of(client, "/test", MAX_LEASES)
          if not acquire(semaphore, 60) then error("timed out") end
          local ok, err = pcall(function()
            counter.current_count = counter.current_count + 1
            if counter.current_count > counter.max_count then
              counter.max_count = counter.current_count
            end
            assert.is_true(stepper.acquire(1, 120))
          end)
          counter.current_count = counter.current_count - 1
          semaphore:release()
          if not ok then error(err, 0) end
        end)
      end
      local remaining = THREADS
      while remaining > 0 do
        local times = math.min(math.random(1, 5), remaining)
        stepper.release(times)
        remaining = remaining - times
        env.sleep(math.random(1, 100) / 1000)
      end
      for _, t in ipairs(threads) do t:join(120) end
      assert.is_true(counter.current_count == 0)
      assert.is_true(counter.max_count > 0)
      assert.is_true(counter.max_count <= MAX_LEASES)
    end, { guard = 240 })
  end)

  it("testThreads", function()
    local THREAD_QTY = 10
    support.threads(function(env)
      local client = env.client({ hosts = h.hosts })
      local semaphore = semaphore_of(client, "/test", 1)
      local threads = {}
      for i = 1, THREAD_QTY do
        threads[i] = env.spawn(function()
          semaphore:acquire()
          local ok, err = pcall(env.sleep, 0.001)
          semaphore:release()
          if not ok then error(err, 0) end
        end)
      end
      -- awaitTermination(10 s)
      assert.is_true(env.handler.wait(function()
        for _, t in ipairs(threads) do
          if not t.done then return false end
        end
        return true
      end, 10))
    end)
  end)

  it("testSimple [difference: semaphore-lease-per-object]", function()
    local client = h:client()
    local semaphore = semaphore_of(client, "/test", 1)
    assert.is_true(acquire(semaphore, 10))
    -- Curator: a second acquire on the object waits for a second lease (null after the
    -- time); zklua: the object holds one lease, so the holder's acquire returns true at once
    -- and takes no second one
    assert.is_true(acquire(semaphore, 1))
    assert.are.equal(1, #client:get_children("/test/leases"))
    -- a second lease (another object) is not granted
    assert.is_false(acquire(semaphore_of(client, "/test", 1), 1))
  end)

  it("testSimple2 [difference: semaphore-timeout-raises]", function()
    local MAX_LEASES = 3
    local client = h:client()
    local leases = {}
    for i = 1, MAX_LEASES do
      local semaphore = semaphore_of(client, "/test", MAX_LEASES)
      assert.is_true(acquire(semaphore, 10))
      leases[i] = semaphore
    end
    local semaphore = semaphore_of(client, "/test", MAX_LEASES)
    -- Curator: acquire(time) returns null; zklua raises LockTimeout
    local ok, err = pcall(semaphore.acquire, semaphore, true, 1)
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.LockTimeout), tostring(err))
    table.remove(leases, 1):release()
    assert.is_true(acquire(semaphore, 10))
    semaphore:release()
    for _, l in ipairs(leases) do l:release() end
  end)

  it("testGetParticipantNodes [difference: semaphore-lease-per-object]", function()
    local LEASES = 3
    local client = h:client()
    local leases = {}
    for i = 1, LEASES do
      -- Curator takes the three leases from one semaphore; here from three objects
      leases[i] = semaphore_of(client, "/test", LEASES)
      assert.is_true(leases[i]:acquire())
    end
    assert.are.equal(LEASES, #leases[1]:lease_holders()) -- getParticipantNodes()
    for _, l in ipairs(leases) do l:release() end
  end)

  it("testNoOrphanedNodes [difference: semaphore-lease-per-object]", function()
    support.threads(function(env)
      local client = env.client({ hosts = h.hosts })
      local semaphore = semaphore_of(client, "/test", 1)
      assert.is_true(acquire(semaphore, 10))
      local child_nodes = client:get_children("/test/leases")
      assert.are.equal(1, #child_nodes)
      -- Curator's second acquire is another thread on the same semaphore; a zklua object
      -- holds one lease (its other coroutines wait for the object), so it is a second object
      local semaphore2 = semaphore_of(client, "/test", 1)
      local lease_future = env.spawn(function() return acquire(semaphore2, 30) end)
      -- wait for the second lease to create its node
      env.eventually(function() return #client:get_children("/test/leases") == 2 end, 10,
                     "the second lease node")
      local new_node
      for _, c in ipairs(client:get_children("/test/leases")) do
        if c ~= child_nodes[1] then new_node = c end
      end
      assert.is_not_nil(new_node)
      -- delete the ephemeral node to trigger a retry
      client:delete("/test/leases/" .. new_node)
      -- release first lease so second one can be acquired
      semaphore:release()
      assert.is_true(lease_future:join(60))
      semaphore2:release()
      assert.are.equal(0, #support.children(client, "/test/leases")) -- (a container)
      -- no more lease exist. must be possible to acquire a new one
      assert.is_true(acquire(semaphore, 10))
      semaphore:release()
    end)
  end)

  it("testInterruptAcquire", function()
    -- CURATOR-462: an acquire interrupted while waiting leaves no lease node.  Curator
    -- interrupts its thread (handle.cancel(true)) once a test hook says it waits; here the
    -- acquire is cancelled (sem:cancel()) once its node is there
    support.threads(function(env)
      local client = env.client({ hosts = h.hosts })
      local s1 = semaphore_of(client, "/test", 1)
      local s2 = semaphore_of(client, "/test", 1)
      local s3 = semaphore_of(client, "/test", 1)
      -- Acquire exclusive semaphore
      assert.is_true(acquire(s1, 10))
      -- Queue up another semaphore on the same path
      local handle = env.spawn(function() return pcall(s2.acquire, s2) end)
      -- Wait until second lease is created and its wait is started
      env.eventually(function() return #client:get_children("/test/leases") == 2 end, 10,
                     "the second lease node")
      -- Interrupt the wait
      s2:cancel()
      handle:join(30)
      -- Assert that the second lease is gone
      env.eventually(function() return #client:get_children("/test/leases") == 1 end, 10,
                     "the cancelled lease node to go")
      assert.are.equal(1, #client:get_children("/test/leases"))
      -- Assert that after closing the first (current) semaphore, we can acquire a new one
      s1:release()
      assert.is_true(acquire(s3, 10))
      s3:release()
    end)
  end)
end)
