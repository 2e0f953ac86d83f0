-- Semaphore (src/recipes/semaphore.c, lua/zklua/recipes/semaphore.lua) against real servers:
-- several clients in one process, zklua child processes (spec/fixtures/semaphore_child.lua),
-- kazoo child processes (spec/fixtures/kazoo_semaphore.py, Debian's python3-kazoo), a
-- standalone server that is stopped or frozen, and a 3-node ensemble whose node is stopped.
--
-- "At most max_leases holders at once" is checked with a ledger: every holder writes "in"
-- (right after acquiring) and "out" (right before releasing) as persistent sequential nodes of
-- one parent, so the sequence numbers order every write and a replay counts the holders.
--
-- A waiter blocks its thread inside acquire(), so whatever must happen WHILE it waits runs
-- from a one-shot get_children watch on the internal lock path (<path>-__lock__): it fires
-- when the waiter's contender node appears there, i.e. once the waiter has queued.
local zklua = require "zklua"
local compat = require "zklua.compat"
local core = require "zklua.core"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"

local ROOT = "/semaphores"

local eventually = helpers.eventually
local expire = helpers.expire
local raises = helpers.raises

-- Replays a ledger: the most holders at once, the rounds of each identifier, and how many
-- were still inside at the end.
local function replay(zk, ledger)
  local names = zk:get_children(ledger)
  table.sort(names) -- fixed-width sequence suffixes: sorted = the order of the writes
  local inside, holders, most, rounds = {}, 0, 0, {}
  for _, name in ipairs(names) do
    local what, ident = zk:get(ledger .. "/" .. name):match("^(%a+) (.*)$")
    if what == "in" then
      assert(not inside[ident], ident .. " entered twice")
      inside[ident] = true
      holders = holders + 1
      if holders > most then most = holders end
      rounds[ident] = (rounds[ident] or 0) + 1
    else
      assert(what == "out" and inside[ident], ident .. " left without entering")
      inside[ident] = nil
      holders = holders - 1
    end
  end
  return most, rounds, holders
end

describe("semaphore", function()
  local server, a, b, c, path, lock_path, ledger
  local counter = 0
  local kids = helpers.kids()

  local function children(p, zk)
    local ok, list = pcall((zk or a).get_children, zk or a, p or path)
    if not ok then return {} end
    table.sort(list)
    return list
  end

  -- Runs fn once, from inside whatever wait is under way, when a contender appears on the
  -- semaphore's internal lock (an acquirer has queued).
  local function when_queued(fn)
    c:ensure_path(lock_path)
    c:get_children(lock_path, function() fn() end)
  end

  local function spawn_zklua(opts)
    local argv = { "./zklua", "spec/fixtures/semaphore_child.lua", "hosts=" .. server.hosts,
                   "path=" .. path }
    for k, v in pairs(opts) do argv[#argv + 1] = k .. "=" .. tostring(v) end
    return kids:spawn(argv)
  end

  local function spawn_kazoo(max, ident, ...)
    return kids:kazoo("spec/fixtures/kazoo_semaphore.py", server.hosts, path, tostring(max),
                      ident, ...)
  end

  local function finished(kid)
    assert.is_true(kid:wait_exit(60), "the child did not finish: " .. kid:stdout())
    assert.are.equal(0, kid.status, kid:stderr())
  end

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  before_each(function()
    counter = counter + 1
    path = ROOT .. "/t" .. counter
    lock_path = path .. "-__lock__"
    ledger = path .. "-ledger"
    a, b, c = helpers.clients(server.hosts, 3)
  end)

  after_each(function()
    kids:cleanup()
    for _, zk in ipairs({ a, b, c }) do zk:close() end
    helpers.delete_trees(server.hosts, path, lock_path, ledger, path .. "-go")
  end)

  describe("leases", function()
    it("hands out at most max_leases; the next waits for a release or is refused", function()
      local sa, sb, sc = a:Semaphore(path, "A", 2), b:Semaphore(path, "B", 2),
                         c:Semaphore(path, "C", 2)
      assert.is_true(sa:acquire())
      assert.is_true(sb:acquire())
      assert.is_true(sa.is_acquired and sb.is_acquired)
      assert.is_false(sc:acquire(false))
      assert.is_false(sc.is_acquired)
      assert.are.same({ "A", "B" }, helpers.sorted(sc:lease_holders()))
      assert.are.same(helpers.sorted({ sa.node, sb.node }), children())
      assert.are.same({}, children(lock_path)) -- every acquire let go of the internal lock

      local events = {}
      when_queued(function()
        events[#events + 1] = "C queued"
        assert.is_true(sa:release())
        events[#events + 1] = "A released"
      end)
      assert.is_true(sc:acquire(true, 20))
      events[#events + 1] = "C acquired"
      assert.are.same({ "C queued", "A released", "C acquired" }, events)
      assert.is_false(sa.is_acquired)
      assert.are.same({ "B", "C" }, helpers.sorted(sa:lease_holders()))
      assert.is_true(sb:release())
      assert.is_true(sc:release())
      assert.are.same({}, children())
      assert.are.same({}, sa:lease_holders())
    end)

    it("uses kazoo's znodes: max_leases in the path, ephemeral <uuid hex> leases", function()
      local s = a:Semaphore(path .. "/deep/er", "worker-1", 3)
      assert.is_true(s:acquire())
      local p = path .. "/deep/er"
      assert.are.equal("3", (a:get(p)))
      local name = children(p)[1]
      assert.truthy(name:match("^" .. string.rep("%x", 32) .. "$"))
      assert.are.equal(s.node, name)
      assert.are.equal(p .. "/" .. name, s.create_path)
      local data, stat = a:get(p .. "/" .. name)
      assert.are.equal("worker-1", data)
      assert.are.equal(a:client_id(), stat.owner_session_id)
      assert.is_table(a:exists(p .. "-__lock__")) -- the internal lock's path, empty again
      assert.are.same({}, children(p .. "-__lock__"))
      assert.are.same({}, b:Semaphore("/no/such/semaphore"):lease_holders())
      assert.is_nil(a:exists("/no/such/semaphore"))
      helpers.delete_trees(server.hosts, path .. "/deep/er-__lock__")
    end)

    it("refuses a different max_leases (kazoo's ValueError) before taking anything", function()
      assert.is_true(a:Semaphore(path, "A", 2):acquire())
      local s3 = b:Semaphore(path, "B", 3)
      local err = raises(errors.BadArgumentsError, s3.acquire, s3)
      assert.are.equal("max_leases", err.argument)
      assert.truthy(tostring(err):find("stores 2, expected: 3", 1, true))
      assert.is_false(s3.is_acquired)
      assert.are.equal(1, #children())
      assert.are.same({}, children(lock_path))
      -- as kazoo: data that is not a number is ignored; Python's int() rules otherwise
      a:create(path .. "-x", "not a number")
      assert.is_true(a:Semaphore(path .. "-x", "A", 5):acquire())
      a:create(path .. "-y", " 1_0\n")
      assert.is_true(a:Semaphore(path .. "-y", "A", 10):acquire())
      raises(errors.BadArgumentsError, a:Semaphore(path .. "-y", "A", 1).acquire,
             a:Semaphore(path .. "-y", "A", 1))
      helpers.delete_trees(server.hosts, path .. "-x", path .. "-x-__lock__", path .. "-y",
                           path .. "-y-__lock__")
    end)

    it("the holder's acquire returns true without a second lease (kazoo); release()", function()
      local s = a:Semaphore(path, "A", 2)
      assert.is_false(s:release())
      assert.is_true(s:acquire())
      assert.is_true(s:acquire()) -- kazoo's test_multiple_acquire_and_release
      assert.is_true(s:acquire(false))
      assert.are.equal(1, #children()) -- still one lease
      assert.is_true(s:release())
      assert.is_false(s:release())
      assert.is_true(s:acquire()) -- and again after a release
      assert.is_true(s:release())
    end)

    it("with() acquires, calls, releases even on error, and re-raises", function()
      local s = a:Semaphore(path)
      local x, y = s:with(function(p, q)
        assert.is_true(s.is_acquired)
        assert.are.equal(1, #children())
        return p + 1, q
      end, 1, "two")
      assert.are.equal(2, x)
      assert.are.equal("two", y)
      assert.is_false(s.is_acquired)
      local ok, err = pcall(s.with, s, function() error("boom in body") end)
      assert.is_false(ok)
      assert.truthy(tostring(err):find("boom in body", 1, true))
      assert.is_false(s.is_acquired)
      assert.are.same({}, children())
    end)

    it("fencing tokens are the lease node's czxid and grow with every holder", function()
      local tokens = {}
      for i, zk in ipairs({ a, b, c, a }) do
        local s = zk:Semaphore(path, "h" .. i, 2)
        assert.is_nil(s.fencing_token)
        assert.is_true(s:acquire())
        tokens[i] = s.fencing_token
        assert.is_true(compat.is_id(tokens[i]))
        assert.are.equal(zk:exists(s.create_path).czxid, tokens[i])
        assert.is_true(s:release())
        assert.is_nil(s.fencing_token)
      end
      for i = 2, #tokens do assert.is_true(tokens[i] > tokens[i - 1]) end
    end)
  end)

  describe("timeouts and cancel", function()
    it("a timeout raises LockTimeout and leaves no node behind", function()
      local sa, sb = a:Semaphore(path, "A"), b:Semaphore(path, "B")
      assert.is_true(sa:acquire())
      local err = raises(errors.LockTimeout, sb.acquire, sb, true, 0.3)
      assert.are.equal(path, err.path)
      assert.is_false(sb.is_acquired)
      assert.are.same({ sa.node }, children())
      assert.are.same({}, children(lock_path))
      assert.is_true(sa:release())
      assert.is_true(sb:acquire(true, 10)) -- usable again
    end)

    it("timeout 0 still takes a free lease (the first look always completes)", function()
      local s = a:Semaphore(path, "A")
      assert.is_true(s:acquire(true, 0))
      local other = b:Semaphore(path, "B")
      raises(errors.LockTimeout, other.acquire, other, true, 0)
      assert.are.same({ s.node }, children())
    end)

    it("cancel() makes a waiting acquire raise CancelledError and clean up", function()
      local sa, sb = a:Semaphore(path, "A"), b:Semaphore(path, "B")
      assert.is_true(sa:acquire())
      when_queued(function() sb:cancel() end)
      raises(errors.CancelledError, sb.acquire, sb)
      assert.is_false(sb.is_acquired)
      assert.are.same({ sa.node }, children())
      assert.are.same({}, children(lock_path))
      assert.is_false(sb.cancelled)
      -- as kazoo (test_acquire_after_cancelled): a cancel with no acquire under way sets
      -- cancelled, and the next acquire resets it
      sb:cancel()
      assert.is_true(sb.cancelled)
      assert.is_false(sb:acquire(false))
      assert.is_false(sb.cancelled)
      assert.is_true(sa:release())
      assert.is_true(sb:acquire())
    end)

    it("a semaphore collected during its acquire cleans up in the background", function()
      local sa = a:Semaphore(path, "A")
      assert.is_true(sa:acquire())
      -- the orphan lives in a frame of its own, which is gone once it returns: a local of a
      -- do-block can stay on the caller's stack (LuaJIT marks a frame's dead slots), and a
      -- reference left there would keep it from being collected at all
      local function start_orphan()
        local raw = core.semaphore(b._session, path, "orphan", 1)
        assert.is_true(raw:acquire(true))
        eventually(function() return raw:step() == "wait" end, 20, "the orphan to wait")
        assert.are.equal(1, #children(lock_path))
      end
      start_orphan()
      collectgarbage()
      collectgarbage()
      eventually(function() return #children(lock_path) == 0 end, 20, "the orphan's clean-up")
      assert.is_true(sa:release())
      b:sync(path)
      assert.are.same({}, children())
    end)
  end)

  describe("several processes", function()
    it("five processes in rounds: never more than max_leases holders at once", function()
      local procs = {}
      for i = 1, 5 do
        procs[i] = spawn_zklua({ ident = "p" .. i, max = 2, rounds = 3, hold = 0.1,
                                 ledger = ledger })
      end
      for _, kid in ipairs(procs) do kid:wait_line("^done", 120) end
      for _, kid in ipairs(procs) do finished(kid) end
      local most, rounds, left = replay(a, ledger)
      assert.is_true(most <= 2, "holders at once: " .. most)
      assert.are.equal(0, left)
      for i = 1, 5 do assert.are.equal(3, rounds["p" .. i]) end
      assert.are.same({}, children())
      assert.are.equal("2", (a:get(path)))
    end)

    it("kill -9 of a holder process frees its slot after its session timeout", function()
      local kid = spawn_zklua({ ident = "K", max = 1, timeout = 2 })
      kid:wait_line("^acquired", 20)
      local sb = b:Semaphore(path, "B")
      assert.is_false(sb:acquire(false))
      when_queued(function() kid:signal("KILL") end)
      assert.is_true(sb:acquire(true, 60))
      assert.are.same({ sb.node }, children())
      assert.is_true(kid:wait_exit(10))
    end)
  end)

  describe("connection loss and expiry", function()
    it("LOST of a holder: not acquired, on_lost runs, its slot goes to a waiter", function()
      local sa = a:Semaphore(path, "A")
      assert.is_true(sa:acquire())
      local lost = {}
      sa:on_lost(function(s) lost[#lost + 1] = s end)
      local kid = spawn_zklua({ ident = "K", max = 1 })
      kid:wait_line("^ready", 20)
      eventually(function() return #children(lock_path) == 1 end, 20, "the waiter to queue")
      expire(a)
      testing.wait_for(function() return #lost == 1 end, 10, "on_lost")
      assert.are.equal(sa, lost[1])
      assert.is_false(sa.is_acquired)
      assert.is_nil(sa.fencing_token)
      kid:wait_line("^acquired", 30)
      assert.are.same({ "K" }, b:Semaphore(path):lease_holders())
      testing.wait_for(function() return a.state == "CONNECTED" end, 10, "a new session")
      assert.is_false(sa:acquire(false)) -- the slot is the waiter's now
      assert.is_nil(kid:stdout():find("lost", 1, true))
    end)

    it("an acquire under way starts again on the new session after an expiry", function()
      local sa, sb = a:Semaphore(path, "A"), b:Semaphore(path, "B")
      assert.is_true(sa:acquire())
      local old_contender, old_session
      when_queued(function()
        old_contender = children(lock_path)[1]
        old_session = b:client_id()
        expire(b) -- its contender node goes with the session; it must queue again
        eventually(function()
          local list = children(lock_path)
          return #list == 1 and list[1] ~= old_contender
        end, 20, "b's new contender")
        assert.is_true(sa:release())
      end)
      assert.is_true(sb:acquire(true, 60))
      assert.is_truthy(old_contender)
      assert.are_not.equal(old_session, b:client_id())
      local _, stat = a:get(sb.create_path)
      assert.are.equal(b:client_id(), stat.owner_session_id) -- made on the new session
      assert.are.same({ sb.node }, children())
    end)

    it("a holder whose server is frozen keeps its lease; a waiter goes on afterwards", function()
      local sa = a:Semaphore(path, "A")
      assert.is_true(sa:acquire())
      local token = sa.fencing_token
      local lost = false
      sa:on_lost(function() lost = true end)
      local kid = spawn_zklua({ ident = "K", max = 1, timeout = 20 })
      kid:wait_line("^ready", 20)
      eventually(function() return #children(lock_path) == 1 end, 20, "the waiter to queue")
      local node = server:node(1)
      node:pause()
      testing.wait_for(function() return a.state == "SUSPENDED" end, 30, "SUSPENDED")
      assert.is_true(sa.is_acquired)
      node:resume()
      testing.wait_for(function() return a.state == "CONNECTED" end, 30, "reconnection")
      assert.is_true(sa.is_acquired)
      assert.is_false(lost)
      assert.are.equal(token, sa.fencing_token)
      assert.are.equal(token, b:exists(sa.create_path).czxid)
      assert.is_false(b:Semaphore(path, "B"):acquire(false))
      assert.is_true(sa:release())
      kid:wait_line("^acquired", 30) -- the waiter's watch survived the outage
    end)

    it("a lease create whose reply was lost is found again, not left behind", function()
      -- Through a proxy that, once the waiter waits for a free slot, lets its next create
      -- (the lease node's) reach the server and holds back everything after it: the server
      -- runs the create, the client gives up on the connection (SUSPENDED, the proxy resumes
      -- then), and the waiter must find its node by name.
      local proxy = testing.proxy(server:node(1))
      local zk = zklua.client{ hosts = proxy.hosts, timeout = 4 }
      zk:start()
      local holder = a:Semaphore(path, "A")
      assert.is_true(holder:acquire())
      local sem = zk:Semaphore(path, "Z")
      local ud = sem._sem
      local step_at_suspended
      zk:add_listener(function(state)
        if state == "SUSPENDED" and not step_at_suspended then
          step_at_suspended = ud:step()
          proxy:resume()
        end
      end)
      when_queued(function()
        local deadline = core.monotonic() + 30
        while ud:step() ~= "wait" do -- it counted: all taken
          assert(core.monotonic() < deadline, "timed out driving the waiter")
          zk:dispatch(0.01)
        end
        proxy:cut_reply("create")
        c:delete_async(holder.create_path) -- the slot frees up: the waiter creates its lease
      end)
      local ok, err = pcall(sem.acquire, sem, true, 60)
      assert.is_true(ok, tostring(err))
      assert.is_true(proxy:status().cut, "the waiter sent no create")
      assert.are.equal("create", step_at_suspended)
      assert.are.same({ sem.node }, children())
      assert.are.equal(a:exists(sem.create_path).czxid, sem.fencing_token)
      assert.is_true(sem:release())
      assert.are.same({}, children())
      assert.are.same({}, children(lock_path))
      zk:close()
      proxy:stop()
    end)

    it("release() while the server is out of reach returns after a session timeout; the lease goes", function()
      helpers.release_while_down(server, a, function(zk) return zk:Semaphore(path, "short") end,
                                 function(s) return s.create_path end)
    end)

    it("stop() while holding is a LOST; close() leaves the object harmless", function()
      local sa = a:Semaphore(path, "A", 2)
      assert.is_true(sa:acquire())
      local lost = 0
      sa:on_lost(function() lost = lost + 1 end)
      a:stop()
      assert.are.equal(1, lost)
      assert.is_false(sa.is_acquired)
      raises(errors.ConnectionClosedError, sa.acquire, sa)
      local sb = b:Semaphore(path, "B", 2)
      assert.is_true(sb:acquire())
      b:close()
      assert.is_false(sb.is_acquired)
      assert.is_false(sb:release())
      raises(errors.ConnectionClosedError, sb.acquire, sb)
      eventually(function() return #children(path, c) == 0 end, 10, "the leases to go")
      b = zklua.client(server.hosts) -- for after_each
      b:start()
    end)
  end)

  describe("kazoo interop", function()
    it("kazoo and zklua processes share a semaphore: never more than max_leases at once", function()
      local procs = {
        spawn_kazoo(2, "kazoo-1", "rounds", "3", "0.1", ledger),
        spawn_zklua({ ident = "zklua-1", max = 2, rounds = 3, hold = 0.1, ledger = ledger }),
        spawn_kazoo(2, "kazoo-2", "rounds", "3", "0.1", ledger),
        spawn_zklua({ ident = "zklua-2", max = 2, rounds = 3, hold = 0.1, ledger = ledger }),
      }
      for _, kid in ipairs(procs) do kid:wait_line("^done", 120) end
      for _, kid in ipairs(procs) do finished(kid) end
      local most, rounds, left = replay(a, ledger)
      assert.is_true(most <= 2, "holders at once: " .. most)
      assert.are.equal(0, left)
      assert.are.same({ ["kazoo-1"] = 3, ["kazoo-2"] = 3, ["zklua-1"] = 3, ["zklua-2"] = 3 },
                      rounds)
      assert.are.same({}, children())
    end)

    it("kazoo holders refuse zklua until one of them releases", function()
      local k1 = spawn_kazoo(2, "kazoo-1", "hold_until", path .. "-go")
      k1:wait_line("^acquired", 30)
      local k2 = spawn_kazoo(2, "kazoo-2", "hold_until", path .. "-go")
      k2:wait_line("^acquired", 30)
      local s = a:Semaphore(path, "zklua", 2)
      assert.is_false(s:acquire(false))
      assert.are.same({ "kazoo-1", "kazoo-2" }, helpers.sorted(s:lease_holders()))
      when_queued(function() b:create(path .. "-go", "") end)
      assert.is_true(s:acquire(true, 30))
      for _, kid in ipairs({ k1, k2 }) do
        kid:wait_line("^released", 20)
        finished(kid)
      end
      assert.are.same({ s.node }, children())
    end)

    it("a zklua holder refuses kazoo; kazoo's blocking acquire gets it after the release", function()
      local s = a:Semaphore(path, "zklua")
      assert.is_true(s:acquire())
      local kz = spawn_kazoo(1, "kazoo", "try_then_wait")
      kz:wait_line("^got False", 30)
      kz:wait_line("^timeout", 30)
      eventually(function() return #children(lock_path) == 1 end, 30, "kazoo to queue again")
      local holders = spawn_kazoo(1, "lister", "holders")
      holders:wait_line("^holders zklua$", 30)
      assert.is_true(s:release())
      kz:wait_line("^acquired", 30)
      kz:wait_line("^released", 30)
      finished(kz)
      assert.are.same({}, children())
    end)

    it("a max_leases mismatch is refused on both sides", function()
      assert.is_true(a:Semaphore(path, "zklua", 2):acquire())
      local wrong = spawn_kazoo(3, "kazoo", "check")
      wrong:wait_line("^ValueError Inconsistent max leases: 2, expected: 3", 30)
      local right = spawn_kazoo(2, "kazoo", "check")
      right:wait_line("^got True", 30)
      finished(wrong)
      finished(right)
      -- a path kazoo made holds what kazoo wrote, and zklua checks it
      local other = path .. "/k"
      local made = kids:kazoo("spec/fixtures/kazoo_semaphore.py", server.hosts, other, "4",
                              "kazoo", "check")
      made:wait_line("^got True", 30)
      finished(made)
      assert.are.equal("4", (a:get(other)))
      local s2 = b:Semaphore(other, "zklua", 2)
      raises(errors.BadArgumentsError, s2.acquire, s2)
      assert.is_true(b:Semaphore(other, "zklua", 4):acquire())
      helpers.delete_trees(server.hosts, other .. "-__lock__")
    end)
  end)

  describe("bad arguments", function()
    it("are refused before anything is sent", function()
      raises(errors.BadArgumentsError, a.Semaphore, a, "/a/../b")
      raises(errors.BadArgumentsError, a.Semaphore, a, path .. "/../x")
      raises(errors.BadArgumentsError, a.Semaphore, a, 42)
      raises(errors.BadArgumentsError, a.Semaphore, a, path, 42)
      raises(errors.BadArgumentsError, a.Semaphore, a, path, string.rep("x", 1024 * 1024))
      for _, bad in ipairs({ 0, -1, 1.5, "2", 2 ^ 31, 0 / 0, true }) do
        local err = raises(errors.BadArgumentsError, a.Semaphore, a, path, "id", bad)
        assert.are.equal("max_leases", err.argument)
      end
      local s = a:Semaphore(path)
      raises(errors.BadArgumentsError, s.acquire, s, "yes")
      raises(errors.BadArgumentsError, s.acquire, s, true, -1)
      raises(errors.BadArgumentsError, s.acquire, s, true, 0 / 0)
      raises(errors.BadArgumentsError, s.acquire, s, true, "soon")
      raises(errors.BadArgumentsError, s.on_lost, s, "not a function")
      raises(errors.BadArgumentsError, s.with, s, nil)
      assert.is_nil(a:exists(path))
      assert.is_nil(a:exists(lock_path))
    end)
  end)
end)

describe("semaphore in an ensemble", function()
  local ens

  setup(function() ens = testing.ensemble(3) end)
  teardown(function() ens:stop() end)

  it("a holder cut off from its server keeps its lease; clients of other servers are refused",
     function()
    -- the holder's only server out of reach through a fault proxy (refused, connection
    -- dropped), not stopped and restarted: a node's restart and resync on a loaded machine
    -- can outlast the session
    local path = "/semaphores/ensemble"
    local p = testing.proxy(ens:node(1))
    local holder = zklua.client{ hosts = p.hosts, timeout = 20 }
    local other = zklua.client{ hosts = ens:node(2).hosts .. "," .. ens:node(3).hosts }
    finally(function() holder:close(); other:close(); p:stop() end)
    holder:start()
    other:start()
    local s = holder:Semaphore(path, "H")
    assert.is_true(s:acquire())
    local lost = false
    s:on_lost(function() lost = true end)
    local token = s.fencing_token
    local session = holder:client_id()
    p:refuse(true)
    p:drop()
    testing.wait_for(function() return holder.state == "SUSPENDED" end, 10, "SUSPENDED")
    assert.is_true(s.is_acquired)
    local o = other:Semaphore(path, "O")
    assert.is_false(o:acquire(false)) -- the holder's ephemeral lease lives on
    assert.are.same({ "H" }, o:lease_holders())
    p:refuse(false)
    testing.wait_for(function() return holder.state == "CONNECTED" end, 30, "reconnection")
    assert.are.equal(session, (holder:client_id()), "the session")
    assert.is_true(s.is_acquired)
    assert.is_false(lost)
    assert.are.equal(token, s.fencing_token)
    assert.is_true(s:release())
    assert.is_true(o:acquire(true, 30))
  end)
end)
