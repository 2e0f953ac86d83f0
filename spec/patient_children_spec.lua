-- PatientChildrenWatch (src/recipes/patient_children.c, src/core/timers.c,
-- lua/zklua/recipes/patient_children.lua) against a real server.
--
-- Time is this recipe's subject: the specs check LOWER bounds (a round never settles sooner
-- than time_boundary after the last change it saw) and never upper bounds; every wait is a
-- generous one.
local zklua = require "zklua"
local core = require "zklua.core"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"

local ROOT = "/patient"
local SLACK = 0.05 -- clock reads around the server's change, not the recipe's timing

local raises = helpers.raises
local expire = helpers.expire

describe("PatientChildrenWatch", function()
  local server, a, b, path
  local counter = 0

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  before_each(function()
    counter = counter + 1
    path = ROOT .. "/t" .. counter
    a, b = helpers.clients(server.hosts, 2)
    a:ensure_path(path)
  end)

  after_each(function()
    a:close()
    b:close()
    helpers.delete_trees(server.hosts, path)
  end)

  local function names(n, prefix)
    local list = {}
    for i = 1, n do list[i] = (prefix or "c") .. string.format("%02d", i) end
    return list
  end

  it("waits out a burst of changes and reports the children after it", function()
    local boundary = 2
    local watch = a:PatientChildrenWatch(path, boundary)
    local start = core.monotonic()
    local f = watch:start()
    for _, name in ipairs(names(12)) do b:create(path .. "/" .. name) end
    local last_change = core.monotonic()
    local children, changed = f:get(60)
    local settled = core.monotonic()
    assert.are.same(names(12), children)
    assert.is_true(settled - last_change >= boundary - SLACK,
                   "settled " .. (settled - last_change) .. " s after the burst")
    assert.is_true(settled - start >= boundary)
    assert.is_false(changed:ready())
    assert.are.equal("settled", watch._watch:phase())
  end)

  it("sets the change future on the next change, with the wall-clock time", function()
    local watch = a:PatientChildrenWatch(path, 0.2)
    b:create(path .. "/x")
    local children, changed = watch:start():get(30)
    assert.are.same({ "x" }, children)
    local before = os.time()
    b:delete(path .. "/x")
    local at = changed:get(30)
    assert.are.equal("number", type(at))
    assert.is_true(at >= before - 1 and at < before + 3600)
    assert.are.equal("idle", watch._watch:phase())
  end)

  it("sets its futures from the event loop: rawlink runs without anyone calling get", function()
    local watch = a:PatientChildrenWatch(path, 0.2)
    local seen = {}
    watch:start():rawlink(function(f)
      local children, changed = f:get()
      seen.children = children
      changed:rawlink(function() seen.changed = true end)
    end)
    testing.wait_for(function() return seen.children ~= nil end, 30, "the round")
    assert.are.same({}, seen.children)
    b:create(path .. "/y")
    testing.wait_for(function() return seen.changed end, 30, "the change")
  end)

  it("start() while settling returns that round; after settling it begins a new one", function()
    local watch = a:PatientChildrenWatch(path, 0.3)
    local f1 = watch:start()
    assert.are.equal(f1, watch:start())
    local first, changed = f1:get(30)
    assert.are.same({}, first)
    b:create(path .. "/n1")
    local f2 = watch:start()
    assert.are_not.equal(f1, f2)
    local second = f2:get(30)
    assert.are.same({ "n1" }, second)
    -- the first round's change future is set by the change the new round saw (or a later one)
    b:create(path .. "/n2")
    changed:get(30)
  end)

  it("keeps a watch with a pending future alive after the script dropped it", function()
    local f = a:PatientChildrenWatch(path, 0.2):start()
    collectgarbage()
    collectgarbage()
    b:create(path .. "/z")
    local children = f:get(30)
    assert.are.same({ "z" }, children)
  end)

  it("a missing node, or one deleted while settling, sets NoNodeError", function()
    local f = a:PatientChildrenWatch(path .. "/missing", 0.1):start()
    local err = raises(errors.NoNodeError, f.get, f, 30)
    assert.are.equal(path .. "/missing", err.path)
    b:create(path .. "/doomed")
    local g = a:PatientChildrenWatch(path .. "/doomed", 30):start()
    b:delete(path .. "/doomed")
    raises(errors.NoNodeError, g.get, g, 30)
  end)

  -- Runs attempt(boundary) until the fault it causes hits a round that is still settling (a
  -- slow fault may outlast the boundary: then the round settled before it, rightly, and the
  -- attempt is repeated with a longer boundary).  Returns what the successful attempt returned.
  local function while_settling(attempt)
    local boundary = 1
    for _ = 1, 4 do
      local hit, result = attempt(boundary)
      if hit then return result end
      boundary = boundary * 2
    end
    error("the fault never hit a settling round")
  end

  it("SUSPENDED: the boundary starts again, whole, once reconnected", function()
    -- the outage through a fault proxy (refused, connection dropped), not a server restart:
    -- a restart on a loaded machine can outlast the session
    local proxy = testing.proxy(server:node(1))
    local zk = zklua.client{ hosts = proxy.hosts, timeout = 20 }
    finally(function() zk:close(); proxy:stop() end)
    zk:start()
    local session = zk:client_id()
    b:create(path .. "/before")
    while_settling(function(boundary)
      local watch = zk:PatientChildrenWatch(path, boundary)
      local connected_at
      local f = watch:start()
      proxy:refuse(true)
      proxy:drop()
      testing.wait_for(function() return zk.state == "SUSPENDED" end, 10, "SUSPENDED")
      local phase_at_fault = watch._watch:phase()
      zk:add_listener(function(state)
        if state == "CONNECTED" then connected_at = core.monotonic(); return true end
      end)
      proxy:refuse(false)
      local children = f:get(60)
      local settled = core.monotonic()
      assert.are.equal(session, (zk:client_id()), "the session")
      assert.are.same({ "before" }, children)
      if phase_at_fault ~= "settling" then return false end
      assert.truthy(connected_at)
      assert.is_true(settled - connected_at >= boundary - SLACK,
                     "settled " .. (settled - connected_at) .. " s after reconnecting")
      return true
    end)
  end)

  it("LOST while settling: reads again on the new session and waits a whole boundary", function()
    local n = 0
    while_settling(function(boundary)
      n = n + 1
      local watch = a:PatientChildrenWatch(path, boundary)
      local phase_at_lost, connected_at
      a:add_listener(function(state)
        if state == "LOST" then phase_at_lost = watch._watch:phase() end
        if state == "CONNECTED" and phase_at_lost then
          connected_at = core.monotonic()
          return true
        end
      end)
      local f = watch:start()
      expire(a)
      testing.wait_for(function() return connected_at ~= nil end, 20, "a new session")
      b:create(path .. "/after" .. n)
      local children = f:get(60)
      if phase_at_lost ~= "settling" then return false end
      assert.is_true(core.monotonic() - connected_at >= boundary - SLACK)
      assert.are.equal("after" .. n, children[#children])
      return true
    end)
  end)

  it("LOST after settling: a change made while the watch was dead sets the change future", function()
    local watch = a:PatientChildrenWatch(path, 0.2)
    local _, changed = watch:start():get(30)
    a:add_listener(function(state)
      -- runs after the C watch heard LOST and before it reads again on the new session
      if state == "LOST" then
        b:create(path .. "/unseen")
        return true -- once: remove this listener
      end
    end)
    expire(a)
    changed:get(30)
    assert.are.equal(1, watch._watch:changes())
  end)

  it("LOST after settling with no change: it keeps watching on the new session", function()
    local watch = a:PatientChildrenWatch(path, 0.2)
    b:create(path .. "/same")
    local children, changed = watch:start():get(30)
    assert.are.same({ "same" }, children)
    expire(a)
    testing.wait_for(function() return a.state == "CONNECTED" end, 20, "a new session")
    -- the read on the new session is back when only its watch is still out
    testing.wait_for(function() return watch._watch:inflight() == 1 end, 20, "the re-read")
    assert.are.equal("settled", watch._watch:phase())
    assert.is_false(changed:ready())
    b:create(path .. "/new")
    changed:get(30)
    assert.are.equal(1, watch._watch:changes())
  end)

  it("stop() sets pending futures with ConnectionClosedError", function()
    local settling = a:PatientChildrenWatch(path, 60):start()
    local quick = a:PatientChildrenWatch(path, 0.1)
    local _, changed = quick:start():get(30)
    a:stop()
    raises(errors.ConnectionClosedError, settling.get, settling, 5)
    raises(errors.ConnectionClosedError, changed.get, changed, 5)
    raises(errors.ConnectionClosedError, quick.start, quick)
  end)

  it("a zero boundary settles after one read", function()
    b:create(path .. "/only")
    local children = a:PatientChildrenWatch(path, 0):start():get(30)
    assert.are.same({ "only" }, children)
  end)

  it("refuses bad arguments before anything is sent", function()
    raises(errors.BadArgumentsError, a.PatientChildrenWatch, a, "/a/../b")
    raises(errors.BadArgumentsError, a.PatientChildrenWatch, a, 7)
    raises(errors.BadArgumentsError, a.PatientChildrenWatch, a, path, -1)
    raises(errors.BadArgumentsError, a.PatientChildrenWatch, a, path, "30")
    raises(errors.BadArgumentsError, a.PatientChildrenWatch, a, path, 0 / 0)
    raises(errors.BadArgumentsError, a.PatientChildrenWatch, a, path, math.huge)
    local err = raises(errors.BadArgumentsError, a.PatientChildrenWatch, a, path, {})
    assert.are.equal("time_boundary", err.argument)
    assert.are.equal(30, a:PatientChildrenWatch(path).time_boundary) -- kazoo's default
    local closed = zklua.client(server.hosts)
    raises(errors.ConnectionClosedError, closed.PatientChildrenWatch, closed, path)
    closed:close()
  end)
end)
