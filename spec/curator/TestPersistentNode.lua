-- Curator's TestPersistentNode (Curator 5.4, curator-recipes' nodes package) in Lua, against
-- real servers, with zklua's PersistentNode (zk:PersistentNode(path, data, opts): Curator's
-- CreateMode.PERSISTENT is {ephemeral = false}, EPHEMERAL_SEQUENTIAL {sequential = true},
-- useProtection {protection = true}).  Curator's sleepABit after an action is a wait for its
-- outcome here, bounded.
local support = require "curator.support"

describe("TestPersistentNode", function()
  local h
  before_each(function() h = support.harness() end)
  after_each(function() h:teardown() end)

  it("testQuickSetData [difference: pnode-early-set-data]", function()
    local TEST_DATA, ALT_TEST_DATA = "hey", "there"
    local client = h:client()
    local pen = client:PersistentNode("/test", TEST_DATA, { ephemeral = false })
    pen:start()
    -- Curator: setData before the initial create is done throws IllegalStateException.
    -- zklua: the data is kept from now on, and the node is created (or rewritten) with it
    pen:set_data(ALT_TEST_DATA)
    assert.is_true(pen:wait_for_initial_create(10))
    client.handler.wait(function() return (client:get("/test")) == ALT_TEST_DATA end, 10)
    assert.are.equal(ALT_TEST_DATA, (client:get("/test")))
    pen:stop()
  end)

  it("testBasic", function()
    local TEST_DATA = "hey"
    local client = h:client()
    local pen = client:PersistentNode("/test", TEST_DATA, { ephemeral = false })
    pen:start()
    assert.is_true(pen:wait_for_initial_create(10))
    client:close() -- cause session to end - force checks that node is persistent
    client = h:client()
    assert.are.equal(TEST_DATA, (client:get("/test")))
  end)

  it("testCreationWithParentCreationOff [difference: pnode-parents-always]", function()
    local client = h:client()
    -- Curator's useParentCreation = false: the missing parents are not made, the initial
    -- create never happens and isParentCreationFailure() is true.  zklua always makes a
    -- missing parent path (container nodes by default, plain ones with container = false)
    local pen = client:PersistentNode("/test/one/two", "", { ephemeral = false, container = false })
    pen:start()
    assert.is_true(pen:wait_for_initial_create(10))
    assert.is_not_nil(client:exists("/test/one/two"))
    pen:stop()
  end)

  it("testRecreationWithParentCreationOff [difference: pnode-parents-always]", function()
    local TEST_DATA = "hey"
    local client = h:client()
    client:ensure_path("/test/one")
    local pen = client:PersistentNode("/test/one/two", TEST_DATA, { container = false })
    pen:start()
    assert.is_true(pen:wait_for_initial_create(10))
    -- deletingChildrenIfNeeded, in one transaction: deleted one by one, the node could be
    -- made again under /test/one between the two deletes
    local t = client:transaction()
    t:delete("/test/one/two")
    t:delete("/test/one")
    local results = t:commit()
    assert.is_true(results[1] == true and results[2] == true)
    -- Curator: not re-created (its parent is gone and parent creation is off), setData throws
    -- IllegalStateException.  zklua: re-created with its parents, and set_data is kept
    client.handler.wait(function() return client:exists("/test/one/two") ~= nil end, 10)
    assert.is_not_nil(client:exists("/test/one/two"))
    -- The persistent node data should still be the initial one
    assert.are.equal(TEST_DATA, pen.data)
    assert.are.equal(TEST_DATA, (client:get("/test/one/two")))
    pen:stop()
  end)

  it("testQuickClose", function()
    local client = h:client()
    local pen = client:PersistentNode("/test/one/two", "", { ephemeral = false })
    pen:start()
    pen:stop()
    -- stop() returns once the node (made or not yet) is deleted
    assert.is_nil(client:exists("/test/one/two"))
  end)

  it("testQuickCloseNodeExists", function()
    local client = h:client()
    client:ensure_path("/test/one/two")
    local pen = client:PersistentNode("/test/one/two", "", { ephemeral = false })
    pen:start()
    pen:stop()
    assert.is_nil(client:exists("/test/one/two"))
  end)

  it("testEphemeralSequentialWithProtectionReconnection", function()
    local server = h:own_server()
    local client = h:client({ hosts = server.hosts, timeout = 30 })
    client:ensure_path("/test/one")
    local pen = client:PersistentNode("/test/one/two", "", { sequential = true, protection = true })
    pen:start()
    assert.is_true(pen:wait_for_initial_create(10)) -- Curator lists the children at once
    local children = client:get_children("/test/one")
    assert.are.equal(1, #children)
    local suspended = false
    client:add_listener(function(state)
      if state == "SUSPENDED" then suspended = true end
    end)
    server:node(1):stop()
    assert.is_true(client.handler.wait(function() return suspended end, 10))
    server:node(1):start()
    assert.is_true(client.handler.wait(function() return client.state == "CONNECTED" end, 30))
    -- Curator's sleepABit after the restart, kept as a window: a second node the recipe
    -- made after reconnecting (what the test guards against) would show in it
    client.handler.wait(function() return #client:get_children("/test/one") > 1 end, 1)
    local children_after = client:get_children("/test/one")
    assert.are.same(children, children_after, "unexpected znodes: " .. table.concat(children_after, ","))
    pen:stop()
  end)
end)
