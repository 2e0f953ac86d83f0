-- kazoo's kazoo/tests/test_partitioner.py, translated (see /work/shared/reference/kazoo-tests):
-- SetPartitioner on kazoo's harness (spec/kazoo/support.lua).  kazoo's set=range(n) is the numbers
-- 0..n-1; `list(partitioner)` is partitioner:list(); kazoo's state_change_event (a
-- threading.Event set on every change) is a flag set by the state_change_event function.
-- kazoo's __wait() (sleep 0.1, then assert) waits here for the state asserted next.
--
-- Faults are real instead of kazoo's stand-ins: test_party_session_failure expires the
-- session (kazoo calls _fail_out()), test_connection_loss closes the connection in a proxy
-- (kazoo injects a dropped connection), and the two race tests (kazoo patches client.Lock
-- with a slow in-process lock) hold an item's lock from another client, so that the first
-- member is still acquiring its share when the second joins.
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local support = require "kazoo.support"

local WAIT = 60 -- s: an upper bound for a state the test waits for (kazoo: 0.1 s of sleep)

describe("test_partitioner.py", function()
  local h, client, path
  local partitioners, events = {}, {}
  local proxy -- test_connection_loss's

  before_each(function()
    h = support.harness()
    client = h.client
    path = "/" .. support.uuid()
    partitioners, events = {}, {}
  end)

  after_each(function()
    for _, qp in ipairs(partitioners) do pcall(qp.finish, qp) end
    h:teardown()
    if proxy then proxy:stop() end
    proxy = nil
  end)

  local function range(size)
    local set = {}
    for i = 0, size - 1 do set[#set + 1] = i end
    return set
  end

  -- kazoo's __create_partitioner (on `on`, default the test's client)
  local function create_partitioner(size, identifier, on)
    local event = { set = false }
    local qp = (on or client):SetPartitioner{
      path = path, set = range(size), time_boundary = 0.2, identifier = identifier,
      state_change_event = function() event.set = true end }
    partitioners[#partitioners + 1] = qp
    events[qp] = event
    return qp
  end

  -- kazoo's __wait_for_acquire, with WAIT for kazoo's 14 s: an upper bound only (the state
  -- is asserted next), which a loaded machine must not miss
  local function wait_for_acquire()
    for _, qp in ipairs(partitioners) do qp:wait_for_acquire(WAIT) end
  end

  local function assert_state(state, list)
    for _, qp in ipairs(list or partitioners) do assert.are.equal(state, qp.state) end
  end

  local function assert_partitions(...)
    local partitions = { ... }
    assert.are.equal(#partitions, #partitioners)
    for i, qp in ipairs(partitioners) do assert.are.same(partitions[i], qp:list()) end
  end

  -- kazoo's __wait before asserting state: waits (running the event loop) until every one of
  -- list is in state.
  local function wait_state(state, list)
    testing.wait_for(function()
      for _, qp in ipairs(list or partitioners) do
        if qp.state ~= state then return false end
      end
      return true
    end, WAIT, state)
  end

  local function release(list)
    for _, qp in ipairs(list or partitioners) do qp:release_set() end
  end

  local function finish()
    for _, qp in ipairs(partitioners) do qp:finish() end
  end

  local function all_but_last()
    local list = {}
    for i = 1, #partitioners - 1 do list[i] = partitioners[i] end
    return list
  end

  it("test_party_of_one", function()
    create_partitioner(3)
    wait_for_acquire()
    assert_state("ACQUIRED")
    assert_partitions({ 0, 1, 2 })
    finish()
  end)

  it("test_party_of_two", function()
    for i = 0, 1 do create_partitioner(2, tostring(i)) end

    wait_for_acquire()
    assert_partitions({ 0 }, { 1 })

    partitioners[1]:finish()
    wait_state("RELEASE", { partitioners[2] })
    assert.is_true(partitioners[2].release)
    partitioners[2]:finish()
  end)

  it("test_party_expansion", function()
    for i = 0, 1 do create_partitioner(3, tostring(i)) end

    wait_for_acquire()
    assert_state("ACQUIRED")
    assert_partitions({ 0, 2 }, { 1 })

    for _, qp in ipairs(partitioners) do events[qp].set = false end

    -- Add another partition, wait till they settle
    create_partitioner(3, "2")
    wait_state("RELEASE", all_but_last())

    assert_state("RELEASE", all_but_last())
    -- kazoo loops over the new member's partitions here (none yet, so it asserts nothing);
    -- what it means is that the others' events were set by their change to RELEASE (the
    -- function runs from the event loop once the change is queued: waited for)
    testing.wait_for(function()
      for _, qp in ipairs(all_but_last()) do
        if not events[qp].set then return false end
      end
      return true
    end, WAIT, "the state_change_event calls")
    for _, qp in ipairs(all_but_last()) do assert.is_true(events[qp].set) end
    release(all_but_last())

    wait_for_acquire()
    assert_partitions({ 0 }, { 1 }, { 2 })

    finish()
  end)

  it("test_more_members_than_set_items", function()
    for i = 0, 1 do create_partitioner(1, tostring(i)) end

    wait_for_acquire()
    assert_state("ACQUIRED")
    assert_partitions({ 0 }, {})

    finish()
  end)

  it("test_party_session_failure", function()
    local partitioner = create_partitioner(3)
    wait_for_acquire()
    assert.are.equal("ACQUIRED", partitioner.state)
    -- a real session failure (kazoo simulates one with _fail_out())
    helpers.expire(client)
    partitioner:release_set()
    assert.is_true(partitioner.failed)
  end)

  it("test_connection_loss", function()
    -- the test's client reaches the server through a proxy, which can close its connection
    proxy = testing.proxy(h.server:node(1))
    local p = proxy
    client = h:get_client{ hosts = p.hosts .. h.namespace }
    client:start()
    local suspended = false
    client:add_listener(function(state)
      if state == "SUSPENDED" then suspended = true end
    end)
    create_partitioner(3, "0")
    create_partitioner(3, "1")

    wait_for_acquire()
    assert_state("ACQUIRED")
    assert_partitions({ 0, 2 }, { 1 })

    -- Emulate connection loss (kazoo's lose_connection: the connection drops, SUSPENDED)
    p:drop()
    testing.wait_for(function() return suspended end, WAIT, "SUSPENDED")
    assert_state("RELEASE")
    release()

    -- Check that partitioners settle after connection loss
    wait_for_acquire()
    assert_state("ACQUIRED")
    assert_partitions({ 0, 2 }, { 1 })

    -- Check that partitioners react on new events after connection loss
    create_partitioner(3, "2")
    wait_state("RELEASE", all_but_last())

    assert_state("RELEASE", all_but_last())
    release(all_but_last())
    wait_for_acquire()
    assert_state("ACQUIRED")
    assert_partitions({ 0 }, { 1 }, { 2 })
  end)

  -- The contenders of item's lock that belong to identifier (their node's data).
  local function contenders_of(item, identifier)
    local lock_path = path .. "/locks/" .. item
    local found = 0
    local ok, names = pcall(client.get_children, client, lock_path)
    if not ok then return 0 end
    for _, name in ipairs(names) do
      local got, data = pcall(client.get, client, lock_path .. "/" .. name)
      if got and data == identifier then found = found + 1 end
    end
    return found
  end

  -- Another client holds item 1's lock (kazoo's slow lock), and the first member
  -- (identifier "0", alone, so its share is both items) holds lock 0 and waits for lock 1.
  local function first_member_acquiring()
    local holder = h:get_client()
    holder:start()
    local slow = holder:Lock(path .. "/locks/1", "slow-lock")
    assert.is_true(slow:acquire())
    create_partitioner(2, "0")
    testing.wait_for(function() return contenders_of(1, "0") == 1 end, WAIT,
                     "the first member to wait for lock 1")
    assert.are.equal("ALLOCATING", partitioners[1].state)
    return slow
  end

  it("test_race_condition_new_partitioner_during_the_lock", function()
    local slow = first_member_acquiring()

    -- The second member joins while the first is acquiring the lock that should belong to
    -- it; the lock is let go at once, so the first may take both locks before it notices
    -- that the party changed: it must then re-acquire the set.  No deadlocks must happen.
    create_partitioner(2, "1")
    slow:release()
    wait_for_acquire()

    assert_state("ACQUIRED")
    assert_partitions({ 0 }, { 1 })
  end)

  it("test_race_condition_new_partitioner_steals_the_lock", function()
    local slow = first_member_acquiring()

    -- The second member joins while the first is acquiring the lock that should belong to
    -- it.  The first must notice that the party changed and give up waiting for that lock
    -- (it never gets it); the second queues for it and gets it when it is let go.
    create_partitioner(2, "1")
    testing.wait_for(function()
      return contenders_of(1, "0") == 0 and contenders_of(1, "1") == 1
    end, WAIT, "the first member to give lock 1 up and the second to wait for it")
    slow:release()
    wait_for_acquire()

    assert_state("ACQUIRED")
    assert_partitions({ 0 }, { 1 })
  end)
end)
