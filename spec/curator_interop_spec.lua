-- Interop with real Curator 5.4 (Debian's libcurator-*-java) programs, compiled and started by
-- spec/support/java.lua (spec/fixtures/java/*.java), against the project's own ZooKeeper
-- server: the harness itself, then zklua's Curator layouts (Lock and Election with
-- layout = "curator") excluding and excluded by InterProcessMutex, electing with LeaderLatch,
-- and a support_curator Counter shared with SharedCount.
-- Every wait is for an event: a line the Java program prints, or a znode zklua watches.
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local java = require "support.java"

local SESSION_MS = 4000

describe("Curator interop", function()
  local server, zk, path
  local counter = 0
  local programs = {}

  local function start(name, ...)
    local p = java.start(name, ...)
    programs[#programs + 1] = p
    return p
  end

  local function children()
    local ok, list = pcall(zk.get_children, zk, path)
    if not ok then return {} end
    table.sort(list)
    return list
  end

  setup(function()
    server = testing.server()
    -- /curator itself is a plain node: a container parent shared by the tests would be
    -- deleted by the server between two of them, under a Curator create (whose LeaderLatch
    -- does not retry a create that found its parent gone)
    helpers.client(server.hosts, "/curator"):close()
  end)
  teardown(function() server:stop() end)

  before_each(function()
    counter = counter + 1
    path = "/curator/t" .. counter
    zk = helpers.client(server.hosts)
  end)

  after_each(function()
    for i = #programs, 1, -1 do
      programs[i]:stop()
      programs[i] = nil
    end
    helpers.drop(zk, path)
  end)

  describe("the Java harness", function()
    it("two InterProcessMutex programs exclude each other; zklua sees Curator's layout", function()
      local one = start("CuratorMutex", server.hosts, path, SESSION_MS)
      local two = start("CuratorMutex", server.hosts, path, SESSION_MS)
      one:send("acquire")
      one:expect("^acquired$")
      local names = children()
      assert.equals(1, #names)
      assert.matches("^_c_%x+%-%x+%-%x+%-%x+%-%x+%-lock%-%d%d%d%d%d%d%d%d%d%d$", names[1])
      two:send("acquire 200")
      two:expect("^timeout$")
      two:send("acquire")
      testing.wait_for(function() return #children() == 2 end, 30, "the second contender's node")
      assert.is_false(two:printed("^acquired$"))
      one:send("release")
      one:expect("^released$")
      two:expect("^acquired$")
    end)

    it("a program killed outright loses its lock when its session expires", function()
      local one = start("CuratorMutex", server.hosts, path, SESSION_MS)
      local two = start("CuratorMutex", server.hosts, path, SESSION_MS)
      one:send("acquire")
      one:expect("^acquired$")
      two:send("acquire")
      testing.wait_for(function() return #children() == 2 end, 30, "the second contender's node")
      one:kill()
      two:expect("^acquired$", 60)
    end)

    it("a bad command gets an error line, and the program goes on", function()
      local one = start("CuratorMutex", server.hosts, path, SESSION_MS)
      one:send("frobnicate")
      one:expect("^error frobnicate")
      one:send("release") -- not held: Curator's IllegalMonitorStateException
      one:expect("^error release IllegalMonitorStateException")
      one:send("acquire")
      one:expect("^acquired$")
    end)

    it("rejects a program name that is not a Java class name", function()
      local err = helpers.raised(java.start, "../etc/passwd")
      assert.matches("a program name is a Java class name", tostring(err))
    end)
  end)

  -- Runs fn once, from inside whatever wait is under way, when the children of path change
  -- (a contender's node appears or goes): watched through a second client.
  local function on_change(observer, fn)
    observer:get_children(path, function() fn() end)
  end

  local CURATOR_LOCK_NODE = "^_c_%x+%-%x+%-%x+%-%x+%-%x+%-lock%-%d%d%d%d%d%d%d%d%d%d$"
  local CURATOR_LATCH_NODE = "^_c_%x+%-%x+%-%x+%-%x+%-%x+%-latch%-%d%d%d%d%d%d%d%d%d%d$"

  describe("Lock{layout = 'curator'} and InterProcessMutex", function()
    it("a Curator holder excludes zklua, which gets the lock once Curator releases", function()
      local curator = start("CuratorMutex", server.hosts, path, SESSION_MS)
      curator:send("acquire")
      curator:expect("^acquired$")
      local lock = zk:Lock(path, "zklua", { layout = "curator" })
      assert.equals("curator", lock.layout)
      assert.is_false(lock:acquire(false))
      local observer = helpers.client(server.hosts)
      on_change(observer, function() curator:send("release") end)
      assert.is_true(lock:acquire(true, 60))
      curator:expect("^released$")
      assert.matches(CURATOR_LOCK_NODE, lock.node)
      assert.equals("zklua", zk:get(path .. "/" .. lock.node))
      assert.same({ "zklua" }, lock:contenders())
      lock:release()
      observer:close()
    end)

    it("a zklua holder excludes Curator, which gets the lock once zklua releases", function()
      local lock = zk:Lock(path, "zklua", { layout = "curator" })
      assert.is_true(lock:acquire())
      local curator = start("CuratorMutex", server.hosts, path, SESSION_MS)
      curator:send("acquire 200")
      curator:expect("^timeout$")
      curator:send("acquire")
      testing.wait_for(function() return #children() == 2 end, 30, "Curator's node")
      assert.is_false(curator:printed("^acquired$"))
      assert.equals(2, #lock:contenders())
      lock:release()
      curator:expect("^acquired$")
    end)

    it("a Curator holder killed outright: zklua gets the lock when its session expires", function()
      local curator = start("CuratorMutex", server.hosts, path, SESSION_MS)
      curator:send("acquire")
      curator:expect("^acquired$")
      local observer = helpers.client(server.hosts)
      on_change(observer, function() curator:kill() end)
      local lock = zk:Lock(path, "zklua", { layout = "curator" })
      assert.is_true(lock:acquire(true, 60))
      lock:release()
      observer:close()
    end)

    it("a zklua holder whose session expires: Curator gets the lock", function()
      local holder = helpers.client(server.hosts)
      local lock = holder:Lock(path, "zklua", { layout = "curator" })
      assert.is_true(lock:acquire())
      local lost = false
      lock:on_lost(function() lost = true end)
      local curator = start("CuratorMutex", server.hosts, path, SESSION_MS)
      curator:send("acquire")
      testing.wait_for(function() return #children() == 2 end, 30, "Curator's node")
      helpers.expire(holder)
      curator:expect("^acquired$")
      testing.wait_for(function() return lost end, 30, "the holder to learn of LOST")
      assert.is_false(lock.is_acquired)
      holder:close()
    end)

    it("the lock path is made of containers: the server deletes it once all left", function()
      local deep = path .. "/sub"
      local lock = zk:Lock(deep, "zklua", { layout = "curator" })
      assert.is_true(lock:acquire())
      lock:release()
      testing.wait_for(function() return zk:exists(path) == nil end, 30,
                       "the empty container parents to be deleted")
      local kept = zk:Lock(deep, "zklua", { layout = "curator", container = false })
      assert.is_true(kept:acquire()) -- and a lock with container = false makes plain ones
      kept:release()
      assert.is_not_nil(zk:exists(deep))
    end)

    it("bad options are refused before anything is sent", function()
      local errors = require "zklua.errors"
      local raises = helpers.raises
      local err = raises(errors.BadArgumentsError, zk.Lock, zk, path, "x", { layout = "curatr" })
      assert.matches("option 'layout' must be \"kazoo\" or \"curator\"", tostring(err))
      err = raises(errors.BadArgumentsError, zk.ReadLock, zk, path, "x", { layout = "Curator" })
      assert.matches("option 'layout' must be \"kazoo\" or \"curator\"", tostring(err))
      err = raises(errors.BadArgumentsError, zk.Lock, zk, path, "x", { container = 1 })
      assert.matches("option 'container' must be a boolean", tostring(err))
      err = raises(errors.BadArgumentsError, zk.Election, zk, path, "x", { layouts = "curator" })
      assert.matches("unknown option 'layouts'", tostring(err))
      assert.is_nil(zk:exists(path))
    end)
  end)

  describe("Election{layout = 'curator'} and LeaderLatch", function()
    it("Curator leads, zklua follows and leads once Curator closes its latch", function()
      local curator = start("CuratorLatch", server.hosts, path, "curator-1", SESSION_MS)
      curator:send("start")
      curator:expect("^is%-leader$")
      local election = zk:Election(path, "zklua-1", { layout = "curator" })
      election:start()
      testing.wait_for(function() return #children() == 2 end, 30, "zklua's node")
      assert.is_false(election.is_leader)
      assert.same({ "curator-1", "zklua-1" }, election:contenders())
      curator:send("leader")
      curator:expect("^leader curator%-1$")
      curator:send("close")
      curator:expect("^closed$")
      assert.is_true(election:await(60))
      for _, name in ipairs(children()) do assert.matches(CURATOR_LATCH_NODE, name) end
      election:stop()
    end)

    it("zklua leads, Curator follows, sees zklua's id, and leads once zklua stops", function()
      local election = zk:Election(path, "zklua-1", { layout = "curator" })
      election:start()
      assert.is_true(election:await(30))
      local curator = start("CuratorLatch", server.hosts, path, "curator-1", SESSION_MS)
      curator:send("start")
      curator:expect("^started$")
      testing.wait_for(function() return #children() == 2 end, 30, "Curator's node")
      curator:send("leader")
      curator:expect("^leader zklua%-1$")
      assert.is_false(curator:printed("^is%-leader$"))
      election:stop()
      curator:expect("^is%-leader$")
    end)

    it("failover both ways under faults: kill -9 of Curator, expiry of zklua", function()
      local curator = start("CuratorLatch", server.hosts, path, "curator-1", SESSION_MS)
      curator:send("start")
      curator:expect("^is%-leader$")
      local member = helpers.client(server.hosts)
      local election = member:Election(path, "zklua-1", { layout = "curator" })
      local lost = 0
      election:on_lost(function() lost = lost + 1 end)
      election:start()
      testing.wait_for(function() return #children() == 2 end, 30, "zklua's node")
      curator:kill() -- its session expires after SESSION_MS: zklua leads then
      assert.is_true(election:await(60))
      local second = start("CuratorLatch", server.hosts, path, "curator-2", SESSION_MS)
      second:send("start")
      second:expect("^started$")
      testing.wait_for(function() return #children() == 2 end, 30, "the second Curator's node")
      assert.is_false(second:printed("^is%-leader$"))
      helpers.expire(member) -- zklua's node goes with its session: Curator leads
      second:expect("^is%-leader$", 60)
      testing.wait_for(function() return lost > 0 end, 30, "zklua to learn it lost")
      election:stop()
      member:close()
    end)
  end)

  describe("Counter{support_curator = true} and SharedCount", function()
    it("Curator reads a zklua counter before its first add, and both add up", function()
      local curator = start("CuratorSharedCount", server.hosts, path, SESSION_MS)
      local count = zk:Counter(path, 0, { support_curator = true })
      assert.equals(0, count:get()) -- makes the node: 4 zero bytes, SharedCount's int
      curator:send("count")
      curator:expect("^count 0$") -- (empty data: BufferUnderflowException)
      count:add(5)
      curator:send("count")
      curator:expect("^count 5$")
      curator:send("add 3")
      curator:expect("^count 8$")
      assert.equals(8, count:get())
      -- a default is the seed: Curator reads it too
      local seeded = zk:Counter(path .. "/seeded", -4, { support_curator = true })
      assert.equals(-4, seeded:get())
      local other = start("CuratorSharedCount", server.hosts, path .. "/seeded", SESSION_MS)
      other:send("count")
      other:expect("^count %-4$")
      -- what the issue saw: an empty node (kazoo's, or zklua's before) is unreadable to Curator
      zk:create(path .. "/empty", "")
      local third = start("CuratorSharedCount", server.hosts, path .. "/empty", SESSION_MS)
      third:send("count")
      third:expect("^error count BufferUnderflowException")
    end)
  end)
end)
