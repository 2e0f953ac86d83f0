-- Curator's TestLeaderSelectorParticipants (Curator 5.4, curator-recipes' leader package) in
-- Lua: every test and assertion, against a real server, with zklua's Election on Curator's
-- LeaderSelector nodes (support.selector).  setId is the Election's identifier;
-- getParticipants() is contenders() (the identifiers, the leader first: a Participant's
-- isLeader() is being first); getLeader() is its first.  A takeLeadership that joins its own
-- thread forever is a fn that waits until its selector is closed.
local support = require "curator.support"

local selector = support.selector

describe("TestLeaderSelectorParticipants", function()
  local h
  before_each(function() h = support.harness() end)
  after_each(function() h:teardown() end)

  it("testId", function()
    support.threads(function(env)
      local client = h:client({ handler = env.handler })
      local latch = support.latch(env, 1)
      local sel = selector(env, client, "/ls", function(s)
        latch.count_down()
        s.join() -- Thread.currentThread().join()
      end, { id = "A is A" })
      sel.start()
      assert.is_true(latch.await(10))
      local participants = sel.getParticipants()
      local leader = participants[1] -- getLeader(): the first participant, which leads
      assert.is_true(sel.hasLeadership())
      assert.are.equal("A is A", leader)
      assert.are.equal(1, #participants)
      assert.are.equal("A is A", participants[1])
      assert.are.equal(sel.getId(), participants[1])
      sel.close()
    end)
  end)

  it("testBasic", function()
    local SELECTOR_QTY = 10
    support.threads(function(env)
      local client = h:client({ handler = env.handler })
      local leader_latch = support.latch(env, 1)
      local working_latch = support.latch(env, SELECTOR_QTY)
      local function listener(s)
        leader_latch.count_down()
        s.join()
      end
      local selectors = {}
      for i = 0, SELECTOR_QTY - 1 do
        selectors[#selectors + 1] = selector(env, client, "/ls", listener, { id = tostring(i) })
      end
      for _, sel in ipairs(selectors) do
        sel.start()
        working_latch.count_down() -- doWork(): the selector's run started
      end
      assert.is_true(leader_latch.await(10))
      assert.is_true(working_latch.await(10))
      -- Thread.sleep(1000), "some time for locks to acquire": until every node is made
      assert.is_true(env.handler.wait(function()
        return #selectors[1].getParticipants() == SELECTOR_QTY
      end, 30))
      local participants = selectors[1].getParticipants()
      for i = 2, #selectors do
        assert.are.same(participants, selectors[i].getParticipants())
      end
      local ids, leader_count = {}, 0
      for i, id in ipairs(participants) do
        -- participant.isLeader(): its selector leads (and is the first)
        if selectors[tonumber(id) + 1].hasLeadership() then
          leader_count = leader_count + 1
          assert.are.equal(1, i)
        end
        assert.is_nil(ids[id])
        ids[id] = true
      end
      assert.are.equal(1, leader_count)
      local n = 0
      for i = 0, SELECTOR_QTY - 1 do
        assert.is_true(ids[tostring(i)])
        n = n + 1
      end
      local m = 0
      for _ in pairs(ids) do m = m + 1 end
      assert.are.equal(n, m)
      for _, sel in ipairs(selectors) do sel.close() end
    end)
  end)
end)
