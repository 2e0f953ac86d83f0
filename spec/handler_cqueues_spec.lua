-- zklua.handlers.cqueues (and the coroutine handler core, zklua.handlers.coroutine) against a
-- real server: blocking calls yield their cqueues coroutine, other coroutines run meanwhile,
-- callbacks may yield, stop() wakes every waiter with ConnectionClosedError, and a blocking
-- call where nothing can resume the caller raises WouldBlockError instead of hanging.
--
-- Each test runs its body in a coroutine of a fresh cqueues controller (run() below) and
-- steps the controller until the body is done; a "ticker" coroutine that counts while the
-- body waits shows that the controller kept running (no call blocked the event loop).
local zklua = require "zklua"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local cqueues = require "cqueues"
local cq_handler = require "zklua.handlers.cqueues"

local ROOT = "/cqueues"
local HANG_GUARD = 120 -- s: a test whose coroutines never finish fails instead of hanging

local raises = helpers.raises

describe("the cqueues handler", function()
  local server
  local counter = 0
  local kids = helpers.kids()

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)
  after_each(function()
    kids:cleanup()
    if server:node(1):is_running() then server:node(1):resume() end
    helpers.delete_trees(server.hosts, ROOT)
  end)

  -- Runs body(env) in a coroutine of a new controller; returns once it finished (raising its
  -- error).  env: cq, handler, root (a fresh path), client(opts), spawn(fn), eventually(pred),
  -- ticker() -> a function giving the ticks counted so far.
  local function run(body)
    counter = counter + 1
    local cq = cqueues.new()
    local handler = cq_handler.new(cq)
    local clients = {}
    local env = { cq = cq, handler = handler, root = ROOT .. "/t" .. counter }
    local finished, ticking = false, true

    function env.client(opts)
      opts = opts or {}
      opts.hosts, opts.handler = opts.hosts or server.hosts, handler
      local zk = zklua.client(opts)
      clients[#clients + 1] = zk
      return zk
    end

    function env.started(opts)
      local zk = env.client(opts)
      zk:start()
      return zk
    end

    function env.spawn(fn) cq:wrap(fn) end

    --- Polls pred every 20 ms, yielding (handler.sleep); raises after timeout s (default 20).
    function env.eventually(pred, timeout, what)
      local deadline = cqueues.monotime() + (timeout or 20)
      while not pred() do
        if cqueues.monotime() > deadline then error("timed out waiting for " .. (what or "a condition"), 2) end
        handler.sleep(0.02)
      end
    end

    function env.ticker()
      local ticks = 0
      cq:wrap(function()
        while ticking do
          ticks = ticks + 1
          cqueues.sleep(0.005)
        end
      end)
      return function() return ticks end
    end

    -- handler.sleep(seconds) until ticks() (env.ticker()'s counter) passed before, at most
    -- 50 times.  Each sleep yields to the controller, but when a loaded machine runs a step
    -- late, the sleeper and the ticker are due in the same step and the sleeper may run
    -- first: one sleep proves nothing then.  A sleep that never yields still fails the
    -- caller's assertion.
    function env.sleep_until_ticked(ticks, before, seconds)
      for _ = 1, 50 do
        handler.sleep(seconds)
        if ticks() > before then return end
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
    ticking = false
    for _, zk in ipairs(clients) do zk:close() end
    if not ok then error(err, 0) end
    assert.is_true(finished, "the test's coroutine did not finish within the hang guard")
    return env
  end

  it("runs many coroutines' sync ops at once, each yielding until its reply is in", function()
    run(function(env)
      local zk = env.started()
      zk:ensure_path(env.root)
      local COROUTINES, ROUNDS = 40, 25
      local inside, most_inside, finished = 0, 0, 0
      local function call(fn, ...)
        inside = inside + 1
        most_inside = math.max(most_inside, inside)
        local a, b = fn(zk, ...)
        inside = inside - 1
        return a, b
      end
      for c = 1, COROUTINES do
        env.spawn(function()
          for r = 1, ROUNDS do
            local path = env.root .. "/c" .. c .. "-" .. r
            assert.are.equal(path, call(zk.create, path, "v" .. c))
            assert.are.equal("v" .. c, (call(zk.get, path)))
            assert.are.equal(1, call(zk.set, path, "w" .. r).version)
            assert.are.equal(1, call(zk.exists, path).version)
            assert.is_true(call(zk.delete, path))
          end
          finished = finished + 1
        end)
      end
      env.eventually(function() return finished == COROUTINES end, 60, "every coroutine")
      assert.are.same({}, zk:get_children(env.root))
      -- coroutines were inside zklua calls at the same time: the calls yielded
      assert.is_true(most_inside > 1, "calls never overlapped")
      assert.are.equal(0, inside)
    end)
  end)

  it("raises WouldBlockError in a plain coroutine cqueues cannot resume, before sending", function()
    run(function(env)
      local zk = env.started()
      zk:ensure_path(env.root)
      local inner = coroutine.wrap(function()
        return pcall(zk.create, zk, env.root .. "/plain", "x")
      end)
      local ok, err = inner()
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.WouldBlockError), tostring(err))
      assert.truthy(tostring(err):find("cq:wrap", 1, true))
      assert.is_nil(zk:exists(env.root .. "/plain"))
    end)
  end)

  it("raises WouldBlockError in the main chunk, and sends nothing", function()
    local root
    local zk
    run(function(env)
      zk = env.started()
      root = env.root
      zk:ensure_path(root)
    end)
    -- run() closed the clients; a fresh one, started and used from inside the controller
    local cq = cqueues.new()
    local handler = cq_handler.new(cq)
    zk = zklua.client{ hosts = server.hosts, handler = handler }
    raises(errors.WouldBlockError, zk.start, zk)
    assert.are.equal("LOST", zk.state)
    cq:wrap(function() zk:start() end)
    assert(cq:loop(30))
    assert.are.equal("CONNECTED", zk.state)
    raises(errors.WouldBlockError, zk.create, zk, root .. "/main", "x")
    raises(errors.WouldBlockError, zk.create, zk, root .. "/main/deep", "x", { makepath = true })
    raises(errors.WouldBlockError, zk.ensure_path, zk, root .. "/made")
    local f = zk:get_async(root)
    raises(errors.WouldBlockError, f.get, f)
    -- a call that does not wait works anywhere: get_nowait runs the events there are
    local core = require "zklua.core"
    local deadline, value = core.monotonic() + 20, nil
    while value == nil and core.monotonic() < deadline do
      local ok, got = pcall(f.get_nowait, f)
      if ok then
        value = got
      else
        assert.is_true(errors.is(got, errors.TimeoutError), tostring(got))
        core.sleep(0.01)
      end
    end
    assert.are.equal("", value)
    raises(errors.WouldBlockError, handler.sleep, 0.01)
    local lock = zk:Lock(root .. "/lock")
    raises(errors.WouldBlockError, lock.acquire, lock)
    local checked = false
    cq:wrap(function()
      assert.are.equal("", (f:get())) -- the async op itself went through
      assert.is_nil(zk:exists(root .. "/main"))
      assert.is_nil(zk:exists(root .. "/made"))
      assert.is_false(lock.is_acquired)
      -- the lock's node, if the attempt made one, is withdrawn in the background
      local gone_by = cqueues.monotime() + 20
      while zk:exists(root .. "/lock") and #zk:get_children(root .. "/lock") > 0 do
        assert(cqueues.monotime() < gone_by, "the lock's node stayed")
        handler.sleep(0.02)
      end
      checked = true
      zk:close()
    end)
    assert(cq:loop(HANG_GUARD))
    assert.is_true(checked)
  end)

  -- Inside a C function that calls Lua (a table.sort comparator, a string.gsub function; under
  -- Lua 5.4 also a __tostring called by tostring and an __index called by table.concat) Lua
  -- cannot yield, though the coroutine is the controller's: a wait there
  -- raised the raw "attempt to yield across a C-call boundary" after its request had gone.
  it("raises WouldBlockError where Lua cannot yield, before sending", function()
    run(function(env)
      local zk = env.started()
      zk:ensure_path(env.root)
      local q = zk:Queue(env.root .. "/q")
      q:put("item")
      local contexts = {
        sort = function(fn) table.sort({ 2, 1, 3 }, function(a, b) fn(); return a < b end) end,
        gsub = function(fn) string.gsub("abc", "b", function() fn(); return "x" end) end,
      }
      if not helpers.LUAJIT then -- LuaJIT yields from these, or never calls them
        contexts.tostring = function(fn)
          return tostring(setmetatable({}, { __tostring = function() fn(); return "x" end }))
        end
        contexts.concat = function(fn)
          return table.concat(setmetatable({}, { __len = function() return 1 end,
                                                 __index = function() fn(); return "x" end }))
        end
      end
      local names = {}
      for name in pairs(contexts) do names[#names + 1] = name end
      table.sort(names)
      local count = 0
      for _, name in ipairs(names) do
        local path = env.root .. "/" .. name
        local calls = {
          create = function() zk:create(path, "x") end,
          makepath = function() zk:create(path .. "/a/b", "x", { makepath = true }) end,
          ensure_path = function() zk:ensure_path(path) end,
          -- a Queue's length asks the server (reconfig once got one as a list)
          queue_len = function() return q:len() end,
          -- the get goes out (get_async asked for it); waiting for it cannot be done here
          future = function() return zk:get_async(env.root):get() end,
          lock = function() return zk:Lock(path .. "-lock"):acquire() end,
          sleep = function() env.handler.sleep(0.01) end,
        }
        for what, call in pairs(calls) do
          local ok, err = pcall(contexts[name], call)
          assert.is_false(ok, name .. "/" .. what)
          assert.is_true(errors.is(err, errors.WouldBlockError), name .. "/" .. what .. ": " ..
                         tostring(err))
          assert.truthy(tostring(err):find("cannot yield here", 1, true), tostring(err))
          count = count + 1
        end
        -- nothing was sent
        assert.is_nil(zk:exists(path))
        assert.is_nil(zk:exists(path .. "-lock"))
      end
      assert.is_true(count >= 2 * 7)
      -- and the coroutine goes on as before
      assert.are.equal(1, q:len())
      assert.are.equal("", (zk:get_async(env.root):get()))
      assert.are.same({ "q" }, zk:get_children(env.root))
    end)
  end)

  it("yields on timeouts: LockTimeout, a future's TimeoutError, sleeps and retries' sleeps", function()
    run(function(env)
      local a = env.started()
      local b = env.started({ command_retry = { max_tries = 3, delay = 0.05, max_jitter = 0 } })
      local ticks = env.ticker()
      local path = env.root .. "/lock"
      assert.is_true(a:Lock(path, "a"):acquire())

      local before = ticks()
      raises(errors.LockTimeout, function() return b:Lock(path, "b"):acquire(true, 0.3) end)
      assert.is_true(ticks() > before, "the controller stood still during acquire's wait")
      assert.are.same({ "a" }, b:Lock(path):contenders()) -- the timed-out node is gone

      before = ticks()
      env.sleep_until_ticked(ticks, before, 0.1)
      assert.is_true(ticks() > before, "the controller stood still during handler.sleep")

      local tries = 0
      before = ticks()
      local value = b:retry(function()
        tries = tries + 1
        if tries < 3 then errors.raise(errors.ConnectionLoss) end
        return "third"
      end)
      assert.are.equal("third", value)
      assert.is_true(ticks() > before, "the controller stood still during retry's sleeps")

      b:create(env.root .. "/x", "later")
      server:node(1):pause()
      local f = b:get_async(env.root .. "/x")
      before = ticks()
      raises(errors.TimeoutError, f.get, f, 0.2)
      assert.is_true(ticks() > before, "the controller stood still during future:get")
      assert.is_false(f:wait(0.05))
      server:node(1):resume()
      assert.are.equal("later", (f:get(20)))
    end)
  end)

  it("serialises coroutines contending for one lock, through three clients", function()
    run(function(env)
      local clients = { env.started(), env.started(), env.started() }
      local path, data = env.root .. "/lock", env.root .. "/count"
      clients[1]:create(data, "0", { makepath = true })
      local COROUTINES, ROUNDS = 12, 2
      local holders, most_holders, finished = 0, 0, 0
      for c = 1, COROUTINES do
        local zk = clients[(c % 3) + 1]
        env.spawn(function()
          local lock = zk:Lock(path, "c" .. c)
          for _ = 1, ROUNDS do
            lock:with(function()
              holders = holders + 1
              most_holders = math.max(most_holders, holders)
              local n = tonumber((zk:get(data)))
              env.handler.sleep(0.005) -- others run meanwhile, and must wait for the lock
              zk:set(data, tostring(n + 1))
              holders = holders - 1
            end)
          end
          finished = finished + 1
        end)
      end
      env.eventually(function() return finished == COROUTINES end, 90, "every coroutine")
      assert.are.equal(1, most_holders)
      assert.are.equal(tostring(COROUTINES * ROUNDS), (clients[1]:get(data)))
      assert.are.same({}, clients[1]:get_children(path))
    end)
  end)

  it("waits for a lock a kazoo process holds while the other coroutines run on", function()
    run(function(env)
      local zk = env.started()
      local path, go = env.root .. "/lock", env.root .. "/go"
      zk:ensure_path(env.root)
      local kz = kids:kazoo("spec/fixtures/kazoo_lock.py", server.hosts, path, "hold_until", go,
                            "kazoo-holder")
      env.eventually(function() return kz:stdout():find("acquired", 1, true) end, 30,
                     "kazoo to hold the lock")
      local ticks = env.ticker()
      local lock = zk:Lock(path, "zklua")
      local got
      env.spawn(function() got = lock:acquire(true, 60) end)
      env.eventually(function() return #zk:get_children(path) == 2 end, 20, "our node queued")
      assert.is_nil(got)
      local before = ticks()
      env.sleep_until_ticked(ticks, before, 0.05)
      assert.is_true(ticks() > before)
      assert.are.same({ "kazoo-holder", "zklua" }, lock:contenders())
      zk:create(go, "")
      env.eventually(function() return got ~= nil end, 30, "the acquire")
      assert.is_true(got)
      assert.is_true(lock.is_acquired)
      env.eventually(function() return kz:stdout():find("released", 1, true) end, 20)
      lock:release()
      env.eventually(function() return kz:exited() end, 20, "kazoo to exit")
      assert.are.equal(0, kz.status, kz:stderr())
    end)
  end)

  it("lets watch callbacks call the client and yield, while later events still arrive", function()
    run(function(env)
      local zk = env.started()
      local a, b, log = env.root .. "/a", env.root .. "/b", env.root .. "/log"
      zk:create(b, "B", { makepath = true })
      zk:create(log, "")
      zk:create(a, "")
      zk:DataWatch(a, function(data)
        if data ~= "" then
          local other = zk:get(b)       -- yields inside the watch function
          env.handler.sleep(0.01)        -- and again
          zk:create(log .. "/e-", data .. ":" .. other, { sequence = true })
        end
      end)
      for i = 1, 3 do
        zk:set(a, "v" .. i)
        env.eventually(function() return #zk:get_children(log) == i end, 20, "the log entry " .. i)
      end
      local entries = {}
      for _, name in ipairs(helpers.sorted(zk:get_children(log))) do
        entries[#entries + 1] = (zk:get(log .. "/" .. name))
      end
      assert.are.same({ "v1:B", "v2:B", "v3:B" }, entries)

      -- a one-shot watch whose callback waits for a later event: polling goes on meanwhile
      -- (its reads are answered), and the later event's callback runs after it returns, as on
      -- kazoo's one callback greenlet: callbacks never nest
      local first_waiting, first_done, second_fired = false, false, false
      local second_during_first
      local y = env.root .. "/y"
      zk:exists(env.root .. "/x", function()
        first_waiting = true
        while not zk:exists(y) do env.handler.sleep(0.01) end
        second_during_first = second_fired
        first_done = true
      end)
      zk:exists(y, function() second_fired = true end)
      zk:create(env.root .. "/x", "")
      env.eventually(function() return first_waiting end, 20, "the first callback to wait")
      zk:create(y, "")
      env.eventually(function() return first_done end, 30, "the first callback to finish")
      assert.is_false(second_during_first)
      env.eventually(function() return second_fired end, 30, "the second callback")
    end)
  end)

  it("stop() wakes every waiting coroutine with ConnectionClosedError", function()
    run(function(env)
      local a = env.started()
      -- a long session: its ops in flight outlast stop()'s grace period (half of it, <= 2 s)
      local b = env.started({ timeout = 20 })
      local lock_path, bar_path = env.root .. "/lock", env.root .. "/barrier"
      assert.is_true(a:Lock(lock_path, "a"):acquire())
      local barrier = b:Barrier(bar_path)
      barrier:create()
      local outcomes, expected = {}, 0
      local function waiter(name, fn)
        expected = expected + 1
        env.spawn(function()
          local ok, err = pcall(fn)
          outcomes[name] = ok and "returned " .. tostring(err) or err
        end)
      end
      waiter("acquire", function() return b:Lock(lock_path, "b"):acquire() end)
      waiter("run", function() return b:Election(lock_path, "e"):run(function() end) end)
      waiter("barrier", function() return barrier:wait() end)
      env.eventually(function() return #a:get_children(lock_path) == 3 end, 20, "both queued")
      server:node(1):pause() -- sync ops now stay in flight
      for i = 1, 3 do waiter("get" .. i, function() return b:get(env.root) end) end
      env.eventually(function() return env.handler.waiting() >= expected end, 20, "every waiter")
      b:stop()
      server:node(1):resume()
      env.eventually(function()
        local n = 0
        for _ in pairs(outcomes) do n = n + 1 end
        return n == expected
      end, 30, "every waiter to return")
      for name, err in pairs(outcomes) do
        assert.is_true(errors.is(err, errors.ConnectionClosedError), name .. ": " .. tostring(err))
      end
      assert.are.equal("LOST", b.state)
      -- gone with the close request, or (ops were in flight: the library dropped the
      -- connection instead) when the 20 s session expires
      env.eventually(function() return #a:get_children(lock_path) == 1 end, 45, "b's nodes gone")
    end)
  end)

  it("runs SUSPENDED and LOST listeners that yield; a held lock's on_lost runs", function()
    run(function(env)
      local zk = env.started({ timeout = 4 })
      local admin = env.started()
      local eph = env.root .. "/eph"
      zk:ensure_path(env.root)
      local states, owners = {}, {}
      local node = server:node(1)
      zk:add_listener(function(state)
        states[#states + 1] = state
        if state == "SUSPENDED" then
          node:resume()
        elseif state == "CONNECTED" and states[#states - 1] == "LOST" then
          -- re-create what the lost session owned: a blocking call inside the listener
          zk:create(eph, "again", { ephemeral = true })
          local data, stat = zk:get(eph)
          -- a session id may be int64_t cdata under LuaJIT: format it, as README says
          owners[#owners + 1] = data .. "@" .. string.format("0x%x", stat.owner_session_id)
        end
      end)
      zk:create(eph, "first", { ephemeral = true })
      local lock = zk:Lock(env.root .. "/lock", "held")
      local lost_seen
      lock:on_lost(function()
        lost_seen = admin:get_children(env.root .. "/lock") -- yields inside on_lost
      end)
      assert.is_true(lock:acquire())

      node:pause()
      env.eventually(function() return states[2] == "CONNECTED" end, 30, "SUSPENDED then CONNECTED")
      assert.are.same({ "SUSPENDED", "CONNECTED" }, states)
      assert.is_true(lock.is_acquired) -- SUSPENDED: still held

      local old_id = zk:client_id()
      testing.expire_session(zk, 30) -- yields: zk.handler.wait
      env.eventually(function() return #owners == 1 end, 30, "the listener's re-create")
      -- the takeover may drop the connection first: SUSPENDED, LOST, CONNECTED
      assert.is_true(helpers.in_order(states, { "SUSPENDED", "CONNECTED", "LOST", "CONNECTED" }),
                     table.concat(states, " "))
      assert.are.equal("CONNECTED", states[#states])
      assert.are_not.equal(old_id, zk:client_id())
      assert.are.equal("again@" .. string.format("0x%x", zk:client_id()), owners[1])
      env.eventually(function() return lost_seen ~= nil end, 20, "on_lost")
      assert.is_false(lock.is_acquired)
    end)
  end)
end)
