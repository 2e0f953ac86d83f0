-- Curator's TestDistributedDoubleBarrier (Curator 5.4, curator-recipes' barriers package) in
-- Lua, against real servers, with zklua's DoubleBarrier in Curator's layout
-- (zk:DoubleBarrier(path, qty, {layout = "curator"}): DistributedDoubleBarrier's nodes and leave
-- algorithm).  Curator's threads are coroutines of one cqueues controller (support.threads),
-- its CountDownLatch and Semaphore support.latch and support.semaphore; Timing.seconds() is
-- 10 s, Curator's default.  Every assertion is Curator's.
local support = require "curator.support"

local QTY = 5
local SECONDS = 10 -- Curator's Timing().seconds()

local function barrier_of(client, path, qty)
  return client:DoubleBarrier(path, qty, { layout = "curator" })
end

describe("TestDistributedDoubleBarrier", function()
  local h
  before_each(function() h = support.harness() end)
  after_each(function() h:teardown() end)

  it("testMultiClient", function()
    support.threads(function(env)
      local post_enter_latch = support.latch(env, QTY)
      local post_leave_latch = support.latch(env, QTY)
      local count, max = 0, 0
      local futures = {}
      for i = 1, QTY do
        futures[i] = env.spawn(function()
          local client = env.client({ hosts = h.hosts }) -- a client per thread
          local barrier = barrier_of(client, "/barrier", QTY)
          assert.is_true(barrier:enter(SECONDS))
          count = count + 1
          if count > max then max = count end
          post_enter_latch.count_down()
          assert.is_true(post_enter_latch.await(SECONDS))
          assert.are.equal(QTY, count)
          assert.is_true(barrier:leave(SECONDS))
          count = count - 1
          post_leave_latch.count_down()
          assert.is_true(post_enter_latch.await(SECONDS)) -- sic: Curator awaits postEnterLatch
          client:close()
        end)
      end
      for _, f in ipairs(futures) do f:join(120) end
      assert.are.equal(0, count)
      assert.are.equal(QTY, max)
    end)
  end)

  it("testOverSubscribed", function()
    -- QTY + 1 barriers of one client, threshold QTY: "a threshold, not a limit".  Curator holds
    -- each one inside enter, in its getChildrenForEntering() hook, until all QTY + 1 are
    -- trying to enter; zklua's enter (the C state machine) has no hook, so each coroutine
    -- takes the hook's semaphore and latch just before its enter, and all QTY + 1 enters start
    -- together on the one client
    support.threads(function(env)
      local client = h:client({ handler = env.handler })
      local semaphore = support.semaphore(env, 0)
      local latch = support.latch(env, 1)
      local futures = {}
      for i = 1, QTY + 1 do
        futures[i] = env.spawn(function()
          local barrier = barrier_of(client, "/barrier", QTY)
          semaphore.release()
          assert.is_true(latch.await(SECONDS))
          assert.is_true(barrier:enter(SECONDS))
          assert.is_true(barrier:leave(SECONDS))
        end)
      end
      -- wait until all QTY+1 barriers are trying to enter
      assert.is_true(semaphore.acquire(QTY + 1, SECONDS))
      latch.count_down()
      for _, f in ipairs(futures) do f:join(120) end -- to check for assertions
    end)
  end)

  it("testBasic", function()
    support.threads(function(env)
      local client = h:client({ handler = env.handler })
      local post_enter_latch = support.latch(env, QTY)
      local post_leave_latch = support.latch(env, QTY)
      local count, max = 0, 0
      local futures = {}
      for i = 1, QTY do
        futures[i] = env.spawn(function()
          local barrier = barrier_of(client, "/barrier", QTY)
          assert.is_true(barrier:enter(SECONDS))
          count = count + 1
          if count > max then max = count end
          post_enter_latch.count_down()
          assert.is_true(post_enter_latch.await(SECONDS))
          assert.are.equal(QTY, count)
          assert.is_true(barrier:leave(10))
          count = count - 1
          post_leave_latch.count_down()
          assert.is_true(post_leave_latch.await(SECONDS))
        end)
      end
      for _, f in ipairs(futures) do f:join(120) end
      assert.are.equal(0, count)
      assert.are.equal(QTY, max)
    end)
  end)
end)
