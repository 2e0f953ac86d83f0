-- One recipe object shared by many coroutines under a coroutine handler (cqueues), against a
-- real server: calls on the object take turns (zklua.recipes.turn), locks are held in turn and
-- never by two coroutines at once, a shared Counter loses and duplicates nothing, cancel()
-- makes acquire and with raise CancelledError without running fn, every waiting call ends with
-- its named error at its timeout, and zk:stop() ends every waiter with ConnectionClosedError;
-- service discovery: concurrent registrations, one ServiceCache started once, a shared provider.
--
-- Each test runs its body in a coroutine of a fresh cqueues controller (run() below).
local zklua = require "zklua"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local cqueues = require "cqueues"
local cq_handler = require "zklua.handlers.cqueues"

local ROOT = "/sharing"
local HANG_GUARD = 120 -- s: a test whose coroutines never finish fails instead of hanging

local raises = helpers.raises

-- Asserts that the pcall results `result` ({ ok, ... }) are an error of class.
local function ended_with(class, result)
  assert.is_false(result[1])
  assert.is_true(errors.is(result[2], class), tostring(result[2]))
end

-- Runs fn(i) for i = 1..n, each in its own coroutine, and waits until every one returned.
local function together(env, n, fn, timeout, what)
  local finished = 0
  for i = 1, n do
    env.spawn(function()
      fn(i)
      finished = finished + 1
    end)
  end
  env.eventually(function() return finished == n end, timeout, what)
end

-- Whether results[1..n] are all in.
local function all_in(results, n)
  for i = 1, n do
    if not results[i] then return false end
  end
  return true
end

-- Runs each of calls in its own coroutine; returns their pcall results ({ ok, ... }), in the
-- order of calls, filled in as they end.
local function spawn_calls(env, calls)
  local results = {}
  for i, call in ipairs(calls) do
    env.spawn(function() results[i] = { pcall(call) } end)
  end
  return results
end

