-- Every public call that can wait ends — it returns, or raises a named zklua error — in every
-- client state: CONNECTED, SUSPENDED (the connection silenced, or dropped and refused, through
-- zklua.testing.proxy), LOST (the server expired the session, and no new one can be made),
-- AUTH_FAILED, CLOSED (stop, close) and after the connection retry policy gave up.
--
-- Each call that takes a bound gets one (BOUND seconds); the others are bounded by the client
-- (its session timeout, its timeout), or end when it stops (Election:run, as kazoo's).
-- Nothing here asserts how fast a call ends: a call that does not end hangs the spec, and a
-- call that ends with anything but a zklua error object fails it.
local zklua = require "zklua"
local testing = require "zklua.testing"
local errors = zklua.errors

local BOUND = 1       -- seconds, given to every call that takes a timeout
local TIMEOUT = 2     -- the clients' session timeout (seconds)

-- The calls, in an order that leaves start() last (it stops a client it cannot connect).
-- ctx: { zk =, root = } with the objects of a fresh client through a proxy.
local CALLS = {
  { "get", function(c) return c.zk:get(c.root) end },
  { "exists", function(c) return c.zk:exists(c.root .. "/none") end },
  { "get_children", function(c) return c.zk:get_children(c.root) end },
  { "create", function(c) return c.zk:create(c.root .. "/n-", "", { sequence = true }) end },
  { "set", function(c) return c.zk:set(c.root, "v") end },
  { "delete", function(c) return c.zk:delete(c.root .. "/none") end },
  { "sync", function(c) return c.zk:sync(c.root) end },
  { "ensure_path", function(c) return c.zk:ensure_path(c.root .. "/made/here") end },
  { "transaction", function(c)
      local t = c.zk:transaction()
      t:check(c.root, -1)
      return t:commit()
    end },
  { "future:get", function(c) local f = c.zk:get_async(c.root); return f:get(BOUND) end },
  { "future:wait", function(c) local f = c.zk:exists_async(c.root); return f:wait(BOUND) end },
  { "Lock:acquire", function(c) return c.lock:acquire(true, BOUND) end },
  { "Lock:acquire(false)", function(c) return c.lock:acquire(false, BOUND) end },
  { "Semaphore:acquire", function(c) return c.sem:acquire(true, BOUND) end },
  { "Counter:add", function(c) return c.counter:add(1, BOUND) end },
  { "Counter:get", function(c) return c.counter:get(BOUND) end },
  { "Queue:put", function(c) return c.queue:put("item") end },
  { "Queue:get", function(c) return c.queue:get() end },
  { "LockingQueue:get", function(c) return c.lqueue:get(BOUND) end },
  { "Barrier:wait", function(c) return c.barrier:wait(BOUND) end },
  { "DoubleBarrier:enter", function(c) return c.dbarrier:enter(BOUND) end },
  { "DoubleBarrier:leave", function(c) return c.dbarrier:leave(BOUND) end },
  { "Party:join", function(c) return c.party:join(BOUND) end },
  { "Party:leave", function(c) return c.joined:leave(BOUND) end },
  { "Party:join (the client's timeout)", function(c) return c.party:join() end },
  { "start", function(c) return c.zk:start(BOUND) end },
}

-- The calls that take no bound yet (kazoo's has none either): while the connection is down
-- they wait for it, and end when the client is stopped (ConnectionClosedError).
local UNBOUNDED = {
  { "Election:run", function(c) return c.election:run(function() return "led" end) end },
}

-- Asserts that each call ends with a return or one of the named errors (a set of names).
local function every_call_ends(ctx, names, state, with_unbounded)
  local calls = {}
  for _, call in ipairs(CALLS) do calls[#calls + 1] = call end
  if with_unbounded then -- they raise before they would wait
    for _, call in ipairs(UNBOUNDED) do table.insert(calls, #calls, call) end
  end
  for _, call in ipairs(calls) do
    local name, fn = call[1], call[2]
    local ok, err = pcall(fn, ctx)
    if not ok then
      assert(errors.is_error(err), state .. ": " .. name .. " raised a bare error: " ..
             tostring(err))
      assert(names[err.name], state .. ": " .. name .. " raised " .. tostring(err))
    end
  end
end

-- Runs each unbounded call on its own client (spares[i]); `other` stops that client from a
-- callback of a reply that arrives while the call waits (the call's wait runs other's event
-- loop too), so each call is shown to end when its client stops, if it waits at all.
local function unbounded_calls_end(spares, other, root, state)
  for i, call in ipairs(UNBOUNDED) do
    local name, fn, spare = call[1], call[2], spares[i]
    local stopper = other:exists_async(root)
    stopper:rawlink(function() spare.zk:stop() end)
    local ok, err = pcall(fn, spare) -- a leave may find its node gone with the session
    assert(ok or errors.is(err, errors.ConnectionClosedError),
           state .. ": " .. name .. " raised " .. tostring(err))
    testing.wait_for(function() return stopper:ready() end, 10, "the stopper")
  end
end

-- The recipe objects the calls use, on client zk under root.
local function objects_of(zk, root, name)
  return {
    zk = zk, root = root,
    lock = zk:Lock(root .. "/lock"),
    sem = zk:Semaphore(root .. "/sem", nil, 1),
    counter = zk:Counter(root .. "/counter"),
    queue = zk:Queue(root .. "/queue"),
    lqueue = zk:LockingQueue(root .. "/lqueue"),
    barrier = zk:Barrier(root .. "/barrier"),
    dbarrier = zk:DoubleBarrier(root .. "/dbarrier", 2),
    party = zk:Party(root .. "/party", name),
    joined = zk:Party(root .. "/joined", name),
    election = zk:Election(root .. "/election", name),
  }
end

local function set(...)
  local s = {}
  for _, name in ipairs({ ... }) do s[name] = true end
  return s
end

describe("every call that can wait ends", function()
  local server, other, proxy, ctx, spares
  local n = 0

  setup(function()
    server = testing.server()
    other = zklua.client{ hosts = server.hosts, timeout = TIMEOUT }
    other:start()
  end)
  teardown(function()
    other:close()
    server:stop()
  end)

  -- A fresh client through a fresh proxy, and what `other` holds so that the waits wait.
  before_each(function()
    n = n + 1
    local root = "/every_wait/" .. n
    other:ensure_path(root)
    proxy = testing.proxy(server:node(1))
    local zk = zklua.client{ hosts = proxy.hosts, timeout = TIMEOUT,
                             connection_retry = { max_tries = -1, delay = 0.05,
                                                  max_delay = 0.2 } }
    zk:start()
    assert.is_true(other:Lock(root .. "/lock"):acquire())
    assert.is_true(other:Semaphore(root .. "/sem", nil, 1):acquire())
    other:Barrier(root .. "/barrier"):create()
    ctx = objects_of(zk, root, "me")
    ctx.joined:join()
    spares = {}
    for i = 1, #UNBOUNDED do
      local spare = zklua.client{ hosts = proxy.hosts, timeout = TIMEOUT }
      spare:start()
      spares[i] = { zk = spare, election = spare:Election(root .. "/election", "spare" .. i) }
    end
  end)

  after_each(function()
    ctx.zk:close()
    for _, spare in ipairs(spares) do spare.zk:close() end
    proxy:stop()
  end)

  it("CONNECTED: returns, or times out within the bound given", function()
    every_call_ends(ctx, set("LockTimeout", "TimeoutError", "NoNodeError"), "CONNECTED")
    assert.are.same({ true, "led" }, { ctx.election:run(function() return "led" end) })
    assert.are.equal("CONNECTED", ctx.zk.state)
  end)

  local CUT_OFF = set("ConnectionLoss", "OperationTimeoutError", "SessionExpiredError",
                      "LockTimeout", "TimeoutError")

  it("SUSPENDED, the connection silenced: every call ends", function()
    proxy:silence("both")
    testing.wait_for(function() return ctx.zk.state == "SUSPENDED" end, 10, "SUSPENDED")
    every_call_ends(ctx, CUT_OFF, "SUSPENDED (silenced)")
    unbounded_calls_end(spares, other, ctx.root, "SUSPENDED (silenced)")
  end)

  it("SUSPENDED, the connection dropped and refused: every call ends", function()
    proxy:refuse(true)
    proxy:drop()
    testing.wait_for(function() return ctx.zk.state == "SUSPENDED" end, 10, "SUSPENDED")
    every_call_ends(ctx, CUT_OFF, "SUSPENDED (refused)")
    unbounded_calls_end(spares, other, ctx.root, "SUSPENDED (refused)")
  end)

  it("LOST (the server expired the session, no new one can be made): every call ends",
     function()
    proxy:refuse(true)
    proxy:drop()
    testing.expire_session(ctx.zk, 20, server.hosts)
    assert.are.equal("LOST", ctx.zk.state)
    every_call_ends(ctx, CUT_OFF, "LOST")
    unbounded_calls_end(spares, other, ctx.root, "LOST")
  end)

  it("AUTH_FAILED: every call raises AuthFailedError", function()
    assert.has_error(function() ctx.zk:add_auth("bogus", ":") end)
    -- the refusal may reach add_auth as a lost connection (the server closes it right after
    -- its answer); the AUTH_FAILED state follows from the library
    testing.wait_for(function() return ctx.zk.client_state == "AUTH_FAILED" end, 20,
                     "the AUTH_FAILED state")
    every_call_ends(ctx, set("AuthFailedError"), "AUTH_FAILED", true)
  end)

  it("CLOSED by stop(): every call raises ConnectionClosedError", function()
    ctx.zk:stop()
    every_call_ends(ctx, set("ConnectionClosedError"), "stopped", true) -- start() returns
  end)

  it("CLOSED by close(): every call raises ConnectionClosedError", function()
    ctx.zk:close()
    every_call_ends(ctx, set("ConnectionClosedError"), "closed", true)
  end)

  it("the connection retry policy gave up: every call ends", function()
    local zk = zklua.client{ hosts = proxy.hosts, timeout = TIMEOUT,
                             connection_retry = { max_tries = 2, delay = 0.05 } }
    zk:start()
    local objects = objects_of(zk, ctx.root, "gave-up")
    proxy:refuse(true)
    proxy:drop()
    testing.wait_for(function() return zk._stopped end, 30, "the policy to give up")
    assert.are.equal("LOST", zk.state)
    -- start() tries again, and gives up again: TimeoutError
    every_call_ends(objects, set("ConnectionClosedError", "TimeoutError"), "gave up", true)
    zk:close()
  end)
end)
