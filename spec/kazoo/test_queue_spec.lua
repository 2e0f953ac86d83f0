-- kazoo's kazoo/tests/test_queue.py, translated (see /work/shared/reference/kazoo-tests):
-- Queue and LockingQueue on kazoo's harness (spec/kazoo/support.lua).  kazoo's TypeError and
-- ValueError for a bad argument are zklua's BadArgumentsError (raised before anything is
-- sent, naming the argument).  kazoo skips the LockingQueue tests before ZooKeeper 3.4;
-- the harness's server is newer, so they all run.
local errors = require "zklua.errors"
local support = require "kazoo.support"
local helpers = require "support.helpers"

local raises = helpers.raises
local BadArguments = errors.BadArgumentsError

-- kazoo's put(b"one", 10.0): a float priority.  LuaJIT has no float subtype (10.0 is 10
-- there), so under LuaJIT the float given is one that is not integral.
local GET_TIMEOUT = 5 -- s: test_concurrent_execution's (kazoo: 0.1)

local FLOAT_PRIORITY = helpers.LUAJIT and 10.5 or 10.0

-- kazoo's queue_validation for put(), shared by both classes.
local function put_validation(queue)
  raises(BadArguments, queue.put, queue, {})
  raises(BadArguments, queue.put, queue, "one", "100")
  raises(BadArguments, queue.put, queue, "one", FLOAT_PRIORITY)
  raises(BadArguments, queue.put, queue, "one", -100)
  raises(BadArguments, queue.put, queue, "one", 100000)
end

-- kazoo's test_priority's puts, shared by both classes.
local function put_priorities(queue)
  queue:put("four", 101)
  queue:put("one", 0)
  queue:put("two", 0)
  queue:put("three", 10)
end

describe("test_queue.py", function()
  local h, client

  before_each(function()
    h = support.harness()
    client = h.client
  end)

  after_each(function() h:teardown() end)

  local function fresh_path() return "/" .. support.uuid() end

  -- KazooQueueTests
  local function make_queue() return client:Queue(fresh_path()) end

  it("KazooQueueTests::test_queue_validation", function()
    put_validation(make_queue())
  end)

  it("KazooQueueTests::test_empty_queue", function()
    local queue = make_queue()
    assert.are.equal(0, queue:len())
    assert.is_nil(queue:get())
    assert.are.equal(0, queue:len())
  end)

  it("KazooQueueTests::test_queue", function()
    local queue = make_queue()
    queue:put("one")
    queue:put("two")
    queue:put("three")
    assert.are.equal(3, queue:len())

    assert.are.equal("one", queue:get())
    assert.are.equal("two", queue:get())
    assert.are.equal("three", queue:get())
    assert.are.equal(0, queue:len())
  end)

  it("KazooQueueTests::test_priority", function()
    local queue = make_queue()
    put_priorities(queue)

    assert.are.equal("one", queue:get())
    assert.are.equal("two", queue:get())
    assert.are.equal("three", queue:get())
    assert.are.equal("four", queue:get())
  end)

  -- KazooLockingQueueTests
  local function make_locking_queue() return client:LockingQueue(fresh_path()) end

  it("KazooLockingQueueTests::test_queue_validation", function()
    local queue = make_locking_queue()
    put_validation(queue)
    -- kazoo's put_all({}): a dict is not a list (Lua's {} is an empty list: a dict has keys)
    raises(BadArguments, queue.put_all, queue, { one = "one" })
    raises(BadArguments, queue.put_all, queue, { {} })
    raises(BadArguments, queue.put_all, queue, { "one" }, "100")
    raises(BadArguments, queue.put_all, queue, { "one" }, FLOAT_PRIORITY)
    raises(BadArguments, queue.put_all, queue, { "one" }, -100)
    raises(BadArguments, queue.put_all, queue, { "one" }, 100000)
  end)

  it("KazooLockingQueueTests::test_empty_queue", function()
    local queue = make_locking_queue()
    assert.are.equal(0, queue:len())
    assert.is_nil(queue:get(0))
    assert.are.equal(0, queue:len())
  end)

  it("KazooLockingQueueTests::test_queue", function()
    local queue = make_locking_queue()
    queue:put("one")
    queue:put_all({ "two", "three" })
    assert.are.equal(3, queue:len())

    assert.is_false(queue:consume())
    assert.is_false(queue:holds_lock())
    assert.are.equal("one", queue:get(1))
    assert.is_true(queue:holds_lock())
    -- Without consuming, should return the same element
    assert.are.equal("one", queue:get(1))
    assert.is_true(queue:consume())
    assert.is_false(queue:holds_lock())
    assert.are.equal("two", queue:get(1))
    assert.is_true(queue:holds_lock())
    assert.is_true(queue:consume())
    assert.is_false(queue:holds_lock())
    assert.are.equal("three", queue:get(1))
    assert.is_true(queue:holds_lock())
    assert.is_true(queue:consume())
    assert.is_false(queue:holds_lock())
    assert.is_false(queue:consume())
    assert.are.equal(0, queue:len())
  end)

  it("test_consume", function()
    local queue = make_locking_queue()

    queue:put("one")
    assert.is_false(queue:consume())
    queue:get(0.1)
    assert.is_true(queue:consume())
    assert.is_false(queue:consume())
  end)

  it("test_release", function()
    local queue = make_locking_queue()

    queue:put("one")
    assert.are.equal("one", queue:get(1))
    assert.is_true(queue:holds_lock())
    assert.is_true(queue:release())
    assert.is_false(queue:holds_lock())
    assert.are.equal("one", queue:get(1))
    assert.is_true(queue:consume())
    assert.is_false(queue:release())
    assert.are.equal(0, queue:len())
  end)

  it("test_holds_lock", function()
    local queue = make_locking_queue()

    assert.is_false(queue:holds_lock())
    queue:put("one")
    queue:get(0.1)
    assert.is_true(queue:holds_lock())
    queue:consume()
    assert.is_false(queue:holds_lock())
  end)

  it("KazooLockingQueueTests::test_priority", function()
    local queue = make_locking_queue()
    put_priorities(queue)

    assert.are.equal("one", queue:get(1))
    assert.is_true(queue:consume())
    assert.are.equal("two", queue:get(1))
    assert.is_true(queue:consume())
    assert.are.equal("three", queue:get(1))
    assert.is_true(queue:consume())
    assert.are.equal("four", queue:get(1))
    assert.is_true(queue:consume())
  end)

  -- kazoo's three threads, each with its own LockingQueue on the path, are three
  -- coroutines of one client here (support.threads), each with its own object.  kazoo's
  -- get(0.1) is an upper bound that a loaded machine may miss between the put and the
  -- claim; the losers wait for it to pass whatever it is, so a longer one proves the same.
  it("test_concurrent_execution", function()
    local values = {}
    support.threads(function(env)
      local zk = env.client{ hosts = h.hosts }
      local queue = zk:LockingQueue(fresh_path())
      local function get_concurrently(i)
        local q = zk:LockingQueue(queue.path)
        values[i] = q:get(GET_TIMEOUT) or "None"
      end
      local threads = {}
      for i = 1, 3 do threads[i] = env.spawn(get_concurrently, i) end
      queue:put("one")
      for i = 1, 3 do threads[i]:join(GET_TIMEOUT + 30) end
    end)

    local ones, nones = 0, 0
    for i = 1, 3 do
      if values[i] == "one" then ones = ones + 1 end
      if values[i] == "None" then nones = nones + 1 end
    end
    assert.are.equal(1, ones)
    assert.are.equal(2, nones)
  end)
end)
