-- The session-expiry matrix, on a 3-node ensemble: one client, v, holds or is a member of every
-- recipe at once (Lock, ReadLock, WriteLock, Semaphore, an Election it leads and one it
-- follows, Party, ShallowParty, DoubleBarrier, TreeCache, Counter, NonBlockingLease, Queue,
-- LockingQueue, PatientChildrenWatch, SetPartitioner, PartitionAllocator), among
-- other members: in-process clients b and c, zklua child processes waiting on the locks and
-- the semaphore, kazoo processes in the barrier.  v's session is expired once
-- (testing.expire_session).  Each row then checks that its recipe reported the loss the way
-- its documentation says, and that the rest of its group carried on.
local zklua = require "zklua"
local errors = zklua.errors
local testing = require "zklua.testing"
local helpers = require "support.helpers"

local ROOT = "/matrix"

describe("the session of a member of every recipe expires", function()
  local ens, kids
  local v, b, c                 -- v is the member whose session expires
  local lost = {}               -- row -> on_lost calls
  local rows = {}               -- row -> what its test needs
  local v_states = {}
  local old_session

  local function path(row) return ROOT .. "/" .. row end

  local function children(p)
    local ok, list = pcall(b.get_children, b, p)
    return ok and list or {}
  end

  local function count_lost(row)
    lost[row] = 0
    return function() lost[row] = lost[row] + 1 end
  end

  local function zklua_child(fixture, args)
    local argv = { "./zklua", "spec/fixtures/" .. fixture, "hosts=" .. ens.hosts }
    for _, a in ipairs(args) do argv[#argv + 1] = a end
    local kid = kids:spawn(argv)
    kid:wait_line("^ready", 60)
    return kid
  end

  local function queued(p, n, what)
    helpers.wait_until(function() return #children(p) == n end, 60, what)
  end

  -- Before the expiry: v takes its place in every recipe, the others around it.
  local function lock_rows()
    local lock = v:Lock(path("lock"), "v")
    assert(lock:acquire(true, 30))
    lock:on_lost(count_lost("lock"))
    rows.lock = { lock = lock, token = lock.fencing_token,
                  kid = zklua_child("lock_child.lua", { "path=" .. path("lock"), "ident=K" }) }
    queued(path("lock"), 2, "the lock's waiter")

    local read = v:ReadLock(path("rlock"), "v")
    assert(read:acquire(true, 30))
    read:on_lost(count_lost("rlock"))
    local other = b:ReadLock(path("rlock"), "b")
    assert(other:acquire(true, 30)) -- readers share
    rows.rlock = { lock = read, other = other,
                   kid = zklua_child("lock_child.lua", { "path=" .. path("rlock"), "ident=W",
                                                         "kind=WriteLock" }) }
    queued(path("rlock"), 3, "the writer behind the readers")

    local write = v:WriteLock(path("wlock"), "v")
    assert(write:acquire(true, 30))
    write:on_lost(count_lost("wlock"))
    rows.wlock = { lock = write,
                   kid = zklua_child("lock_child.lua", { "path=" .. path("wlock"), "ident=R",
                                                         "kind=ReadLock" }) }
    queued(path("wlock"), 2, "the reader behind the writer")
  end

  local function semaphore_row()
    local sem = v:Semaphore(path("sem"), "v", 2)
    assert(sem:acquire(true, 30))
    sem:on_lost(count_lost("sem"))
    local other = b:Semaphore(path("sem"), "b", 2)
    assert(other:acquire(true, 30))
    rows.sem = { sem = sem, other = other,
                 kid = zklua_child("semaphore_child.lua", { "path=" .. path("sem"), "max=2",
                                                            "ident=K" }) }
    queued(path("sem") .. "-__lock__", 1, "the semaphore's waiter")
  end

  local function election_rows()
    local leads = v:Election(path("elect-lead"), "v")
    leads:on_lost(count_lost("elect-lead"))
    leads:start()
    assert.is_true(leads:await(30))
    local follower = b:Election(path("elect-lead"), "b")
    rows["elect-lead"] = { v = leads, b = follower, token = leads.fencing_token, b_led = 0 }
    follower:on_leader(function()
      rows["elect-lead"].b_led = rows["elect-lead"].b_led + 1
    end)
    follower:start()
    queued(path("elect-lead"), 2, "the follower")

    local leader = b:Election(path("elect-follow"), "b")
    leader:start()
    assert.is_true(leader:await(30))
    local follows = v:Election(path("elect-follow"), "v")
    follows:on_lost(count_lost("elect-follow"))
    follows:start()
    queued(path("elect-follow"), 2, "v behind the leader")
    local last = c:Election(path("elect-follow"), "c")
    last:start()
    queued(path("elect-follow"), 3, "c behind v")
    rows["elect-follow"] = { v = follows, b = leader, c = last, b_lost = 0 }
    leader:on_lost(function() rows["elect-follow"].b_lost = rows["elect-follow"].b_lost + 1 end)
    assert.are.same({ "b", "v", "c" }, leader:contenders())
  end

  local function party_rows()
    for _, kind in ipairs({ "Party", "ShallowParty" }) do
      local row = kind:lower()
      local mine, theirs = v[kind](v, path(row), "v"), b[kind](b, path(row), "b")
      mine:join(); theirs:join()
      mine:on_lost(count_lost(row))
      b:sync(path(row)) -- b's server may lag v's join
      assert.are.same({ "b", "v" }, helpers.sorted(theirs:members()))
      rows[row] = { v = mine, b = theirs }
    end
  end

  local function barrier_row()
    local p = path("barrier")
    b:ensure_path(p)
    local k1 = kids:kazoo("spec/fixtures/kazoo_recipes.py", ens.hosts, "double_barrier", p, 3, "k1")
    local k2 = kids:kazoo("spec/fixtures/kazoo_recipes.py", ens.hosts, "double_barrier", p, 3, "k2")
    queued(p, 2, "the kazoo members to enter")
    local d = v:DoubleBarrier(p, 3, "v")
    assert.is_true(d:enter(60))
    assert.truthy(k1:wait_line("^entered", 60), k1:stderr())
    assert.truthy(k2:wait_line("^entered", 60), k2:stderr())
    d:on_lost(count_lost("barrier"))
    rows.barrier = { d = d, kazoo = { k1, k2 } }
  end

  local function tree_cache_row()
    local p = path("tree")
    b:create(p .. "/x", "x0", { makepath = true })
    b:create(p .. "/y", "y0")
    local cache = v:TreeCache(p)
    local events = {}
    cache:listen(function(event)
      events[#events + 1] = { type = event.type, path = event.data and event.data.path }
    end)
    cache:start()
    testing.wait_for(function() return cache.initialized end, 30, "the cache to load")
    rows.tree = { cache = cache, events = events, mark = #events }
  end

  local function counter_row()
    local mine, theirs = v:Counter(path("counter")), b:Counter(path("counter"))
    mine:add(10); theirs:add(5)
    rows.counter = { v = mine, b = theirs }
  end

  local function lease_row()
    local lease = v:NonBlockingLease(path("lease"), 3600, "v")
    assert.is_true(lease.obtained)
    b:sync(path("lease")) -- b's server may not have applied v's write yet (an ensemble)
    rows.lease = { lease = lease, record = b:get(path("lease") .. "/lease_holder") }
  end

  local function queue_rows()
    local q = v:Queue(path("queue"))
    q:put("q1"); q:put("q2")
    rows.queue = { v = q, b = b:Queue(path("queue")) }

    local mine = v:LockingQueue(path("lqueue"))
    mine:put("i1"); mine:put("i2")
    assert.are.equal("i1", mine:get(30))
    mine:on_lost(count_lost("lqueue"))
    local theirs = b:LockingQueue(path("lqueue"))
    assert.are.equal("i2", theirs:get(30))
    rows.lqueue = { v = mine, b = theirs, c = c:LockingQueue(path("lqueue")) }
  end

  local function patient_row()
    local p = path("patient")
    b:create(p .. "/one", "", { makepath = true })
    v:sync(p) -- v's server may not have applied b's create yet (an ensemble)
    local watch = v:PatientChildrenWatch(p, 0.3)
    local listed, changed = watch:start():get(30)
    assert.are.same({ "one" }, listed)
    rows.patient = { watch = watch, changed = changed }
  end

  -- Runs the event loops until done(); partitioners told to RELEASE release their set.
  local function pump(partitioners, done, what)
    helpers.eventually(function()
      for _, qp in ipairs(partitioners) do
        if qp.release then qp:release_set() end
      end
      return done()
    end, 60, what)
  end

  local function partition_rows()
    local set = { "s1", "s2", "s3", "s4" }
    local function member(zk, id)
      return zk:SetPartitioner{ path = path("partitioner"), set = set, identifier = id,
                                time_boundary = 0.3 }
    end
    local mine, theirs = member(v, "v"), member(b, "b")
    pump({ mine, theirs }, function() return mine.acquired and theirs.acquired end,
         "the partitioners to split the set")
    local tokens = {}
    for item in mine:iter() do tokens[item] = mine:fencing_token(item) end
    rows.partitioner = { v = mine, b = theirs, tokens = tokens }

    local allocated = { lost = {} }
    local function allocator(zk, id, on_rebalance)
      return zk:PartitionAllocator{ path = path("allocator"), identifier = id,
                                    on_rebalance = on_rebalance }
    end
    allocated.v = allocator(v, "v", function(_, old, info)
      if info.session_lost then allocated.lost[#allocated.lost + 1] = old end
    end)
    allocated.b = allocator(b, "b")
    allocated.v:start({ "a1", "a2", "a3", "a4" })
    allocated.b:start()
    assert.is_true(allocated.v:wait_settled(60))
    assert.is_true(allocated.b:wait_settled(60))
    allocated.had = allocated.v.allocation
    assert.are.equal(2, #allocated.had)
    rows.allocator = allocated
  end

  setup(function()
    ens = testing.ensemble(3)
    kids = helpers.kids()
    v = zklua.client{ hosts = ens.hosts, timeout = 10 }
    v:add_listener(function(state) v_states[#v_states + 1] = state end)
    v:start(60)
    b, c = helpers.clients(ens.hosts, 2)
    b:ensure_path(ROOT)
    lock_rows()
    semaphore_row()
    election_rows()
    party_rows()
    barrier_row()
    tree_cache_row()
    counter_row()
    lease_row()
    queue_rows()
    patient_row()
    partition_rows()

    old_session = v:client_id()
    helpers.expire(v)
    testing.wait_for(function() return v.state == "CONNECTED" end, 60, "v's new session")
  end)

  teardown(function()
    if kids then kids:cleanup() end
    for _, zk in ipairs({ v, b, c }) do pcall(zk.close, zk) end
    if ens then ens:stop() end
  end)

  it("v saw LOST, then CONNECTED on a new session", function()
    assert.is_true(helpers.in_order(v_states, { "CONNECTED", "LOST", "CONNECTED" }),
                   table.concat(v_states, " "))
    assert.are_not.equal(old_session, (v:client_id()))
  end)

  it("Lock: the holder hears on_lost; the waiter takes the lock with a greater token", function()
    local row = rows.lock
    testing.wait_for(function() return lost.lock == 1 end, 30, "on_lost")
    assert.is_false(row.lock.is_acquired)
    assert.is_nil(row.lock.fencing_token)
    local token = tonumber(row.kid:wait_line("^acquired", 60):match("acquired (%d+)"))
    assert.is_true(token > row.token)
    assert.is_false(row.lock:acquire(false)) -- the waiter holds it now
  end)

  it("ReadLock: the reader hears on_lost; the writer waits for the other reader, then goes",
     function()
    local row = rows.rlock
    testing.wait_for(function() return lost.rlock == 1 end, 30, "on_lost")
    assert.is_false(row.lock.is_acquired)
    assert.is_true(row.other.is_acquired)
    -- v's read node is gone, b's is not: the writer still waits
    queued(path("rlock"), 2, "v's read node to go")
    assert.is_nil(row.kid:stdout():find("acquired", 1, true))
    assert.is_true(row.other:release())
    row.kid:wait_line("^acquired", 60)
  end)

  it("WriteLock: the writer hears on_lost; the waiting reader goes", function()
    local row = rows.wlock
    testing.wait_for(function() return lost.wlock == 1 end, 30, "on_lost")
    assert.is_false(row.lock.is_acquired)
    row.kid:wait_line("^acquired", 60)
  end)

  it("Semaphore: the holder hears on_lost; its lease goes to the waiter, the other stays",
     function()
    local row = rows.sem
    testing.wait_for(function() return lost.sem == 1 end, 30, "on_lost")
    assert.is_false(row.sem.is_acquired)
    row.kid:wait_line("^acquired", 60)
    assert.is_true(row.other.is_acquired)
    assert.are.same({ "K", "b" }, helpers.sorted(row.other:lease_holders()))
    assert.is_false(row.sem:acquire(false)) -- both slots are taken
  end)

  it("Election, leader: on_lost, the follower leads, v competes again behind it", function()
    local row = rows["elect-lead"]
    testing.wait_for(function() return lost["elect-lead"] == 1 end, 30, "on_lost")
    assert.is_false(row.v.is_leader)
    assert.is_true(row.b:await(60))
    assert.are.equal(1, row.b_led)
    assert.is_true(row.b.fencing_token > row.token)
    helpers.wait_until(function()
      local ok, list = pcall(row.b.contenders, row.b)
      return ok and #list == 2
    end, 60, "v to rejoin")
    assert.are.same({ "b", "v" }, row.b:contenders())
    row.b:stop()
    assert.is_true(row.v:await(60)) -- and it may lead again
    row.v:stop()
  end)

  it("Election, follower: the leader leads on; v rejoins at the end of the queue", function()
    local row = rows["elect-follow"]
    helpers.wait_until(function()
      local ok, list = pcall(row.b.contenders, row.b)
      return ok and #list == 3 and list[3] == "v"
    end, 60, "v's new node at the end of the queue")
    assert.are.same({ "b", "c", "v" }, row.b:contenders())
    assert.is_true(row.b.is_leader)
    assert.are.equal(0, row.b_lost)
    assert.are.equal(0, lost["elect-follow"]) -- it was not leading: nothing to lose
    row.b:stop()
    assert.is_true(row.c:await(60)) -- c, now first, leads before v
    assert.is_false(row.v.is_leader)
    row.c:stop()
    assert.is_true(row.v:await(60))
    row.v:stop()
  end)

  for _, kind in ipairs({ "Party", "ShallowParty" }) do
    local row = kind:lower()
    it(kind .. ": the member hears on_lost and is gone; the others stay; it may join again",
       function()
      local r = rows[row]
      testing.wait_for(function() return lost[row] == 1 end, 30, "on_lost")
      assert.is_false(r.v.participating)
      assert.is_true(r.b.participating)
      helpers.wait_until(function()
        local ok, members = pcall(r.b.members, r.b)
        return ok and #members == 1
      end, 60, "v to be gone from the party")
      assert.are.same({ "b" }, r.b:members())
      r.v:join()
      b:sync(path(row)) -- b's server may lag v's join
      assert.are.same({ "b", "v" }, helpers.sorted(r.b:members()))
    end)
  end

  it("DoubleBarrier: the member hears on_lost, stays entered, and all three leave", function()
    local row = rows.barrier
    testing.wait_for(function() return lost.barrier == 1 end, 30, "on_lost")
    assert.is_true(row.d.participating)
    b:create(path("barrier") .. "-leave")
    assert.is_true(row.d:leave(60))
    for _, k in ipairs(row.kazoo) do assert.truthy(k:wait_line("^left", 60), k:stderr()) end
  end)

  it("TreeCache: CONNECTION_LOST, then RECONNECTED; it follows the tree on", function()
    local row = rows.tree
    local function index(kind, from)
      for i = from or 1, #row.events do
        if row.events[i].type == kind then return i end
      end
    end
    testing.wait_for(function() return index("CONNECTION_LOST", row.mark + 1) ~= nil end, 30,
                     "CONNECTION_LOST")
    local gone = index("CONNECTION_LOST", row.mark + 1)
    testing.wait_for(function() return index("CONNECTION_RECONNECTED", gone) ~= nil end, 30,
                     "CONNECTION_RECONNECTED")
    local p = path("tree")
    assert.are.equal("x0", row.cache:get_data(p .. "/x").data)
    b:set(p .. "/x", "x1")
    b:create(p .. "/z", "z0")
    b:delete(p .. "/y")
    testing.wait_for(function()
      local x, z = row.cache:get_data(p .. "/x"), row.cache:get_data(p .. "/z")
      return x and x.data == "x1" and z and z.data == "z0" and not row.cache:get_data(p .. "/y")
    end, 30, "the cache to follow the changes")
    assert.are.same({ "x", "z" }, row.cache:get_children(p))
    row.cache:close()
  end)

  it("Counter: nothing to lose; both members keep counting from the same value", function()
    local row = rows.counter
    assert.are.equal(15, row.v.value)
    row.v:add(1)
    row.b:add(2)
    -- an ensemble: v's server may not have applied b's write yet (reads are not linearizable);
    -- sync makes it catch up with the leader, as a reader that must see it would
    v:sync(path("counter"))
    assert.are.equal(18, row.v.value)
    assert.are.equal(18, row.b.value)
  end)

  it("NonBlockingLease: time-based, it survives the expiry; others are still refused", function()
    local row = rows.lease
    assert.are.equal(row.record, (b:get(path("lease") .. "/lease_holder")))
    assert.is_true(row.lease.obtained)
    assert.is_false(b:NonBlockingLease(path("lease"), 3600, "b").obtained)
    assert.is_true(v:NonBlockingLease(path("lease"), 3600, "v").obtained) -- v renews it
  end)

  it("Queue: persistent, nothing to lose; its items go out once each, in order", function()
    local row = rows.queue
    assert.are.equal("q1", row.v:get())
    row.b:put("q3")
    assert.are.equal("q2", row.b:get())
    assert.are.equal("q3", row.v:get())
    assert.is_nil(row.b:get())
  end)

  it("LockingQueue: the holder hears on_lost; its item goes to the next consumer", function()
    local row = rows.lqueue
    testing.wait_for(function() return lost.lqueue == 1 end, 30, "on_lost")
    assert.is_false(row.v:holds_lock())
    assert.are.equal("i1", row.c:get(60)) -- at least once: the claim went with the session
    assert.is_true(row.c:holds_lock())
    assert.is_true(row.b:holds_lock()) -- the other holder keeps its item
    assert.is_true(row.b:consume())
    assert.is_nil(row.v:get(0.3))     -- nothing unclaimed is left
    assert.is_true(row.c:consume())
    b:sync(path("lqueue")) -- c consumed through another server: b's must catch up first
    assert.are.equal(0, row.b:len()) -- (no __len on tables under LuaJIT)
  end)

  it("SetPartitioner: FAILURE for v (as kazoo); the other member takes the whole set", function()
    local row = rows.partitioner
    helpers.eventually(function() return row.v.failed end, 30, "FAILURE")
    assert.is_true(errors.is(row.v.error, errors.SessionExpiredError), tostring(row.v.error))
    assert.are.same({}, row.v:list())
    pump({ row.b }, function() return row.b.acquired and #row.b:list() == 4 end,
         "b to own the set") -- (list(): no __len on tables under LuaJIT)
    for item, token in pairs(row.tokens) do
      assert.is_true(row.b:fencing_token(item) > token, item)
    end
  end)

  it("PartitionAllocator: v hears its items lost, rejoins; every item has one owner again",
     function()
    local row = rows.allocator
    helpers.eventually(function() return #row.lost > 0 end, 30, "on_rebalance with session_lost")
    assert.are.same(row.had, row.lost[1])
    assert.is_true(row.v:wait_settled(60))
    assert.is_true(row.b:wait_settled(60))
    local owned = {}
    for _, m in ipairs({ row.v, row.b }) do
      for _, item in ipairs(m.allocation) do
        assert.is_nil(owned[item], item .. " owned twice")
        owned[item] = true
      end
    end
    assert.are.same({ a1 = true, a2 = true, a3 = true, a4 = true }, owned)
    assert.is_true(#row.v.allocation > 0) -- v competes again on its new session
    row.v:stop(); row.b:stop()
  end)

  it("PatientChildrenWatch: a settled watch compares the children on the new session", function()
    local row = rows.patient
    assert.is_false(row.changed:ready()) -- the children did not change meanwhile
    b:create(path("patient") .. "/two", "")
    assert.is_true(row.changed:wait(60), "the change was not seen after the expiry")
    assert.is_true(row.changed:successful())
  end)
end)
