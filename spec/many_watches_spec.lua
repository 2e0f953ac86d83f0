-- Watches past the server's packet limit survive a reconnection.  After a dropped connection
-- the C client re-registers every watch with SetWatches requests; ZooKeeper 3.8.0's client
-- sent one, with every watched path, and past the server's 1 MiB packet limit (about 40k
-- watches here) the server closed each new connection on it: the session flapped, no watch
-- fired again, and it expired.  The project's build of the client sends them in 128 KiB
-- batches (scripts/zookeeper-client-patches/set-watches-in-batches.patch), as the Java client
-- does.  The drop is the proxy's (zklua.testing.proxy), placed between two steps of the test.
local zklua = require "zklua"
local core = require "zklua.core"
local testing = require "zklua.testing"
local helpers = require "support.helpers"

local ROOT = "/many_watches"
local N = 50000 -- 50k paths of ~35 bytes: 1.8 MB of SetWatches, past the 1 MiB limit

describe("50k watches and a dropped connection", function()
  local server, p, zk, writer

  setup(function()
    server = testing.server()
    p = testing.proxy(server:node(1))
  end)
  teardown(function()
    if zk then zk:close() end
    if writer then
      helpers.drop(writer, ROOT)
      writer:close()
    end
    p:stop()
    server:stop()
  end)

  it("every watch is registered again after the reconnection, in one session", function()
    assert.is_true(core.zookeeper.set_watches_in_batches,
                   "this build's C client sends SetWatches in one request (README: Building)")
    zk = zklua.client{ hosts = p.hosts, timeout = 20 }
    zk:start()
    writer = helpers.client(server.hosts)
    zk:ensure_path(ROOT)
    local fired, futures = {}, {}
    for i = 1, N do
      local path = ROOT .. "/node-with-a-name-" .. i
      futures[i] = zk:exists_async(path, function(ev) fired[#fired + 1] = ev.path end)
    end
    for i = 1, N do assert.is_nil(futures[i]:get(60)) end
    local session = zk:client_id()
    local states = {}
    zk:add_listener(function(state) states[#states + 1] = state end)
    p:drop()
    helpers.wait_until(function() return states[#states] == "CONNECTED" end, 30,
                       "the reconnection")
    -- a round trip on the new connection: the SetWatches went before it
    assert.are.equal("", (zk:get(ROOT)))
    for _, i in ipairs({ 1, math.floor(N / 2), N }) do writer:create(ROOT .. "/node-with-a-name-" .. i, "") end
    helpers.wait_until(function() return #fired == 3 end, 30, "the three watches")
    table.sort(fired)
    local expected = {}
    for _, i in ipairs({ 1, math.floor(N / 2), N }) do expected[#expected + 1] = ROOT .. "/node-with-a-name-" .. i end
    table.sort(expected)
    assert.are.same(expected, fired)
    assert.are.same({ "SUSPENDED", "CONNECTED" }, states)
    assert.are.equal(session, (zk:client_id()))
  end)
end)
