-- kazoo's kazoo/tests/test_connection.py, translated (see /work/shared/reference/kazoo-tests):
-- what a standalone server or a 3-node loopback ensemble can show of the connection.
--
-- kazoo makes its faults by patching its own Python connection loop (a select() that never
-- sees the socket readable or writable, a Connect reply that fails to deserialize, a request
-- that drops the connection).  Here the same faults are real, made by the fault proxy
-- (zklua.testing.proxy) between the client and the server: a reply that never comes, a
-- request that never goes up, a reconnection attempt that fails, a dropped connection.  The
-- client's session timeout is short (4 s) where kazoo's test waits for its read timeout (2/3
-- of it).  The tests that reach into kazoo's internals (its request queue, its wake-up socket
-- pair, its xid bookkeeping) are in spec/kazoo/not_applicable.lua.
local zklua = require "zklua"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local support = require "kazoo.support"
local errors = zklua.errors

local SHORT_TIMEOUT = 4 -- s: the session timeout of the clients that wait for a read timeout

local raises = helpers.raises

-- kazoo's `ev = threading.Event()` set by a listener on CONNECTED.
local function on_connected(client)
  local ev = { set = false }
  client:add_listener(function(state)
    if state == "CONNECTED" then ev.set = true end
  end)
  return ev
end

describe("test_connection.py", function()
  local h, proxy

  before_each(function() h = support.harness() end)
  after_each(function()
    h:teardown()
    if proxy then proxy:stop() end
    proxy = nil
  end)

  -- A started client through a fresh fault proxy, chrooted as h.client is.
  local function client_through_proxy()
    proxy = testing.proxy(h.server:node(1))
    local client = h:get_client{ hosts = proxy.hosts .. h.namespace, timeout = SHORT_TIMEOUT,
                                 connection_retry = { max_tries = -1, delay = 0.05,
                                                      max_delay = 0.2 } }
    client:start()
    return client
  end

  it("test_with_bad_sessionid", function()
    local ev = false
    local password = string.rep("\7", 16)
    local client = h:get_client{ client_id = { 82838284824, password } }
    client:add_listener(function(state)
      if state == "CONNECTED" then ev = true end
    end)
    client:start()
    testing.wait_for(function() return ev end, 15, "CONNECTED")
    assert.is_true(ev)
    client:stop()
  end)

  it("test_connection_read_timeout", function()
    local client = client_through_proxy()
    local path = support.unique_path()
    local ev = on_connected(client)
    client:create(path, "1")
    proxy:cut_reply("get") -- the get reaches the server; no reply ever reaches the client
    raises(errors.ConnectionLoss, client.get, client, path)
    proxy:resume()
    -- the client reconnects automatically
    testing.wait_for(function() return ev.set end, 30, "CONNECTED")
    assert.is_true(ev.set)
    assert.are.equal("1", (client:get(path)))
  end)

  it("test_connection_write_timeout", function()
    local client = client_through_proxy()
    local path = support.unique_path()
    local ev = on_connected(client)
    proxy:silence("up") -- nothing the client writes reaches the server
    raises(errors.ConnectionLoss, client.create, client, path)
    proxy:drop() -- what the client wrote is dropped with the connection, never sent on
    proxy:resume()
    -- the client reconnects automatically
    testing.wait_for(function() return ev.set end, 30, "CONNECTED")
    assert.is_true(ev.set)
    assert.is_nil(client:exists(path))
  end)

  it("test_connection_deserialize_fail", function()
    local client = client_through_proxy()
    local path = support.unique_path()
    local ev = on_connected(client)
    proxy:silence("up")
    raises(errors.ConnectionLoss, client.create, client, path)
    -- the first reconnection attempt fails (kazoo: its Connect reply cannot be read); the
    -- client goes on trying
    local base = proxy:status().accepted
    proxy:refuse(true)
    proxy:drop()
    helpers.wait_until(function() return proxy:status().accepted > base end, 30,
                       "a failed reconnection attempt")
    proxy:resume()
    -- this time it succeeds
    testing.wait_for(function() return ev.set end, 30, "CONNECTED")
    assert.is_true(ev.set)
    assert.is_nil(client:exists(path))
  end)

  it("test_connection_close [difference: close-stops]", function()
    -- kazoo's close() of a started client raises; zklua's stops it first
    local client = h.client
    client:close()
    assert.are.equal("LOST", client.state)
    assert.are.equal("CLOSED", client.client_state)
    client:stop()
    client:close()
    -- a closed client cannot be started again: a new client is made instead
    raises(errors.ConnectionClosedError, client.start, client)
    local again = h:get_client()
    again:start()
    assert.are.equal("CONNECTED", again.state)
  end)

  it("test_connection_dropped", function()
    local client = client_through_proxy()
    local ev = false
    local path = support.unique_path()
    client:create(path)
    client:add_listener(function(state)
      if state == "CONNECTED" then ev = true end
    end)
    proxy:cut_reply("set")
    local result = client:set_async(path, string.rep("a", 1000 * 1024))
    helpers.wait_until(function() return proxy:status().cut end, 30, "the set to go up")
    proxy:drop() -- kazoo's _CONNECTION_DROP
    proxy:resume()
    raises(errors.ConnectionLoss, result.get, result)
    -- we have a working connection again
    testing.wait_for(function() return ev end, 30, "CONNECTED")
    assert.is_true(ev)
  end)
end)

describe("test_connection.py", function()
  -- TestReadOnlyMode: a 3-node ensemble with read-only mode enabled (kazoo's
  -- ZOOKEEPER_LOCAL_SESSION_RO)
  local ens, h

  setup(function()
    ens = testing.ensemble(3, { read_only = true })
    h = support.harness{ server = ens }
  end)
  teardown(function()
    if h then pcall(h.teardown, h) end
    if ens then ens:stop() end
  end)

  it("test_read_only", function()
    h.client:stop() -- do not keep the client started in setUp alive
    local client = h:get_client{ read_only = true }
    local states, ev = {}, false
    local function listen(state)
      states[#states + 1] = state
      if client.client_state == "CONNECTED_RO" then ev = true end
    end
    client:add_listener(listen)
    client:start()
    local ok, err = pcall(function()
      ens:node(2):stop()
      ens:node(3):stop()
      -- restarting the client makes it look for a server again (kazoo: resets the xid)
      client:stop()
      client:start(60) -- the last node takes a while to turn read-only
      testing.wait_for(function() return ev end, 60, "CONNECTED_RO")
      assert.is_true(ev)
      assert.are.equal("CONNECTED_RO", client.client_state)

      -- a read-only command
      assert.are.same({}, client:get_children("/"))

      -- an error with a write command
      raises(errors.NotReadOnlyCallError, client.create, client, "/fred")

      -- pings go on: still connected read-only after a few of them (kazoo waits 15 s)
      testing.sleep(2 * client:session_timeout() / 3)
      assert.are.equal("CONNECTED_RO", client.client_state)
    end)
    client:remove_listener(listen)
    ens:node(2):start(90)
    ens:node(3):start(90)
    assert(ok, err)
  end)
end)
