-- Requests made while the connection is down (SUSPENDED) wait for the reconnection and then
-- run, in order, as kazoo queues them; they fail with SessionExpiredError when the session is
-- gone first, with ConnectionClosedError when the client stops or its connection retry policy
-- gives up, and with TimeoutError at the bound a future's get() is given.  Made while a
-- session's first connection is awaited, a request waits at most a session timeout, then
-- fails with ConnectionLoss.  A request already sent when the
-- connection dropped still fails with ConnectionLoss: its reply is lost.
--
-- The faults come from zklua.testing.proxy: refuse() makes every reconnection attempt fail
-- (the server looks down), and the proxy counts the connections it accepted, so a test waits
-- until the client has failed to reconnect twice after its request was made: the moment the
-- request used to fail with ConnectionLoss.  Nothing here sleeps to synchronise.
local zklua = require "zklua"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local cqueues = require "cqueues"
local cq_handler = require "zklua.handlers.cqueues"

local ROOT = "/suspended_requests"
local TIMEOUT = 30 -- s, the session timeout: no test's outage comes near it
local RETRY = { max_tries = -1, delay = 0.05, max_delay = 0.2 }
local HANG_GUARD = 120 -- s: a coroutine test that never finishes fails instead of hanging

local raises = helpers.raises

describe("requests made while SUSPENDED", function()
  local server, other, proxy, zk
  local n = 0
  local path

  setup(function()
    server = testing.server()
    other = helpers.client(server.hosts, ROOT)
  end)
  teardown(function()
    helpers.drop(other, ROOT)
    server:stop()
  end)

  -- A client through a fresh proxy (opts added to the client's options).
  local function client_through_proxy(opts)
    local o = { hosts = proxy.hosts, timeout = TIMEOUT, connection_retry = RETRY }
    for k, v in pairs(opts or {}) do o[k] = v end
    local c = zklua.client(o)
    c:start()
    return c
  end

  before_each(function()
    n = n + 1
    path = ROOT .. "/" .. n
    proxy = testing.proxy(server:node(1))
  end)
  after_each(function()
    if zk then zk:close() end
    zk = nil
    proxy:stop()
  end)

  -- Polls pred (it may ask the proxy) every 20 ms through sleep; raises after 30 s.
  local function until_true(pred, what, sleep)
    local deadline = cqueues.monotime() + 30
    while not pred() do
      if cqueues.monotime() > deadline then error("timed out waiting for " .. what, 2) end
      sleep(0.02)
    end
  end

  -- Makes every reconnection fail, drops the connection and waits for SUSPENDED.
  local function go_down(c, sleep)
    proxy:refuse(true)
    proxy:drop()
    until_true(function() return c.state == "SUSPENDED" end, "SUSPENDED", sleep or testing.sleep)
  end

  -- Waits until the client failed two more reconnection attempts than when called (each
  -- counted by the proxy when it accepts and closes it): past the first, the requests made
  -- before the call used to fail with ConnectionLoss.
  local function two_failed_attempts(sleep)
    local base = proxy:status().accepted
    until_true(function() return proxy:status().accepted >= base + 2 end,
               "2 failed reconnection attempts", sleep or testing.sleep)
  end

  it("wait for the reconnection and then run, in the order they were made", function()
    zk = client_through_proxy()
    go_down(zk)
    local created = zk:create_async(path, "v0")
    local set = zk:set_async(path, "v1")
    local read = zk:get_async(path)
    local children = zk:get_children_async(ROOT)
    two_failed_attempts()
    assert.is_false(created:ready())
    assert.is_false(set:ready())
    assert.is_false(read:ready())
    assert.is_false(children:ready())
    assert.are.equal("SUSPENDED", zk.state)
    proxy:refuse(false)
    assert.are.equal(path, created:get(30))
    assert.are.equal(1, set:get(30).version)
    assert.are.equal("v1", (read:get(30)))
    assert.is_truthy(helpers.in_order(children:get(30), { tostring(n) }))
    assert.are.equal("v1", (other:get(path)))
    assert.are.equal("CONNECTED", zk.state)
  end)

  it("a watch asked for while SUSPENDED is set once the request runs", function()
    other:create(path, "v0")
    zk = client_through_proxy()
    go_down(zk)
    local event
    local read = zk:get_async(path, function(ev) event = ev end)
    two_failed_attempts()
    proxy:refuse(false)
    assert.are.equal("v0", (read:get(30)))
    other:set(path, "v1")
    testing.wait_for(function() return event ~= nil end, 30, "the watch")
    assert.are.equal("CHANGED", event.type)
    assert.are.equal(path, event.path)
  end)

  it("a blocking call and a recipe's own requests wait too (shared by coroutines)", function()
    other:create(path, "v0")
    local cq = cqueues.new()
    local handler = cq_handler.new(cq)
    local results, failures = {}, {}
    local function spawn(name, fn)
      cq:wrap(function()
        local ok, result = pcall(fn)
        if ok then results[name] = result else failures[#failures + 1] = tostring(result) end
      end)
    end
    local finished = false
    cq:wrap(function()
      zk = client_through_proxy{ handler = handler }
      go_down(zk, handler.sleep)
      spawn("set", function() return zk:set(path, "v1").version end)
      spawn("lock", function() return zk:Lock(path .. "-lock", "me"):acquire(true, 60) end)
      spawn("counter", function()
        local counter = zk:Counter(path .. "-counter")
        local _, _, post = counter:add(1)
        return post
      end)
      until_true(function() return handler.waiting() >= 3 end, "every call to wait",
                 handler.sleep)
      two_failed_attempts(handler.sleep)
      assert.are.same({}, results) -- none ended (with ConnectionLoss)
      assert.are.same({}, failures)
      proxy:refuse(false)
      until_true(function()
        return (results.set and results.lock and results.counter) or #failures > 0
      end, "every call", handler.sleep)
      finished = true
    end)
    local deadline = cqueues.monotime() + HANG_GUARD
    local ok, err = true, nil
    while ok and not finished and cqueues.monotime() < deadline do
      ok, err = cq:step(0.5)
    end
    assert(ok, err)
    assert.are.same({}, failures)
    assert.is_true(finished, "the coroutines did not finish within the hang guard")
    assert.are.same({ set = 1, lock = true, counter = 1 }, results)
    assert.are.equal("v1", (other:get(path)))
    assert.are.equal(1, #other:get_children(path .. "-lock"))
  end)

  it("fail with SessionExpiredError when the server expired the session meanwhile", function()
    zk = client_through_proxy()
    local id, passwd = zk:client_id()
    go_down(zk)
    local created = zk:create_async(path, "v0")
    -- the server ends the session: another handle takes it over and closes it
    local thief = zklua.client{ hosts = server.hosts, timeout = TIMEOUT, client_id = { id, passwd } }
    thief:start()
    thief:close()
    proxy:refuse(false)
    raises(errors.SessionExpiredError, created.get, created, 30)
    assert.is_nil(other:exists(path))
    testing.wait_for(function() return zk.state == "CONNECTED" end, 30, "a new session")
    assert.are.equal(path, zk:create(path, "v1")) -- the new session's requests run
  end)

  it("fail with SessionExpiredError when the connection stays down a session timeout",
     function()
    zk = client_through_proxy{ timeout = 2 }
    go_down(zk)
    local created = zk:create_async(path, "v0")
    raises(errors.SessionExpiredError, created.get, created, 60)
    assert.are.equal("LOST", zk.state)
    assert.is_nil(other:exists(path))
  end)

  it("made before a session's first connection, wait at most a session timeout", function()
    -- (after an expiry the client raises SessionExpiredError until the new session is there,
    -- as kazoo; the recipes' own requests wait in the core as these do)
    proxy:refuse(true)
    local cq = cqueues.new()
    local handler = cq_handler.new(cq)
    local outcome, started, created = nil, false, nil
    zk = zklua.client{ hosts = proxy.hosts, timeout = 2, connection_retry = RETRY,
                       handler = handler }
    cq:wrap(function()
      started = pcall(zk.start, zk, 60)
    end)
    cq:wrap(function()
      until_true(function() return zk.client_state == "CONNECTING" end, "CONNECTING",
                 handler.sleep)
      local f = zk:create_async(path, "v0")
      local ok, err = pcall(f.get, f, 60)
      outcome = ok and "created" or err
      proxy:refuse(false)
      until_true(function() return started end, "start()", handler.sleep)
      created = zk:create(path, "v1")
    end)
    local deadline = cqueues.monotime() + HANG_GUARD
    local ok, err = true, nil
    while ok and not created and cqueues.monotime() < deadline do
      ok, err = cq:step(0.5)
    end
    assert(ok, err)
    assert.is_true(errors.is(outcome, errors.ConnectionLoss), tostring(outcome))
    assert.is_true(started)
    assert.are.equal(path, created)
  end)

  it("fail with ConnectionClosedError when the client stops", function()
    zk = client_through_proxy()
    go_down(zk)
    local created = zk:create_async(path, "v0")
    local read = zk:get_async(ROOT)
    zk:stop()
    raises(errors.ConnectionClosedError, created.get, created, 0)
    raises(errors.ConnectionClosedError, read.get, read, 0)
    proxy:refuse(false)
    assert.is_nil(other:exists(path))
  end)

  it("fail with ConnectionClosedError when the connection retry policy gives up", function()
    zk = client_through_proxy{ connection_retry = { max_tries = 2, delay = 0.05 } }
    go_down(zk)
    local created = zk:create_async(path, "v0")
    raises(errors.ConnectionClosedError, created.get, created, 30)
    assert.are.equal("LOST", zk.state)
    assert.are.equal("CLOSED", zk.client_state)
  end)

  it("a future's get(timeout) raises TimeoutError; the request still runs later", function()
    zk = client_through_proxy()
    go_down(zk)
    local created = zk:create_async(path, "v0")
    raises(errors.TimeoutError, created.get, created, 0.1)
    proxy:refuse(false)
    assert.are.equal(path, created:get(30))
  end)

  it("a request whose reply was lost fails with ConnectionLoss, as in kazoo", function()
    zk = client_through_proxy()
    proxy:cut_reply("create")
    local created = zk:create_async(path, "v0")
    helpers.wait_until(function() return proxy:status().cut end, 30, "the create to go up")
    -- the server carries it out before the drop: a close that finds the held-back reply
    -- unread resets the connection, and a reset may discard a request the server (slow under
    -- load) had not read yet, so waiting for the node makes the outcome one, not a race
    helpers.wait_until(function() return other:exists(path) end, 30, "the create to be done")
    proxy:drop() -- the reply never came: to the client, the create may have been done or not
    proxy:resume()
    raises(errors.ConnectionLoss, created.get, created, 30)
    testing.wait_for(function() return zk.state == "CONNECTED" end, 30, "reconnection")
    assert.is_truthy(zk:exists(path)) -- the server did carry it out, on the same session
  end)
end)
