-- Election (lua/zklua/recipes/election.lua over src/recipes/lock.c) against a real server:
-- several clients in one process, zklua child processes (spec/fixtures/election_child.lua) and
-- kazoo child processes (spec/fixtures/kazoo_election.py, Debian's python3-kazoo).
--
-- A run() blocks its thread, so whatever must happen WHILE it waits runs from a one-shot
-- get_children watch on the election path (as in lock_spec.lua).
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"

local ROOT = "/elections"

local eventually = helpers.eventually
local expire = helpers.expire
local raises = helpers.raises

local function leaders(list)
  local n, who = 0, nil
  for _, e in ipairs(list) do
    if e.is_leader then n, who = n + 1, e end
  end
  return n, who
end

describe("elections", function()
  local server, a, b, c, path
  local counter = 0
  local kids = helpers.kids()

  local function children(zk)
    local ok, list = pcall((zk or a).get_children, zk or a, path)
    if not ok then return {} end
    return list
  end

  local function when_queued(fn)
    c:get_children(path, function() fn() end)
  end

  local function spawn_zklua(opts)
    local argv = helpers.lua_argv("spec/fixtures/election_child.lua", "hosts=" .. server.hosts,
                                  "path=" .. path)
    for k, v in pairs(opts) do argv[#argv + 1] = k .. "=" .. tostring(v) end
    return kids:spawn(argv)
  end

  local function spawn_kazoo(ident)
    return kids:kazoo("spec/fixtures/kazoo_election.py", server.hosts, path,
                      ident, path .. "-go-" .. ident, path .. "-leader")
  end

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  before_each(function()
    counter = counter + 1
    path = ROOT .. "/t" .. counter
    a, b, c = helpers.clients(server.hosts, 3)
  end)

  after_each(function()
    kids:cleanup()
    for _, zk in ipairs({ a, b, c }) do zk:close() end
    helpers.delete_trees(server.hosts, ROOT)
  end)

  describe("latch form", function()
    it("elects exactly one leader among 3 clients; on_leader, is_leader, await", function()
      local ea, eb, ec = a:Election(path, "A"), b:Election(path, "B"), c:Election(path, "C")
      local elected = {}
      for _, e in ipairs({ ea, eb, ec }) do
        e:on_leader(function(x) elected[#elected + 1] = x.identifier end)
      end
      assert.is_true(ea:start())
      assert.is_false(ea:start()) -- already started
      assert.is_true(ea:await(10))
      assert.is_true(ea.is_leader)
      assert.is_true(eb:start())
      eventually(function() return #children() == 2 end, 10, "b to queue")
      assert.is_true(ec:start())
      assert.is_false(eb:await(0.3))
      assert.is_false(ec:await(0.1))
      assert.are.equal(1, (leaders({ ea, eb, ec })))
      assert.are.same({ "A" }, elected)
      assert.are.same({ "A", "B", "C" }, ea:contenders())
      assert.are.same({ "A", "B", "C" }, ec:contenders())
      assert.is_nil(eb.fencing_token)
      assert.are.equal(a:exists(path .. "/" .. ea.lock.node).czxid, ea.fencing_token)
    end)

    it("the leader leaves: the next in order takes over, and so on", function()
      local list = { a:Election(path, "A"), b:Election(path, "B"), c:Election(path, "C") }
      local order = {}
      for i, e in ipairs(list) do
        e:on_leader(function(x) order[#order + 1] = x.identifier end)
        e:start()
        eventually(function() return #children() == i end, 10, "the member to queue")
      end
      testing.wait_for(function() return #order == 1 end, 10, "a first leader")
      local tokens = { list[1].fencing_token }
      assert.is_true(list[1]:stop())
      assert.is_false(list[1].is_leader)
      assert.is_true(list[2]:await(10))
      assert.are.equal(1, (leaders(list)))
      assert.are.same({ "B", "C" }, list[3]:contenders())
      tokens[2] = list[2].fencing_token
      list[2]:stop()
      assert.is_true(list[3]:await(10))
      tokens[3] = list[3].fencing_token
      assert.are.same({ "A", "B", "C" }, order)
      for i = 2, 3 do assert.is_true(tokens[i] > tokens[i - 1]) end
      -- a member that stopped can start again: it queues at the end
      assert.is_true(list[1]:start())
      assert.is_false(list[1]:await(0.2))
      assert.are.same({ "C", "A" }, list[1]:contenders())
      list[3]:stop()
      assert.is_true(list[1]:await(10))
      assert.are.same({ "A", "B", "C", "A" }, order)
      list[1]:stop()
      assert.are.same({}, children())
    end)

    it("on_leader runs from zk:dispatch() without any blocking call", function()
      local ea, eb = a:Election(path, "A"), b:Election(path, "B")
      ea:start()
      assert.is_true(ea:await(10))
      local became = false
      eb:on_leader(function() became = true end)
      eb:start()
      eventually(function() return #children() == 2 end, 10, "b to queue")
      ea:stop()
      local zklua_core = require "zklua.core"
      local deadline = zklua_core.monotonic() + 10
      while not became and zklua_core.monotonic() < deadline do
        b:dispatch(0.05)
      end
      assert.is_true(became)
      assert.is_true(eb.is_leader)
    end)

    it("cancel() withdraws a waiting latch and leaves a leader alone", function()
      local ea, eb = a:Election(path, "A"), b:Election(path, "B")
      ea:start()
      assert.is_true(ea:await(10))
      eb:start()
      eventually(function() return #children() == 2 end, 10, "b to queue")
      eb:cancel()
      assert.is_false(eb.is_running)
      eventually(function() return #children() == 1 end, 10, "b's node to go")
      ea:cancel()
      assert.is_true(ea.is_leader)
      assert.is_true(ea.is_running)
      ea:stop()
    end)
  end)

  describe("run", function()
    it("blocks until elected, calls fn with its arguments and releases after", function()
      local ea, eb = a:Election(path, "A"), b:Election(path, "B")
      ea:start()
      assert.is_true(ea:await(10))
      local events = {}
      when_queued(function()
        events[#events + 1] = "B queued"
        assert.are.same({ "A", "B" }, eb:contenders())
        ea:stop()
        events[#events + 1] = "A left"
      end)
      local ok, x, y = eb:run(function(p, q)
        events[#events + 1] = "B leads"
        assert.is_true(eb.is_leader)
        assert.is_number(eb.fencing_token)
        assert.are.same({ "B" }, ea:contenders())
        return p + 1, q
      end, 1, "two")
      assert.is_true(ok)
      assert.are.equal(2, x)
      assert.are.equal("two", y)
      assert.are.same({ "B queued", "A left", "B leads" }, events)
      assert.is_false(eb.is_leader)
      assert.are.same({}, children())
    end)

    it("an error in fn releases leadership and is re-raised", function()
      local ea, eb = a:Election(path, "A"), b:Election(path, "B")
      local ok, err = pcall(ea.run, ea, function() error("boom in leader") end)
      assert.is_false(ok)
      assert.truthy(tostring(err):find("boom in leader", 1, true))
      assert.is_false(ea.is_leader)
      assert.are.same({}, children())
      local ran = false
      assert.is_true((eb:run(function() ran = true end)))
      assert.is_true(ran)
      assert.is_true((ea:run(function() end))) -- usable again
    end)

    it("run({timeout = t}, fn): TimeoutError when not elected in time, fn not called", function()
      local ea, eb = a:Election(path, "A"), b:Election(path, "B")
      ea:start()
      assert.is_true(ea:await(10))
      local called = false
      raises(errors.TimeoutError, eb.run, eb, { timeout = 0.3 }, function() called = true end)
      assert.is_false(called)
      assert.is_false(eb.is_running)
      assert.are.equal(1, #children()) -- its node deleted
      raises(errors.BadArgumentsError, eb.run, eb, { timeout = -1 }, function() end)
      raises(errors.BadArgumentsError, eb.run, eb, { wait = 1 }, function() end)
      ea:stop()
      assert.are.same({ true, "led", 7 },
                      { eb:run({ timeout = 10 }, function(x) return "led", x end, 7) })
    end)

    it("cancel() ends a waiting run with false; before a run, the next run", function()
      local ea, eb = a:Election(path, "A"), b:Election(path, "B")
      ea:start()
      assert.is_true(ea:await(10))
      local called = false
      when_queued(function() eb:cancel() end)
      assert.is_false(eb:run(function() called = true end))
      assert.is_false(called)
      eventually(function() return #children() == 1 end, 10, "b's node to go")
      eb:cancel() -- kazoo: cancels the next run
      assert.is_false(eb:run(function() called = true end))
      assert.is_false(called)
      ea:stop()
      assert.is_true((eb:run(function() called = true end)))
      assert.is_true(called)
    end)

    it("refuses to mix run() and start() on one object", function()
      local e = a:Election(path, "A")
      e:start()
      raises(errors.KazooException, e.run, e, function() end)
      e:stop()
      e:run(function()
        raises(errors.KazooException, e.start, e)
        raises(errors.KazooException, e.run, e, function() end)
      end)
    end)
  end)

  describe("session loss", function()
    it("leader session expiry: on_lost, another member leads, the latch rejoins", function()
      local ea, eb = a:Election(path, "A"), b:Election(path, "B")
      local log = {}
      ea:on_leader(function() log[#log + 1] = "A leads" end)
      ea:on_lost(function(e)
        log[#log + 1] = "A lost"
        assert.is_false(e.is_leader)
      end)
      eb:on_leader(function() log[#log + 1] = "B leads" end)
      ea:start()
      assert.is_true(ea:await(10))
      local token = ea.fencing_token
      eb:start()
      eventually(function() return #children() == 2 end, 10, "b to queue")
      expire(a)
      assert.is_true(eb:await(20))
      local function logged(what)
        for _, entry in ipairs(log) do
          if entry == what then return true end
        end
        return false
      end
      -- B may lead before A's client hears of the expiry: the server decides, not A
      testing.wait_for(function() return logged("A lost") end, 10, "on_lost")
      assert.is_false(ea.is_leader)
      assert.is_true(eb.fencing_token > token)
      -- A competes again on its new session, behind B
      testing.wait_for(function() return a.state == "CONNECTED" end, 10, "a new session")
      eventually(function() return #children() == 2 end, 10, "a to rejoin")
      assert.are.same({ "B", "A" }, eb:contenders())
      assert.is_false(ea:await(0.2))
      eb:stop()
      assert.is_true(ea:await(10))
      assert.are.equal(4, #log)
      assert.are.equal("A leads", log[1])
      local middle = { log[2], log[3] }
      table.sort(middle)
      assert.are.same({ "A lost", "B leads" }, middle)
      assert.are.equal("A leads", log[4])
      ea:stop()
    end)

    it("run: the fn keeps running after an expiry, but is_leader turns false", function()
      local e = a:Election(path, "A")
      local lost = 0
      e:on_lost(function() lost = lost + 1 end)
      local seen = {}
      assert.is_true((e:run(function()
        seen[1] = e.is_leader
        expire(a)
        testing.wait_for(function() return lost == 1 end, 10, "on_lost")
        seen[2] = e.is_leader
        seen[3] = e.fencing_token
      end)))
      assert.are.same({ true, false }, seen)
      assert.is_false(e.is_leader)
    end)

    it("kill -9 of a leader process: a survivor leads after the session timeout", function()
      local kid = spawn_zklua({ ident = "K", timeout = 2 })
      kid:wait_line("^leader", 20)
      local token = tonumber(kid:stdout():match("leader (%d+)"))
      local ea, eb = a:Election(path, "A"), b:Election(path, "B")
      ea:start()
      eventually(function() return #children() == 2 end, 10, "a to queue")
      eb:start()
      eventually(function() return #children() == 3 end, 10, "the members to queue")
      assert.are.same({ "K", "A", "B" }, ea:contenders())
      kid:signal("KILL")
      assert.is_true(kid:wait_exit(5))
      assert.is_true(ea:await(30))
      assert.is_false(eb.is_leader)
      assert.is_true(ea.fencing_token > token)
      assert.are.same({ "A", "B" }, eb:contenders())
    end)

    it("a zklua child that expires loses, and another zklua child takes over", function()
      local k1 = spawn_zklua({ ident = "K1" })
      k1:wait_line("^leader", 20)
      local k2 = spawn_zklua({ ident = "K2" })
      k2:wait_line("^ready", 20)
      eventually(function() return #children() == 2 end, 10, "k2 to queue")
      local t1 = tonumber(k1:stdout():match("leader (%d+)"))
      k1:signal("STOP") -- frozen: its session expires after 10 s
      local line = k2:wait_line("^leader", 40)
      k1:signal("CONT")
      k1:wait_line("^lost", 20)
      assert.is_true(tonumber(line:match("leader (%d+)")) > t1)
    end)
  end)

  describe("kazoo interop", function()
    it("kazoo and zklua members: one leader at a time, leadership passes between them", function()
      local marker = path .. "-leader"
      local k1 = spawn_kazoo("kazoo-1")
      k1:wait_line("^leader", 30)
      local e = a:Election(path, "zklua-a")
      local violations = 0
      e:on_leader(function()
        local ok = pcall(a.create, a, marker, "zklua-a", { ephemeral = true, makepath = true })
        if not ok then violations = violations + 1 end
      end)
      e:start()
      assert.is_false(e:await(0.5))
      local k2 = spawn_kazoo("kazoo-2")
      k2:wait_line("^ready", 30)
      eventually(function() return #children() == 3 end, 20, "kazoo-2 to queue")
      assert.are.same({ "kazoo-1", "zklua-a", "kazoo-2" }, e:contenders())
      assert.are.equal("kazoo-1", (a:get(marker)))
      -- kazoo-1 steps down: zklua leads (kazoo-2 still waits)
      b:create(path .. "-go-kazoo-1", "")
      assert.is_true(e:await(20))
      assert.is_true(k1:wait_exit(20))
      assert.are.equal(0, k1.status, k1:stderr())
      assert.truthy(k1:stdout():find("done", 1, true))
      assert.are.equal("zklua-a", (a:get(marker)))
      assert.is_nil(k2:stdout():find("leader", 1, true))
      -- zklua steps down: kazoo-2 leads
      a:delete(marker)
      e:stop()
      k2:wait_line("^leader", 20)
      assert.are.same({ "kazoo-2" }, e:contenders())
      b:create(path .. "-go-kazoo-2", "")
      assert.is_true(k2:wait_exit(20))
      assert.are.equal(0, k2.status, k2:stderr())
      assert.is_nil(k1:stdout():find("violation", 1, true))
      assert.is_nil(k2:stdout():find("violation", 1, true))
      assert.are.equal(0, violations)
    end)

    it("a zklua run() waits behind a kazoo Lock on the same path", function()
      local kz = kids:kazoo("spec/fixtures/kazoo_lock.py", server.hosts, path,
                            "hold_until", path .. "-go", "kazoo-lock")
      kz:wait_line("^acquired", 30)
      local e = a:Election(path, "zklua")
      when_queued(function()
        assert.are.same({ "kazoo-lock", "zklua" }, e:contenders())
        b:create(path .. "-go", "")
      end)
      local order = {}
      assert.is_true((e:run(function() order[#order + 1] = "zklua leads" end)))
      kz:wait_line("^released", 10)
      assert.are.same({ "zklua leads" }, order)
    end)
  end)

  describe("bad arguments", function()
    it("are refused before anything is sent", function()
      raises(errors.BadArgumentsError, a.Election, a, "/a/../b")
      raises(errors.BadArgumentsError, a.Election, a, path .. "/../x")
      raises(errors.BadArgumentsError, a.Election, a, 42)
      raises(errors.BadArgumentsError, a.Election, a, path, 42)
      raises(errors.BadArgumentsError, a.Election, a, path, string.rep("x", 1024 * 1024))
      local e = a:Election(path)
      raises(errors.BadArgumentsError, e.run, e)
      raises(errors.BadArgumentsError, e.run, e, "not a function")
      raises(errors.BadArgumentsError, e.on_leader, e, nil)
      raises(errors.BadArgumentsError, e.on_lost, e, 42)
      raises(errors.BadArgumentsError, e.await, e, -1)
      raises(errors.BadArgumentsError, e.await, e, "soon")
      raises(errors.KazooException, e.await, e) -- not started
      raises(errors.BadArgumentsError, e.run, e, setmetatable({}, {})) -- a table, no __call
      assert.is_nil(a:exists(path))
      assert.is_false(e:stop())
    end)

    it("accepts a callable table wherever it takes a function (kazoo: any callable)", function()
      local e = a:Election(path, "callable")
      local called = {}
      local function callable(name)
        return setmetatable({}, { __call = function(_, ...) called[name] = select("#", ...) end })
      end
      e:on_leader(callable("on_leader"))
      e:on_lost(callable("on_lost"))
      assert.are.same({ true }, { (e:run(callable("run"), 1, 2)) })
      assert.are.equal(2, called.run)
      local l = a:Lock(path, "l")
      l:on_lost(callable("lock on_lost"))
      l:with(callable("with"), "x")
      assert.are.equal(1, called.with)
      assert.is_false(l.is_acquired)
    end)
  end)
end)
