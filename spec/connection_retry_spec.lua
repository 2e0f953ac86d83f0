-- kazoo's connection_retry (src/core/reconnect.c): with every server down the client makes a
-- pass over its hosts, then pauses, longer after each failed pass, instead of libzookeeper's
-- own loop without pause (thousands of attempts a second); it gives up after max_tries failed
-- passes or at the deadline, stopping as kazoo's client does (LOST, CLOSED), and start() says
-- so.  A connection made resets the count; a server coming back is still found in time for
-- the session to survive.  Dead servers are free loopback ports with nothing listening.
local zklua = require "zklua"
local core = require "zklua.core"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local errors = zklua.errors

local function dead_hosts(n)
  local list = {}
  for i = 1, n do list[i] = "127.0.0.1:" .. core.free_port() end
  return table.concat(list, ",")
end

local function start_error(zk, timeout)
  local ok, err = pcall(zk.start, zk, timeout)
  assert.is_false(ok, "start() succeeded")
  assert.is_true(errors.is(err, errors.TimeoutError), tostring(err))
  return err
end

describe("connection_retry", function()
  it("gives up after max_tries failed passes over the hosts, as kazoo: LOST, CLOSED",
     function()
    local zk = zklua.client{ hosts = dead_hosts(2), timeout = 10,
                             connection_retry = { max_tries = 2, delay = 0.02,
                                                  max_jitter = 0 } }
    local states = {}
    zk:add_listener(function(state) states[#states + 1] = state end)
    local err = start_error(zk, 30)
    assert.is_truthy(tostring(err):find("connection retry policy", 1, true), tostring(err))
    -- kazoo's KazooRetry: a first pass, then max_tries more, one attempt per host each
    assert.are.equal(6, zk._session:failed_connection_attempts())
    assert.are.equal("LOST", zk.state)
    assert.are.equal("CLOSED", zk.client_state)
    assert.is_false(zk.connected)
    local ok, get_err = pcall(zk.get, zk, "/")
    assert.is_false(ok)
    assert.is_true(errors.is(get_err, errors.ConnectionClosedError), tostring(get_err))
    zk:close()
  end)

  it("gives up at its deadline", function()
    local zk = zklua.client{ hosts = dead_hosts(1), timeout = 10,
                             connection_retry = { max_tries = -1, delay = 0.05, backoff = 1,
                                                  max_jitter = 0, deadline = 0.5 } }
    local err = start_error(zk, 30)
    assert.is_truthy(tostring(err):find("deadline 0.5", 1, true), tostring(err))
    local attempts = zk._session:failed_connection_attempts()
    -- passes of one attempt, 0.05 s apart, until the next pause would end past 0.5 s from the
    -- first failure: 10 of them, fewer on a slow machine
    assert.is_true(attempts >= 3 and attempts <= 10, attempts .. " attempts")
    assert.are.equal("CLOSED", zk.client_state)
    zk:close()
  end)

  it("pauses between passes by default, instead of the library's loop without pause",
     function()
    -- two hosts: libzookeeper pauses a little between attempts on one host, never on two
    local zk = zklua.client{ hosts = dead_hosts(2), timeout = 10 }
    local cpu0 = core.cpu_time()
    start_error(zk, 3)
    local cpu = core.cpu_time() - cpu0
    local attempts = zk._session:failed_connection_attempts()
    zk:close()
    -- the default: 0.1 s doubling up to 1 s (a tenth of the session timeout), jitter 0.4; in
    -- 3 s that is 4 to 7 passes of two attempts.  libzookeeper alone: some 30,000 attempts,
    -- and most of a core (measured: 4.5 s of CPU in 5 s)
    assert.is_true(attempts >= 4 and attempts <= 16, attempts .. " attempts in 3 s")
    assert.is_true(cpu < 0.5, cpu .. " s of CPU in 3 s")
  end)

  it("a drop is not a failed attempt; the policy gives up two passes later; start() again",
     function()
    local server = testing.server()
    local ok, err = pcall(function()
      local zk = zklua.client{ hosts = server.hosts, timeout = 10,
                               connection_retry = { max_tries = 1, delay = 0.05 } }
      zk:start(15)
      zk:create("/retry-reset", "x", { ephemeral = true })
      server:node(1):stop()
      -- the drop is not a failed attempt; two passes of one attempt later the policy gives up
      helpers.wait_until(function() return zk.client_state == "CLOSED" end, 15,
                         "the client to give up")
      assert.are.equal("LOST", zk.state)
      assert.is_true(zk._session:gave_up_connecting())
      assert.are.equal(2, zk._session:failed_connection_attempts())
      server:node(1):start()
      zk:start(15) -- tries again, from a count of zero
      assert.are.equal("CONNECTED", zk.state)
      zk:get("/")
      zk:close()
    end)
    server:stop()
    assert(ok, err)
  end)

  -- A restarted server gives the sessions it restores a whole timeout from its start, but the
  -- client counts a connection down for a whole session timeout from the drop as LOST (as
  -- Curator).  And a client may lose up to 2/3 of its session timeout to one connection
  -- attempt: ZooKeeper 3.8 leaves a connection it took in the first moments of its start
  -- unanswered and open (it means to close it, "ZooKeeperServer not running", but the close
  -- throws a NullPointerException, its database not made yet, before the socket is closed),
  -- and libzookeeper waits 2/3 of the session timeout for the handshake's reply.  Sessions of
  -- 60 s (the harness's maximum) outlast that for any restart shorter than about 18 s; the
  -- only bound the tests put on the reconnection is the session timeout.
  local RESTART_SESSION = 60

  it("the default policy finds a restarted server while the session lives", function()
    local server = testing.server()
    local ok, err = pcall(function()
      local zk = zklua.client{ hosts = server.hosts, timeout = RESTART_SESSION }
      zk:start(15)
      local id = zk:client_id()
      zk:create("/retry-survives", "x", { ephemeral = true })
      local states = {}
      zk:add_listener(function(state) states[#states + 1] = state end)
      server:node(1):stop()
      helpers.wait_until(function() return zk.state == "SUSPENDED" end, 10, "SUSPENDED")
      core.sleep(3) -- down long enough for the pauses to reach their longest (1 s here)
      local attempts = zk._session:failed_connection_attempts()
      assert.is_true(attempts <= 12, attempts .. " attempts in 3 s")
      server:node(1):start()
      helpers.wait_until(function() return zk.state == "CONNECTED" end, RESTART_SESSION,
                         "CONNECTED")
      assert.are.equal(id, (zk:client_id()))
      assert.is_truthy(zk:exists("/retry-survives"))
      assert.are.same({ "SUSPENDED", "CONNECTED" }, states)
      zk:delete("/retry-survives")
      zk:close()
    end)
    server:stop()
    assert(ok, err)
  end)

  it("every client of a restarted server gets its session back", function()
    local server = testing.server()
    local clients = {}
    local ok, err = pcall(function()
      local ids, heard = {}, {}
      for i = 1, 5 do
        local zk = zklua.client{ hosts = server.hosts, timeout = RESTART_SESSION }
        clients[i] = zk
        zk:start(15)
        ids[i] = zk:client_id()
        zk:create("/restart-" .. i, "x", { ephemeral = true })
        heard[i] = {}
        zk:add_listener(function(state) table.insert(heard[i], state) end)
      end
      local function all(state)
        return function()
          for _, zk in ipairs(clients) do
            if zk.state ~= state then return false end
          end
          return true
        end
      end
      server:node(1):stop()
      helpers.wait_until(all("SUSPENDED"), RESTART_SESSION, "every client SUSPENDED")
      server:node(1):start()
      helpers.wait_until(all("CONNECTED"), RESTART_SESSION, "every client CONNECTED")
      for i, zk in ipairs(clients) do
        assert.are.equal(ids[i], (zk:client_id()), "client " .. i .. "'s session")
        assert.are.same({ "SUSPENDED", "CONNECTED" }, heard[i], "client " .. i)
        assert.is_truthy(zk:exists("/restart-" .. i), "client " .. i .. "'s ephemeral node")
      end
    end)
    for _, zk in ipairs(clients) do zk:close() end
    server:stop()
    assert(ok, err)
  end)

  it("stop() ends a pause at once, an endless one too (the library's I/O thread is joined)",
     function()
    for _, delay in ipairs({ 30, math.huge }) do
      local zk = zklua.client{ hosts = dead_hosts(1), timeout = 10,
                               connection_retry = { max_tries = -1, delay = delay,
                                                    max_jitter = 0, max_delay = delay } }
      local t0 = core.monotonic()
      start_error(zk, 0.5) -- start() stops the client after its timeout, mid-pause
      zk:close()
      local took = core.monotonic() - t0
      assert.is_true(took < 10, "start() and close() took " .. took .. " s, pause " .. delay)
    end
  end)

  it("bad input: a clear error naming the option, before anything is sent", function()
    local function bad(retry, pattern)
      local ok, err = pcall(zklua.client, { hosts = "127.0.0.1:2181", connection_retry = retry })
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.BadArgumentsError), tostring(err))
      assert.is_truthy(tostring(err):find(pattern, 1, true), tostring(err))
    end
    bad(5, "connection_retry")
    bad({ max_tries = "3" }, "max_tries")
    bad({ max_tries = 1.5 }, "max_tries")
    bad({ delay = -1 }, "delay")
    bad({ max_jitter = 2 }, "max_jitter")
    bad({ retries = 3 }, "retries")
  end)
end)
