-- create's container and ttl options (ZooKeeper 3.5+ node modes) against a real server that
-- zklua.testing starts with extendedTypesEnabled and a half-second container check: the
-- server, not zklua, deletes an empty container and a TTL node once its time is up.  Each
-- deletion is waited for (the server is asked every 50 ms), and a control node beside it,
-- that the server must keep, shows the deletion is the mode's doing.
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"

local ROOT = "/node-modes"

describe("create's node modes", function()
  local server, zk

  setup(function()
    server = testing.server()
    zk = helpers.client(server.hosts, ROOT)
  end)
  teardown(function()
    helpers.drop(zk, ROOT)
    server:stop()
  end)

  local function gone(path)
    return function() return zk:exists(path) == nil end
  end

  it("a container goes once its last child went; a plain node stays", function()
    local box, plain = ROOT .. "/box", ROOT .. "/plain"
    assert.equals(box, zk:create(box, "x", { container = true }))
    zk:create(plain, "y")
    zk:create(box .. "/child")
    zk:create(plain .. "/child")
    local data = zk:get(box)
    assert.equals("x", data)
    zk:delete(box .. "/child")
    zk:delete(plain .. "/child")
    testing.wait_for(gone(box), 30, "the empty container to be deleted")
    assert.is_not_nil(zk:exists(plain))
    zk:delete(plain)
  end)

  it("a container that never had a child is kept", function()
    local never, box = ROOT .. "/never", ROOT .. "/box2"
    zk:create(never, "", { container = true })
    zk:create(box, "", { container = true })
    zk:create(box .. "/child")
    zk:delete(box .. "/child")
    testing.wait_for(gone(box), 30, "the emptied container to be deleted")
    assert.is_not_nil(zk:exists(never))
    zk:delete(never)
  end)

  it("a TTL node goes after its ttl; a longer-lived one stays; sequence and stat work", function()
    local short, long = ROOT .. "/short", ROOT .. "/long"
    local created, stat = zk:create(short, "s", { ttl = 300, include_data = true })
    assert.equals(short, created)
    assert.equals(1, stat.dataLength)
    zk:create(long, "l", { ttl = 3600 * 1000 })
    local seq = zk:create_async(ROOT .. "/seq-", "q", { ttl = 300, sequence = true }):get()
    assert.matches("^/node%-modes/seq%-%d%d%d%d%d%d%d%d%d%d$", seq)
    testing.wait_for(gone(short), 30, "the TTL node to be deleted")
    testing.wait_for(gone(seq), 30, "the sequential TTL node to be deleted")
    assert.is_not_nil(zk:exists(long))
    zk:delete(long)
  end)

  it("a TTL node with a child is kept while the child lives", function()
    local parent = ROOT .. "/ttl-parent"
    zk:create(parent, "", { ttl = 200 })
    zk:create(parent .. "/child")
    local control = ROOT .. "/ttl-control"
    zk:create(control, "", { ttl = 200 })
    testing.wait_for(gone(control), 30, "the childless TTL node to be deleted")
    assert.is_not_nil(zk:exists(parent))
    zk:delete(parent .. "/child")
    testing.wait_for(gone(parent), 30, "the TTL node to be deleted once childless")
  end)

  it("makepath makes plain parents under a container or a TTL node", function()
    local deep = ROOT .. "/a/b/c"
    assert.equals(deep, zk:create(deep, "", { container = true, makepath = true }))
    assert.is_not_nil(zk:exists(ROOT .. "/a/b"))
    zk:delete(ROOT .. "/a", nil, true)
  end)

  describe("bad input is refused before anything is sent", function()
    local cases = {
      { { container = true, ephemeral = true }, "container node cannot be ephemeral" },
      { { container = true, sequence = true }, "container node cannot be ephemeral, sequential" },
      { { container = true, ttl = 100 }, "or have a ttl" },
      { { container = "yes" }, "option 'container' must be a boolean" },
      { { ttl = 0 }, "option 'ttl' must be a whole number of milliseconds from 1" },
      { { ttl = -5 }, "option 'ttl' must be a whole number" },
      { { ttl = 1.5 }, "option 'ttl' must be a whole number" },
      { { ttl = 0 / 0 }, "option 'ttl' must be a whole number" },
      { { ttl = 2 ^ 40 }, "option 'ttl' must be a whole number" },
      { { ttl = "100" }, "option 'ttl' must be a number" },
      { { ttl = 100, ephemeral = true }, "an ephemeral node cannot have a ttl" },
    }
    for i, case in ipairs(cases) do
      it("case " .. i .. ": " .. case[2], function()
        for _, call in ipairs({ zk.create, zk.create_async }) do
          local err = helpers.raises(errors.BadArgumentsError, call, zk, ROOT .. "/bad", "", case[1])
          assert.matches(case[2], tostring(err), 1, true)
        end
        assert.is_nil(zk:exists(ROOT .. "/bad"))
      end)
    end
  end)
end)
