-- Party and ShallowParty (src/recipes/party.c, lua/zklua/recipes/party.lua) against a real
-- server: several clients and kazoo child processes (spec/fixtures/kazoo_recipes.py).
local zklua = require "zklua"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"

local ROOT = "/parties"

local expire = helpers.expire
local raises = helpers.raises
local sorted = helpers.sorted

describe("Party", function()
  local server, a, b, path
  local n = 0
  local kids = helpers.kids()

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  before_each(function()
    n = n + 1
    path = ROOT .. "/p" .. n
    a, b = helpers.clients(server.hosts, 2)
  end)

  after_each(function()
    kids:cleanup()
    a:close(); b:close()
    helpers.delete_trees(server.hosts, ROOT)
  end)

  local function kazoo(...)
    return kids:kazoo("spec/fixtures/kazoo_recipes.py", server.hosts, ...)
  end

  it("joins with kazoo's node, lists members, counts them and leaves", function()
    local pa, pb = a:Party(path, "A"), b:Party(path, "B")
    assert.are.equal(0, pa:len())
    assert.are.same({}, pa:members())
    pa:join()
    assert.is_true(pa.participating)
    local names = a:get_children(path)
    assert.are.equal(1, #names)
    assert.truthy(names[1]:match("^%x+__party__$"))
    assert.are.equal(32, #names[1]:match("^(%x+)__"))
    assert.are.equal(pa.node, names[1])
    local data, stat = a:get(pa.create_path)
    assert.are.equal("A", data)
    assert.are.equal(a:client_id(), stat.owner_session_id) -- ephemeral
    pa:join() -- again: nothing changes
    pb:join()
    a:create(path .. "/other", "not a member")
    assert.are.same({ "A", "B" }, sorted(pb:members()))
    assert.are.equal(2, pa:len())
    if not helpers.LUAJIT then assert.are.equal(2, #pa) end -- LuaJIT's # ignores __len
    assert.is_true(pa:leave())
    assert.is_false(pa.participating)
    assert.is_false(pa:leave()) -- nothing to delete
    assert.are.same({ "B" }, pb:members())
  end)

  it("ShallowParty keeps the identifier in the node name", function()
    local sa, sb = a:ShallowParty(path, "host-1"), b:ShallowParty(path, "two")
    sa:join(); sb:join()
    assert.truthy(sa.node:match("^%x+%-host%-1$"))
    assert.are.equal(sa.identifier, "host-1")
    assert.are.same({ "host-1", "two" }, sorted(sa:members()))
    assert.are.equal(2, sb:len())
    if not helpers.LUAJIT then assert.are.equal(2, #sb) end
    assert.is_true(sb:leave())
    assert.are.same({ "host-1" }, sa:members())
  end)

  it("checks its arguments before anything is sent", function()
    raises(errors.BadArgumentsError, a.Party, a, "/a/../b")
    raises(errors.BadArgumentsError, a.Party, a, path, 7)
    raises(errors.BadArgumentsError, a.ShallowParty, a, path, "a/b")
    local p = a:Party(path)
    raises(errors.BadArgumentsError, p.on_lost, p, "nope")
    assert.is_nil(a:exists(path))
  end)

  for _, shallow in ipairs({ false, true }) do
    local class = shallow and "ShallowParty" or "Party"
    it(class .. " members are seen by zklua and kazoo alike", function()
      local k = kazoo("party", path, "kz", shallow and "shallow" or nil)
      assert.truthy(k:wait_line("^joined", 30), k:stderr())
      local pa = a[class](a, path, "zl")
      pa:join()
      local pb = b[class](b, path, "zl2")
      pb:join()
      assert.truthy(k:wait_line("^members kz,zl,zl2$", 30), k:stdout() .. k:stderr())
      assert.are.same({ "kz", "zl", "zl2" }, sorted(pa:members()))
      pb:leave()
      assert.truthy(k:wait_line("^members kz,zl$", 30), k:stdout() .. k:stderr())
      a:create(path .. "-stop", nil, { makepath = true })
      assert.truthy(k:wait_line("^left", 30), k:stderr())
      assert.is_true(k:wait_exit(10))
      testing.wait_for(function() return #pa:members() == 1 end, 10, "kazoo to leave")
      assert.are.same({ "zl" }, pa:members())
    end)
  end

  it("SUSPENDED: a member whose connection drops briefly stays a member", function()
    -- briefly, and through a fault proxy (refused, connection dropped), not a server restart:
    -- a restart on a loaded machine can outlast the session (a connection down for a whole
    -- session timeout is a LOST)
    local proxy = testing.proxy(server:node(1))
    local zk = zklua.client{ hosts = proxy.hosts, timeout = 20 }
    finally(function() zk:close(); proxy:stop() end)
    zk:start()
    local p = zk:Party(path, "S")
    p:join()
    local lost = false
    p:on_lost(function() lost = true end)
    local session = zk:client_id()
    proxy:refuse(true)
    proxy:drop()
    testing.wait_for(function() return zk.state == "SUSPENDED" end, 10, "SUSPENDED")
    assert.is_true(p.participating)
    assert.are.same({ "S" }, a:Party(path):members()) -- the server still has the member
    proxy:refuse(false)
    testing.wait_for(function() return zk.state == "CONNECTED" end, 30, "reconnection")
    assert.are.equal(session, (zk:client_id()), "the session")
    assert.is_true(p.participating)
    assert.is_false(lost)
    assert.are.same({ "S" }, a:Party(path):members())
  end)

  it("LOST: a member is gone after an expiry, on_lost tells, and it may join again", function()
    local p = a:Party(path, "A")
    p:join()
    local calls = {}
    p:on_lost(function(party) calls[#calls + 1] = party end)
    expire(a)
    testing.wait_for(function() return #calls == 1 end, 10, "on_lost")
    assert.are.equal(p, calls[1])
    assert.is_false(p.participating)
    testing.wait_for(function() return a.state == "CONNECTED" end, 20, "the new session")
    assert.are.same({}, b:Party(path):members()) -- not re-joined (kazoo's behaviour)
    p:join()
    assert.are.same({ "A" }, b:Party(path):members())
    assert.are.equal(1, #calls)
  end)

  it("a join started during an expiry completes on the new session", function()
    local p = a:Party(path, "A")
    local ok = false
    a:add_listener(function(state)
      if state == "LOST" and not ok then ok = true end
    end)
    expire(a)
    p:join() -- the new session may still be connecting
    assert.is_true(p.participating)
    assert.are.same({ "A" }, b:Party(path):members())
  end)

  it("stop() while joined runs on_lost; the node goes with the session", function()
    local zk = zklua.client(server.hosts)
    zk:start()
    local p = zk:ShallowParty(path, "x")
    p:join()
    local lost = 0
    p:on_lost(function() lost = lost + 1 end)
    zk:stop()
    testing.wait_for(function() return lost == 1 end, 10, "on_lost")
    assert.is_false(p.participating)
    assert.are.same({}, a:ShallowParty(path):members())
    zk:close()
  end)
end)
