-- PersistentNode (src/recipes/persistent_node.c, lua/zklua/recipes/persistent_node.lua),
-- Curator's: a node this client keeps present with its current data, against a real server.
-- Every fault is real (another client deletes the node, the server expires the session or
-- a TTL node, the fault proxy drops the connection) and every wait is for an event: the
-- node's own counters and callbacks, or a predicate that asks the server.
local zklua = require "zklua"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"

local ROOT = "/pnodes"

describe("PersistentNode", function()
  local server, zk, other, path
  local counter = 0

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  before_each(function()
    counter = counter + 1
    path = ROOT .. "/t" .. counter .. "/node"
    zk, other = helpers.clients(server.hosts, 2)
  end)

  after_each(function()
    zk:close()
    helpers.drop(other, ROOT)
  end)

  local function wait(pred, what) testing.wait_for(pred, 30, what) end

  it("start keeps an ephemeral node with its data; on_created runs; stop deletes it", function()
    local node = zk:PersistentNode(path, "v1")
    local created = 0
    node:on_created(function(n)
      assert.equals(node, n)
      created = created + 1
    end)
    assert.is_false(node.present)
    node:start()
    assert.is_true(node:wait_for_initial_create(30))
    assert.is_true(node.present)
    wait(function() return created == 1 end, "on_created")
    local data, stat = other:get(path)
    assert.equals("v1", data)
    assert.equals(zk:client_id(), stat.ephemeralOwner) -- ephemeral, of this client's session
    assert.equals(1, node.creations)
    assert.is_true(node:stop())
    assert.equals("idle", node.phase)
    assert.is_nil(other:exists(path))
    assert.is_false(node:stop()) -- nothing left to delete
  end)

  it("is created again, with its current data, after another client deletes it", function()
    local node = zk:PersistentNode(path, "v1")
    node:start()
    assert.is_true(node:wait_for_initial_create(30))
    other:delete(path)
    wait(function() return node.creations == 2 end, "the node to be made again")
    assert.equals("v1", other:get(path))
    node:set_data("v2")
    wait(function() return other:get(path) == "v2" end, "set_data to reach the node")
    assert.equals("v2", node.data)
    other:delete(path)
    wait(function() return node.creations == 3 end, "the node to be made again")
    assert.equals("v2", other:get(path))
    node:stop()
  end)

  it("someone else's change is left alone and the node still kept", function()
    local node = zk:PersistentNode(path, "mine")
    node:start()
    assert.is_true(node:wait_for_initial_create(30))
    other:set(path, "theirs")
    other:delete(path) -- the watch was set again after the change: the delete is seen
    wait(function() return node.creations == 2 end, "the node to be made again")
    assert.equals("mine", other:get(path))
    node:stop()
  end)

  it("an expired session: on_lost runs, and the node is made again on the new session", function()
    local node = zk:PersistentNode(path, "v1")
    local lost = 0
    node:on_lost(function() lost = lost + 1 end)
    node:start()
    assert.is_true(node:wait_for_initial_create(30))
    local old_owner = select(2, other:get(path)).ephemeralOwner
    helpers.expire(zk)
    -- LOST, then the node made again by the new session
    wait(function()
      local stat = other:exists(path)
      return lost >= 1 and stat ~= nil and stat.ephemeralOwner == zk:client_id()
    end, "LOST, then the new session's node")
    local data, stat = other:get(path)
    assert.equals("v1", data)
    assert.are_not.equal(old_owner, stat.ephemeralOwner)
    node:stop()
  end)

  -- The registrar's outage (issue 21): its connection is down past its session timeout, so it
  -- counts the session LOST and opens a new one, while the server still holds the old one (here
  -- held alive by a second client that resumed it, so it cannot expire during the test).  The
  -- node the old session owns is replaced by the new session's at once, in every mode.
  local function old_session_outlives_the_client(opts)
    local proxy = testing.proxy(server:node(1))
    local client = zklua.client{ hosts = proxy.hosts, timeout = 4 }
    local states = {}
    client:add_listener(function(state) states[#states + 1] = state end)
    client:start()
    local node = client:PersistentNode(path, "v1", opts)
    local lost = 0
    node:on_lost(function() lost = lost + 1 end)
    node:start()
    assert.is_true(node:wait_for_initial_create(30))
    local actual = node.actual_path or path
    local old_id, old_password = client:client_id()
    proxy:refuse(true)
    proxy:drop()
    -- the old session, alive at the server for as long as this client keeps it
    local holder = zklua.client{ hosts = server.hosts, timeout = 4,
                                 client_id = { old_id, old_password } }
    holder:start()
    assert.equals(old_id, (holder:client_id()))
    wait(function() return states[#states] == "LOST" end, "the client to count its session LOST")
    proxy:resume()
    -- (the server has the node before this client has run the create's completion: wait
    -- for both, or the count below races the completion)
    wait(function()
      local stat = other:exists(actual)
      return stat ~= nil and stat.ephemeralOwner == client:client_id() and node.creations >= 2
    end, "the new session's node")
    -- replaced while the old session still lives (without the fix it stays the old one's)
    assert.equals("CONNECTED", holder.state)
    assert.equals(old_id, (holder:client_id()))
    assert.are_not.equal(old_id, (client:client_id()))
    assert.equals("v1", other:get(actual))
    assert.equals(actual, node.actual_path or path) -- the same name, sequential too
    assert.equals(1, lost)
    assert.equals(2, node.creations)
    -- and it is kept: the old session's end does not take it
    holder:close()
    node:set_data("v2")
    wait(function() return other:get(actual) == "v2" end, "set_data after the old session ended")
    assert.equals(client:client_id(), other:exists(actual).ephemeralOwner)
    node:stop()
    assert.is_nil(other:exists(actual))
    client:close()
    proxy:stop()
  end

  for _, mode in ipairs({
    { "ephemeral", {} },
    { "ephemeral, protected", { protection = true } },
    { "ephemeral sequential", { sequential = true } },
    { "ephemeral sequential, protected", { sequential = true, protection = true } },
  }) do
    it("after LOST, replaces at once the node its old session still owns (" .. mode[1] .. ")",
       function() old_session_outlives_the_client(mode[2]) end)
  end

  it("does not delete a live foreign session's node: takes it over, as before", function()
    other:create(path, "theirs", { ephemeral = true, makepath = true })
    local owner = other:client_id()
    local node = zk:PersistentNode(path, "mine")
    node:start()
    assert.is_true(node:wait_for_initial_create(30))
    local data, stat = other:get(path)
    assert.equals("mine", data)
    assert.equals(owner, stat.ephemeralOwner) -- still the other session's node
    assert.equals(0, node.creations)
    node:stop()
  end)

  it("a dropped connection loses nothing; the node is still watched afterwards", function()
    local proxy = testing.proxy(server:node(1))
    local client = zklua.client{ hosts = proxy.hosts, timeout = 8 }
    local states = {}
    client:add_listener(function(state) states[#states + 1] = state end)
    client:start()
    local node = client:PersistentNode(path, "v1")
    node:start()
    assert.is_true(node:wait_for_initial_create(30))
    proxy:drop()
    wait(function() return states[#states] == "CONNECTED" and #states >= 2 end,
         "the reconnection")
    assert.same({ "SUSPENDED", "CONNECTED" }, { states[#states - 1], states[#states] })
    assert.equals(1, node.creations) -- the session lived: the node was never gone
    other:delete(path)
    wait(function() return node.creations == 2 end, "the node to be made again")
    node:stop()
    client:close()
    proxy:stop()
  end)

  it("a persistent TTL node the server expires is made again; it outlives the session", function()
    local node = zk:PersistentNode(path, "t", { ephemeral = false, ttl = 300 })
    local lost = 0
    node:on_lost(function() lost = lost + 1 end)
    node:start()
    assert.is_true(node:wait_for_initial_create(30))
    -- (no read of it here: the server may expire it any time from 300 ms on)
    wait(function() return node.creations >= 2 end, "the server to expire it, and a new one")
    local before = node.creations
    helpers.expire(zk)
    -- the server goes on expiring it: made again, so it is watched on the new session
    wait(function() return node.creations > before end, "the node to be made again")
    assert.equals(0, lost)
    node:stop() -- (true or false: the server may have just expired it)
    assert.is_nil(other:exists(path))
  end)

  it("takes over a node that exists: writes its data, does not count a creation", function()
    other:create(path, "old", { makepath = true })
    local node = zk:PersistentNode(path, "new", { ephemeral = false })
    local created = 0
    node:on_created(function() created = created + 1 end)
    node:start()
    assert.is_true(node:wait_for_initial_create(30))
    local data, stat = other:get(path)
    assert.equals("new", data)
    assert.equals(0, stat.ephemeralOwner) -- persistent (ephemeral = false)
    assert.equals(0, node.creations)
    assert.equals(0, created)
    node:stop()
  end)

  it("makes its parents as containers by default, plain ones with container = false", function()
    local parent = ROOT .. "/t" .. counter
    local node = zk:PersistentNode(path, "x")
    node:start()
    assert.is_true(node:wait_for_initial_create(30))
    node:stop()
    wait(function() return other:exists(parent) == nil end, "the container parents to go")
    local plain = zk:PersistentNode(path, "x", { container = false })
    plain:start()
    assert.is_true(plain:wait_for_initial_create(30))
    plain:stop()
    assert.is_not_nil(other:exists(parent))
  end)

  it("a node the server refuses fails with the server's error", function()
    local parent = ROOT .. "/t" .. counter
    other:create(parent, "", { makepath = true, ephemeral = true })
    local node = zk:PersistentNode(parent .. "/child", "x")
    node:start()
    helpers.raises(errors.NoChildrenForEphemeralsError, node.wait_for_initial_create, node, 30)
    assert.equals("failed", node.phase)
  end)

  it("a running node dropped without stop is deleted in the background", function()
    local node = zk:PersistentNode(path, "x")
    node:start()
    assert.is_true(node:wait_for_initial_create(30))
    node = nil -- luacheck: ignore
    collectgarbage()
    collectgarbage()
    wait(function() return other:exists(path) == nil end, "the dropped node to be deleted")
  end)

  it("the client's stop ends it; wait_for_initial_create then raises", function()
    local node = zk:PersistentNode(path, "x")
    node:start()
    assert.is_true(node:wait_for_initial_create(30))
    zk:stop()
    assert.is_false(node.present)
    helpers.raises(errors.ConnectionClosedError, node.wait_for_initial_create, node, 5)
  end)

  describe("sequential modes", function()
    local SEQ = string.rep("%d", 10)
    local UUID = "%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x"

    local function parent_of(p) return (p:match("^(.*)/[^/]*$")) end
    local function name_of(p) return (p:match("/([^/]*)$")) end

    -- a plain parent: a container one would be reaped (within a second) once empty, so its
    -- children could not be listed after a stop
    before_each(function() other:ensure_path(parent_of(path)) end)

    it("ephemeral: actual_path is the sequential node; deleted, it comes back under that name; " ..
       "stop deletes it", function()
      local node = zk:PersistentNode(path, "v1", { sequential = true })
      assert.is_nil(node.actual_path)
      node:start()
      assert.is_true(node:wait_for_initial_create(30))
      local actual = node.actual_path
      assert.matches("^" .. path .. SEQ .. "$", actual)
      local data, stat = other:get(actual)
      assert.equals("v1", data)
      assert.equals(zk:client_id(), stat.ephemeralOwner)
      assert.is_nil(other:exists(path)) -- the base path itself is no node
      other:delete(actual)
      wait(function() return node.creations == 2 end, "the node to be made again")
      assert.equals(actual, node.actual_path)
      assert.same({ name_of(actual) }, other:get_children(parent_of(path)))
      assert.equals("v1", other:get(actual))
      assert.is_true(node:stop())
      assert.is_nil(other:exists(actual))
      assert.is_nil(node.actual_path)
      assert.same({}, other:get_children(parent_of(path)))
      -- started again: a new sequential node
      node:start()
      assert.is_true(node:wait_for_initial_create(30))
      assert.matches("^" .. path .. SEQ .. "$", node.actual_path)
      assert.are_not.equal(actual, node.actual_path)
      assert.is_true(node:stop())
    end)

    it("ephemeral: an expired session's node is made again under the same name", function()
      local node = zk:PersistentNode(path, "v1", { sequential = true })
      local lost = 0
      node:on_lost(function() lost = lost + 1 end)
      node:start()
      assert.is_true(node:wait_for_initial_create(30))
      local actual = node.actual_path
      local old_owner = select(2, other:get(actual)).ephemeralOwner
      helpers.expire(zk)
      wait(function()
        local stat = other:exists(actual)
        return lost >= 1 and stat ~= nil and stat.ephemeralOwner == zk:client_id()
      end, "LOST, then the new session's node")
      assert.are_not.equal(old_owner, select(2, other:get(actual)).ephemeralOwner)
      assert.equals(actual, node.actual_path)
      assert.same({ name_of(actual) }, other:get_children(parent_of(path)))
      node:stop()
      assert.same({}, other:get_children(parent_of(path)))
    end)

    it("persistent with protection: a _c_<uuid>- name, kept through an expiry", function()
      local node = zk:PersistentNode(path, "p", { ephemeral = false, sequential = true,
                                                  protection = true })
      node:start()
      assert.is_true(node:wait_for_initial_create(30))
      local actual = node.actual_path
      assert.matches("^" .. parent_of(path) .. "/_c_" .. UUID .. "%-node" .. SEQ .. "$", actual)
      assert.equals(0, select(2, other:get(actual)).ephemeralOwner)
      helpers.expire(zk)
      other:delete(actual) -- watched again on the new session: it comes back
      wait(function() return node.creations == 2 end, "the node to be made again")
      assert.equals(actual, node.actual_path)
      assert.same({ name_of(actual) }, other:get_children(parent_of(path)))
      assert.is_true(node:stop())
      assert.same({}, other:get_children(parent_of(path)))
    end)

    it("persistent with a ttl: the server expires it; it comes back under the same name", function()
      local node = zk:PersistentNode(path, "t", { ephemeral = false, sequential = true, ttl = 300 })
      node:start()
      assert.is_true(node:wait_for_initial_create(30))
      local actual = node.actual_path
      assert.matches("^" .. path .. SEQ .. "$", actual)
      wait(function() return node.creations >= 2 end, "the server to expire it, and a new one")
      assert.equals(actual, node.actual_path)
      node:stop() -- (true or false: the server may have just expired it)
      assert.same({}, other:get_children(parent_of(path)))
    end)

    -- A create whose reply was lost: the proxy lets the create reach the server and holds back
    -- everything after it; the client gives up on the connection (SUSPENDED, the proxy resumes
    -- then) and must find its node instead of making a second one.
    local lost_reply_cases = {
      { "ephemeral, found by its owner", { sequential = true } },
      { "ephemeral with protection, found by name", { sequential = true, protection = true } },
      { "persistent with protection, found by name",
        { ephemeral = false, sequential = true, protection = true } },
    }
    for _, case in ipairs(lost_reply_cases) do
      it("a lost create reply leaves exactly one node: " .. case[1], function()
        local client, proxy, states = helpers.client_losing_reply(server:node(1), 8)
        client:ensure_path(parent_of(path))
        other:create(path .. "0000000000", "someone else's", { ephemeral = true })
        local node = client:PersistentNode(path, "v1", case[2])
        proxy:cut_reply("create")
        node:start()
        assert.is_true(node:wait_for_initial_create(60))
        assert.is_true(proxy:status().cut, "the start sent no create")
        assert.equals("SUSPENDED", states[1])
        assert.equals(0, node.creations) -- found and taken over, not made twice
        local mine = helpers.sorted(other:get_children(parent_of(path)))
        assert.same(helpers.sorted({ "node0000000000", name_of(node.actual_path) }), mine)
        assert.equals("v1", other:get(node.actual_path))
        assert.is_true(node:stop())
        assert.same({ "node0000000000" }, other:get_children(parent_of(path)))
        client:close()
        proxy:stop()
      end)
    end

    -- Curator's TestPersistentNode.testEphemeralSequentialWithProtectionReconnection: the
    -- server stops and restarts; the node's name is the same afterwards (Curator sleeps "a
    -- bit" around the restart; here: until the client is connected and the node present, owned
    -- by its session — a restart slower than the session timeout is a LOST, and the node, taken
    -- over from the old session, is made again once the server expires that session).
    it("Curator TestPersistentNode.testEphemeralSequentialWithProtectionReconnection", function()
      zk:ensure_path("/test/one")
      local pen = zk:PersistentNode("/test/one/two", "", { sequential = true, protection = true })
      pen:start()
      assert.is_true(pen:wait_for_initial_create(30))
      local children = zk:get_children("/test/one")
      assert.equals(1, #children)
      server:node(1):stop()
      wait(function() return zk.state ~= "CONNECTED" end, "the disconnection")
      server:node(1):start()
      local actual = pen.actual_path
      wait(function()
        if zk.state ~= "CONNECTED" or not pen.present then return false end
        local ok, stat = pcall(zk.exists, zk, actual)
        return ok and stat ~= nil and stat.ephemeralOwner == zk:client_id()
      end, "the reconnection, with the node there")
      local children_after = zk:get_children("/test/one")
      assert.same(children, children_after)
      pen:stop()
      -- the other client lived through the restart too: a call it makes before it is
      -- connected again can meet its session's expiry (SessionExpiredError, as kazoo's would)
      wait(function() return other.state == "CONNECTED" end, "the other client's reconnection")
      other:delete("/test", nil, true)
    end)
  end)

  describe("bad input is refused before anything is sent", function()
    local cases = {
      { function() return zk:PersistentNode("/a/../b", "x") end, "node name '..'" },
      { function() return zk:PersistentNode("/", "x") end, "the root cannot be a persistent node" },
      { function() return zk:PersistentNode("/a", 5) end, "data" },
      { function() return zk:PersistentNode("/a", "x", { ttl = 100 }) end, "a ttl needs ephemeral = false" },
      { function() return zk:PersistentNode("/a", "x", { ephemeral = false, ttl = 0 }) end,
        "option 'ttl' must be a whole number" },
      { function() return zk:PersistentNode("/a", "x", { ephemeral = "no" }) end,
        "option 'ephemeral' must be a boolean" },
      { function() return zk:PersistentNode("/a", "x", { mode = "EPHEMERAL" }) end,
        "unknown option 'mode'" },
      { function() return zk:PersistentNode("/a", "x", { sequential = "yes" }) end,
        "option 'sequential' must be a boolean" },
      { function() return zk:PersistentNode("/a", "x", { protection = 1 }) end,
        "option 'protection' must be a boolean" },
      { function() return zk:PersistentNode("/a", "x", { sequential = true, ttl = 5 }) end,
        "a ttl needs ephemeral = false" },
      { function() return zk:PersistentNode("/a", "x"):set_data({}) end, "data" },
      { function() return zk:PersistentNode("/a", "x"):wait_for_initial_create(-1) end,
        "timeout must be a number" },
    }
    for i, case in ipairs(cases) do
      it("case " .. i .. ": " .. case[2], function()
        local err = helpers.raises(errors.BadArgumentsError, case[1])
        assert.matches(case[2], tostring(err), 1, true)
        assert.is_nil(other:exists("/a"))
      end)
    end
  end)
end)
