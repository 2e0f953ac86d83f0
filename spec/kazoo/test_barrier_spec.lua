-- kazoo's kazoo/tests/test_barrier.py (KazooBarrierTests, KazooDoubleBarrierTests) in Lua,
-- against a real server: every test and assertion of kazoo's.  kazoo's threads sharing the
-- barriers are coroutines of one controller (support.threads), its Events support.event.
-- One deliberate difference (README, "Differences from kazoo": barrier-errors): kazoo's
-- enter() swallows the server's error when the barrier cannot be entered; zklua's raises it.
local errors = require "zklua.errors"
local support = require "kazoo.support"

describe("test_barrier.py", function()
  local h

  before_each(function() h = support.harness() end)
  after_each(function() h:teardown() end)

  -- ------------------------------------------------------------ KazooBarrierTests

  it("test_barrier_not_exist", function()
    local b = h.client:Barrier("/some/path")
    assert.is_true(b:wait())
  end)

  it("test_barrier_exists", function()
    local b = h.client:Barrier("/some/path")
    b:create()
    assert.is_false(b:wait(0))
    b:remove()
    assert.is_true(b:wait())
  end)

  it("test_remove_nonexistent_barrier", function()
    local b = h.client:Barrier("/some/path")
    assert.is_false(b:remove())
  end)

  -- ------------------------------------------------------------ KazooDoubleBarrierTests

  it("test_basic_barrier", function()
    local b = h.client:DoubleBarrier("/some/path", 1)
    assert.is_false(b.participating)
    b:enter()
    assert.is_true(b.participating)
    b:leave()
    assert.is_false(b.participating)
  end)

  it("test_two_barrier", function()
    support.threads(function(env)
      local client = env.client({ hosts = h.hosts })
      local av = support.event(env)
      local ev = support.event(env)
      local bv = support.event(env)
      local release_all = support.event(env)
      local b1 = client:DoubleBarrier("/some/path", 2)
      local b2 = client:DoubleBarrier("/some/path", 2)

      local function make_barrier_one()
        b1:enter()
        ev.set()
        release_all.wait()
        b1:leave()
        ev.set()
      end

      local function make_barrier_two()
        bv.wait()
        b2:enter()
        av.set()
        release_all.wait()
        b2:leave()
        av.set()
      end

      -- Spin up both of them
      local t1 = env.spawn(make_barrier_one)
      local t2 = env.spawn(make_barrier_two)

      assert.is_false(b1.participating)
      assert.is_false(b2.participating)

      bv.set()
      av.wait()
      ev.wait()
      assert.is_true(b1.participating)
      assert.is_true(b2.participating)

      av.clear()
      ev.clear()

      release_all.set()
      av.wait()
      ev.wait()
      assert.is_false(b1.participating)
      assert.is_false(b2.participating)
      t1:join()
      t2:join()
    end)
  end)

  it("test_three_barrier", function()
    support.threads(function(env)
      local client = env.client({ hosts = h.hosts })
      local av = support.event(env)
      local ev = support.event(env)
      local bv = support.event(env)
      local release_all = support.event(env)
      local b1 = client:DoubleBarrier("/some/path", 3)
      local b2 = client:DoubleBarrier("/some/path", 3)
      local b3 = client:DoubleBarrier("/some/path", 3)

      local function make_barrier_one()
        b1:enter()
        ev.set()
        release_all.wait()
        b1:leave()
        ev.set()
      end

      local function make_barrier_two()
        bv.wait()
        b2:enter()
        av.set()
        release_all.wait()
        b2:leave()
        av.set()
      end

      -- Spin up both of them
      local t1 = env.spawn(make_barrier_one)
      local t2 = env.spawn(make_barrier_two)

      assert.is_false(b1.participating)
      assert.is_false(b2.participating)

      bv.set()
      assert.is_false(b1.participating)
      assert.is_false(b2.participating)
      b3:enter()
      ev.wait()
      av.wait()

      assert.is_true(b1.participating)
      assert.is_true(b2.participating)
      assert.is_true(b3.participating)

      av.clear()
      ev.clear()

      release_all.set()
      b3:leave()
      av.wait()
      ev.wait()
      assert.is_false(b1.participating)
      assert.is_false(b2.participating)
      assert.is_false(b3.participating)
      t1:join()
      t2:join()
    end)
  end)

  it("test_barrier_existing_parent_node [difference: barrier-errors]", function()
    local b = h.client:DoubleBarrier("/some/path", 1)
    assert.is_false(b.participating)
    h.client:create("/some", nil, { ephemeral = true })
    -- the barrier cannot create children under an ephemeral node: the server says why
    -- (kazoo's enter() swallows it and returns)
    local ok, err = pcall(b.enter, b)
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.NoChildrenForEphemeralsError), tostring(err))
    assert.is_false(b.participating)
  end)

  it("test_barrier_existing_node", function()
    local b = h.client:DoubleBarrier("/some", 1)
    assert.is_false(b.participating)
    h.client:ensure_path(b.path)
    h.client:create(b.create_path, nil, { ephemeral = true })
    -- the barrier will re-use an existing node
    b:enter()
    assert.is_true(b.participating)
    b:leave()
  end)
end)
