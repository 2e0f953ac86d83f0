-- Semaphore{layout = "curator"} against real Curator 5.4 InterProcessSemaphoreV2 programs
-- (spec/fixtures/java/CuratorSemaphore.java, started by spec/support/java.lua) on the project's
-- own ZooKeeper server: one limit shared both ways, waiters granted across the two, a Curator
-- holder killed outright, a zklua holder expired, Curator reading zklua's lease nodes, and
-- zklua's own: clean-up (timeout, bad options), a lease create whose reply was lost.  Every
-- wait is for an event: a line the Java program prints, or a znode zklua watches.
local zklua = require "zklua"
local core = require "zklua.core"
local testing = require "zklua.testing"
local errors = require "zklua.errors"
local helpers = require "support.helpers"
local interop = require "support.curator"

local SESSION_MS = 4000
local LEASE_NODE = "^_c_%x+%-%x+%-%x+%-%x+%-%x+%-lease%-%d%d%d%d%d%d%d%d%d%d$"
local CURATOR = { layout = "curator" }

describe("Semaphore{layout = 'curator'} and InterProcessSemaphoreV2", function()
  local server, zk, path, leases
  local s = interop.scaffold("/cursem", function(t)
    server, zk, path, leases = t.server, t.zk, t.path, t.path and t.path .. "/leases"
  end)
  setup(s.setup); teardown(s.teardown); before_each(s.before_each); after_each(s.after_each)

  local function start(max_leases, id)
    return s:start("CuratorSemaphore", server.hosts, path, max_leases, id, SESSION_MS)
  end

  -- The lease nodes (or the children of of), sorted.
  local function children(of)
    return s:children(of or leases)
  end

  -- Runs fn once, from inside whatever wait is under way, when the lease nodes change (one
  -- appears or goes): watched through a second client.
  local function on_change(observer, fn)
    observer:ensure_path(leases)
    s:on_change(observer, fn, leases)
  end

  it("shares one limit both ways: a waiter on either side is granted on a release", function()
    local curator = start(2, "curator-1")
    curator:send("acquire")
    local _, first = curator:expect("^acquired (%S+)$")
    assert.matches(LEASE_NODE, first)
    local sem = zk:Semaphore(path, "zklua-1", 2, CURATOR)
    assert.equals("curator", sem.layout)
    assert.is_true(sem:acquire(true, 60))
    assert.matches(LEASE_NODE, sem.node)
    assert.same({ "curator-1", "zklua-1" }, helpers.sorted(sem:lease_holders()))

    -- full: a third zklua acquirer does not get in, and leaves nothing behind
    local other = helpers.client(server.hosts)
    local third = other:Semaphore(path, "zklua-2", 2, CURATOR)
    assert.is_false(third:acquire(false))
    assert.equals(2, #children())
    assert.same({}, children(path .. "/locks"))

    -- a third Curator acquirer waits (its node counted, not holding) until zklua releases
    local waiter = start(2, "curator-2")
    waiter:send("acquire 200")
    waiter:expect("^timeout$")
    waiter:send("acquire")
    s:wait_children(3, "Curator's waiting node", leases)
    assert.is_false(waiter:printed("^acquired"))
    assert.same({ "curator-1", "zklua-1" }, helpers.sorted(sem:lease_holders()))
    assert.is_true(sem:release())
    waiter:expect("^acquired " .. LEASE_NODE:sub(2))

    -- and a zklua waiter is granted when a Curator holder releases
    local observer = helpers.client(server.hosts)
    on_change(observer, function() curator:send("release") end)
    assert.is_true(third:acquire(true, 60))
    curator:expect("^released$")
    assert.same({ "curator-2", "zklua-2" }, helpers.sorted(third:lease_holders()))
    assert.is_true(third:release())
    observer:close()
    other:close()
  end)

  it("a Curator holder killed outright: its lease is freed when its session expires", function()
    local curator = start(1, "curator-1")
    curator:send("acquire")
    curator:expect("^acquired ")
    local observer = helpers.client(server.hosts)
    on_change(observer, function() curator:kill() end) -- once zklua's node waits
    local sem = zk:Semaphore(path, "zklua-1", 1, CURATOR)
    assert.is_true(sem:acquire(true, 60))
    assert.same({ sem.node }, children())
    assert.same({ "zklua-1" }, sem:lease_holders())
    sem:release()
    observer:close()
  end)

  it("Curator's getParticipantNodes() lists zklua's lease node, holding its identifier", function()
    local sem = zk:Semaphore(path, "zklua-1", 2, CURATOR)
    assert.is_true(sem:acquire())
    local curator = start(2, "curator-1")
    curator:send("nodes")
    local _, nodes = curator:expect("^nodes (%S+)$")
    assert.equals(sem.node, nodes)
    assert.equals("zklua-1", (zk:get(leases .. "/" .. sem.node)))
    assert.equals(sem.create_path, leases .. "/" .. sem.node:sub(1, -11))
    curator:send("acquire")
    local _, own = curator:expect("^acquired (%S+)$")
    curator:send("nodes")
    local _, both = curator:expect("^nodes (%S+)$")
    assert.same(helpers.sorted({ sem.node, own }), helpers.sorted(
      (function() local t = {} for n in both:gmatch("[^,]+") do t[#t + 1] = n end return t end)()))
    assert.is_true(sem:release())
    assert.is_nil(sem.node)
    curator:send("nodes")
    curator:expect("^nodes " .. own:gsub("%-", "%%-") .. "$")
  end)

  it("a zklua holder whose session expires: LOST, and Curator's waiter gets the lease", function()
    local holder = helpers.client(server.hosts)
    local sem = holder:Semaphore(path, "zklua-1", 1, CURATOR)
    assert.is_true(sem:acquire())
    local lost = false
    sem:on_lost(function() lost = true end)
    local curator = start(1, "curator-1")
    curator:send("acquire")
    s:wait_children(2, "Curator's waiting node", leases)
    helpers.expire(holder)
    curator:expect("^acquired ", 60)
    testing.wait_for(function() return lost end, 30, "the holder to learn of LOST")
    assert.is_false(sem.is_acquired)
    assert.is_nil(sem.fencing_token)
    holder:close()
  end)

  it("a zklua waiter that times out deletes its lease node and lets go of the mutex", function()
    local curator = start(1, "curator-1")
    curator:send("acquire")
    local _, held = curator:expect("^acquired (%S+)$")
    local sem = zk:Semaphore(path, "zklua-1", 1, CURATOR)
    helpers.raises(errors.LockTimeout, sem.acquire, sem, true, 0.5)
    assert.same({ held }, children())
    assert.same({}, children(path .. "/locks"))
    assert.is_false(sem:acquire(false))
    assert.same({ held }, children())
    -- and Curator can still go through the mutex: a second Curator times out, then gets in
    local second = start(1, "curator-2")
    second:send("acquire 200")
    second:expect("^timeout$")
    curator:send("release")
    curator:expect("^released$")
    second:send("acquire")
    second:expect("^acquired ")
  end)

  it("two zklua semaphores in the layout exclude each other; the fencing token grows", function()
    local a = zk:Semaphore(path, "a", 1, CURATOR)
    local other = helpers.client(server.hosts)
    local b = other:Semaphore(path, "b", 1, CURATOR)
    assert.is_true(a:acquire())
    local token = a.fencing_token
    assert.equals(zk:exists(leases .. "/" .. a.node).czxid, token)
    assert.is_false(b:acquire(false))
    assert.same({ a.node }, children())
    assert.is_true(a:release())
    assert.is_true(b:acquire(false))
    assert.is_true(b.fencing_token > token)
    assert.same({ b.node }, children())
    assert.same({}, children(path .. "/locks"))
    b:release()
    other:close()
  end)

  it("a lease create whose reply was lost is found by its protected prefix", function()
    -- The waiter queues for the mutex behind a contender node of ours; once it waits there,
    -- the proxy is told to let the next create (the lease node's, which follows the mutex)
    -- reach the server and hold back everything after it, and the contender goes: the server
    -- makes the lease node, the client gives up on the connection (SUSPENDED, the proxy
    -- resumes then), and the waiter must find its node among the leases, not make a second.
    local locks = path .. "/locks"
    zk:ensure_path(leases)
    zk:ensure_path(locks)
    local blocker = zk:create(locks .. "/_c_00000000-0000-4000-8000-000000000000-lock-", "",
                              { ephemeral = true, sequence = true })
    local proxy = testing.proxy(server:node(1))
    local client = zklua.client{ hosts = proxy.hosts, timeout = 4 }
    client:start()
    local sem = client:Semaphore(path, "zklua-1", 1, CURATOR)
    local ud = sem._sem
    local step_at_suspended
    client:add_listener(function(state)
      if state == "SUSPENDED" and not step_at_suspended then
        step_at_suspended = ud:step()
        proxy:resume()
      end
    end)
    local observer = helpers.client(server.hosts)
    observer:get_children(locks, function()
      local deadline = core.monotonic() + 30
      while not ud:checked() do -- the mutex looked at its contenders: it waits for ours
        assert(core.monotonic() < deadline, "timed out driving the waiter")
        client:dispatch(0.01)
      end
      assert.equals("lock", ud:step())
      proxy:cut_reply("create")
      observer:delete_async(blocker)
    end)
    local ok, err = pcall(sem.acquire, sem, true, 60)
    assert.is_true(ok, tostring(err))
    assert.is_true(proxy:status().cut, "the waiter sent no create")
    assert.equals("create", step_at_suspended)
    assert.same({ sem.node }, children())
    assert.matches(LEASE_NODE, sem.node)
    assert.equals(zk:exists(leases .. "/" .. sem.node).czxid, sem.fencing_token)
    -- what is in flight is counted right after the search: the count's watch, nothing else
    -- (an orphan is freed when this reaches 0: a count too low freed it under a live watch)
    assert.equals(1, ud:inflight())
    assert.is_true(sem:release())
    testing.wait_for(function() return ud:inflight() <= 0 end, 30, "the count's watch")
    assert.equals(0, ud:inflight())
    assert.same({}, children())
    assert.same({}, children(locks))
    -- the next acquire creates under a new protected id (Curator's: one per create), so an
    -- old node of this object is never taken for the new one's
    local first = sem.create_path
    assert.is_true(sem:acquire(true, 30))
    assert.are_not.equal(first, sem.create_path)
    assert.equals(sem.create_path, leases .. "/" .. sem.node:sub(1, #sem.create_path - #leases - 1))
    assert.is_true(sem:release())
    observer:close()
    client:close()
    proxy:stop()
  end)

  it("bad options are refused before anything is sent", function()
    local raises = helpers.raises
    local err = raises(errors.BadArgumentsError, zk.Semaphore, zk, path, "x", 2,
                       { layout = "curatr" })
    assert.matches("option 'layout' must be \"kazoo\" or \"curator\"", tostring(err))
    err = raises(errors.BadArgumentsError, zk.Semaphore, zk, path, "x", 2, { layouts = "curator" })
    assert.matches("unknown option 'layouts'", tostring(err))
    err = raises(errors.BadArgumentsError, zk.Semaphore, zk, path, "x", 2, { layout = 1 })
    assert.matches("option 'layout' must be a string", tostring(err))
    err = raises(errors.BadArgumentsError, zk.Semaphore, zk, path, "x", 2, "curator")
    assert.matches("opts must be a table", tostring(err))
    err = raises(errors.BadArgumentsError, zk.Semaphore, zk, path, "x", 0, CURATOR)
    assert.matches("max_leases must be an integer", tostring(err))
    assert.is_nil(zk:exists(path))
  end)
end)
