-- Curator's TestLeaderSelectorEdges (Curator 5.4, curator-recipes' leader package) in Lua,
-- against a real server, with zklua's Election on Curator's LeaderSelector nodes
-- (support.selector).  Curator's ChaosMonkeyCnxnFactory is a server that, once a node under
-- /mylock/ is created, closes that connection without the reply and then, for
-- LOCKOUT_DURATION_MS, closes every connection that sends a request.  Here the fault proxy
-- does it in front of the shared server (testing.proxy): cut_reply("create") lets the create
-- reach the server and no reply back; then the lockout refuses every connection (a shorter
-- one: the lockout is the fault's length, nothing waits on it) and the proxy forwards again.
-- Its two createProtectedNodeInBackground tests are of CuratorFramework's create builder
-- (spec/curator/not_applicable.lua).
local testing = require "zklua.testing"
local support = require "curator.support"

local CHAOS_ZNODE = "/mylock"
local LOCKOUT_S = 1

describe("TestLeaderSelectorEdges", function()
  local h
  before_each(function() h = support.harness() end)
  after_each(function() h:teardown() end)

  it("flappingTest [difference: selector-create-lost]", function()
    support.threads(function(env)
      local proxy = testing.proxy(h.server:node(1))
      local client = h:client({ hosts = proxy.hosts .. h.namespace, handler = env.handler,
                                timeout = 30, start = false })
      local admin = h:client({ handler = env.handler }) -- straight to the server
      local reconnected = support.latch(env, 1)
      local suspended = false
      client:add_listener(function(state)
        if state == "SUSPENDED" then suspended = true
        elseif state == "CONNECTED" and suspended then reconnected.count_down() end
      end)
      client:start()
      local take_leadership = support.latch(env, 1)
      local children_while_leading
      local function listener()
        children_while_leading = #client:get_children(CHAOS_ZNODE)
        take_leadership.count_down()
      end
      local sel1 = support.selector(env, client, CHAOS_ZNODE, listener)
      local sel2
      client:create(CHAOS_ZNODE)
      proxy:cut_reply("create")
      sel1.start()
      -- the chaos server: the lock node is created, the connection closed without the reply,
      -- then every connection refused for the lockout
      local made = false -- looked at every 50 ms, for at most 30 s
      for _ = 1, 600 do
        made = proxy:status().cut and #admin:get_children(CHAOS_ZNODE) == 1
        if made then break end
        env.sleep(0.05)
      end
      assert.is_true(made)
      proxy:refuse(true)
      proxy:drop()
      env.sleep(LOCKOUT_S)
      proxy:resume()
      assert.is_true(reconnected.await(10), "Connection has not been lost")
      -- Curator: leadership has failed (its retries ran out in the lockout; the latch is
      -- still 1) and the protected node is deleted in the background.  zklua: the run finds
      -- its node by its protected name once reconnected and leads on it, with no second node
      assert.is_true(take_leadership.await(30))
      assert.are.equal(1, children_while_leading)
      assert.is_true(env.handler.wait(function() return sel1.thread.done end, 30))
      -- Check that there is no znode
      local children = #client:get_children(CHAOS_ZNODE)
      assert.are.equal(0, children, "Still " .. children .. " znodes under " .. CHAOS_ZNODE ..
                                    " lock")
      -- Check that a new LeaderSelector can be started
      local take_leadership2 = support.latch(env, 1)
      sel2 = support.selector(env, client, CHAOS_ZNODE, function()
        take_leadership2.count_down()
      end)
      sel2.start()
      assert.is_true(take_leadership2.await(10))
      sel1.close()
      sel2.close()
      proxy:stop()
    end)
  end)
end)
