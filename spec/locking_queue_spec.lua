-- LockingQueue (src/recipes/locking_queue.c, lua/zklua/recipes/queue.lua) against a real
-- server: several clients in one process, zklua consumer processes
-- (spec/fixtures/queue_child.lua) and kazoo processes (spec/fixtures/kazoo_queue.py).
--
-- The fault tests drive the C queue directly (core.locking_queue on a client's session) so
-- that a fault lands on a chosen step: a proxy (zklua.testing.proxy) cuts the reply to the
-- step's request, or the test runs the event loop until that step is in flight (or
-- waiting), then cuts the client off through a proxy or expires the session.
local zklua = require "zklua"
local core = require "zklua.core"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"

local ROOT = "/locking-queues"

local raises = helpers.raises
local eventually = helpers.eventually
local expire = helpers.expire

local function hex(s)
  return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

local function unhex(h)
  return (h:gsub("%x%x", function(x) return string.char(tonumber(x, 16)) end))
end

local function got_lines(text)
  local values = {}
  for h in text:gmatch("got (%x*)") do values[#values + 1] = unhex(h) end
  return values
end

local function same_multiset(a, b)
  assert.are.same(helpers.sorted(a), helpers.sorted(b))
end


describe("LockingQueue", function()
  local server, a, b, c, path
  local counter = 0
  local kids = helpers.kids()

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  before_each(function()
    counter = counter + 1
    path = ROOT .. "/t" .. counter
    a, b, c = helpers.clients(server.hosts, 3)
  end)

  after_each(function()
    kids:cleanup()
    for _, zk in ipairs({ a, b, c }) do zk:close() end
    helpers.delete_trees(server.hosts, path)
  end)

  local function entries() return c:get_children(path .. "/entries") end
  local function claims() return c:get_children(path .. "/taken") end

  -- get + consume until nothing is available; returns the values.
  local function drain(q)
    local values = {}
    while true do
      local v = q:get(0)
      if v == nil then return values end
      assert.is_true(q:consume())
      values[#values + 1] = v
    end
  end

  describe("claiming and consuming", function()
    it("claims by priority then first in first out, with kazoo's nodes", function()
      local q = a:LockingQueue(path)
      q:put("p100")
      q:put("p1", 1)
      q:put_all({ "p50-a", "p50-b" }, 50)
      assert.are.equal(4, q:len())
      for _, name in ipairs(entries()) do
        assert.truthy(name:match("^entry%-%d%d%d%-%d%d%d%d%d%d%d%d%d%d$"), name)
      end
      assert.are.equal("p1", q:get())
      local claim = claims()[1]
      assert.are.equal(helpers.sorted(entries())[1], claim)
      local data, stat = c:get(path .. "/taken/" .. claim)
      assert.are.equal(q.id, data)
      assert.truthy(q.id:match("^%x+$") and #q.id == 32)
      assert.are.equal(a:client_id(), stat.owner_session_id) -- ephemeral, ours
      assert.are.equal("p1", q:get()) -- held: the same item again (as kazoo)
      assert.is_true(q:holds_lock())
      assert.is_true(q:consume())
      assert.is_false(q:holds_lock())
      assert.are.same({}, claims())
      assert.are.equal(3, q:len())
      assert.are.same({ "p50-a", "p50-b", "p100" }, drain(b:LockingQueue(path)))
    end)

    it("two consumers never hold one item; release hands it back", function()
      local qa, qb = a:LockingQueue(path), b:LockingQueue(path)
      qa:put_all({ "x", "y" })
      assert.are.equal("x", qa:get())
      assert.are.equal("y", qb:get())
      assert.is_nil(c:LockingQueue(path):get(0)) -- both claimed
      assert.are.equal(2, qa:len()) -- claimed items still count (as kazoo)
      assert.is_true(qa:release())
      assert.is_false(qa:release())
      assert.is_false(qa:consume())
      assert.are.equal("x", c:LockingQueue(path):get(0))
      assert.is_true(qb:consume())
    end)

    it("get(timeout) gives nil when nothing comes, leaving no claim", function()
      local q = a:LockingQueue(path)
      assert.is_nil(q:get(0.3))
      assert.is_nil(q:get(0))
      assert.are.same({}, claims())
      q:put("now")
      assert.are.equal("now", q:get(0)) -- the first look always completes
    end)

    it("a get waiting on an empty queue takes an item put by a kazoo process", function()
      local q = a:LockingQueue(path)
      q:put("first")
      assert.are.equal("first", q:get())
      assert.is_true(q:consume())
      local kz = kids:kazoo("spec/fixtures/kazoo_queue.py", server.hosts, "locking_put_all",
                            path, "100", hex("from kazoo\0"))
      assert.are.equal("from kazoo\0", q:get(60))
      assert.is_true(q:consume())
      kz:wait_line("^put", 30)
    end)

    it("put_all is one transaction: all or nothing", function()
      local q = a:LockingQueue(path)
      q:put_all({ "a", "b", "c", "d", "e", "f" }, 3)
      q:put("g", 3)
      assert.are.same({ "a", "b", "c", "d", "e", "f", "g" }, drain(q))
      local big = string.rep("x", 600 * 1024)
      raises(errors.BadArgumentsError, q.put_all, q, { big, big })
      assert.are.equal(0, q:len())
    end)

    it("holds_lock() is false once the claim is gone, and consume() then gives false", function()
      local q = a:LockingQueue(path)
      q:put("item")
      assert.are.equal("item", q:get())
      c:delete(path .. "/taken/" .. claims()[1]) -- someone removed our claim
      assert.is_false(q:holds_lock())
      assert.is_false(q:consume())
      assert.are.same({ "item" }, drain(b:LockingQueue(path))) -- still in the queue
    end)
  end)

  describe("several consumers", function()
    it("four consumer processes get every item exactly once", function()
      local items = {}
      for i = 1, 60 do items[i] = string.format("task-%02d\0\255", i) end
      local q = a:LockingQueue(path)
      q:put_all({ table.unpack(items, 1, 30) })
      q:put_all({ table.unpack(items, 31, 60) }, 10)
      local consumers = {}
      for i = 1, 4 do
        consumers[i] = kids:spawn({ "./zklua", "spec/fixtures/queue_child.lua",
                                    "hosts=" .. server.hosts, "path=" .. path,
                                    "kind=LockingQueue" })
      end
      local got = {}
      for _, kid in ipairs(consumers) do
        kid:wait_line("^done", 90)
        assert.is_true(kid:wait_exit(20))
        assert.are.equal(0, kid.status, kid:stderr())
        for _, v in ipairs(got_lines(kid:stdout())) do got[#got + 1] = v end
      end
      same_multiset(items, got)
      assert.are.equal(0, q:len())
      assert.are.same({}, claims())
    end)

    it("kill -9 of a holder process frees its item after its session timeout", function()
      local q = a:LockingQueue(path)
      q:put("held by the dead")
      local kid = kids:spawn({ "./zklua", "spec/fixtures/queue_child.lua",
                               "hosts=" .. server.hosts, "path=" .. path,
                               "kind=LockingQueue", "mode=hold", "timeout=2" })
      assert.are.equal("holding " .. hex("held by the dead"), kid:wait_line("^holding", 30))
      assert.is_nil(q:get(0)) -- claimed by the process
      kid:signal("KILL")
      assert.are.equal("held by the dead", q:get(60))
      assert.is_true(q:consume())
      assert.is_true(kid:wait_exit(5))
    end)
  end)

  describe("connection loss and expiry", function()
    it("session expiry of a holder frees its item for another consumer; on_lost runs", function()
      local qa, qb = a:LockingQueue(path), b:LockingQueue(path)
      qa:put("precious")
      assert.are.equal("precious", qa:get())
      local lost = {}
      qa:on_lost(function(q) lost[#lost + 1] = q end)
      assert.is_nil(qb:get(0))
      expire(a)
      testing.wait_for(function() return #lost == 1 end, 10, "on_lost")
      assert.are.equal(qa, lost[1])
      assert.are.equal("precious", qb:get(30))
      testing.wait_for(function() return a.state == "CONNECTED" end, 20, "a new session")
      assert.is_false(qa:holds_lock())
      assert.is_false(qa:consume())
      assert.is_nil(qa:get(0)) -- claims afresh: qb holds the only item
      assert.is_true(qb:consume())
      assert.are.equal(0, qa:len())
    end)

    it("a get waiting on an empty queue survives SUSPENDED", function()
      -- the outage through a proxy (refused, connection dropped), not a server restart: a
      -- restart on a loaded machine can outlast the session
      local p = testing.proxy(server:node(1))
      finally(function() p:stop() end)
      a:close()
      a = zklua.client{ hosts = p.hosts, timeout = 20 }
      a:start()
      local ud = core.locking_queue(a._session, path)
      a:ensure_path(path .. "/entries")
      a:ensure_path(path .. "/taken")
      assert.is_true(ud:get())
      testing.wait_for(function() return ud:waiting() end, 10, "the get to wait")
      local session = a:client_id()
      p:refuse(true)
      p:drop()
      testing.wait_for(function() return a.state == "SUSPENDED" end, 10, "SUSPENDED")
      assert.are.equal("getting", ud:phase())
      p:refuse(false)
      testing.wait_for(function() return a.state == "CONNECTED" end, 30, "reconnection")
      assert.are.equal(session, (a:client_id()), "the session")
      assert.are.equal("getting", ud:phase())
      b:LockingQueue(path):put("after the outage")
      testing.wait_for(function() return ud:phase() ~= "getting" end, 30, "the claim")
      assert.are.equal("holding", ud:phase())
      assert.are.equal("after the outage", ud:value())
    end)

    it("a get waiting on an empty queue starts again after LOST", function()
      local ud = core.locking_queue(a._session, path)
      a:ensure_path(path .. "/entries")
      a:ensure_path(path .. "/taken")
      assert.is_true(ud:get())
      testing.wait_for(function() return ud:waiting() end, 10, "the get to wait")
      expire(a)
      testing.wait_for(function() return a.state == "CONNECTED" end, 20, "a new session")
      testing.wait_for(function() return ud:waiting() end, 10, "the get to wait again")
      b:LockingQueue(path):put("after the expiry")
      testing.wait_for(function() return ud:phase() ~= "getting" end, 30, "the claim")
      assert.are.equal("after the expiry", ud:value())
      local data, stat = c:get(path .. "/taken/" .. claims()[1])
      assert.are.equal(ud:owner_id(), data)
      assert.are.equal(a:client_id(), stat.owner_session_id) -- made on the new session
    end)

    -- A client through a proxy that lets the request of `opcode` reach the server and holds
    -- back everything after it: the client gives up on the connection (SUSPENDED), and the
    -- proxy resumes then.  Returns the client, its proxy and the states it went through.
    local function client_losing_reply()
      return helpers.client_losing_reply(server:node(1))
    end

    it("a claim whose create reply was lost is adopted, not duplicated", function()
      local zk, proxy, states = client_losing_reply()
      local q = zk:LockingQueue(path)
      q:put("adopt me")
      q:put("second")
      local ud = core.locking_queue(zk._session, path)
      proxy:cut_reply("create") -- the claim reaches the server, its reply does not come back
      assert.is_true(ud:get())
      testing.wait_for(function() return ud:phase() ~= "getting" end, 60, "the claim")
      assert.is_true(proxy:status().cut, "the get sent no create")
      assert.are.equal("SUSPENDED", states[1])
      assert.are.equal("holding", ud:phase())
      assert.are.equal("adopt me", ud:value())
      local taken = claims()
      assert.are.equal(1, #taken)
      assert.are.equal(ud:owner_id(), (c:get(path .. "/taken/" .. taken[1])))
      assert.are.same({ "second" }, drain(b:LockingQueue(path)))
      zk:close()
      proxy:stop()
    end)

    it("a consume whose reply was lost counts as done when the item is gone", function()
      local zk, proxy, states = client_losing_reply()
      local q = zk:LockingQueue(path)
      q:put("consume me")
      q:put("second")
      local ud = core.locking_queue(zk._session, path)
      assert.is_true(ud:get())
      testing.wait_for(function() return ud:phase() == "holding" end, 10, "the claim")
      proxy:cut_reply("multi") -- the consume's transaction runs; its reply does not come back
      assert.is_true(ud:consume())
      testing.wait_for(function() return ud:phase() ~= "consuming" end, 60, "the consume")
      assert.is_true(proxy:status().cut, "the consume sent no transaction")
      assert.are.equal("SUSPENDED", states[1])
      assert.are.same({ "consumed", 0 }, { ud:outcome() })
      assert.are.equal(1, #entries())
      assert.are.same({}, claims())
      assert.are.same({ "second" }, drain(b:LockingQueue(path)))
      zk:close()
      proxy:stop()
    end)

    it("a holder whose server is out of reach briefly keeps its item (SUSPENDED)", function()
      -- the outage through a proxy (refused, connection dropped), not a server restart: a
      -- restart on a loaded machine can outlast the session (a loaded run lost it so)
      local p = testing.proxy(server:node(1))
      local holder = zklua.client{ hosts = p.hosts, timeout = 10 }
      holder:start()
      local q = holder:LockingQueue(path)
      q:put("kept")
      assert.are.equal("kept", q:get())
      local lost = false
      q:on_lost(function() lost = true end)
      local session = holder:client_id()
      p:refuse(true)
      p:drop()
      testing.wait_for(function() return holder.state == "SUSPENDED" end, 10, "SUSPENDED")
      p:refuse(false)
      testing.wait_for(function() return holder.state == "CONNECTED" end, 15, "reconnection")
      assert.are.equal(session, (holder:client_id()), "the session")
      assert.is_false(lost)
      assert.is_true(q:holds_lock())
      assert.is_nil(b:LockingQueue(path):get(0))
      assert.is_true(q:consume())
      holder:close()
      p:stop()
    end)

    it("stop() while holding is a LOST: on_lost runs, the item stays in the queue", function()
      local q = a:LockingQueue(path)
      q:put("item")
      assert.are.equal("item", q:get())
      local lost = 0
      q:on_lost(function() lost = lost + 1 end)
      a:stop()
      assert.are.equal(1, lost)
      raises(errors.ConnectionClosedError, q.get, q)
      assert.are.equal("item", b:LockingQueue(path):get(10))
    end)

    it("a get that times out while claiming drops its claim (no claim left behind)", function()
      local q = a:LockingQueue(path)
      q:put_all({ "1", "2", "3" })
      -- the claimed entry's read reaches the server and its reply is held back, so the get
      -- stays in its read step (for 20 s: the client's read timeout) until resume()
      local proxy = testing.proxy(server:node(1))
      local zk = zklua.client{ hosts = proxy.hosts, timeout = 30 }
      zk:start()
      local ud = core.locking_queue(zk._session, path)
      proxy:cut_reply("get")
      assert.is_true(ud:get())
      testing.wait_for(function() return proxy:status().cut end, 10, "the read")
      assert.are.equal("read", ud:step())
      ud:give_up()
      assert.are.equal("abandoning", ud:phase())
      proxy:resume()
      testing.wait_for(function() return ud:phase() == "idle" end, 10, "the clean-up")
      assert.are.equal("gave_up", (ud:outcome()))
      assert.are.same({}, claims())
      assert.are.same({ "1", "2", "3" }, drain(q))
      zk:close()
      proxy:stop()
    end)

    it("a queue collected during its get drops its claim in the background", function()
      local q = a:LockingQueue(path)
      q:put("x")
      -- as above: the get is held in its read step until resume(), so that it is collected
      -- while claiming
      local proxy = testing.proxy(server:node(1))
      local zk = zklua.client{ hosts = proxy.hosts, timeout = 30 }
      zk:start()
      local function start_get_and_drop()
        local ud = core.locking_queue(zk._session, path)
        proxy:cut_reply("get")
        assert.is_true(ud:get())
        testing.wait_for(function() return proxy:status().cut end, 10, "the read")
        assert.are.equal("read", ud:step())
      end
      start_get_and_drop()
      -- LuaJIT's compiled traces hold the objects they were recorded with (the ud, in the
      -- wait above) until flushed
      if jit then jit.flush() end
      collectgarbage()
      collectgarbage()
      proxy:resume()
      eventually(function()
        collectgarbage()
        return #claims() == 0
      end, 10, "the orphan's clean-up")
      assert.are.same({ "x" }, drain(q))
      zk:close()
      proxy:stop()
    end)
  end)

  describe("kazoo interop", function()
    it("items put by kazoo are claimed and consumed by zklua, in order", function()
      local kz = kids:kazoo("spec/fixtures/kazoo_queue.py", server.hosts, "locking_put_all",
                            path, "100", hex("k1"), hex("k2\0\255"), hex("k3"))
      kz:wait_line("^put", 30)
      a:LockingQueue(path):put("z0", 0)
      assert.are.same({ "z0", "k1", "k2\0\255", "k3" }, drain(a:LockingQueue(path)))
    end)

    it("items put by zklua are claimed and consumed by kazoo", function()
      local q = a:LockingQueue(path)
      q:put_all({ "z1", "z2\0" })
      q:put("z0", 0)
      local kz = kids:kazoo("spec/fixtures/kazoo_queue.py", server.hosts, "locking_drain", path)
      kz:wait_line("^done", 60)
      assert.is_true(kz:wait_exit(10))
      assert.are.equal(0, kz.status, kz:stderr())
      assert.are.same({ "z0", "z1", "z2\0" }, got_lines(kz:stdout()))
      assert.are.equal(0, q:len())
      assert.are.same({}, claims())
    end)

    it("a kazoo holder's claim keeps zklua off the item until kazoo releases it", function()
      local q = a:LockingQueue(path)
      q:put("contested")
      local kz = kids:kazoo("spec/fixtures/kazoo_queue.py", server.hosts, "locking_hold", path,
                            path .. "-release")
      kz:wait_line("^holding", 30)
      assert.is_nil(q:get(0))
      b:create(path .. "-release", "")
      assert.are.equal("contested", q:get(30))
      assert.is_true(q:consume())
      kz:wait_line("^released True", 30)
      b:delete(path .. "-release")
    end)
  end)

  describe("bad arguments", function()
    it("are refused before anything is sent", function()
      raises(errors.BadArgumentsError, a.LockingQueue, a, "/a/../b")
      raises(errors.BadArgumentsError, a.LockingQueue, a, nil)
      local q = a:LockingQueue(path)
      raises(errors.BadArgumentsError, q.put, q, nil)
      raises(errors.BadArgumentsError, q.put, q, {})
      raises(errors.BadArgumentsError, q.put, q, "x", 1000)
      raises(errors.BadArgumentsError, q.put, q, "x", 2.5)
      raises(errors.BadArgumentsError, q.put_all, q, "x")
      raises(errors.BadArgumentsError, q.put_all, q, { "x", false })
      raises(errors.BadArgumentsError, q.put_all, q, { "x" }, -1)
      raises(errors.BadArgumentsError, q.get, q, -1)
      raises(errors.BadArgumentsError, q.get, q, "soon")
      raises(errors.BadArgumentsError, q.get, q, 0 / 0)
      raises(errors.BadArgumentsError, q.on_lost, q, "not a function")
      assert.is_nil(a:exists(path))
    end)
  end)
end)
