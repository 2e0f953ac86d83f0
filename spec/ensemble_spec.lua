-- A client on a 3-node ensemble: losing its server (stopped or frozen) suspends the connection
-- and keeps the session; losing the quorum fails ops fast and recovers; acknowledged writes
-- survive a node restart.
local zklua = require "zklua"
local core = require "zklua.core"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local ledger = require "support.ledger"
local errors = zklua.errors

local function error_name(err)
  return errors.is_error(err) and err.name or tostring(err)
end

local in_order = helpers.in_order

local eventually = helpers.wait_until

describe("a client on a 3-node ensemble", function()
  local ens
  local clients

  -- every node running, unfrozen and serving
  local function heal()
    for i = 1, 3 do
      local node = ens:node(i)
      if node.paused then node:resume() end
    end
    for i = 1, 3 do
      local node = ens:node(i)
      if not node:is_running() then node:start() end
    end
    eventually(function()
      for i = 1, 3 do
        local mode = ens:node(i):mode()
        if mode ~= "leader" and mode ~= "follower" then return false end
      end
      return true
    end, 30, "the ensemble to serve")
  end

  setup(function() ens = testing.ensemble(3) end)
  teardown(function() if ens then ens:stop() end end)

  before_each(function() clients = {} end)
  after_each(function()
    for _, c in ipairs(clients) do pcall(c.close, c) end
    heal()
  end)

  local function started(opts)
    local c = zklua.client(opts)
    clients[#clients + 1] = c
    c:start(30)
    return c
  end

  -- The node zk is connected to: the one whose `cons` lists zk's session.
  local function connected_node(zk)
    local found
    eventually(function()
      local id = zk:client_id()
      if not id then return false end
      for i = 1, 3 do
        local node = ens:node(i)
        if node:is_running() and not node.paused then
          local cons = core.four_letter("127.0.0.1", node.port, "cons", 1)
          if cons and cons:find(string.format("sid=0x%x", id), 1, true) then
            found = node
            return true
          end
        end
      end
      return false
    end, 10, "a node listing the client's session")
    return found
  end

  local function recorder(zk)
    local states = {}
    zk:add_listener(function(state) states[#states + 1] = state end)
    return states
  end

  it("keeps its session when its server stops: SUSPENDED, then CONNECTED elsewhere", function()
    local zk = started{ hosts = ens.hosts, timeout = 10 }
    local observer = started{ hosts = ens.hosts }
    zk:create("/stop-eph", "mine", { ephemeral = true })
    local id = zk:client_id()
    local states = recorder(zk)
    local node = connected_node(zk)

    node:stop()
    testing.wait_for(function() return in_order(states, { "SUSPENDED", "CONNECTED" }) end, 30,
                     "SUSPENDED then CONNECTED")
    assert.are_not.equal("LOST", states[1])
    for _, s in ipairs(states) do assert.are_not.equal("LOST", s) end
    assert.are.equal("CONNECTED", zk.state)
    assert.are.equal(id, (zk:client_id()))
    assert.are_not.equal(node, connected_node(zk))
    -- the session's ephemeral node is still there and still its own. If the stopped node led,
    -- the others may still be electing: the node the client reached can drop it once more, so
    -- the reads retry, as a user's would; the session must stay the same all along.
    local patient = zklua.retry{ max_tries = -1, delay = 0.1, deadline = 30 }
    assert.are.equal(id, patient(zk.exists, zk, "/stop-eph").owner_session_id)
    assert.are.equal(id, patient(observer.exists, observer, "/stop-eph").owner_session_id)
    patient(zk.set, zk, "/stop-eph", "still mine")
    -- the observer's server may not have applied the set yet (reads are not linearizable):
    -- sync makes it catch up with the leader, as a reader that must see it would
    patient(observer.sync, observer, "/stop-eph")
    assert.are.equal("still mine", (patient(observer.get, observer, "/stop-eph")))
    for _, s in ipairs(states) do assert.are_not.equal("LOST", s) end
    assert.are.equal(id, (zk:client_id()))
    node:start()
  end)

  it("keeps its session when its server freezes past the timeout", function()
    local zk = started{ hosts = ens.hosts, timeout = 4 }
    local observer = started{ hosts = ens.hosts }
    zk:create("/pause-eph", "", { ephemeral = true })
    local id = zk:client_id()
    local states = recorder(zk)
    local node = connected_node(zk)

    node:pause() -- SIGSTOP: the socket stays open, nothing answers
    local ok, err = pcall(testing.wait_for, function()
      return in_order(states, { "SUSPENDED", "CONNECTED" })
    end, 30, "SUSPENDED then CONNECTED")
    node:resume()
    assert(ok, err)
    -- If the frozen node led, the other two elect a new leader and the node the client reached
    -- may drop it once more meanwhile (ConnectionLoss): retry the reads, as a user would. The
    -- session must stay the same all along.
    local patient = zklua.retry{ max_tries = -1, delay = 0.1, deadline = 30 }
    assert.are.equal(id, patient(zk.exists, zk, "/pause-eph").owner_session_id)
    assert.are.equal(id, patient(observer.exists, observer, "/pause-eph").owner_session_id)
    for _, s in ipairs(states) do assert.are_not.equal("LOST", s) end
    assert.are.equal(id, (zk:client_id()))
  end)

  it("without a quorum fails ops fast, and works again once the quorum is back", function()
    local zk = started{ hosts = ens.hosts, timeout = 2 }
    zk:create("/quorum-eph", "", { ephemeral = true })
    zk:ensure_path("/quorum-data")
    local id = zk:client_id()
    local states = recorder(zk)
    local keep = connected_node(zk)
    local lost = {}
    for i = 1, 3 do
      if ens:node(i) ~= keep then lost[#lost + 1] = ens:node(i) end
    end
    for _, node in ipairs(lost) do node:kill() end

    -- the node left notices it has no quorum and stops serving
    eventually(function() return keep:mode() == nil end, 20, "the last node to stop serving")
    testing.wait_for(function() return zk.state ~= "CONNECTED" end, 20, "the client to notice")
    assert.is_truthy(in_order(states, { "SUSPENDED" }), table.concat(states, " "))
    assert.is_false(zk.connected)

    -- ops fail (they do not hang) with connection errors, reads and writes alike
    local function fails_fast(fn, ...)
      local t0 = core.monotonic()
      local ok, err = pcall(fn, ...)
      assert.is_true(core.monotonic() - t0 < 15, "an op hung without a quorum")
      assert.is_false(ok, "an op succeeded without a quorum")
      local name = error_name(err)
      -- SessionExpiredError once the session timeout passed (the session counts as LOST)
      assert.is_truthy(name == "ConnectionLoss" or name == "OperationTimeoutError" or
                       name == "SessionExpiredError", "op failed with " .. name)
    end
    fails_fast(zk.exists, zk, "/quorum-data")
    fails_fast(zk.set, zk, "/quorum-data", "no quorum")
    fails_fast(zk.create, zk, "/quorum-new", "")
    local futures = {}
    for i = 1, 20 do futures[i] = zk:get_async("/quorum-data") end
    for _, f in ipairs(futures) do
      assert.is_true(f:wait(15), "an async op never resolved without a quorum")
      assert.is_false(f:successful())
      local name = error_name(f.exception)
      assert.is_truthy(name == "ConnectionLoss" or name == "OperationTimeoutError" or
                       name == "SessionExpiredError", name)
    end

    -- a whole session timeout without a connection: the session counts as LOST (no server
    -- can vouch for it), and a new one is opened once a quorum serves again
    testing.wait_for(function() return zk.state == "LOST" end, 30, "LOST")
    assert.is_true(in_order(states, { "SUSPENDED", "LOST" }), table.concat(states, " "))
    assert.are_not.equal("CONNECTED", zk.state)

    for _, node in ipairs(lost) do node:start() end
    testing.wait_for(function() return zk.state == "CONNECTED" end, 30, "CONNECTED again")
    assert.is_true(in_order(states, { "SUSPENDED", "LOST", "CONNECTED" }), table.concat(states, " "))
    assert.are_not.equal(id, (zk:client_id()))
    -- the old session could not be closed without a server: the restored ensemble expires it
    eventually(function()
      local ok, stat = pcall(zk.exists, zk, "/quorum-eph")
      return ok and stat == nil
    end, 30, "the old session's ephemeral node to go")
    -- the restored ensemble may still be settling: retry, as a user would
    local patient = zklua.retry{ max_tries = -1, delay = 0.1, deadline = 30 }
    patient(zk.set, zk, "/quorum-data", "quorum back")
    assert.are.equal("quorum back", (patient(zk.get, zk, "/quorum-data")))
  end)

  it("every write acknowledged before a node restart is readable after it", function()
    local zk = started{ hosts = ens.hosts, timeout = 10 }
    zk:ensure_path("/ledger")
    local L = ledger.new("ensemble") -- spec/support/ledger.lua: acknowledged writes
    for i = 1, 150 do L:create(zk, string.format("/ledger/e%03d", i), "entry " .. i) end
    for i = 1, 50 do L:set(zk, "/ledger", i) end
    assert.are.equal(0, L:settle(30), "a write never resolved")
    assert.are.equal("", L:failures())
    assert.are.equal(200, L.acked)

    -- restart the leader: an election follows, the old leader rejoins as a follower
    local leader = assert(ens:leader(), "no leader")
    leader:stop()
    leader:start()

    -- while the ensemble elects a new leader, reads may time out: retry them, as a user would
    local patient = zklua.retry{ max_tries = -1, delay = 0.1, deadline = 30 }
    local function check(client, where)
      assert.are.same({}, L:check(client, where, 30))
      assert.are.equal(150, #patient(client.get_children, client, "/ledger"), where)
      local data, stat = patient(client.get, client, "/ledger")
      assert.are.equal("50", data, where)
      assert.are.equal(50, stat.version, where)
    end
    -- read from the restarted node itself, and through the original client
    local direct = started{ hosts = leader.hosts, timeout = 10 }
    check(direct, "the restarted node")
    testing.wait_for(function() return zk.state == "CONNECTED" end, 30, "the client")
    check(zk, "the first client")
    patient(zk.delete, zk, "/ledger", nil, true) -- the ensemble may still be settling
  end)
end)
