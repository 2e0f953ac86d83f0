-- Curator's TestPersistentTtlNode (Curator 5.4, curator-recipes' nodes package) in Lua: every
-- test and assertion, against a real server, with zklua's PersistentTtlNode
-- (zk:PersistentTtlNode(path, ttl, data)).  Curator's server looks for expired TTL nodes and
-- empty containers every millisecond; zklua.testing's every 500 ms, so a TTL node goes between
-- ttl and ttl + 500 ms after its last write.  The ttl is 500 ms (Curator's: a tenth of its
-- Timing, 1 s); Curator's sleeps longer than the ttl are kept (they are the test), its
-- sleepABit before "the node is gone" is a wait until it is gone, and its windows in which
-- nothing may happen last at least two touches.
local support = require "curator.support"

local TTL_MS = 500
local CHILD = "touch" -- PersistentTtlNode.DEFAULT_CHILD_NODE_NAME

describe("TestPersistentTtlNode", function()
  local h
  before_each(function() h = support.harness() end)
  after_each(function() h:teardown() end)

  -- waits (running the loop) until path is gone; true when it went within 30 s
  local function gone(env, client, path)
    for _ = 1, 600 do
      if not client:exists(path) then return true end
      env.sleep(0.05)
    end
    return false
  end

  -- a window of at least two touches of node
  local function two_touches(env, node)
    local from = node.touches
    return env.handler.wait(function() return node.touches >= from + 2 end, 30)
  end

  it("testBasic", function()
    support.threads(function(env)
      local client = h:client({ handler = env.handler })
      local node = client:PersistentTtlNode("/test", TTL_MS, "")
      node:start()
      assert.is_true(node:wait_for_initial_create(10))
      for _ = 1, 5 do
        env.sleep((TTL_MS + TTL_MS / 2) / 1000) -- a bit more than the TTL
        assert.is_not_nil(client:exists("/test"))
      end
      node:stop()
      assert.is_not_nil(client:exists("/test"))
      assert.is_true(gone(env, client, "/test"))
      assert.is_nil(client:exists("/test"))
    end)
  end)

  it("testForcedDeleteOfTouchNode", function()
    support.threads(function(env)
      local client = h:client({ handler = env.handler })
      local node = client:PersistentTtlNode("/test", TTL_MS, "")
      node:start()
      assert.is_true(node:wait_for_initial_create(10))
      for _ = 1, 5 do
        env.sleep(TTL_MS / 1000)
        pcall(client.delete, client, "/test/" .. CHILD) -- delete().quietly()
      end
      -- timing.sleepABit(): the touches go on (the container, if the server deleted it once
      -- empty, is made again)
      assert.is_true(two_touches(env, node))
      assert.is_not_nil(client:exists("/test"))
      node:stop()
    end)
  end)

  it("testRecreationOfParentNodeWithParentCreationOff [difference: pnode-parents-always]",
     function()
    support.threads(function(env)
      local TEST_DATA = "hey"
      local container_path = "/test/one/two"
      local child_path = "/test/one/two/" .. CHILD
      local client = h:client({ handler = env.handler })
      client:ensure_path("/test/one") -- create().creatingParentsIfNeeded()
      -- Curator's useParentCreation = false: zklua always makes a missing parent path
      local node = client:PersistentTtlNode(container_path, TTL_MS, TEST_DATA)
      node:start()
      assert.is_true(node:wait_for_initial_create(10))
      env.sleep((TTL_MS + TTL_MS / 2) / 1000)
      assert.is_not_nil(client:exists(container_path))
      assert.is_not_nil(client:exists(child_path))

      -- deletingChildrenIfNeeded, in one transaction: a tree deleted node by node is made
      -- again under the deleting client's feet (until the touch node is there again, a
      -- transaction naming it is refused, and is sent again)
      local deleted = false
      for _ = 1, 50 do
        local t = client:transaction()
        t:delete(child_path)
        t:delete(container_path)
        t:delete("/test/one")
        deleted = t:commit()[1] == true
        if deleted then break end
        env.sleep(0.05)
      end
      assert.is_true(deleted)
      -- Curator: the container cannot be made again (no parent creation), so both stay gone
      -- and setData throws IllegalStateException.  zklua: the container is made again with its
      -- parents and its data, and touched again
      assert.is_true(env.handler.wait(function() return node.touches > 0 end, 30))
      local from = node.touches
      assert.is_true(env.handler.wait(function() return node.touches > from end, 30))
      assert.is_not_nil(client:exists(container_path))
      assert.is_not_nil(client:exists(child_path))
      assert.are.equal(TEST_DATA, (client:get(container_path)))
      -- The underlying persistent node data should still be the initial one
      assert.are.equal(TEST_DATA, node.data)
      node:set_data("") -- taken (pnode-early-set-data's rule): kept from now on
      assert.are.equal("", node.data)
      node:stop()
    end)
  end)

  it("testEventsOnParent", function()
    support.threads(function(env)
      local client = h:client({ handler = env.handler })
      local node = client:PersistentTtlNode("/test", TTL_MS, "")
      local changes = support.semaphore(env, 0)
      node:start()
      assert.is_true(node:wait_for_initial_create(10))
      -- PathChildrenCache(client, "/", true) with BUILD_INITIAL_CACHE: CHILD_UPDATED of /test
      -- is a change of /test's data after the first read
      local first = true
      client:DataWatch("/test", function()
        if first then first = false else changes.release() end
      end)
      assert.are.equal(0, changes.available())
      assert.is_true(two_touches(env, node)) -- timing.sleepABit()
      assert.are.equal(0, changes.available())

      client:set("/test", "changed")
      assert.is_true(changes.acquire(1, 10))
      assert.is_true(two_touches(env, node)) -- timing.sleepABit()
      assert.are.equal(0, changes.available())
      node:stop()

      assert.is_true(gone(env, client, "/test"))
      assert.is_nil(client:exists("/test"))
    end)
  end)
end)
