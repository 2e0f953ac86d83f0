-- Curator's TestLeaderSelectorCluster (Curator 5.4, curator-recipes' leader package) in Lua:
-- every test and assertion, against a real 3-node ensemble of the test's own (Curator's
-- TestingCluster: h:own_ensemble(3)), with zklua's Election on Curator's LeaderSelector nodes
-- (support.selector).  killServer is a SIGKILL of the node the client is connected to (its
-- session's current server); the cluster's stop and restart are every node's.  Curator's
-- Timing: a 10 s session for testRestart; testLostRestart, which waits for LOST with every
-- server down, takes a 4 s one (LOST comes a session timeout after the connection is lost).
local support = require "curator.support"

describe("TestLeaderSelectorCluster", function()
  local h
  before_each(function() h = support.harness() end)
  after_each(function() h:teardown() end)

  it("testRestart", function()
    support.threads(function(env)
      local cluster = h:own_ensemble(3)
      local client = h:client({ hosts = cluster.hosts, handler = env.handler })
      local semaphore = support.semaphore(env, 0)
      local sel = support.selector(env, client, "/leader", function()
        local names = client:get_children("/leader")
        assert.is_true(#names > 0)
        semaphore.release()
      end)
      sel.autoRequeue()
      sel.start()
      assert.is_true(semaphore.acquire(1, 10))
      -- cluster.findConnectionInstance(client's ZooKeeper), cluster.killServer(it)
      local port = tonumber(client._session:current_server():match(":(%d+)$"))
      local killed
      for _, node in ipairs(cluster.nodes) do
        if node.port == port then killed = node end
      end
      assert.is_not_nil(killed)
      killed:kill()
      -- timing.multiple(4).acquireSemaphore: the permits of terms led after the kill
      semaphore.n = 0
      assert.is_true(semaphore.acquire(1, 40))
      sel.close()
    end)
  end)

  it("testLostRestart", function()
    support.threads(function(env)
      local cluster = h:own_ensemble(3)
      local client = h:client({ hosts = cluster.hosts, handler = env.handler, timeout = 4 })
      client:sync("/")
      local err, lock_node
      local semaphore = support.semaphore(env, 0)
      local lost_latch = support.latch(env, 1)
      local internal_lost_latch = support.latch(env, 1)
      client:add_listener(function(state)
        if state == "LOST" then internal_lost_latch.count_down() end
      end)
      local sel = support.selector(env, client, "/leader", function()
        local ok, e = pcall(function()
          local names = client:get_children("/leader")
          if #names ~= 1 then
            semaphore.release()
            err = "Names size isn't 1: " .. #names
            return
          end
          lock_node = names[1]
          semaphore.release()
          if not internal_lost_latch.await(40) then
            err = "internalLostLatch await failed"
          end
        end)
        lost_latch.count_down()
        if not ok then error(e, 0) end
      end)
      sel.start()
      assert.is_true(semaphore.acquire(1, 40))
      assert.is_nil(err)

      for _, node in ipairs(cluster.nodes) do node:stop() end -- cluster.stop()

      assert.is_true(lost_latch.await(40))
      env.sleep(0.1) -- timing.sleepABit()
      assert.is_false(sel.hasLeadership())
      assert.is_not_nil(lock_node)

      cluster:start() -- new TestingCluster(instances).start()
      -- Curator's delete below retries until its client is connected again (on a new
      -- session); zklua's calls raise while the client has no session: wait for it
      assert.is_true(env.handler.wait(function() return client.state == "CONNECTED" end, 40))
      -- simulate the lock deleting due to session expiration
      pcall(client.delete, client, "/leader/" .. lock_node)

      assert.are.equal(0, semaphore.available())
      assert.is_false(sel.hasLeadership())

      assert.is_true(env.handler.wait(function() return sel.thread.done end, 40))
      assert.is_true(sel.requeue())
      assert.is_true(semaphore.acquire(1, 40))
      sel.close()
    end)
  end)
end)
