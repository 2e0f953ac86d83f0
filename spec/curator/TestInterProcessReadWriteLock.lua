-- Curator's TestInterProcessReadWriteLock (Curator 5.4, curator-recipes' locks package) in Lua:
-- every test and assertion, against real servers, with zklua's ReadLock and WriteLock on
-- InterProcessReadWriteLock's nodes (zk:ReadLock(path, data, {layout = "curator"}) and
-- zk:WriteLock(...): _c_<uuid>-__READ__ and _c_<uuid>-__WRIT__).  Curator's readLock() and
-- writeLock() of one InterProcessReadWriteLock are here a ReadLock and a WriteLock object;
-- the lockData bytes are the identifier (each node's data).  Curator's threads are coroutines
-- of one cqueues controller (support.threads).  A zklua lock object is held by one coroutine
-- at a time (the difference rwlock-read-per-object): where Curator's threads share one
-- readLock(), each reader here has a ReadLock of its own.  Curator's acquire(time, unit)
-- returns false when the time passed; zklua's raises LockTimeout: a false is that error here.
local errors = require "zklua.errors"
local support = require "curator.support"

local function read_lock(client, path, data)
  return client:ReadLock(path, data, { layout = "curator" })
end

local function write_lock(client, path, data)
  return client:WriteLock(path, data, { layout = "curator" })
end

-- Curator's acquire(time, unit): true, or false (LockTimeout) when the time passed.
local function acquire(lock, timeout)
  local ok, err = pcall(lock.acquire, lock, true, timeout)
  if ok then return err end
  if errors.is(err, errors.LockTimeout) then return false end
  error(err, 0)
end

describe("TestInterProcessReadWriteLock", function()
  local h
  before_each(function() h = support.harness() end)
  after_each(function() h:teardown() end)

  it("testGetParticipantNodes [difference: rwlock-read-per-object]", function()
    local READERS = 20
    local WRITERS = 8
    support.threads(function(env)
      local client = env.client({ hosts = h.hosts })
      local latch = support.latch(env, READERS + WRITERS)
      local read_latch = support.latch(env, READERS)
      local exit_latch = support.latch(env, 1)
      local threads = {}
      for _ = 1, READERS do
        threads[#threads + 1] = env.spawn(function()
          local lock = read_lock(client, "/lock", "reader")
          assert.is_true(lock:acquire())
          local ok, err = pcall(function()
            latch.count_down()
            read_latch.count_down()
            exit_latch.await()
          end)
          lock:release()
          if not ok then error(err, 0) end
        end)
      end
      for _ = 1, WRITERS do
        threads[#threads + 1] = env.spawn(function()
          assert.is_true(read_latch.await(10))
          latch.count_down() -- must be before as there can only be one writer
          local lock = write_lock(client, "/lock", "writer")
          assert.is_true(lock:acquire())
          local ok, err = pcall(exit_latch.await)
          lock:release()
          if not ok then error(err, 0) end
        end)
      end
      assert.is_true(latch.await(10))
      -- Curator's getParticipantNodes() of each lock lists its own kind's nodes; zklua's
      -- contenders() lists every contender's identifier (kazoo's): counted by kind here.  The
      -- writers' nodes may still be on their way: wait until all 28 are there
      local reader = read_lock(client, "/lock", "observer")
      local contenders
      env.eventually(function()
        contenders = reader:contenders()
        return #contenders == READERS + WRITERS
      end, 10, "every contender's node")
      local readers, writers = 0, 0
      for _, id in ipairs(contenders) do
        if id == "reader" then readers = readers + 1 elseif id == "writer" then writers = writers + 1 end
      end
      assert.are.equal(readers, READERS)
      assert.are.equal(writers, WRITERS)
      exit_latch.count_down()
      for _, t in ipairs(threads) do t:join(60) end
    end)
  end)

  it("testThatUpgradingIsDisallowed", function()
    local client = h:client()
    local rlock = read_lock(client, "/lock")
    local wlock = write_lock(client, "/lock")
    assert.is_true(rlock:acquire())
    assert.is_false(acquire(wlock, 5))
    rlock:release()
  end)

  it("testThatDowngradingRespectsThreads", function()
    support.threads(function(env)
      local client = env.client({ hosts = h.hosts })
      local wlock = write_lock(client, "/lock")
      local rlock = read_lock(client, "/lock")
      local latch = support.latch(env, 1)
      local release_latch = support.latch(env, 1)
      local f1 = env.spawn(function()
        assert.is_true(wlock:acquire())
        latch.count_down()
        local ok, err = pcall(release_latch.await)
        wlock:release()
        if not ok then error(err, 0) end
      end)
      local f2 = env.spawn(function()
        assert.is_true(latch.await(10))
        assert.is_false(acquire(rlock, 5))
      end)
      f2:join(60)
      release_latch.count_down()
      f1:join(60)
    end)
  end)

  it("testDowngrading [difference: rwlock-downgrade]", function()
    local client = h:client()
    local wlock = write_lock(client, "/lock")
    local rlock = read_lock(client, "/lock")
    assert.is_true(wlock:acquire())
    -- Curator: the write lock's holder takes the read lock too; zklua's ReadLock waits for the
    -- lower writer, its own process's too, until its time passed
    assert.is_false(acquire(rlock, 5))
    wlock:release()
    -- once the writer is gone the reader gets it
    assert.is_true(acquire(rlock, 5))
    rlock:release()
  end)

  it("testBasic", function()
    local CONCURRENCY = 8
    local ITERATIONS = 100
    support.threads(function(env)
      local concurrent_count, max_concurrent_count = 0, 0
      local write_count, read_count = 0, 0
      local function do_locking(lock, max_allowed)
        assert.is_true(acquire(lock, 10))
        concurrent_count = concurrent_count + 1
        local local_concurrent_count = concurrent_count
        if local_concurrent_count > max_concurrent_count then
          max_concurrent_count = local_concurrent_count
        end
        local ok, err = pcall(function()
          assert.is_true(local_concurrent_count <= max_allowed, tostring(local_concurrent_count))
          env.sleep(math.random(1, 9) / 1000) -- holds it a moment (Curator's Thread.sleep)
        end)
        concurrent_count = concurrent_count - 1
        lock:release()
        if not ok then error(err, 0) end
      end
      local futures = {}
      for i = 1, CONCURRENCY do
        futures[i] = env.spawn(function()
          local client = env.client({ hosts = h.hosts })
          local wlock, rlock = write_lock(client, "/lock"), read_lock(client, "/lock")
          for _ = 1, ITERATIONS do
            if math.random(0, 99) < 10 then
              do_locking(wlock, 1)
              write_count = write_count + 1
            else
              do_locking(rlock, math.huge)
              read_count = read_count + 1
            end
          end
        end)
      end
      for _, f in ipairs(futures) do f:join(120) end
      assert.is_true(write_count > 0)
      assert.is_true(read_count > 0)
      assert.is_true(max_concurrent_count > 1)
    end, { guard = 180 })
  end)

  it("testSetNodeData", function()
    local client = h:client()
    local node_data = { 1, 2, 3, 4 }
    local lock = write_lock(client, "/lock", string.char(node_data[1], node_data[2], node_data[3], node_data[4]))
    -- mutate passed-in node data, lock has made copy (a Lua string cannot change)
    node_data[1] = 5
    assert.is_true(lock:acquire())
    local children = client:get_children("/lock")
    assert.are.equal(1, #children)
    local data_in_zk = client:get("/lock/" .. children[1])
    assert.is_not_nil(data_in_zk)
    assert.are.equal("\1\2\3\4", data_in_zk)
    lock:release()
  end)

  it("testLockPath", function()
    local client1 = h:client()
    local client2 = h:client()
    local lock1 = write_lock(client1, "/lock")
    local lock2 = read_lock(client2, "/lock")
    assert.is_true(lock1:acquire())
    local lock_path = lock1.node -- getLockPath()
    assert.is_truthy(lock_path)
    h:expire_session(client1) -- KillSession.kill
    assert.is_true(lock2:acquire(true, 30))
    local ok, err = pcall(client1.get, client1, lock_path)
    assert.is_false(ok, "expected not to find node")
    assert.is_true(errors.is(err, errors.NoNodeError), tostring(err))
    lock2:release()
    lock1:release()
  end)
end)
