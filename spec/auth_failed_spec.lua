-- AUTH_FAILED, as kazoo: when the server refuses an auth (add_auth, or auth_data at a new
-- session) the session is gone and no new one follows: the client reads state LOST and
-- client_state AUTH_FAILED, and every call — plain ops and recipe calls that wait — raises
-- AuthFailedError at once, and so does a recipe wait already under way.  stop() and start()
-- begin again (with the same auth_data, so start() raises AuthFailedError once more).
local zklua = require "zklua"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local errors = zklua.errors

local raised = helpers.raised

local function is_auth_failed(err)
  assert.is_true(errors.is(err, errors.AuthFailedError), tostring(err))
end

describe("AUTH_FAILED", function()
  local server, zk, other
  local n = 0
  local root

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  before_each(function()
    n = n + 1
    root = "/auth_failed/" .. n
    zk = zklua.client{ hosts = server.hosts, timeout = 4 }
    zk:start()
    other = zklua.client{ hosts = server.hosts, timeout = 4 }
    other:start()
    zk:ensure_path(root)
  end)

  after_each(function()
    zk:close()
    other:close()
  end)

  it("add_auth with a scheme the server refuses: LOST, AUTH_FAILED, AuthFailedError", function()
    local states = {}
    zk:add_listener(function(state) states[#states + 1] = state end)
    is_auth_failed(raised(zk.add_auth, zk, "bogus", ":"))
    assert.are.equal("LOST", zk.state)
    assert.are.equal("AUTH_FAILED", zk.client_state)
    assert.are.same({ "LOST" }, states)
    is_auth_failed(raised(zk.get, zk, root))
    is_auth_failed(raised(zk.exists, zk, root))
    is_auth_failed(raised(zk.create, zk, root .. "/x", "v"))
    is_auth_failed(raised(zk.set, zk, root, "v"))
    is_auth_failed(raised(zk.delete, zk, root))
    is_auth_failed(raised(zk.get_children, zk, root))
    is_auth_failed(raised(zk.sync, zk, root))
    is_auth_failed(raised(zk.add_auth, zk, "digest", "user:pw"))
    local f = zk:get_async(root)
    is_auth_failed(raised(f.get, f, 5))
  end)

  it("every recipe call that would wait raises AuthFailedError at once", function()
    local party = zk:Party(root .. "/party", "me")
    party:join()
    local lock = zk:Lock(root .. "/lock")
    local sem = zk:Semaphore(root .. "/sem", nil, 2)
    local counter = zk:Counter(root .. "/counter")
    local queue = zk:Queue(root .. "/queue")
    local lqueue = zk:LockingQueue(root .. "/lqueue")
    local barrier = zk:Barrier(root .. "/barrier")
    barrier:create()
    local dbarrier = zk:DoubleBarrier(root .. "/dbarrier", 2)
    local election = zk:Election(root .. "/election", "me")
    is_auth_failed(raised(zk.add_auth, zk, "bogus", ":"))
    is_auth_failed(raised(party.leave, party))
    is_auth_failed(raised(party.join, party))
    is_auth_failed(raised(lock.acquire, lock))
    is_auth_failed(raised(lock.acquire, lock, true, 5))
    is_auth_failed(raised(sem.acquire, sem))
    is_auth_failed(raised(counter.add, counter, 1))
    is_auth_failed(raised(queue.put, queue, "x"))
    is_auth_failed(raised(queue.get, queue))
    is_auth_failed(raised(lqueue.get, lqueue, 5))
    is_auth_failed(raised(barrier.wait, barrier, 5))
    is_auth_failed(raised(dbarrier.enter, dbarrier))
    is_auth_failed(raised(election.run, election, function() end))
  end)

  it("an acquire waiting for another holder ends with AuthFailedError", function()
    local held = other:Lock(root .. "/lock")
    assert.is_true(held:acquire())
    local lock = zk:Lock(root .. "/lock")
    -- the refusal comes while acquire waits: from a watch callback its wait runs
    zk:exists(root .. "/go", function() zk:add_auth_async("bogus", ":") end)
    other:create(root .. "/go", "")
    is_auth_failed(raised(lock.acquire, lock))
    -- the library fails ops as soon as it marks its handle AUTH_FAILED; the state event is
    -- queued behind the op's reply and reaches the client at its next dispatch
    testing.wait_for(function() return zk.client_state == "AUTH_FAILED" end, 10,
                     "the AUTH_FAILED state")
    held:release()
  end)

  it("a semaphore acquire waiting for a lease ends with AuthFailedError", function()
    local taken = other:Semaphore(root .. "/sem", nil, 1)
    assert.is_true(taken:acquire())
    local sem = zk:Semaphore(root .. "/sem", nil, 1)
    zk:exists(root .. "/go", function() zk:add_auth_async("bogus", ":") end)
    other:create(root .. "/go", "")
    is_auth_failed(raised(sem.acquire, sem))
    taken:release()
  end)

  it("a barrier wait ends with AuthFailedError", function()
    local barrier = zk:Barrier(root .. "/barrier")
    barrier:create()
    zk:exists(root .. "/go", function() zk:add_auth_async("bogus", ":") end)
    other:create(root .. "/go", "")
    is_auth_failed(raised(barrier.wait, barrier))
  end)

  it("an allocator's wait_settled under way ends with AuthFailedError; start() after too",
     function()
    local path = root .. "/pa"
    -- another session owns q1's node: the member's claim waits for it, so it never settles
    local core = require "zklua.core"
    other:create(path .. "/owners/" .. core.allocator_node_name("q1"), "intruder",
                 { ephemeral = true, makepath = true })
    local a = zk:PartitionAllocator{ path = path, identifier = "m1" }
    assert.is_true(a:start({ "q1" }, 10))
    assert.is_false(a:wait_settled(0.2))
    zk:exists(root .. "/go", function() zk:add_auth_async("bogus", ":") end)
    other:create(root .. "/go", "")
    is_auth_failed(raised(a.wait_settled, a, 30))
    testing.wait_for(function() return zk.client_state == "AUTH_FAILED" end, 10,
                     "the AUTH_FAILED state")
    assert.are.same({}, a.allocation)
    a:stop() -- returns: the nodes go with the session
    assert.are.equal("idle", a.state)
    is_auth_failed(raised(a.start, a, { "q1" }, 10))
    is_auth_failed(raised(a.wait_settled, a, 10))
    is_auth_failed(raised(zk.PartitionAllocator, zk, { path = path, identifier = "m2" }))
  end)

  it("an Election's run() and await() waiting behind a leader end with AuthFailedError",
     function()
    local path = root .. "/election"
    local leader = other:Election(path, "leader")
    assert.is_true(leader:start())
    assert.is_true(leader:await(10))
    local latch = zk:Election(path, "latch")
    assert.is_true(latch:start())
    zk:exists(root .. "/go", function() zk:add_auth_async("bogus", ":") end)
    other:create(root .. "/go", "")
    is_auth_failed(raised(latch.await, latch, 30))
    assert.is_false(latch.is_leader)
    testing.wait_for(function() return zk.client_state == "AUTH_FAILED" end, 10,
                     "the AUTH_FAILED state")
    is_auth_failed(raised(latch.start, latch))
    -- a run() waiting to be elected, on another client refused the same way
    local third = zklua.client{ hosts = server.hosts, timeout = 4 }
    third:start()
    local runner = third:Election(path, "runner")
    local elected = false
    third:exists(root .. "/go2", function() third:add_auth_async("bogus", ":") end)
    other:create(root .. "/go2", "")
    local err = raised(runner.run, runner, function() elected = true end)
    third:close()
    is_auth_failed(err)
    assert.is_false(elected)
    assert.is_true(leader:stop(10))
  end)

  it("stop() and start() begin again; the refused auth is sent again, and refused", function()
    is_auth_failed(raised(zk.add_auth, zk, "bogus", ":"))
    zk:stop()
    is_auth_failed(raised(zk.start, zk, 5))
    -- start() stops a client whose auth was refused, as when auth_data is refused
    assert.are.equal("LOST", zk.state)
    local err = raised(zk.get, zk, "/")
    assert.is_true(errors.is(err, errors.ConnectionClosedError), tostring(err))
  end)
end)
