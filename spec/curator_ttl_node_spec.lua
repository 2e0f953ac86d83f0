-- zk:PersistentTtlNode is Curator 5.4's PersistentTtlNode (a CONTAINER node holding the data,
-- kept alive by its PERSISTENT_WITH_TTL child "touch" written every ttl / 2), shared with a
-- real Curator program (spec/fixtures/java/CuratorTtlNode.java in its own JVM): each side
-- reads the other's node, makes the same kinds of nodes, and keeps the other's node alive
-- after the other stopped; once both stopped, the server deletes it.  Then what SUSPENDED
-- (the connection refused and dropped by zklua.testing.proxy for longer than the ttl), LOST
-- (the session expired) and coroutines sharing one object do to it.  zklua.testing's servers
-- look for expired TTL nodes and empty containers every 500 ms.  Waits are for events: a line
-- the Java program prints, the node's touches, a predicate asking the server.
local zklua = require "zklua"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local interop = require "support.curator"
local cq_handler = require "zklua.handlers.cqueues"

local SESSION_MS = 8000
local TTL_MS = 500

describe("PersistentTtlNode and Curator's PersistentTtlNode", function()
  local server, zk, path
  local s = interop.scaffold("/ttlnodes", function(t) server, zk, path = t.server, t.zk, t.path end,
                             { suffix = "/node" })
  setup(s.setup); teardown(s.teardown); before_each(s.before_each); after_each(s.after_each)

  local function wait(pred, what) testing.wait_for(pred, 30, what) end
  local function exists(p) return zk:exists(p) ~= nil end
  -- more than a ttl and the server's 500 ms look for expired nodes: a node nobody touches
  -- is gone by then
  local function past_ttl() testing.sleep(TTL_MS / 1000 + 1) end
  local function touched(node, n)
    local from = node.touches
    wait(function() return node.touches >= from + (n or 2) end, "touches")
  end

  it("bad arguments raise, naming what is wrong, before anything is sent", function()
    local function fails(pattern, ...)
      local args = { ... }
      local ok, err = pcall(function() return zk:PersistentTtlNode(table.unpack(args, 1, 4)) end)
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find(pattern), tostring(err))
    end
    fails("ttl", path, 0, "d")
    fails("ttl", path, 1.5, "d")
    fails("ttl", path, "500", "d")
    fails("child", path, 500, "d", { child = "a/b" })
    fails("touch_factor", path, 500, "d", { touch_factor = 0 })
    fails("bogus", path, 500, "d", { bogus = true })
    fails("root", "/", 500, "d")
    assert.is_nil(zk:exists(path))
  end)

  it("Curator reads zklua's node, zklua reads Curator's, and both make the same nodes", function()
    local node = zk:PersistentTtlNode(path .. "-lua", TTL_MS, "lua-data")
    node:start()
    assert.is_true(node:wait_for_initial_create(10))
    touched(node, 1)
    local curator = s:start("CuratorTtlNode", server.hosts, path, TTL_MS, "java-data", SESSION_MS)
    curator:send("start")
    curator:expect("^created$")
    assert.are.equal("java-data", (zk:get(path)))
    wait(function() return exists(path .. "/touch") end, "Curator's touch node")
    -- a Curator client reads zklua's node; it goes once nobody touches it.  The reader reads
    -- before the node stops: its JVM can take longer to start on a loaded machine than the
    -- server takes to delete a node nobody touches
    local reader = s:start("CuratorTtlNode", server.hosts, path .. "-lua", TTL_MS, "x", SESSION_MS)
    reader:send("get")
    reader:expect("^data lua%-data$")
    node:stop()
    wait(function() return not exists(path .. "-lua") end, "zklua's stopped node to go")
    reader:send("get")
    reader:expect("^none$")
    curator:send("close")
    curator:expect("^closed$")
    wait(function() return not exists(path) end, "Curator's closed node to go")
  end)

  it("keeps Curator's node alive after Curator closed, and Curator keeps zklua's", function()
    local curator = s:start("CuratorTtlNode", server.hosts, path, TTL_MS, "java-data", SESSION_MS)
    curator:send("start")
    curator:expect("^created$")
    local node = zk:PersistentTtlNode(path, TTL_MS, "lua-data")
    node:start()
    assert.is_true(node:wait_for_initial_create(10))
    -- zklua's data is written over Curator's (as Curator's PersistentNode takes a node over)
    curator:send("get")
    curator:expect("^data lua%-data$")
    curator:send("close")
    curator:expect("^closed$")
    past_ttl()
    assert.is_true(exists(path))
    touched(node)
    assert.is_true(exists(path))
    -- now the other way: Curator keeps zklua's node once zklua stopped
    local again = s:start("CuratorTtlNode", server.hosts, path, TTL_MS, "java-2", SESSION_MS)
    again:send("start")
    again:expect("^created$")
    node:stop()
    past_ttl()
    assert.is_true(exists(path))
    assert.are.equal("java-2", (zk:get(path)))
    again:send("close")
    again:expect("^closed$")
    wait(function() return not exists(path) end, "the node to go once both stopped")
  end)

  it("SUSPENDED longer than the ttl: the server deletes it; it is made again on reconnection",
     function()
    local proxy = testing.proxy(server:node(1))
    local member = s:closing(zklua.client{ hosts = proxy.hosts, timeout = SESSION_MS / 1000 })
    member:start()
    local suspended = false
    member:add_listener(function(state) if state == "SUSPENDED" then suspended = true end end)
    local node = member:PersistentTtlNode(path, TTL_MS, "kept")
    node:start()
    assert.is_true(node:wait_for_initial_create(10))
    touched(node)
    local session = member:client_id()
    proxy:refuse(true)
    proxy:drop()
    wait(function() return suspended end, "SUSPENDED")
    -- nothing touches the node: the server deletes the touch node, then the empty container
    wait(function() return not exists(path) end, "the untouched node to go")
    proxy:refuse(false)
    wait(function() return member.state == "CONNECTED" end, "CONNECTED")
    assert.are.equal(session, (member:client_id()), "the same session")
    wait(function() return exists(path) end, "the node made again")
    touched(node)
    assert.are.equal("kept", (zk:get(path)))
    assert.is_true(exists(path .. "/touch"))
    node:stop()
    proxy:stop()
  end)

  it("LOST: nothing is lost, the touches go on on the new session", function()
    local member = s:closing(helpers.client(server.hosts))
    local node = member:PersistentTtlNode(path, TTL_MS, "kept")
    node:start()
    assert.is_true(node:wait_for_initial_create(10))
    touched(node)
    testing.expire_session(member)
    wait(function() return member.state == "CONNECTED" end, "CONNECTED on a new session")
    touched(node)
    past_ttl()
    assert.is_true(exists(path))
    assert.are.equal("kept", (zk:get(path)))
    node:stop()
  end)

  it("coroutines share one node: each waits for the initial create; any may stop it", function()
    interop.in_cqueues(function(cq)
      local member = zklua.client{ hosts = server.hosts, handler = cq_handler.new(cq) }
      member:start()
      local node = member:PersistentTtlNode(path, TTL_MS, "shared")
      local results = {}
      for i = 1, 3 do
        cq:wrap(function() results[i] = node:wait_for_initial_create(30) end)
      end
      node:start()
      local deadline = require("cqueues").monotime() + 30
      while #results < 3 and require("cqueues").monotime() < deadline do
        member.handler.sleep(0.02)
      end
      assert.are.same({ true, true, true }, results)
      -- a container is deleted by the server only once it had a child: the first touch
      while node.touches < 1 and require("cqueues").monotime() < deadline do
        member.handler.sleep(0.02)
      end
      local stopped = false
      cq:wrap(function() node:stop(); stopped = true end)
      while not stopped and require("cqueues").monotime() < deadline do
        member.handler.sleep(0.02)
      end
      assert.is_true(stopped)
      member:close()
    end, 120)
    wait(function() return not exists(path) end, "the stopped node to go")
  end)
end)
