-- Curator's TestLeaderSelector (Curator 5.4, curator-recipes' leader package) in Lua: every
-- test and assertion, against real servers, with zklua's Election on Curator's LeaderSelector
-- nodes (zk:Election(path, id, {layout = "curator-selector"})).  A LeaderSelector is
-- support.selector: start() runs election:run(fn) in a thread of its own (support.threads' coroutines;
-- with autoRequeue, run({requeue = true}, fn)), requeue() runs it again unless a run is under
-- way (Curator's internalRequeue: false while queued), hasLeadership() is is_leader.
-- Curator interrupts takeLeadership (on SUSPENDED and LOST through its
-- LeaderSelectorListenerAdapter and the standard error policy, or on close()); zklua cannot
-- interrupt fn (the difference selector-interrupt): fn is told, by is_leader turning false,
-- and returns.  So a takeLeadership that waits "forever" (Thread.currentThread().join()) is a
-- fn that waits until it is told: on_lost ran or is_leader is false, or its selector closed
-- (close() here is cancel() plus what Curator's interrupt of a leader says).  Curator's
-- sleeps that wait for something are waits for it; its observation windows are kept.
local support = require "curator.support"

local PATH_NAME = "/one/two/me"
local queue, states_into, selector = support.queue, support.states_into, support.selector

describe("TestLeaderSelector", function()
  local h
  before_each(function() h = support.harness() end)
  after_each(function() h:teardown() end)

  local function client_of(env, opts)
    local o = { handler = env.handler, start = false }
    for k, v in pairs(opts or {}) do o[k] = v end
    return h:client(o)
  end

  it("testErrorPolicies [difference: selector-interrupt]", function()
    support.threads(function(env)
      local server = h:own_server()
      local client = client_of(env, { hosts = server.hosts, timeout = 2 })
      local changes = queue(env)
      states_into(client, changes)
      client:start()
      local function listener(s)
        changes.add("leader")
        -- Thread.currentThread().join(); catch InterruptedException: "release"
        if s.join() then changes.add("release") end
      end
      -- StandardConnectionStateErrorPolicy: zklua's default with this layout
      local sel = selector(env, client, "/test", listener)
      assert.are.equal("standard", sel.election.error_policy)
      sel.start()
      assert.are.equal("CONNECTED", changes.poll(10))
      assert.are.equal("leader", changes.poll(10))
      server:stop()
      local next = { changes.poll(10), changes.poll(10) }
      table.sort(next)
      assert.are.same({ "SUSPENDED", "release" }, next)
      assert.are.equal("LOST", changes.poll(10))
      sel.close()
      client:close()
      changes.items = {}

      server = h:own_server()
      client = client_of(env, { hosts = server.hosts, timeout = 2 })
      states_into(client, changes)
      client:start()
      -- SessionConnectionStateErrorPolicy
      sel = selector(env, client, "/test", listener, { policy = "session" })
      sel.start()
      assert.are.equal("CONNECTED", changes.poll(10))
      assert.are.equal("leader", changes.poll(10))
      server:stop()
      assert.are.equal("SUSPENDED", changes.poll(10))
      next = { changes.poll(10), changes.poll(10) }
      table.sort(next)
      assert.are.same({ "LOST", "release" }, next)
      sel.close()
    end)
  end)

  it("testLeaderNodeDeleteOnInterrupt [difference: selector-interrupt]", function()
    support.threads(function(env)
      local server = h:own_server()
      -- a session longer than the server's stop and restart
      local client = client_of(env, { hosts = server.hosts, timeout = 30 })
      local reconnected = support.latch(env, 1)
      local connected_once = false
      client:add_listener(function(state)
        if state == "CONNECTED" then
          if connected_once then reconnected.count_down() end
          connected_once = true
        end
      end)
      client:start()
      local q = queue(env)
      local leader_interrupted = false
      local sel = selector(env, client, "/leader", function(s)
        q.add(s)
        -- join() until interrupted: here the test's own interrupt of the leader thread
        env.handler.wait(function() return leader_interrupted end, 60)
      end)
      sel.start()
      assert.is_not_nil(q.poll(10))
      server:node(1):stop()
      leader_interrupted = true -- leaderThread.interrupt()
      env.handler.poke()
      server:node(1):start()
      assert.is_true(reconnected.await(60))
      sel.thread:join(60) -- timing.sleepABit(): the run released its node
      assert.are.equal(0, #support.children(client, "/leader")) -- (a container: may be gone)
      sel.close()
    end)
  end)

  it("testAutoRequeue", function()
    support.threads(function(env)
      local client = client_of(env)
      client:start()
      local semaphore = support.semaphore(env, 0)
      local sel = selector(env, client, "/leader", function()
        env.sleep(0.01)
        semaphore.release()
      end)
      sel.autoRequeue()
      sel.start()
      assert.is_true(semaphore.acquire(2, 10))
      sel.close()
    end)
  end)

  it("testServerDying", function()
    support.threads(function(env)
      local server = h:own_server()
      local client = client_of(env, { hosts = server.hosts, timeout = 2 })
      local semaphore = support.semaphore(env, 0)
      client:add_listener(function(state)
        if state == "LOST" then semaphore.release() end
      end)
      client:start()
      local sel = selector(env, client, "/leader", function(s)
        semaphore.release()
        s.join() -- Thread.sleep(Integer.MAX_VALUE)
      end)
      sel.start()
      assert.is_true(semaphore.acquire(1, 10))
      server:stop()
      assert.is_true(semaphore.acquire(1, 30))
      sel.close()
    end)
  end)

  -- testKillSessionThenCloseShouldElectNewLeader and testKillServerThenCloseShouldElectNewLeader
  local function kill_then_close(env, client, kill, auto_requeue)
    local semaphore = support.semaphore(env, 0)
    local interrupted = support.latch(env, 1)
    local leader_count = 0
    local function listener(s)
      leader_count = leader_count + 1
      semaphore.release()
      if s.join() then interrupted.count_down() end
      leader_count = leader_count - 1
    end
    local sel1 = selector(env, client, PATH_NAME, listener, { auto_requeue = auto_requeue })
    local sel2 = selector(env, client, PATH_NAME, listener, { auto_requeue = auto_requeue })
    local closed1, closed2 = false, false
    sel1.start()
    sel2.start()
    assert.is_true(semaphore.acquire(1, 10))
    kill()
    assert.is_true(interrupted.await(30))
    if not auto_requeue then
      -- timing.sleepABit(): the interrupted leader's run has ended
      assert.is_true(env.handler.wait(function()
        return sel1.thread.done or sel2.thread.done
      end, 30))
      local waiting = sel1.thread.done and sel2 or sel1
      local requeued1 = sel1.requeue()
      local requeued2 = sel2.requeue()
      -- Curator: both true (the waiting selector's acquire failed with its session);
      -- zklua: the waiting run is still queued, on the new session (selector-wait-survives-lost)
      assert.are.equal(waiting ~= sel1, requeued1)
      assert.are.equal(waiting ~= sel2, requeued2)
      assert.is_false(waiting.thread.done)
    end
    assert.is_true(semaphore.acquire(1, 30))
    assert.are.equal(1, leader_count)
    if sel1.hasLeadership() then
      sel1.close()
      closed1 = true
    elseif sel2.hasLeadership() then
      sel2.close()
      closed2 = true
    else
      error("No leaderselector has leadership!")
    end
    -- Verify that the other leader took over leadership.
    assert.is_true(semaphore.acquire(1, 30))
    assert.are.equal(1, leader_count)
    if not closed1 then sel1.close() end
    if not closed2 then sel2.close() end
  end

  it("testKillSessionThenCloseShouldElectNewLeader [difference: selector-wait-survives-lost]",
     function()
    support.threads(function(env)
      local client = client_of(env)
      client:start()
      kill_then_close(env, client, function() h:expire_session(client) end, false)
    end)
  end)

  it("testKillServerThenCloseShouldElectNewLeader", function()
    support.threads(function(env)
      local server = h:own_server()
      local client = client_of(env, { hosts = server.hosts, timeout = 30 })
      client:start()
      kill_then_close(env, client, function()
        server:node(1):stop()
        server:node(1):start() -- new TestingServer(port)
      end, true)
    end)
  end)

  it("testClosing", function()
    support.threads(function(env)
      local client = client_of(env)
      client:start()
      local latch = support.latch(env, 1)
      local function take(s)
        -- latch.await(10, SECONDS), interrupted by close()
        env.handler.wait(function() return latch.count() == 0 or s.closed end, 10)
      end
      local sel1 = selector(env, client, PATH_NAME, take)
      local sel2 = selector(env, client, PATH_NAME, take)
      sel1.start()
      sel2.start()
      assert.is_true(env.handler.wait(function()
        return sel1.hasLeadership() or sel2.hasLeadership()
      end, 30))
      assert.are_not.equal(sel1.hasLeadership(), sel2.hasLeadership())
      local positive, negative
      if sel1.hasLeadership() then
        positive, negative = sel1, sel2
      else
        positive, negative = sel2, sel1
      end
      negative.close()
      env.sleep(1)
      assert.are_not.equal(positive.hasLeadership(), negative.hasLeadership())
      assert.is_true(positive.hasLeadership())
      positive.close()
      env.sleep(1)
      assert.is_false(positive.hasLeadership())
    end)
  end)

  it("testRotatingLeadership", function()
    local LEADER_QTY = 5
    local REPEAT_QTY = 3
    support.threads(function(env)
      local client = client_of(env)
      client:start()
      local leader_list = queue(env)
      local selectors = {}
      for i = 0, LEADER_QTY - 1 do
        selectors[#selectors + 1] = selector(env, client, PATH_NAME, function()
          env.sleep(0.1) -- timing.sleepABit()
          leader_list.add(i)
        end)
      end
      local local_leader_list = {}
      for i = 1, REPEAT_QTY do
        for _, sel in ipairs(selectors) do
          if i > 1 then sel.requeue() else sel.start() end
        end
        while #local_leader_list ~= i * #selectors do
          local polled = leader_list.poll(10)
          assert.is_not_nil(polled)
          local_leader_list[#local_leader_list + 1] = polled
        end
        env.sleep(0.1) -- timing.sleepABit()
        for _, sel in ipairs(selectors) do sel.thread:join(10) end
      end
      for _, sel in ipairs(selectors) do sel.close() end
      for _ = 1, REPEAT_QTY do
        local uniques = {}
        for _ = 1, #selectors do
          assert.is_true(#local_leader_list > 0)
          local this_index = table.remove(local_leader_list, 1)
          assert.is_nil(uniques[this_index])
          uniques[this_index] = true
        end
      end
    end)
  end)
end)
