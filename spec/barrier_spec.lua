-- Barrier and DoubleBarrier (src/recipes/barrier.c, lua/zklua/recipes/barrier.lua) against a
-- real server: several clients and kazoo child processes (spec/fixtures/kazoo_recipes.py).
--
-- A wait blocks its thread, so whatever must happen WHILE it waits runs from a callback: a
-- one-shot exists watch on a trigger node that an async create fires once the wait runs.
local zklua = require "zklua"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"

local ROOT = "/barriers"

local expire = helpers.expire
local raises = helpers.raises

describe("Barrier", function()
  local server, a, b, path
  local n = 0
  local kids = helpers.kids()

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  before_each(function()
    n = n + 1
    path = ROOT .. "/b" .. n
    a, b = helpers.clients(server.hosts, 2)
    b:ensure_path(ROOT)
  end)

  after_each(function()
    kids:cleanup()
    a:close(); b:close()
    helpers.delete_trees(server.hosts, ROOT)
  end)

  local function kazoo(...)
    return kids:kazoo("spec/fixtures/kazoo_recipes.py", server.hosts, ...)
  end

  -- Runs fn (on b) once a wait is under way: b creates a trigger node asynchronously and its
  -- exists watch fires when the server has made it.
  local function soon(fn)
    local trigger = path .. "-trigger" .. math.random(1e9)
    b:exists(trigger, function() fn() end)
    b:create_async(trigger)
  end

  it("create, wait until removed, remove", function()
    local bar = a:Barrier(path)
    assert.is_true(bar:wait(1)) -- no barrier: passes at once
    bar:create()
    assert.is_table(a:exists(path))
    assert.is_false(bar:wait(0.3)) -- still up
    soon(function() b:delete_async(path) end)
    assert.is_true(bar:wait(10))
    assert.is_false(bar:remove())
    bar:create()
    soon(function() b:set_async(path, "changed") end) -- a change is not a removal
    assert.is_false(bar:wait(0.5))
    assert.is_true(bar:remove())
    assert.is_true(bar:wait())
  end)

  it("checks its arguments before anything is sent", function()
    raises(errors.BadArgumentsError, a.Barrier, a, "/a/../b")
    local bar = a:Barrier(path)
    raises(errors.BadArgumentsError, bar.wait, bar, -1)
    raises(errors.BadArgumentsError, a.DoubleBarrier, a, path, 0)
    raises(errors.BadArgumentsError, a.DoubleBarrier, a, path, 1.5)
    raises(errors.BadArgumentsError, a.DoubleBarrier, a, path, 2, 7)
    local d = a:DoubleBarrier(path, 2)
    raises(errors.BadArgumentsError, d.enter, d, "soon")
    assert.is_nil(a:exists(path))
  end)

  it("SUSPENDED: a wait goes on through a disconnection", function()
    local zk = zklua.client{ hosts = server.hosts, timeout = 4 }
    zk:start()
    local bar = zk:Barrier(path)
    bar:create()
    local node = server:node(1)
    local states = {}
    zk:add_listener(function(state)
      states[#states + 1] = state
      if state == "SUSPENDED" then node:resume()
      elseif state == "CONNECTED" then b:delete_async(path) end
    end)
    node:pause()
    assert.is_true(bar:wait(30))
    assert.are.same({ "SUSPENDED", "CONNECTED" }, { states[1], states[2] })
    zk:close()
  end)

  it("LOST: a wait watches again on the new session", function()
    local bar = a:Barrier(path)
    bar:create()
    expire(a)
    soon(function() b:delete_async(path) end)
    assert.is_true(bar:wait(30))
  end)

  describe("DoubleBarrier", function()
    it("enters and leaves with two kazoo members (kazoo's nodes and ready)", function()
      local k1 = kazoo("double_barrier", path, 3, "k1")
      local k2 = kazoo("double_barrier", path, 3, "k2")
      testing.wait_for(function()
        local ok, list = pcall(a.get_children, a, path)
        return ok and #list == 2
      end, 30, "the kazoo members")
      assert.is_nil(k1:stdout():match("entered"))
      local d = a:DoubleBarrier(path, 3, "zl")
      assert.is_true(d:enter(30))
      assert.is_true(d.participating)
      assert.is_table(a:exists(path .. "/ready"))
      local data, stat = a:get(d.create_path)
      assert.are.equal("zl", data)
      assert.are.equal(a:client_id(), stat.owner_session_id)
      assert.truthy(d.node_name:match("^%x+$") and #d.node_name == 32)
      assert.truthy(k1:wait_line("^entered", 30), k1:stderr())
      assert.truthy(k2:wait_line("^entered", 30), k2:stderr())
      a:create(path .. "-leave")
      assert.is_true(d:leave(30))
      assert.is_false(d.participating)
      assert.truthy(k1:wait_line("^left", 30), k1:stderr())
      assert.truthy(k2:wait_line("^left", 30), k2:stderr())
      assert.are.same({}, a:get_children(path))
    end)

    it("a kazoo member enters after zklua waited for it; leave waits for everyone", function()
      local d = a:DoubleBarrier(path, 2, "zl")
      soon(function() kazoo("double_barrier", path, 2, "kz") end)
      assert.is_true(d:enter(30))
      local k = kids[#kids]
      assert.truthy(k:wait_line("^entered", 30), k:stderr())
      -- zklua leaves first: it waits until the kazoo member has left too
      soon(function() b:create_async(path .. "-leave") end)
      assert.is_true(d:leave(30))
      assert.truthy(k:wait_line("^left", 30), k:stderr())
    end)

    it("enter times out (its node deleted) and leave times out while others stay", function()
      local d = a:DoubleBarrier(path, 2, "alone")
      assert.is_false(d:enter(0.5))
      assert.is_false(d.participating)
      testing.wait_for(function() return #a:get_children(path) == 0 end, 10, "the clean-up")
      local k = kazoo("double_barrier", path, 2, "kz")
      assert.is_true(d:enter(30))
      assert.truthy(k:wait_line("^entered", 30), k:stderr())
      assert.is_false(d:leave(0.5)) -- kazoo has not left
      a:create(path .. "-leave")
      assert.is_true(d:leave(30))
      assert.truthy(k:wait_line("^left", 30), k:stderr())
    end)

    it("LOST while entered: on_lost runs, leave still completes", function()
      local d = a:DoubleBarrier(path, 1, "solo")
      assert.is_true(d:enter(10))
      local lost = 0
      d:on_lost(function(x) assert.are.equal(d, x); lost = lost + 1 end)
      expire(a)
      testing.wait_for(function() return lost == 1 end, 10, "on_lost")
      assert.is_true(d.participating)
      assert.is_true(d:leave(30))
      assert.are.same({}, a:get_children(path))
    end)

    it("LOST during enter: the member enters on the new session", function()
      local d = a:DoubleBarrier(path, 2, "zl")
      local expired = false
      soon(function()
        expire(a)
        expired = true
        kazoo("double_barrier", path, 2, "kz")
      end)
      assert.is_true(d:enter(60))
      assert.is_true(expired)
      local k = kids[#kids]
      assert.truthy(k:wait_line("^entered", 30), k:stderr())
      a:create(path .. "-leave")
      assert.is_true(d:leave(30))
      assert.truthy(k:wait_line("^left", 30), k:stderr())
    end)
  end)
end)