-- ... and waits until every call ended.
local function all_results(env, calls)
  local results = spawn_calls(env, calls)
  env.eventually(function() return all_in(results, #calls) end)
  return results
end

-- A list of n times call.
local function copies(n, call)
  local calls = {}
  for i = 1, n do calls[i] = call end
  return calls
end

-- Asserts that of the pcall results exactly one succeeded and the others were refused with
-- KazooException (a recipe started from many coroutines starts once).
local function one_succeeded(results)
  local succeeded = 0
  for _, result in ipairs(results) do
    if result[1] then
      succeeded = succeeded + 1
    else
      ended_with(errors.KazooException, result)
    end
  end
  assert.are.equal(1, succeeded)
end

-- Runs each of calls in its own coroutine, waits until every one of them waits, stops zk and
-- returns each call's pcall results ({ ok, ... }), in the order of calls.
local function results_after_stop(env, zk, calls)
  local results = spawn_calls(env, calls)
  env.eventually(function() return env.handler.waiting() >= #calls end)
  zk:stop()
  env.eventually(function() return all_in(results, #calls) end)
  return results
end

-- ... and asserts that every call ended with ConnectionClosedError.
local function stop_ends_all(env, zk, calls)
  for _, result in ipairs(results_after_stop(env, zk, calls)) do
    ended_with(errors.ConnectionClosedError, result)
  end
end

describe("a recipe object shared by coroutines", function()
  local server
  local counter = 0

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)
  after_each(function()
    if server:node(1):is_running() and server:node(1).paused then server:node(1):resume() end
    helpers.delete_trees(server.hosts, ROOT)
  end)

  -- Runs body(env) in a coroutine of a new controller; returns once it finished (raising its
  -- error).  env: handler, root (a fresh path), started(opts) -> a started client,
  -- spawn(fn) (a coroutine; its error fails the test), eventually(pred, timeout, what).
  local function run(body)
    counter = counter + 1
    local cq = cqueues.new()
    local handler = cq_handler.new(cq)
    local clients = {}
    local env = { handler = handler, root = ROOT .. "/t" .. counter }
    local finished = false
    local failures = {}

    function env.started(opts)
      opts = opts or {}
      opts.hosts, opts.handler = opts.hosts or server.hosts, handler
      local zk = zklua.client(opts)
      clients[#clients + 1] = zk
      zk:start()
      return zk
    end

    function env.spawn(fn)
      cq:wrap(function()
        local ok, err = pcall(fn)
        if not ok then failures[#failures + 1] = tostring(err) end
      end)
    end

    function env.eventually(pred, timeout, what)
      local deadline = cqueues.monotime() + (timeout or 20)
      while not pred() do
        if #failures > 0 then error("a coroutine failed: " .. failures[1], 2) end
        if cqueues.monotime() > deadline then
          error("timed out waiting for " .. (what or "a condition"), 2)
        end
        handler.sleep(0.02)
      end
    end

    cq:wrap(function()
      body(env)
      finished = true
    end)
    local deadline = cqueues.monotime() + HANG_GUARD
    local ok, err = true, nil
    while ok and not finished and cqueues.monotime() < deadline do
      ok, err = cq:step(0.5)
    end
    for _, zk in ipairs(clients) do zk:close() end
    if not ok then error(err, 0) end
    assert.are.same({}, failures)
    assert.is_true(finished, "the test's coroutine did not finish within the hang guard")
  end

  -- n coroutines each run lock:with(); none may be inside at the same time as another, and
  -- they get the lock in the order they asked for it.
  local function held_in_turn(env, lock, n)
    local inside, most, arrived, got, finished = 0, 0, {}, {}, 0
    for i = 1, n do
      env.spawn(function()
        arrived[#arrived + 1] = i
        lock:with(function()
          got[#got + 1] = i
          inside = inside + 1
          most = math.max(most, inside)
          assert.is_true(lock.is_acquired)
          env.handler.sleep(0.01) -- let the others run while this one holds it
          inside = inside - 1
        end)
        finished = finished + 1
      end)
    end
    env.eventually(function() return finished == n end, 60, "every holder")
    assert.are.equal(1, most)
    assert.are.same(arrived, got)
    assert.is_false(lock.is_acquired)
  end

  describe("locks and the semaphore", function()
    it("Lock, WriteLock, ReadLock and Semaphore are held in turn, never by two at once",
       function()
      run(function(env)
        local zk = env.started()
        held_in_turn(env, zk:Lock(env.root .. "/lock", "one"), 8)
        held_in_turn(env, zk:WriteLock(env.root .. "/rw", "w"), 5)
        held_in_turn(env, zk:ReadLock(env.root .. "/rw", "r"), 5)
        held_in_turn(env, zk:Semaphore(env.root .. "/sem", "s", 3), 8)
        held_in_turn(env, zk:Semaphore(env.root .. "/csem", "s", 3, { layout = "curator" }), 8)
        assert.are.same({}, zk:get_children(env.root .. "/lock"))
        assert.are.same({}, zk:get_children(env.root .. "/sem"))
      end)
    end)

    it("a second coroutine's acquire waits for the first's release; the holder's gets false",
       function()
      run(function(env)
        local zk = env.started()
        for _, make in ipairs({ "Lock", "Semaphore" }) do
          local lock = zk[make](zk, env.root .. "/" .. make, "one")
          local events = {}
          assert.is_true(lock:acquire())
          -- the holder asking again: Lock false (kazoo), Semaphore true without a second lease
          assert.are.equal(make == "Semaphore", lock:acquire(true, 1))
          env.spawn(function()
            assert.is_false(lock:acquire(false)) -- taken: non-blocking gets false at once
            events[#events + 1] = "second asks"
            assert.is_true(lock:acquire(true, 20))
            events[#events + 1] = "second holds"
            assert.is_true(lock:release())
          end)
          env.eventually(function() return #events == 1 end)
          env.eventually(function() return env.handler.waiting() >= 1 end) -- it waits
          events[#events + 1] = "first releases"
          assert.is_true(lock:release())
          env.eventually(function() return #events == 3 and not lock.is_acquired end)
          assert.are.same({ "second asks", "first releases", "second holds" }, events)
          assert.are.equal(0, #zk:get_children(env.root .. "/" .. make))
        end
      end)
    end)

    it("of many non-blocking acquires at once exactly one gets it", function()
      run(function(env)
        local zk = env.started()
        local lock = zk:Lock(env.root .. "/lock", "one")
        local results = {}
        together(env, 10, function(i) results[i] = lock:acquire(false) end)
        assert.are.equal(10, #results)
        local got = 0
        for i = 1, 10 do got = got + (results[i] and 1 or 0) end
        assert.are.equal(1, got)
        assert.is_true(lock:release())
      end)
    end)

    for _, make in ipairs({ "Lock", "Semaphore" }) do
      it(make .. ": cancel() makes acquire and with raise CancelledError; fn never runs",
         function()
        run(function(env)
          local zk, other = env.started(), env.started()
          local path = env.root .. "/" .. make
          local blocker = other[make](other, path, "blocker")
          assert.is_true(blocker:acquire())
          local lock = zk[make](zk, path, "shared")
          local outcomes, ran = {}, false
          -- a with() waiting in C behind another client's holder
          env.spawn(function()
            local ok, err = pcall(lock.with, lock, function() ran = true end)
            outcomes.with = not ok and errors.is(err, errors.CancelledError)
          end)
          -- its node (Lock), or the semaphore's internal lock it holds while it waits
          local waiting_path = make == "Lock" and path or path .. "-__lock__"
          local nodes = make == "Lock" and 2 or 1
          env.eventually(function()
            return other:exists(waiting_path) and #other:get_children(waiting_path) == nodes
          end, 20, "the shared object waiting in ZooKeeper")
          -- and an acquire queued behind it for the object's turn: not cancelled
          env.spawn(function() outcomes.queued = lock:acquire(true, 30) end)
          env.eventually(function() return env.handler.waiting() >= 2 end)
          lock:cancel()
          env.eventually(function() return outcomes.with ~= nil end)
          assert.is_true(outcomes.with)
          assert.is_false(ran)
          assert.is_nil(outcomes.queued)
          assert.is_false(lock.cancelled)
          assert.is_true(blocker:release())
          env.eventually(function() return outcomes.queued ~= nil end)
          assert.is_true(outcomes.queued)
          assert.is_true(lock:release())

          -- a with() waiting for a sibling coroutine to release the object
          assert.is_true(lock:acquire())
          outcomes = {}
          env.spawn(function()
            local ok, err = pcall(lock.with, lock, function() ran = true end)
            outcomes.with = not ok and errors.is(err, errors.CancelledError)
          end)
          env.eventually(function() return env.handler.waiting() >= 1 end)
          lock:cancel()
          env.eventually(function() return outcomes.with ~= nil end)
          assert.is_true(outcomes.with)
          assert.is_false(ran)
          assert.is_true(lock.is_acquired) -- the holder keeps it
          assert.is_true(lock:release())
          assert.are.same({}, zk:get_children(path))
        end)
      end)
    end

    it("an acquire's timeout counts its wait for the turn; the object stays usable", function()
      run(function(env)
        local zk = env.started()
        for _, make in ipairs({ "Lock", "Semaphore" }) do
          local lock = zk[make](zk, env.root .. "/" .. make, "one")
          assert.is_true(lock:acquire())
          local errs = {}
          env.spawn(function() -- waits with the turn for the holder
            errs[1] = select(2, pcall(lock.acquire, lock, true, 0.5))
          end)
          env.spawn(function() -- waits for the turn
            errs[2] = select(2, pcall(lock.acquire, lock, true, 0.3))
          end)
          env.eventually(function() return errs[1] and errs[2] end)
          assert.is_true(errors.is(errs[1], errors.LockTimeout), tostring(errs[1]))
          assert.is_true(errors.is(errs[2], errors.LockTimeout), tostring(errs[2]))
          assert.is_true(lock.is_acquired)
          local got
          env.spawn(function() got = lock:acquire(true, 10) end)
          env.eventually(function() return env.handler.waiting() >= 1 end)
          assert.is_true(lock:release())
          env.eventually(function() return got ~= nil end)
          assert.is_true(got)
          assert.is_true(lock:release())
        end
      end)
    end)

    it("stop() ends every coroutine waiting on a shared lock with ConnectionClosedError",
       function()
      run(function(env)
        local zk, other = env.started(), env.started()
        local lock = zk:Lock(env.root .. "/lock", "shared")
        local sem = zk:Semaphore(env.root .. "/sem", "shared")
        assert.is_true(other:Lock(env.root .. "/lock", "blocker"):acquire())
        assert.is_true(other:Semaphore(env.root .. "/sem", "blocker"):acquire())
        local calls = {}
        for _, recipe in ipairs({ lock, sem }) do
          for _ = 1, 3 do calls[#calls + 1] = function() return recipe:acquire() end end
        end
        stop_ends_all(env, zk, calls)
      end)
    end)
  end)

  describe("Counter", function()
    it("50 concurrent adds from 10 coroutines sum exactly, each with its own values",
       function()
      run(function(env)
        local zk = env.started()
        local c = zk:Counter(env.root .. "/n")
        local posts, seen = {}, {}
        together(env, 10, function()
          for _ = 1, 5 do
            local self, pre, post = c:add(1)
            assert.are.equal(c, self)
            assert.are.equal(pre + 1, post)
            posts[#posts + 1] = post
          end
        end, 60, "every add")
        assert.are.equal(50, c.value)
        for _, post in ipairs(posts) do
          assert.is_nil(seen[post], "post_value " .. post .. " twice")
          seen[post] = true
        end
        for v = 1, 50 do assert.is_true(seen[v], "no add ended at " .. v) end
      end)
    end)

    it("add, sub and get time out during an outage with TimeoutError; stop() ends waiters",
       function()
      run(function(env)
        local zk = env.started({ timeout = 2 })
        local c = zk:Counter(env.root .. "/n")
        c:add(1)
        server:node(1):pause()
        raises(errors.TimeoutError, c.add, c, 1, 0.3)
        raises(errors.TimeoutError, c.sub, c, 1, 0.3)
        raises(errors.TimeoutError, c.get, c, 0.3)
        -- nothing waits for ever: the client's timeout (2 s here) bounds a call without one
        raises(errors.TimeoutError, c.add, c, 1)
        stop_ends_all(env, zk, copies(4, function() return c:add(1, 60) end))
        server:node(1):resume()
        local zk2 = env.started()
        local c2 = zk2:Counter(env.root .. "/n")
        local _, pre, post = c2:add(1, 10) -- usable after the outage; timed-out adds may apply
        assert.are.equal(pre + 1, post)
      end)
    end)
  end)

  describe("the turn", function()
    -- A holder that dies, or is dropped by its host and collected (an nginx request killed),
    -- while it has the turn: the coroutines waiting for the turn take it over and finish.
    -- The holder enters the turn as a recipe call does (zklua.recipes.turn) from a plain
    -- coroutine the test resumes by hand, so it is suspended with the turn, or dies with it,
    -- exactly where the test says.
    local turn = require "zklua.recipes.turn"

    -- A plain coroutine that enters c's turn and yields; resumed with "raise" it raises.
    local function holder(zk, c)
      local co = coroutine.create(function()
        assert(turn.enter(c._turn, zk, "add", c.path))
        if coroutine.yield("holding") == "raise" then error("killed while holding the turn") end
      end)
      local ok, what = coroutine.resume(co)
      assert.is_true(ok, tostring(what))
      assert.are.equal("holding", what)
      return co
    end

    -- n coroutines add 1 to c; returns a function saying how many finished.
    local function adders(env, c, n)
      local finished = 0
      for _ = 1, n do
        env.spawn(function()
          c:add(1, 30)
          finished = finished + 1
        end)
      end
      env.eventually(function() return env.handler.waiting() >= n end, 20, "the adders waiting")
      assert.are.equal(0, finished) -- they wait for the turn the holder has
      return function() return finished end
    end

    it("a holder that raises while it has the turn hands it on", function()
      run(function(env)
        local zk = env.started()
        local c = zk:Counter(env.root .. "/n")
        local co = holder(zk, c)
        local finished = adders(env, c, 3)
        local ok, err = coroutine.resume(co, "raise")
        assert.is_false(ok)
        assert.matches("killed while holding the turn", err)
        assert.are.equal("dead", coroutine.status(co))
        env.eventually(function() return finished() == 3 end, 20, "the adders")
        assert.are.equal(3, c.value)
        assert.are.equal(3, zk:Counter(env.root .. "/n"):get())
      end)
    end)

    it("a holder dropped and collected while it has the turn hands it on", function()
      run(function(env)
        local zk = env.started()
        local c = zk:Counter(env.root .. "/n")
        local weak = setmetatable({}, { __mode = "v" })
        weak[1] = holder(zk, c) -- suspended with the turn, referenced by nothing but weak
        local finished = adders(env, c, 3)
        collectgarbage()
        collectgarbage()
        assert.is_nil(weak[1], "the dropped holder was not collected")
        env.eventually(function() return finished() == 3 end, 20, "the adders")
        assert.are.equal(3, c.value)
        -- and the turn is free for the next call
        assert.are.equal(4, select(3, c:add(1, 10)))
      end)
    end)
  end)

  describe("queues, parties and barriers", function()
    it("a shared Queue hands each item to exactly one get; gets time out in an outage",
       function()
      run(function(env)
        local zk = env.started({ timeout = 2 })
        local q = zk:Queue(env.root .. "/q")
        for i = 1, 20 do q:put("item-" .. i) end
        local got = {}
        together(env, 5, function()
          for _ = 1, 4 do
            local v = q:get() -- the index after the call: other gets run meanwhile
            got[#got + 1] = v
          end
        end, 60, "every get")
        table.sort(got)
        local wanted = {}
        for i = 1, 20 do wanted[i] = "item-" .. i end
        table.sort(wanted)
        assert.are.same(wanted, got)
        assert.is_nil(q:get())
        q:put("late")
        server:node(1):pause()
        raises(errors.TimeoutError, q.get, q, 0.3)
        server:node(1):resume()
        assert.are.equal("late", q:get(20)) -- the timed-out get's item goes to the next get
      end)
    end)

    it("a shared LockingQueue's waiting gets and a Barrier's waits end with stop()", function()
      run(function(env)
        local zk = env.started()
        local lq = zk:LockingQueue(env.root .. "/lq")
        local b = zk:Barrier(env.root .. "/b")
        b:create()
        local calls = {}
        for _ = 1, 3 do
          calls[#calls + 1] = function() return lq:get() end
          calls[#calls + 1] = function() return b:wait() end
        end
        stop_ends_all(env, zk, calls)
      end)
    end)

    it("a shared LockingQueue get times out with nil, and its timeout counts the turn",
       function()
      run(function(env)
        local zk = env.started()
        local lq = zk:LockingQueue(env.root .. "/lq")
        local results = {}
        env.spawn(function() results[1] = { lq:get(0.5) } end)
        env.spawn(function() results[2] = { lq:get(0.3) } end)
        env.eventually(function() return results[1] and results[2] end)
        assert.are.same({}, results[1])
        assert.are.same({}, results[2])
        lq:put("x")
        assert.are.equal("x", lq:get(10))
        assert.is_true(lq:consume())
      end)
    end)

    -- Spawns each of calls in turn, each once the one before waits; returns their results
    -- (pcall's: ok, value or error), filled in as they end.
    local function waiting_calls(env, calls)
      local results = {}
      for i, call in ipairs(calls) do
        local waiting = env.handler.waiting()
        env.spawn(function() results[i] = { pcall(call) } end)
        env.eventually(function() return env.handler.waiting() > waiting end)
      end
      return results
    end

    -- The outages below are short against the session timeout (10 s), so the session and
    -- the calls under way survive them.
    it("Party join/leave time out in an outage (TimeoutError), the turn counted; usable after",
       function()
      run(function(env)
        local zk = env.started({ timeout = 10 })
        local party = zk:Party(env.root .. "/party", "me")
        party:join()
        server:node(1):pause()
        raises(errors.TimeoutError, party.leave, party, 0.3)
        local leave, join
        env.spawn(function() leave = { pcall(party.leave, party, 60) } end)
        env.eventually(function() return env.handler.waiting() >= 1 end)
        env.spawn(function() join = { pcall(party.join, party, 0.3) } end) -- waits for the turn
        env.eventually(function() return join ~= nil end)
        assert.is_false(join[1])
        assert.is_true(errors.is(join[2], errors.TimeoutError), tostring(join[2]))
        assert.is_nil(leave)
        server:node(1):resume()
        env.eventually(function() return leave ~= nil end, 30, "the leave under way")
        -- the first leave timed out, went on and deleted the node: its answer is this one's
        assert.are.same({ true, true }, leave)
        party:join(20)
        assert.are.same({ "me" }, party:members())
        assert.is_true(party:leave(20))
      end)
    end)

    it("LockingQueue consume/release time out in an outage; the next call gets the answer",
       function()
      run(function(env)
        local zk = env.started({ timeout = 10 })
        local lq = zk:LockingQueue(env.root .. "/lq")
        lq:put("a")
        lq:put("b")
        assert.are.equal("a", lq:get(10))
        server:node(1):pause()
        raises(errors.TimeoutError, lq.consume, lq, 0.3)
        raises(errors.TimeoutError, lq.release, lq, 0.3) -- waits for the consume first
        server:node(1):resume()
        -- the consume that timed out went on: its answer is the next consume's
        assert.is_true(lq:consume(20))
        assert.is_false(lq:consume(20)) -- nothing held now
        assert.are.equal("b", lq:get(10))
        server:node(1):pause()
        raises(errors.TimeoutError, lq.release, lq, 0.3)
        server:node(1):resume()
        assert.is_true(lq:release(20))
        assert.are.equal("b", lq:get(10)) -- handed back, claimed again
        assert.is_true(lq:consume(20))
        assert.are.equal(0, lq:len())
      end)
    end)

    it("without a timeout, Party and LockingQueue calls are bounded by the client's timeout",
       function()
      run(function(env)
        local zk = env.started({ timeout = 2 })
        local parties, queues = {}, {}
        for i = 1, 2 do
          parties[i] = zk:Party(env.root .. "/party", "p" .. i)
          queues[i] = zk:LockingQueue(env.root .. "/lq")
          queues[i]:put("item")
          assert.are.equal("item", queues[i]:get(10))
        end
        parties[1]:join() -- to leave; parties[2] joins
        server:node(1):pause()
        local results = all_results(env, {
          function() return parties[1]:leave() end, function() return parties[2]:join() end,
          function() return queues[1]:consume() end, function() return queues[2]:release() end,
        })
        for i = 1, 4 do ended_with(errors.TimeoutError, results[i]) end
      end)
    end)

    it("stop() ends coroutines waiting in Party leave and LockingQueue consume/release",
       function()
      run(function(env)
        local zk = env.started({ timeout = 4 })
        local party = zk:Party(env.root .. "/party", "me")
        local lq = zk:LockingQueue(env.root .. "/lq")
        party:join()
        lq:put("x")
        assert.are.equal("x", lq:get(10))
        server:node(1):pause()
        local results = waiting_calls(env, {
          function() return party:leave(60) end,  -- its delete in flight
          function() return party:join(60) end,   -- waits for the turn
          function() return lq:consume(60) end,   -- its transaction in flight
          function() return lq:release(60) end,   -- waits for the turn
        })
        zk:stop()
        env.eventually(function() return #results == 4 and results[1] and results[3] end)
        -- in flight: the member node goes with the session (leave: false, as after a LOST);
        -- the consume's transaction is failed by the stop (ZCLOSING)
        assert.are.same({ true, false }, results[1])
        ended_with(errors.ConnectionClosedError, results[3])
        ended_with(errors.ConnectionClosedError, results[2])
        ended_with(errors.ConnectionClosedError, results[4])
      end)
    end)

    it("a refused auth (AUTH_FAILED) ends every waiting call with AuthFailedError", function()
      run(function(env)
        local zk, other = env.started(), env.started()
        local lq = zk:LockingQueue(env.root .. "/lq")
        local lock = zk:Lock(env.root .. "/lock", "shared")
        assert.is_true(other:Lock(env.root .. "/lock", "blocker"):acquire())
        local results = waiting_calls(env, {
          function() return lq:get() end,        -- waits for an item, with the turn
          function() return lq:consume(60) end,  -- waits for the turn
          function() return lock:acquire() end,  -- waits for the blocker, with the turn
          function() return lock:acquire(true, 60) end, -- waits for the turn
        })
        local err = select(2, pcall(zk.add_auth, zk, "bogus", ":"))
        assert.is_true(errors.is(err, errors.AuthFailedError), tostring(err))
        env.eventually(function() return all_in(results, 4) end)
        for i = 1, 4 do ended_with(errors.AuthFailedError, results[i]) end
      end)
    end)

    it("a Party joined and left by many coroutines at once has one member node", function()
      run(function(env)
        local zk = env.started()
        local party = zk:Party(env.root .. "/party", "me")
        together(env, 6, function() party:join() end)
        assert.are.same({ "me" }, party:members())
        local left = {}
        together(env, 3, function(i) left[i] = party:leave() end)
        assert.are.equal(3, #left)
        table.sort(left, function(x, y) return x and not y end)
        assert.are.same({ true, false, false }, left)
        assert.are.same({}, party:members())
      end)
    end)
  end)

  describe("leases", function()
    -- The internal lock's nodes under path (kazoo's Lock at the lease's path).
    local function lock_nodes(zk, path)
      local n = 0
      for _, child in ipairs(zk:get_children(path)) do
        if child:find("__lock__", 1, true) then n = n + 1 end
      end
      return n
    end

    it("coroutines racing for one lease: exactly one obtains it; each attempt ends", function()
      run(function(env)
        local zk = env.started()
        local path = env.root .. "/lease"
        local got = {}
        together(env, 6, function(i)
          local lease = zk:NonBlockingLease(path, 600, "c" .. i)
          if lease.obtained then got[#got + 1] = i end
        end, 60, "every attempt")
        assert.are.equal(1, #got)
        local multi_got = 0
        together(env, 5, function(i)
          local multi = zk:MultiNonBlockingLease(3, env.root .. "/multi", 600, "m" .. i)
          if multi.obtained then multi_got = multi_got + 1 end
        end, 60, "every multi attempt")
        assert.are.equal(3, multi_got)
        assert.are.equal(0, lock_nodes(zk, path)) -- the internal locks are released
        for slot = 0, 2 do assert.are.equal(0, lock_nodes(zk, env.root .. "/multi/" .. slot)) end
      end)
    end)

    it("an attempt times out in an outage (TimeoutError), the lock released after; " ..
       "stop() ends attempts", function()
      run(function(env)
        local zk = env.started({ timeout = 10 })
        local path = env.root .. "/lease"
        local multi = env.root .. "/multi"
        zk:ensure_path(path)
        zk:ensure_path(multi .. "/0")
        server:node(1):pause()
        raises(errors.TimeoutError, zk.NonBlockingLease, zk, path, 60, "me", nil, 0.3)
        raises(errors.TimeoutError, zk.MultiNonBlockingLease, zk, 2, multi, 60, "me", nil, 0.3)
        server:node(1):resume()
        env.eventually(function()
          return lock_nodes(zk, path) == 0 and lock_nodes(zk, multi .. "/0") == 0
        end, 20, "the abandoned attempts' lock nodes deleted")
        assert.is_nil(zk:exists(path .. "/lease_holder")) -- abandoned before the decision
        assert.is_true(zk:NonBlockingLease(path, 60, "me", nil, 20).obtained)
        server:node(1):pause()
        local calls = {}
        for i = 1, 3 do
          calls[i] = function() return zk:NonBlockingLease(path .. "/s", 60, "s" .. i, nil, 60) end
        end
        stop_ends_all(env, zk, calls)
      end)
    end)
  end)

  describe("set partitioners", function()
    it("coroutines sharing one SetPartitioner: one allocation, one release, every wait ends",
       function()
      run(function(env)
        local zk = env.started()
        local path = env.root .. "/sp"
        local qp = zk:SetPartitioner{ path = path, set = { "a", "b", "c" }, identifier = "m1",
                                      time_boundary = 0.2 }
        local acquired = {}
        together(env, 4, function(i) acquired[i] = qp:wait_for_acquire(20) end)
        assert.are.same({ true, true, true, true }, acquired)
        assert.are.same({ "a", "b", "c" }, qp:list())
        local tokens = {}
        for _, item in ipairs(qp:list()) do tokens[item] = qp:fencing_token(item) end
        -- a party change asks for a release; three coroutines release at once: one release
        local other = env.started()
        local qp2 = other:SetPartitioner{ path = path, set = { "a", "b", "c" },
                                          identifier = "m2", time_boundary = 0.2 }
        env.eventually(function() return qp.release end, 20, "RELEASE")
        together(env, 3, function() qp:release_set(20) end)
        assert.is_true(qp:wait_for_acquire(20))
        assert.is_true(qp2:wait_for_acquire(20))
        assert.are.equal(3, #qp:list() + #qp2:list())
        for _, item in ipairs(qp:list()) do -- owned again: a new lock, a new token
          assert.is_true(qp:fencing_token(item) > tokens[item])
        end
        together(env, 3, function() qp:finish(20) end)
        assert.is_true(qp.failed)
        qp2:finish(20)
        for _, item in ipairs({ "a", "b", "c" }) do
          assert.are.same({}, zk:get_children(path .. "/locks/" .. item))
        end
        assert.are.same({}, zk:get_children(path .. "/party"))
      end)
    end)

    it("release_set/finish/the join time out in an outage (TimeoutError); stop() ends waits",
       function()
      run(function(env)
        local zk = env.started({ timeout = 10 })
        local path = env.root .. "/sp"
        local qp = zk:SetPartitioner{ path = path, set = { "a", "b" }, identifier = "m1",
                                      time_boundary = 0.1 }
        assert.is_true(qp:wait_for_acquire(20))
        local other = env.started()
        local qp2 = other:SetPartitioner{ path = path, set = { "a", "b" }, identifier = "m2",
                                          time_boundary = 0.1 }
        env.eventually(function() return qp.release end, 20, "RELEASE")
        server:node(1):pause()
        raises(errors.TimeoutError, qp.release_set, qp, 0.3)
        raises(errors.TimeoutError, zk.SetPartitioner, zk,
               { path = path, set = { "a" }, identifier = "late", timeout = 0.3 })
        server:node(1):resume()
        qp:release_set(20) -- the timed-out release went on: this one waits for it
        assert.is_true(qp:wait_for_acquire(20))
        assert.is_true(qp2:wait_for_acquire(20))
        -- a member that waits to settle (time_boundary 30 s) and a finish in an outage
        local waiting = zk:SetPartitioner{ path = env.root .. "/sp2", set = { "x" },
                                           time_boundary = 30 }
        server:node(1):pause()
        raises(errors.TimeoutError, qp.finish, qp, 0.3)
        local calls = copies(3, function() return waiting:wait_for_acquire(60) end)
        calls[4] = function() return qp:finish(60) end
        local results = results_after_stop(env, zk, calls)
        for i = 1, 3 do assert.are.same({ true, false }, results[i]) end
        assert.is_true(waiting.failed)
        -- the finish in flight: its nodes went with the session, nothing is left to wait for
        assert.are.same({ true }, results[4])
        assert.is_true(qp.failed)
      end)
    end)
  end)

  describe("partition allocators", function()
    it("coroutines sharing one allocator: each item acquired once, every wait ends", function()
      run(function(env)
        local zk = env.started({ timeout = 10 })
        local acquired, released = {}, {}
        local a = zk:PartitionAllocator{ path = env.root .. "/pa", identifier = "m1",
          on_acquire = function(item) acquired[#acquired + 1] = item end,
          on_release = function(item) released[#released + 1] = item end }
        one_succeeded(all_results(env, copies(3, function()
          return a:start({ "q1", "q2", "q3" }, 20)
        end)))
        local settled = {}
        together(env, 4, function(i) settled[i] = a:wait_settled(20) end)
        assert.are.same({ true, true, true, true }, settled)
        table.sort(acquired)
        assert.are.same({ "q1", "q2", "q3" }, acquired)
        -- an outage: stop(timeout) and start(seed, timeout) end at their timeout; stop() of the
        -- client ends the waiters
        server:node(1):pause()
        raises(errors.TimeoutError, a.stop, a, 0.3)
        server:node(1):resume()
        assert.is_true(a:stop(20)) -- the timed-out leave went on: this one waits for it
        table.sort(released)
        assert.are.same({ "q1", "q2", "q3" }, released)
        assert.are.same({}, zk:get_children(env.root .. "/pa/members"))
        local b = zk:PartitionAllocator{ path = env.root .. "/pa", identifier = "m2" }
        server:node(1):pause()
        raises(errors.TimeoutError, b.start, b, nil, 0.3)
        local settle = function() return b:wait_settled(60) end
        stop_ends_all(env, zk, { settle, settle })
      end)
    end)
  end)

  describe("patient children watches and tree caches", function()
    it("coroutines sharing a PatientChildrenWatch get one round's future; stop() ends waits",
       function()
      run(function(env)
        local zk, other = env.started(), env.started()
        local path = env.root .. "/patient"
        zk:ensure_path(path)
        other:create(path .. "/a", "")
        local watch = zk:PatientChildrenWatch(path, 0.2)
        local futures, got = {}, {}
        together(env, 4, function(i)
          futures[i] = watch:start()
          got[i] = { futures[i]:get(20) }
        end)
        for i = 2, 4 do
          assert.are.equal(futures[1], futures[i]) -- one round, handed to every caller
          assert.are.equal(got[1][2], got[i][2])   -- and one change future
        end
        for i = 1, 4 do assert.are.same({ "a" }, got[i][1]) end
        local change = got[1][2]
        local seen = {}
        for i = 1, 3 do
          env.spawn(function() seen[i] = change:get(20) end)
        end
        env.eventually(function() return env.handler.waiting() >= 3 end)
        other:create(path .. "/b", "")
        env.eventually(function() return seen[1] and seen[2] and seen[3] end)
        assert.are.equal(seen[1], seen[2])
        assert.are.equal(seen[1], seen[3])
        -- a round that cannot settle within the test (boundary 60 s): waiters end on stop()
        local slow = zk:PatientChildrenWatch(path, 60)
        local get = function() return slow:start():get(90) end
        stop_ends_all(env, zk, { get, get, get })
      end)
    end)

    it("a PatientChildrenWatch's waiting futures end with AuthFailedError on AUTH_FAILED",
       function()
      run(function(env)
        local zk = env.started()
        local path = env.root .. "/patient"
        zk:ensure_path(path)
        local watch = zk:PatientChildrenWatch(path, 60)
        local results = spawn_calls(env, copies(2, function() return watch:start():get(90) end))
        env.eventually(function() return env.handler.waiting() >= 2 end)
        local err = select(2, pcall(zk.add_auth, zk, "bogus", ":"))
        assert.is_true(errors.is(err, errors.AuthFailedError), tostring(err))
        env.eventually(function() return all_in(results, 2) end)
        for i = 1, 2 do ended_with(errors.AuthFailedError, results[i]) end
        local refused = { pcall(watch.start, watch) }
        ended_with(errors.AuthFailedError, refused)
      end)
    end)

    it("coroutines starting one TreeCache: it starts once, each node is reported once",
       function()
      run(function(env)
        local zk, other = env.started(), env.started()
        local path = env.root .. "/tree"
        other:create(path .. "/x/y", "v", { makepath = true })
        local cache = zk:TreeCache(path)
        local added, initialized = {}, 0
        cache:listen(function(event)
          if event.type == "NODE_ADDED" then
            added[event.data.path] = (added[event.data.path] or 0) + 1
          elseif event.type == "INITIALIZED" then
            initialized = initialized + 1
          end
        end)
        one_succeeded(all_results(env, copies(4, function() return cache:start(20) end)))
        env.eventually(function() return cache.initialized end, 20, "INITIALIZED")
        assert.are.same({ [path] = 1, [path .. "/x"] = 1, [path .. "/x/y"] = 1 }, added)
        assert.are.equal(1, initialized)
        assert.are.equal("v", cache:get_data(path .. "/x/y").data)
        cache:close()
      end)
    end)

    it("a TreeCache start times out in an outage (TimeoutError, still latent); stop() and " ..
       "AUTH_FAILED end it", function()
      run(function(env)
        local zk = env.started({ timeout = 10 })
        local cache = zk:TreeCache(env.root .. "/tree")
        server:node(1):pause()
        raises(errors.TimeoutError, cache.start, cache, 0.3)
        assert.are.equal("latent", cache.state)
        local results = {}
        env.spawn(function() results[1] = { pcall(cache.start, cache, 60) } end)
        env.eventually(function() return env.handler.waiting() >= 1 end)
        raises(errors.KazooException, cache.start, cache, 60) -- the first one is starting
        zk:stop()
        env.eventually(function() return results[1] end)
        ended_with(errors.ConnectionClosedError, results[1])
        assert.are.equal("latent", cache.state)
        server:node(1):resume()
        -- AUTH_FAILED while a start waits for the root: the auth is refused before its reply
        local refused = env.started()
        local late = refused:TreeCache(env.root .. "/tree2")
        env.spawn(function() results[2] = { pcall(refused.add_auth, refused, "bogus", ":") } end)
        env.spawn(function() results[3] = { pcall(late.start, late, 60) } end)
        env.eventually(function() return results[2] and results[3] end)
        ended_with(errors.AuthFailedError, results[2])
        ended_with(errors.AuthFailedError, results[3])
        assert.are.equal("latent", late.state)
      end)
    end)
  end)

  describe("service discovery", function()
    it("coroutines sharing a ServiceDiscovery, a ServiceCache and a ServiceProvider", function()
      run(function(env)
        local zk, other = env.started(), env.started()
        local sd = zk:ServiceDiscovery(env.root .. "/sd")
        together(env, 8, function(i)
          sd:register{ name = "api", id = "i" .. i, address = "127.0.0.1", port = 1000 + i }
        end, 60, "every registration")
        assert.are.equal(8, #other:ServiceDiscovery(env.root .. "/sd"):query_for_instances("api"))
        -- one cache started from 4 coroutines: it starts once, the others are refused
        local cache = sd:ServiceCache("api")
        one_succeeded(all_results(env, copies(4, function() return cache:start(20) end)))
        assert.are.equal(8, #cache:get_instances())
        -- a provider read by coroutines: round robin hands out each instance in turn
        local provider = sd:ServiceProvider("api", { cache = cache })
        local seen, picks = {}, 0
        together(env, 4, function()
          for _ = 1, 4 do
            seen[provider:get_instance().id] = true
            picks = picks + 1
            env.handler.sleep(0)
          end
        end)
        assert.are.equal(16, picks)
        local n = 0
        for _ in pairs(seen) do n = n + 1 end
        assert.are.equal(8, n)
        -- stop() ends a start that waits
        local late = zk:ServiceDiscovery(env.root .. "/sd2"):ServiceCache("api")
        server:node(1):pause()
        stop_ends_all(env, zk, { function() return late:start(60) end })
        server:node(1):resume()
        cache:close()
      end)
    end)
  end)

  describe("elections", function()
    it("coroutines awaiting one latch all see its leadership; a second run() is refused; " ..
       "stop() ends awaiters", function()
      run(function(env)
        local zk, other = env.started(), env.started()
        local path = env.root .. "/election"
        local leader = other:Election(path, "leader")
        leader:start()
        assert.is_true(leader:await(20))
        local e = zk:Election(path, "shared")
        e:start()
        local results = spawn_calls(env, copies(3, function() return e:await(60) end))
        env.eventually(function() return env.handler.waiting() >= 3 end)
        leader:stop(20)
        env.eventually(function() return all_in(results, 3) end)
        for i = 1, 3 do assert.are.same({ true, true }, results[i]) end
        assert.are.equal(1, #zk:get_children(path)) -- one node: led once
        raises(errors.KazooException, e.run, e, function() end)
        assert.is_true(e:stop(20))
        local run_elected = false
        local f = zk:Election(path, "runner")
        assert.is_true(leader:start())
        assert.is_true(leader:await(20))
        local awaited = {}
        env.spawn(function()
          local result = { pcall(f.run, f, function() run_elected = true end) }
          awaited[1] = result
        end)
        env.eventually(function() return env.handler.waiting() >= 1 end)
        zk:stop()
        env.eventually(function() return awaited[1] end)
        assert.is_false(awaited[1][1])
        assert.is_true(errors.is(awaited[1][2], errors.ConnectionClosedError),
                       tostring(awaited[1][2]))
        assert.is_false(run_elected)
      end)
    end)
  end)

  describe("persistent nodes", function()
    it("coroutines starting and awaiting one PersistentNode: one node; stop() ends waiters",
       function()
      run(function(env)
        local zk = env.started({ timeout = 2 })
        zk:ensure_path(env.root)
        local node = zk:PersistentNode(env.root .. "/n", "x")
        local got = 0
        together(env, 5, function()
          node:start()
          if node:wait_for_initial_create(30) then got = got + 1 end
        end, 60, "every waiter")
        assert.are.equal(5, got)
        assert.are.equal(1, node.creations)
        assert.are.same({ "n" }, zk:get_children(env.root))
        -- during an outage the node cannot be made: waiters wait until the client stops
        local later = zk:PersistentNode(env.root .. "/m", "y")
        server:node(1):pause()
        later:start()
        assert.is_false(later:wait_for_initial_create(0.3))
        stop_ends_all(env, zk, copies(3, function() return later:wait_for_initial_create() end))
        server:node(1):resume()
      end)
    end)
  end)
end)
