-- A network partition on a 3-node loopback ensemble: the nodes reach each other only through
-- proxies (testing.ensemble(3, {partitionable = true})), and one follower is cut off from
-- the other two while its clients still reach it — its links closed and refused, or silenced
-- (nothing closed: the nodes notice by their timeouts).
--
-- Proves: a client of the cut-off node goes SUSPENDED, then LOST; a lock it held is granted
-- to a client of the majority once the majority expired the session, and the cut-off holder
-- learns it lost the lock (on_lost); the fencing tokens grow; no write the majority
-- acknowledged is lost; once healed, the cut-off node serves every acknowledged write and
-- its client gets a new session.
--
-- Not proved, because it does not hold yet: that the cut-off holder gives the lock up BEFORE
-- the majority grants it.  The client declares LOST a session timeout after it noticed the
-- disconnection, while the server's expiry counts from the last packet it got, which is
-- earlier (by up to 2/3 of the timeout when the link goes silent).  The ledger below records
-- both times; see the report that came with this spec.
local zklua = require "zklua"
local core = require "zklua.core"
local testing = require "zklua.testing"

local TIMEOUT = 4 -- the clients' session timeout (seconds)

describe("a partitioned ensemble", function()
  local ens, n = nil, 0

  setup(function() ens = testing.ensemble(3, { partitionable = true }) end)
  teardown(function() ens:stop() end)

  local function partition_test(how)
    n = n + 1
    local root = "/partition/" .. n
    local cut -- a follower: the two others keep the leader and a quorum
    testing.wait_for(function()
      for _, node in ipairs(ens.nodes) do
        if node:mode() == "follower" then cut = node end
      end
      return cut ~= nil and ens:leader() ~= nil
    end, 60, "a follower and a leader")
    local majority = {}
    for _, node in ipairs(ens.nodes) do
      if node ~= cut then majority[#majority + 1] = node.hosts end
    end
    local zc = zklua.client{ hosts = cut.hosts, timeout = TIMEOUT }
    zc:start()
    local zm = zklua.client{ hosts = table.concat(majority, ","), timeout = TIMEOUT }
    zm:start()

    local ledger = {} -- what happened, in order, each with this process's clock
    local function note(what) ledger[#ledger + 1] = { what = what, at = core.monotonic() } end
    local states = {}
    zc:add_listener(function(state) states[#states + 1] = state; note("cut " .. state) end)

    zm:ensure_path(root .. "/acked")
    local acked = {}
    local function write(client, i)
      acked[#acked + 1] = client:create(root .. "/acked/w-", tostring(i), { sequence = true })
    end
    for i = 1, 20 do write(i % 2 == 0 and zm or zc, i) end
    local held = zc:Lock(root .. "/lock", "cut-off client")
    assert.is_true(held:acquire(true, 10))
    local cut_token = held.fencing_token
    note("cut acquired")
    held:on_lost(function() note("cut gave up") end)

    ens:isolate(cut.id, { silent = how == "silent" })
    note("isolated")
    for i = 21, 40 do write(zm, i) end -- the majority serves on
    local taker = zm:Lock(root .. "/lock", "majority client")
    assert.is_true(taker:acquire(true, 60)) -- once the majority expired zc's session
    note("majority acquired")
    testing.wait_for(function() return zc.state == "LOST" end, 4 * TIMEOUT, "LOST")

    assert.are.same({ "SUSPENDED", "LOST" }, { states[1], states[2] })
    local seen = {}
    for _, entry in ipairs(ledger) do seen[entry.what] = entry.at end
    assert.is_truthy(seen["cut gave up"], "the cut-off holder never heard it lost the lock")
    assert.is_false(held.is_acquired)
    assert.is_true(taker.fencing_token > cut_token)

    ens:heal()
    testing.wait_for(function() return zc.state == "CONNECTED" end, 60, "the cut-off client")
    zc:sync(root .. "/acked")
    local present = {}
    for _, name in ipairs(zc:get_children(root .. "/acked")) do
      present[root .. "/acked/" .. name] = true
    end
    for _, path in ipairs(acked) do
      assert.is_true(present[path] == true, "acknowledged write lost: " .. path)
    end
    assert.is_true(taker:release())
    zc:close()
    zm:close()
    return seen
  end

  it("links closed and refused: SUSPENDED then LOST, the lock moves, no write is lost",
     function()
    partition_test("closed")
  end)

  it("links silenced: SUSPENDED then LOST, the lock moves, no write is lost", function()
    partition_test("silent")
  end)
end)
