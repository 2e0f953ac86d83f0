-- Counter (src/recipes/counter.c, lua/zklua/recipes/counter.lua) against a real server:
-- several clients, zklua child processes (spec/fixtures/counter_child.lua) and kazoo child
-- processes (spec/fixtures/kazoo_recipes.py, Debian's python3-kazoo).
local zklua = require "zklua"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local child = require "fixtures.child"
local helpers = require "support.helpers"

local ROOT = "/counters"

local expire = helpers.expire
local raises = helpers.raises

describe("Counter", function()
  local server, a, b, path
  local n = 0
  local kids = helpers.kids()

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  before_each(function()
    n = n + 1
    path = ROOT .. "/c" .. n
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

  it("keeps an int counter as kazoo does: '3', pre_value, post_value, + and -", function()
    local c = a:Counter(path)
    assert.are.equal(0, c.value)
    assert.are.equal("", (a:get(path))) -- created with its parents, empty data
    c:add(3)
    assert.are.equal("3", (a:get(path)))
    assert.are.equal(0, c.pre_value)
    assert.are.equal(3, c.post_value)
    c = c + 2
    c = c - 1
    assert.are.equal(4, c.value)
    assert.are.equal(5, c.pre_value)
    assert.are.equal(4, c.post_value)
    assert.is_true(helpers.is_integer(c.value))
    c:sub(10)
    assert.are.equal("-6", (a:get(path)))
    local other = b:Counter(path, 7) -- data present: the default does not matter
    assert.are.equal(-6, other.value)
  end)

  it("keeps a float counter as Python's repr", function()
    -- under LuaJIT 1.0 is an integral number like 1: only opts.float makes a float counter
    local f = helpers.LUAJIT and a:Counter(path, 1.0, { float = true }) or a:Counter(path, 1.0)
    assert.are.equal(1.0, f.value)
    f:add(2.5)
    assert.are.equal("3.5", (a:get(path)))
    f:add(0.5)
    assert.are.equal("4.0", (a:get(path)))
    f:add(2) -- an integer delta is converted
    assert.are.equal("6.0", (a:get(path)))
    if not helpers.LUAJIT then assert.are.equal(math.type(f.value), "float") end
    f:sub(6.1)
    assert.are.equal("-0.09999999999999964", (a:get(path)))
  end)

  it("keeps a curator counter as a 4-byte big-endian int", function()
    local k = a:Counter(path, 0, { support_curator = true })
    assert.are.equal(0, k:get())
    assert.are.equal("\0\0\0\0", (a:get(path))) -- created holding the default (SharedCount's seed)
    local seeded = a:Counter(path .. "s", -3, { support_curator = true })
    assert.are.equal(-3, seeded:get())
    assert.are.equal("\255\255\255\253", (a:get(path .. "s")))
    a:Counter(path .. "p"):get() -- kazoo's layout: created empty, as kazoo does
    assert.are.equal("", (a:get(path .. "p")))
    k:add(5)
    assert.are.equal("\0\0\0\5", (a:get(path)))
    k:sub(7)
    assert.are.equal("\255\255\255\254", (a:get(path)))
    assert.are.equal(-2, k.value)
    a:set(path, "\127\255\255\255")
    raises(errors.BadArgumentsError, k.add, k, 1) -- would not fit in 32 bits
    assert.are.equal("\127\255\255\255", (a:get(path)))
  end)

  it("checks its arguments before anything is sent", function()
    local c = a:Counter(path)
    raises(errors.BadArgumentsError, c.add, c, 1.5) -- kazoo: TypeError
    raises(errors.BadArgumentsError, c.add, c, "1")
    raises(errors.BadArgumentsError, c.sub, c, nil)
    raises(errors.BadArgumentsError, a.Counter, a, "/a/../b")
    raises(errors.BadArgumentsError, a.Counter, a, path, "0")
    raises(errors.BadArgumentsError, a.Counter, a, path, 1.5, { support_curator = true })
    raises(errors.BadArgumentsError, a.Counter, a, path, 0, { bogus = true })
    assert.is_nil(a:exists(path)) -- nothing was sent
    a:create(path, "3.0", { makepath = true })
    raises(errors.KazooException, function() return c.value end) -- int("3.0") fails in Python
    a:set(path, "9223372036854775807") -- the largest 64-bit integer
    raises(errors.BadArgumentsError, c.add, c, 1)
  end)

  it("sums concurrent adds exactly: two clients, a zklua process and two kazoo processes", function()
    a:ensure_path(path)
    local procs = {
      kazoo("counter", path, 100),
      kazoo("counter", path, 100),
    }
    local z = child.spawn(helpers.lua_argv("spec/fixtures/counter_child.lua", server.hosts, path, 100))
    kids[#kids + 1] = z
    procs[#procs + 1] = z
    for _, p in ipairs(procs) do assert.truthy(p:wait_line("^ready", 30), p:stderr()) end
    a:create(path .. "-go")
    local ca, cb = a:Counter(path), b:Counter(path)
    for _ = 1, 50 do ca:add(1); cb:add(1) end
    for _, p in ipairs(procs) do
      assert.truthy(p:wait_line("^done", 60), p:stderr())
      assert.is_true(p:wait_exit(10))
      assert.are.equal(0, p.status, p:stderr())
    end
    assert.are.equal(400, ca.value)
    assert.are.equal("400", (a:get(path)))
    local v = kazoo("counter_value", path)
    assert.truthy(v:wait_line("^value 400$", 30), v:stdout() .. v:stderr())
  end)

  it("reads what kazoo wrote, float and curator too", function()
    local p = kazoo("counter", path, 3, "float")
    p:wait_line("^ready", 30)
    a:create(path .. "-go", nil, { makepath = true })
    assert.truthy(p:wait_line("^done 4.5", 30), p:stderr())
    local f = a:Counter(path, 0.0, helpers.LUAJIT and { float = true } or nil)
    assert.are.equal(4.5, f.value)
    f:add(0.25)
    local v = kazoo("counter_value", path, "float")
    assert.truthy(v:wait_line("^value 4.75$", 30), v:stdout() .. v:stderr())
    local k = a:Counter(path .. "k", 0, { support_curator = true })
    k:add(41)
    local kv = kazoo("counter_value", path .. "k", "curator")
    assert.truthy(kv:wait_line("^value 41$", 30), kv:stdout() .. kv:stderr())
  end)

  it("SUSPENDED: an add waits for the reconnection and applies once", function()
    local zk = zklua.client{ hosts = server.hosts, timeout = 4 }
    zk:start()
    local c = zk:Counter(path)
    c:add(10)
    local node = server:node(1)
    local states = {}
    zk:add_listener(function(state)
      states[#states + 1] = state
      if state == "SUSPENDED" then node:resume() end
    end)
    node:pause()
    c:add(1) -- sent to a frozen server: the connection times out, then comes back
    assert.are.equal("SUSPENDED", states[1])
    assert.are.equal(11, c.post_value)
    assert.are.equal("11", (a:get(path)))
    zk:close()
  end)

  it("an add whose set reply was lost applies once", function()
    -- Through a proxy that lets the set reach the server and holds back everything after
    -- it: the server applies it, the client hears nothing, gives up on the connection
    -- (SUSPENDED, the proxy resumes then) and must not add again.
    local zk, proxy, states = helpers.client_losing_reply(server:node(1))
    local c = zk:Counter(path)
    c:add(10)
    proxy:cut_reply("set")
    c:add(1)
    assert.is_true(proxy:status().cut, "the add sent no set")
    assert.are.equal("SUSPENDED", states[1])
    assert.are.equal(11, c.post_value)
    assert.are.equal("11", (a:get(path)))
    zk:close()
    proxy:stop()
  end)

  it("LOST: an add after an expiry goes on the new session; the value survives", function()
    local c = a:Counter(path)
    c:add(5)
    local lost = false
    a:add_listener(function(state) if state == "LOST" then lost = true end end)
    expire(a)
    assert.is_true(lost)
    c:add(1) -- started while the new session may still be connecting
    assert.are.equal(6, c.value)
    assert.are.equal(6, b:Counter(path).value)
  end)

  it("stop() during an add (waiting for a reconnection) raises ConnectionClosedError", function()
    local zk = zklua.client{ hosts = server.hosts, timeout = 4 }
    zk:start()
    local c = zk:Counter(path)
    c:add(1)
    local node = server:node(1)
    zk:add_listener(function(state)
      if state == "SUSPENDED" then zk:stop() end
    end)
    node:pause()
    local ok, err = pcall(c.add, c, 1)
    node:resume()
    assert.is_false(ok)
    assert.is_true(errors.is(err, errors.ConnectionClosedError), tostring(err))
    zk:close()
  end)
end)
