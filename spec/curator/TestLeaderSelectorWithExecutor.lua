-- Curator's TestLeaderSelectorWithExecutor (Curator 5.4, curator-recipes' leader package) in
-- Lua: its test and assertion, against a real server, with zklua's Election on Curator's
-- LeaderSelector nodes (support.selector).  Curator runs takeLeadership on the
-- ExecutorService it is given; zklua's run is the calling coroutine (here a support.threads
-- "thread"), so the executor has no counterpart and the test is the autoRequeue selector's:
-- one leader at a time.  Its listener interrupts the leader on SUSPENDED and LOST: a fn that
-- waits until it is told (selector-interrupt).
local support = require "curator.support"

describe("TestLeaderSelectorWithExecutor", function()
  local h
  before_each(function() h = support.harness() end)
  after_each(function() h:teardown() end)

  it("test", function()
    support.threads(function(env)
      local client = h:client({ handler = env.handler })
      local leader_count = 0
      local sel = support.selector(env, client, "/test", function(s)
        leader_count = leader_count + 1
        s.join() -- while (!interrupted) Thread.sleep(1000)
        leader_count = leader_count - 1
      end)
      sel.autoRequeue()
      sel.start()
      -- timing.sleepABit(): the selector leads, and stays the only leader a while
      assert.is_true(env.handler.wait(function() return leader_count > 0 end, 30))
      env.sleep(0.25)
      assert.are.equal(1, leader_count)
      sel.close()
      assert.are.equal(0, leader_count)
    end)
  end)
end)
