-- Interop with real Curator 5.4 (Debian's libcurator-*-java) programs, compiled and started by
-- spec/support/java.lua (spec/fixtures/java/*.java), against the project's own ZooKeeper
-- server: the harness itself, then zklua's Curator layouts (Lock and Election with
-- layout = "curator") excluding and excluded by InterProcessMutex, electing with LeaderLatch.
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

  setup(function() server = testing.server() end)
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
end)
