-- The order a client tries its servers in (kazoo's randomize_hosts), and set_hosts: with
-- randomize_hosts = false the client connects to the first server that answers, in the order
-- given; by default each client takes its own random order, so clients spread over the
-- servers.  After set_hosts the client reconnects within the new list.  Two
-- standalone servers stand in for an ensemble's nodes (only where a client connects matters).
local zklua = require "zklua"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"

describe("host order", function()
  local a, b

  setup(function()
    a = testing.server()
    b = testing.server()
  end)
  teardown(function()
    a:stop()
    b:stop()
  end)

  -- The port of the server zk is connected to.
  local function port_of(zk)
    return tonumber(zk._session:current_server():match(":(%d+)$"))
  end

  it("connects in the order given with randomize_hosts = false", function()
    for _ = 1, 5 do
      local zk = zklua.client{ hosts = a.hosts .. "," .. b.hosts, randomize_hosts = false }
      zk:start()
      assert.are.equal(a:node(1).port, port_of(zk))
      zk:close()
      zk = zklua.client{ hosts = b.hosts .. "," .. a.hosts, randomize_hosts = false }
      zk:start()
      assert.are.equal(b:node(1).port, port_of(zk))
      zk:close()
    end
  end)

  it("spreads clients over the servers by default", function()
    local seen = {}
    for _ = 1, 24 do -- all 24 on one server: a chance of 2 in 2^24
      local zk = zklua.client(a.hosts .. "," .. b.hosts)
      zk:start()
      seen[port_of(zk)] = true
      zk:close()
    end
    assert.is_true(seen[a:node(1).port] and seen[b:node(1).port])
  end)

  it("set_hosts: the client reconnects within its new list", function()
    local zk = zklua.client{ hosts = a.hosts, randomize_hosts = false }
    zk:start()
    assert.are.equal(a:node(1).port, port_of(zk))
    zk:set_hosts(b.hosts)
    assert.are.same({ { "127.0.0.1", b:node(1).port } }, zk.hosts)
    -- libzookeeper may keep the live connection (3.8.0 does here, where every server is
    -- 127.0.0.1); the next one is made within the new list.  a and b are separate servers,
    -- so the session cannot follow: a new one starts on b.
    local ok, err = pcall(function()
      a:node(1):stop()
      testing.wait_for(function()
        return zk.client_state == "CONNECTED" and port_of(zk) == b:node(1).port
      end, 30, "a connection to the new server")
      assert.are.equal("imok", zk:command("ruok"))
    end)
    a:node(1):start()
    if not ok then error(err, 0) end
    helpers.raises(errors.ConfigurationError, zk.set_hosts, zk, b.hosts .. "/other")
    helpers.raises(errors.BadArgumentsError, zk.set_hosts, zk, 42)
    zk:close()
    helpers.raises(errors.ConnectionClosedError, zk.set_hosts, zk, a.hosts)
  end)

end)
