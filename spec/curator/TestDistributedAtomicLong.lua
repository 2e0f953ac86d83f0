-- Curator's TestDistributedAtomicLong (Curator 5.4, curator-recipes' atomic package) in Lua:
-- every test and assertion, against real servers, with zklua's Counter on
-- DistributedAtomicLong's node (zk:Counter(path, 0, {layout = "curator-atomic-long"}): 8
-- big-endian bytes, adds in Curator's optimistic mode).  Curator's threads are coroutines of
-- one cqueues controller (support.threads).  increment(), decrement(), add(n), subtract(n) are
-- add(1), sub(1), add(n), sub(n), whose pre and post values are AtomicValue's preValue() and
-- postValue(); get() is get().  The Counter only adds (atomic-long-add-only): it has no
-- compareAndSet, trySet, forceSet or initialize, and no AtomicValue (an add happened, or it
-- raised: there is no succeeded() == false, and no stats of its tries); where Curator's test
-- forces a value, the test here writes the node's 8 bytes itself (client:set, what forceSet
-- does to a node that exists).  It has no promoted-to-lock mode (atomic-long-retries).
local errors = require "zklua.errors"
local support = require "curator.support"

local LAYOUT = { layout = "curator-atomic-long" }

local function dal_of(client, path)
  return client:Counter(path, 0, LAYOUT)
end

-- DistributedAtomicLong.valueToBytes(n): 8 big-endian bytes (n >= 0 here).
local function to_bytes(n)
  local b = {}
  for i = 8, 1, -1 do
    b[i] = string.char(n % 256)
    n = math.floor(n / 256)
  end
  return table.concat(b)
end

local function version_of(client, path)
  return select(2, client:get(path)).version
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
    local ok, err = pcall(function() return dal:get() end)
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.KazooException), tostring(err))
    assert.is_falsy(tostring(err):match("underflow") or tostring(err):match("overflow"))
  end)

  it("testCompareAndSetWithFreshInstance [difference: atomic-long-add-only]", function()
    local client = h:client()
    -- Curator: compareAndSet(0, 1) on a missing node fails, initialize(0) creates it, then
    -- compareAndSet(0, 1) succeeds and initialize(0) fails (the node exists).  zklua: the
    -- counter's first call creates the node holding its default (atomic-long-create) ...
    local dal = dal_of(client, "/counter")
    assert.are.equal(0, dal:get())
    assert.are.equal(0, version_of(client, "/counter"))
    local _, pre, post = dal:add(1)
    assert.are.equal(0, pre)
    assert.are.equal(1, post)
    -- ... and the default of another counter never sets a node that exists (initialize false)
    assert.are.equal(1, client:Counter("/counter", 5, LAYOUT):get())
    assert.are.equal(to_bytes(1), (client:get("/counter")))
  end)

  it("testCompareAndSet [difference: atomic-long-add-only]", function()
    local client = h:client()
    local dal = dal_of(client, "/counter")
    dal:get()
    client:set("/counter", to_bytes(1)) -- forceSet(1)
    -- Curator: compareAndSet(1, 5) succeeds, a second compareAndSet(1, 5) fails; zklua adds
    local _, pre, post = dal:add(4)
    assert.are.equal(1, pre)
    assert.are.equal(5, post)
    -- Curator: an increment by another DistributedAtomicLong between the read and the set
    -- makes compareAndSet(5, 10) fail on the version.  zklua's add applies on top of it: many
    -- adds of two clients that race each other's versions sum exactly
    local other = dal_of(h:client(), "/counter")
    support.threads(function(env)
      local a = env.spawn(function() for _ = 1, 50 do dal:add(1) end end)
      local b = env.spawn(function() for _ = 1, 50 do other:add(1) end end)
      a:join(60)
      b:join(60)
    end)
    assert.are.equal(105, dal:get())
    assert.are.equal(to_bytes(105), (client:get("/counter")))
  end)

  it("testForceSet [difference: atomic-long-add-only]", function()
    support.threads(function(env)
      local client = env.client({ hosts = h.hosts })
      local dal = dal_of(client, "/counter")
      dal:get()
      local incrementer = env.spawn(function()
        for _ = 1, 1000 do
          dal:add(1)
          env.sleep(0.01)
        end
      end)
      local setter = env.spawn(function()
        for _ = 1, 1000 do
          client:set("/counter", to_bytes(0)) -- forceSet(0)
          env.sleep(0.01)
        end
      end)
      -- Curator reads at once, while its threads run on (its executor is never shut down)
      local value = dal:get()
      assert.is_true(value < 10)
      -- every add read the forced value and went on on top of it (none raised)
      incrementer:join(60)
      setter:join(60)
      assert.is_true(incrementer.ok and setter.ok)
      assert.is_true(dal:get() >= 0)
    end, { guard = 120 })
  end)

  it("testSimulation [difference: atomic-long-retries]", function()
    local thread_qty = 20
    local execution_qty = 50
    local failures, errors_ = 0, 0
    support.threads(function(env)
      local procs = {}
      for i = 1, thread_qty do
        procs[i] = env.spawn(function()
          local previous_value = -1
          local client = env.client({ hosts = h.hosts })
          -- Curator: ExponentialBackoffRetry(3, 3) and PromotedToLock on "/lock"; zklua's add
          -- retries its BadVersion until applied (or its timeout: 60 s here)
          local dal = dal_of(client, "/counter")
          for _ = 1, execution_qty do
            env.sleep(math.random(0, 9) / 1000)
            local ok, _, _, post = pcall(dal.add, dal, 1, 60)
            if ok then
              if post <= previous_value then errors_ = errors_ + 1 end
              previous_value = post
            else
              failures = failures + 1
            end
          end
        end)
      end
      for _, p in ipairs(procs) do p:join(120) end
      assert.are.equal(errors_, 0)
      -- Curator: some increments took optimistic tries, some promoted-lock tries (and some may
      -- fail after both).  zklua: every one applied, in optimistic tries only (no "/lock")
      assert.are.equal(0, failures)
      local client = env.client({ hosts = h.hosts })
      assert.are.equal(thread_qty * execution_qty, dal_of(client, "/counter"):get())
      assert.is_nil(client:exists("/lock"))
    end, { guard = 180 })
  end)

  it("testBasic [difference: atomic-long-add-only]", function()
    local client = h:client()
    local dal = dal_of(client, "/foo/bar/counter")
    -- Curator: each call succeeded() in one optimistic try and no promoted-lock try.  zklua
    -- has no stats: each call here is one set of the node (its version grows by one)
    local function check(call, n, want_pre, want_post)
      local v0 = client:exists("/foo/bar/counter") and version_of(client, "/foo/bar/counter")
      local _, pre, post = call(dal, n)
      assert.are.equal(want_pre, pre)
      assert.are.equal(want_post, post)
      assert.are.equal((v0 or 0) + 1, version_of(client, "/foo/bar/counter"))
    end
    check(dal.add, 1, 0, 1)   -- increment()
    check(dal.sub, 1, 1, 0)   -- decrement()
    check(dal.add, 10, 0, 10) -- add(10)
    check(dal.sub, 5, 10, 5)  -- subtract(5)
    assert.are.equal(to_bytes(5), (client:get("/foo/bar/counter")))
    assert.is_nil(client:exists("/lock"))
  end)
end)
