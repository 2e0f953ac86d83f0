-- Queue (src/recipes/item_queue.c, lua/zklua/recipes/queue.lua) against a real server: one
-- process, zklua consumer processes (spec/fixtures/queue_child.lua) and kazoo processes
-- (spec/fixtures/kazoo_queue.py, Debian's python3-kazoo).
--
-- The fault tests drive the C queue directly (core.item_queue on a client's session) so that
-- a fault lands on a chosen step: a proxy (zklua.testing.proxy) cuts the reply to a chosen
-- request, or the test runs the event loop until the step it wants is in flight, then cuts
-- the client off through a proxy.
local zklua = require "zklua"
local core = require "zklua.core"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"

local ROOT = "/queues"

local raises = helpers.raises
local eventually = helpers.eventually

local function hex(s)
  return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

local function unhex(h)
  return (h:gsub("%x%x", function(x) return string.char(tonumber(x, 16)) end))
end

-- The values of a process's "got <hex>" lines.
local function got_lines(text)
  local values = {}
  for h in text:gmatch("got (%x*)") do values[#values + 1] = unhex(h) end
  return values
end

-- Asserts that lists a and b hold the same values the same number of times.
local function same_multiset(a, b)
  assert.are.same(helpers.sorted(a), helpers.sorted(b))
end

describe("Queue", function()
  local server, a, b, path
  local counter = 0
  local kids = helpers.kids()

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  before_each(function()
    counter = counter + 1
    path = ROOT .. "/t" .. counter
    a, b = helpers.clients(server.hosts, 2)
  end)

  after_each(function()
    kids:cleanup()
    a:close()
    b:close()
    helpers.delete_trees(server.hosts, path)
  end)

  local function drain(q)
    local values = {}
    while true do
      local v = q:get()
      if v == nil then return values end
      values[#values + 1] = v
    end
  end

  describe("order and values", function()
    it("gives items by priority, then first in first out, under kazoo's node names", function()
      local q = a:Queue(path)
      assert.are.equal(0, q:len())
      q:put("p100-first")
      q:put("p5-first", 5)
      q:put("p999", 999)
      q:put("p100-second", 100)
      q:put_all({ "p5-second", "p5-third" }, 5)
      q:put("p0", 0)
      assert.are.equal(7, q:len())
      assert.are.equal(7, q:len())
      for _, name in ipairs(a:get_children(path)) do
        assert.truthy(name:match("^entry%-%d%d%d%-%d%d%d%d%d%d%d%d%d%d$"), name)
      end
      assert.are.same({ "p0", "p5-first", "p5-second", "p5-third", "p100-first",
                        "p100-second", "p999" }, drain(b:Queue(path)))
      assert.is_nil(a:Queue(path):get())
      assert.are.equal(0, q:len())
    end)

    it("keeps values byte for byte, empty and binary ones included", function()
      local q = a:Queue(path)
      local values = { "", "\0", "a\0b\255\254", string.rep("\1\2\3", 1000), "tail" }
      for _, v in ipairs(values) do q:put(v) end
      assert.are.same(values, drain(q))
    end)

    it("put_all is one transaction: its items are consecutive, and all or nothing", function()
      local q, other = a:Queue(path), b:Queue(path)
      local paths = q:put_all({ "a1", "a2", "a3" })
      assert.are.equal(3, #paths)
      other:put("b1")
      q:put_all({ "a4", "a5" })
      assert.are.same({ "a1", "a2", "a3", "b1", "a4", "a5" }, drain(other))
      assert.are.same({}, q:put_all({}))
      -- two values that fit one by one but not in one request: refused, nothing sent
      local big = string.rep("x", 600 * 1024)
      raises(errors.BadArgumentsError, q.put_all, q, { big, big })
      assert.are.equal(0, q:len())
    end)

    it("creates the queue path with its parents", function()
      local q = a:Queue(path .. "/deep/er")
      q:put("x")
      assert.are.same({ "x" }, drain(b:Queue(path .. "/deep/er")))
    end)
  end)

  describe("several consumers", function()
    it("two clients taking in turn get every item once", function()
      local items = {}
      for i = 1, 30 do items[i] = "item-" .. i end
      a:Queue(path):put_all(items)
      local qa, qb = a:Queue(path), b:Queue(path)
      local got = {}
      while true do
        local va, vb = qa:get(), qb:get()
        if va then got[#got + 1] = va end
        if vb then got[#got + 1] = vb end
        if not va and not vb then break end
      end
      same_multiset(items, got)
    end)

    it("four consumer processes draining one queue get every item exactly once", function()
      local items = {}
      for i = 1, 80 do items[i] = string.format("job-%03d-\0\255", i) end
      local q = a:Queue(path)
      q:put_all({ table.unpack(items, 1, 40) })
      q:put_all({ table.unpack(items, 41, 80) }, 7)
      local consumers = {}
      for i = 1, 4 do
        consumers[i] = kids:spawn({ "./zklua", "spec/fixtures/queue_child.lua",
                                    "hosts=" .. server.hosts, "path=" .. path })
      end
      local got = {}
      for _, kid in ipairs(consumers) do
        kid:wait_line("^done", 60)
        assert.is_true(kid:wait_exit(20))
        assert.are.equal(0, kid.status, kid:stderr())
        for _, v in ipairs(got_lines(kid:stdout())) do got[#got + 1] = v end
      end
      same_multiset(items, got)
      assert.are.equal(0, q:len())
    end)
  end)

  describe("connection loss and expiry", function()
    it("a get whose delete reply was lost returns its item, once (at least once)", function()
      -- The client goes through a proxy that lets the get's delete reach the server and
      -- holds back everything after it: the server deletes the entry, the client hears
      -- nothing, gives up on the connection (SUSPENDED) and, the proxy resumed then, sends
      -- the delete again: the entry is gone by then, so the get returns what it read.
      local zk, proxy, states = helpers.client_losing_reply(server:node(1))
      local q = zk:Queue(path)
      q:put("first")
      q:put("second")
      proxy:cut_reply("delete")
      local ud = core.item_queue(zk._session, path)
      assert.is_true(ud:get())
      testing.wait_for(function() return ud:phase() ~= "getting" end, 60, "the get")
      assert.is_true(proxy:status().cut, "the get sent no delete")
      assert.are.equal("SUSPENDED", states[1])
      assert.are.same({ "got", 0 }, { ud:outcome() })
      assert.are.equal("first", ud:value())
      assert.is_true(ud:ambiguous()) -- the retried delete found the entry gone
      assert.are.same({ "second" }, drain(b:Queue(path)))
      zk:close()
      proxy:stop()
    end)

    it("a get started while the server is out of reach waits and goes on (SUSPENDED)", function()
      -- the outage through a fault proxy (refused, connection dropped), not a server restart:
      -- a restart on a loaded machine can outlast the session
      local proxy = testing.proxy(server:node(1))
      local zk = zklua.client{ hosts = proxy.hosts, timeout = 20 }
      finally(function() zk:close(); proxy:stop() end)
      zk:start()
      local q = zk:Queue(path)
      q:put("kept")
      local ud = core.item_queue(zk._session, path)
      local session = zk:client_id()
      proxy:refuse(true)
      proxy:drop()
      testing.wait_for(function() return zk.state == "SUSPENDED" end, 10, "SUSPENDED")
      assert.is_true(ud:get())
      assert.are.equal("getting", ud:phase())
      assert.are.equal(1, #b:get_children(path)) -- still queued
      proxy:refuse(false)
      testing.wait_for(function() return ud:phase() ~= "getting" end, 30, "the get")
      assert.are.equal(session, (zk:client_id()), "the session")
      assert.are.equal("got", (ud:outcome()))
      assert.are.equal("kept", ud:value())
      assert.is_false(ud:ambiguous())
      assert.is_nil(b:Queue(path):get())
    end)

    it("gets go on after a session expiry (LOST): the queue is persistent", function()
      local q = a:Queue(path)
      q:put_all({ "x", "y" })
      assert.are.equal("x", q:get())
      helpers.expire(a)
      testing.wait_for(function() return a.state == "CONNECTED" end, 20, "a new session")
      assert.are.equal("y", q:get())
      assert.is_nil(q:get())
    end)

    it("a get interrupted in its wait hands its item to the next get()", function()
      local q = a:Queue(path)
      q:put_all({ "one", "two" })
      local waits = 0
      local real_wait = a.handler.wait
      a.handler.wait = function(...) -- raises on the first wait, as SIGINT would
        waits = waits + 1
        if waits == 1 then error("interrupted") end
        return real_wait(...)
      end
      local ok, err = pcall(q.get, q)
      a.handler.wait = real_wait
      assert.is_false(ok)
      assert.truthy(tostring(err):find("interrupted", 1, true))
      assert.are.same({ "one", "two" }, drain(q))
    end)

    it("a stopped client's get raises ConnectionClosedError; the item stays", function()
      local q = a:Queue(path)
      q:put("only")
      a:stop()
      raises(errors.ConnectionClosedError, q.get, q)
      a:start()
      assert.are.equal("only", q:get())
    end)
  end)

  describe("kazoo interop", function()
    it("items put by kazoo come out of zklua in kazoo's order", function()
      local kz = kids:kazoo("spec/fixtures/kazoo_queue.py", server.hosts, "queue_put", path,
                            "100", hex("k-100-a"), hex("k-100-b\0\255"))
      kz:wait_line("^put", 30)
      local kz2 = kids:kazoo("spec/fixtures/kazoo_queue.py", server.hosts, "queue_put", path,
                             "3", hex("k-3"))
      kz2:wait_line("^put", 30)
      a:Queue(path):put("z-50", 50)
      assert.are.same({ "k-3", "z-50", "k-100-a", "k-100-b\0\255" }, drain(a:Queue(path)))
    end)

    it("items put by zklua come out of kazoo in order", function()
      local q = a:Queue(path)
      q:put("z-second")
      q:put("z-first\0", 1)
      q:put_all({ "z-third", "z-fourth" }, 500)
      local kz = kids:kazoo("spec/fixtures/kazoo_queue.py", server.hosts, "queue_drain", path)
      kz:wait_line("^done", 30)
      assert.is_true(kz:wait_exit(10))
      assert.are.equal(0, kz.status, kz:stderr())
      assert.are.same({ "z-first\0", "z-second", "z-third", "z-fourth" }, got_lines(kz:stdout()))
      assert.are.equal(0, q:len())
    end)

    it("a kazoo consumer and zklua consumers share a queue: every item once", function()
      local items = {}
      for i = 1, 40 do items[i] = "shared-" .. i end
      a:Queue(path):put_all(items)
      local kz = kids:kazoo("spec/fixtures/kazoo_queue.py", server.hosts, "queue_drain", path)
      local zl = kids:spawn({ "./zklua", "spec/fixtures/queue_child.lua",
                              "hosts=" .. server.hosts, "path=" .. path })
      local mine = drain(b:Queue(path))
      kz:wait_line("^done", 30)
      zl:wait_line("^done", 30)
      local got = {}
      for _, list in ipairs({ mine, got_lines(kz:stdout()), got_lines(zl:stdout()) }) do
        for _, v in ipairs(list) do got[#got + 1] = v end
      end
      same_multiset(items, got)
    end)
  end)

  describe("bad arguments", function()
    it("are refused before anything is sent", function()
      raises(errors.BadArgumentsError, a.Queue, a, "/a/../b")
      raises(errors.BadArgumentsError, a.Queue, a, 42)
      local q = a:Queue(path)
      raises(errors.BadArgumentsError, q.put, q, nil)
      raises(errors.BadArgumentsError, q.put, q, 42)
      raises(errors.BadArgumentsError, q.put, q, "x", -1)
      raises(errors.BadArgumentsError, q.put, q, "x", 1000)
      raises(errors.BadArgumentsError, q.put, q, "x", 1.5)
      raises(errors.BadArgumentsError, q.put, q, "x", "high")
      raises(errors.BadArgumentsError, q.put, q, string.rep("x", 1024 * 1024))
      raises(errors.BadArgumentsError, q.put_all, q, "not a list")
      raises(errors.BadArgumentsError, q.put_all, q, { "a", 2 })
      raises(errors.BadArgumentsError, q.put_all, q, { "a", nil, "c" })
      raises(errors.BadArgumentsError, q.put_all, q, { first = "a" })
      raises(errors.BadArgumentsError, q.put_all, q, { "a" }, 1000)
      local err = raises(errors.BadArgumentsError, q.put, q, "x", 1000)
      assert.are.equal("priority", err.argument)
      assert.is_nil(a:exists(path))
    end)
  end)

  it("a consumer process on a missing queue finds it empty and exits", function()
    local kid = kids:spawn({ "./zklua", "spec/fixtures/queue_child.lua", "hosts=" .. server.hosts,
                             "path=" .. path })
    assert.are.equal("done 0", kid:wait_line("^done", 30))
    eventually(function() return kid:exited() end, 20, "the consumer to exit")
    assert.are.equal(0, kid.status, kid:stderr())
  end)
end)
