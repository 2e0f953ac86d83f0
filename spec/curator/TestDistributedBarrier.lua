-- Curator's TestDistributedBarrier (Curator 5.4, curator-recipes' barriers package) in Lua:
-- every test and assertion, against real servers, with zklua's Barrier, which has
-- DistributedBarrier's layout (one node, up while it exists): setBarrier() is create(),
-- removeBarrier() remove(), waitOnBarrier(time) wait(seconds).  Curator's threads are
-- coroutines of one cqueues controller (support.threads).  Where Curator sleeps so that a
-- waiter is waiting before the barrier changes, the test here waits until the server holds
-- the waiter's watch on the barrier node (four-letter word wchp).  One deliberate difference
-- (barrier-wait-survives): Curator's waitOnBarrier ends with ConnectionLossException when the
-- server goes; zklua's wait goes on through SUSPENDED and LOST.
local core = require "zklua.core"
local support = require "curator.support"

-- Whether the server of hosts ("host:port[,...]") holds a watch on path (the full path).
local function watched(server, path)
  local report = core.four_letter("127.0.0.1", server:node(1).port, "wchp", 2) or ""
  for line in report:gmatch("[^\n]+") do
    if line == path then return true end
  end
  return false
end

describe("TestDistributedBarrier", function()
  local h
  before_each(function() h = support.harness() end)
  after_each(function() h:teardown() end)

  it("testServerCrash [difference: barrier-wait-survives]", function()
    local TIMEOUT = 1 -- Curator: 1000 ms
    local server = h:own_server()
    support.threads(function(env)
      local client = env.client({ hosts = server.hosts, timeout = TIMEOUT * 10 })
      local suspended = false
      client:add_listener(function(state)
        if state == "SUSPENDED" then suspended = true end
      end)
      local barrier = client:Barrier("/barrier")
      barrier:create()
      local waiter = env.spawn(function() return barrier:wait(TIMEOUT * 2000) end)
      -- Curator: a thread stops the server TIMEOUT / 2 into the wait
      env.eventually(function() return watched(server, "/barrier") end, 10, "the waiter's watch")
      server:node(1):stop()
      assert.is_true(env.handler.wait(function() return suspended end, 10))
      -- Curator's waitOnBarrier throws ConnectionLossException here; zklua's wait goes on
      assert.is_false(waiter.done)
      server:node(1):start()
      local other = env.client({ hosts = server.hosts })
      assert.is_true(other:Barrier("/barrier"):remove())
      assert.is_true(waiter:join(30))
      assert.is_true(waiter.ok)
    end)
  end)

  it("testMultiClient", function()
    support.threads(function(env)
      do
        local client = env.client({ hosts = h.hosts })
        client:Barrier("/barrier"):create()
        client:close()
      end
      local client1 = env.client({ hosts = h.hosts })
      local client2 = env.client({ hosts = h.hosts })
      local futures = {}
      for i, c in ipairs({ client1, client2 }) do
        futures[i] = env.spawn(function()
          -- waitOnBarrier(10 ms): the barrier is up, the time passes (Curator ignores the
          -- result; it is false)
          return c:Barrier("/barrier"):wait(0.01)
        end)
      end
      -- Curator: Thread.sleep(1000), by which both waits have ended; here until they have
      for _, f in ipairs(futures) do assert.is_false(f:join(30)) end
      do
        local client = env.client({ hosts = h.hosts })
        assert.is_true(client:Barrier("/barrier"):remove())
        client:close()
      end
      for _, c in ipairs({ client1, client2 }) do
        assert.is_true(c:Barrier("/barrier"):wait(10))
      end
    end)
  end)

  it("testNoBarrier", function()
    support.threads(function(env)
      local client = env.client({ hosts = h.hosts })
      local barrier = client:Barrier("/barrier")
      assert.is_true(barrier:wait(10))
      -- just for grins, test the infinite wait
      local future = env.spawn(function()
        barrier:wait()
        return ""
      end)
      assert.is_true(future:join(10) ~= nil)
    end)
  end)

  it("testBasic", function()
    support.threads(function(env)
      local client = env.client({ hosts = h.hosts })
      local barrier = client:Barrier("/barrier")
      barrier:create()
      local remover = env.spawn(function()
        -- Curator: Thread.sleep(1000), then removeBarrier(); here once the waiter watches it
        env.eventually(function() return watched(h.server, h.namespace .. "/barrier") end, 10,
                       "the waiter's watch")
        return barrier:remove()
      end)
      assert.is_true(barrier:wait(10))
      assert.is_true(remover:join(10))
    end)
  end)
end)
