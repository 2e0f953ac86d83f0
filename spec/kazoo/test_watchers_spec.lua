-- kazoo's kazoo/tests/test_watchers.py, translated (see /work/shared/reference/kazoo-tests):
-- DataWatch, ChildrenWatch and PatientChildrenWatch against a real standalone server.
--
-- kazoo's `update.wait(10)` before an assertion is a wait for the callback (an upper bound);
-- its `update.wait(0.2)` before asserting that nothing was called is a round trip here
-- (settle): the server sends a watch event before the replies that follow the change, so once
-- a sync made after the change has returned, any call the change caused has been made.
-- kazoo's Python None in a list is false here (Lua lists hold no nil).  Internal names:
-- kazoo's `_stopped` is `stopped`, `_session_watcher` is `_listener`, `state_listeners` is
-- `_listeners`.
local zklua = require "zklua"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local support = require "kazoo.support"

local errors = zklua.errors

local NONE = false -- Python's None inside a list

local function wait(pred, timeout, what)
  testing.wait_for(pred, timeout or 10, what or "the watch function")
end

local function contains(list, item)
  for _, x in ipairs(list) do
    if x == item then return true end
  end
  return false
end

describe("test_watchers.py", function()
  local h, client, path

  before_each(function()
    h = support.harness()
    client = h.client
    path = support.unique_path()
    client:ensure_path(path) -- the setUp of kazoo's data and children watcher tests
  end)
  after_each(function() h:teardown() end)

  -- Any watch call caused by a change made before this is made before it returns.
  local function settle()
    client:sync("/")
  end

  -- ---------------------------------------------------------------- KazooDataWatcherTests

  it("test_data_watcher", function()
    local update, data = false, { true }
    path = path .. "f" -- a non-existent path
    client:DataWatch(path)(function(d)
      data = { d or NONE }
      update = true
    end)
    wait(function() return update end)
    assert.are.same({ NONE }, data)
    update = false

    client:create(path, "fred")
    wait(function() return update end)
    assert.are.equal("fred", data[1])
  end)

  it("test_data_watcher_once", function()
    local update, data = false, { true }
    path = path .. "f"
    local dwatcher = client:DataWatch(path)
    dwatcher(function(d)
      data = { d or NONE }
      update = true
    end)
    wait(function() return update end)
    assert.are.same({ NONE }, data)
    helpers.raises(errors.KazooException, dwatcher, function() table.remove(data) end)
    assert.are.same({ NONE }, data)
  end)

  it("test_data_watcher_with_event", function()
    local update, data = false, { true }
    path = path .. "f"
    client:DataWatch(path)(function(_, _, event)
      data = { event or NONE }
      update = true
    end)
    wait(function() return update end)
    assert.are.same({ NONE }, data)
    update = false

    client:create(path, "fred")
    wait(function() return update end)
    assert.are.equal("CREATED", data[1].type)
  end)

  it("test_func_style_data_watch", function()
    local update, data = false, { true }
    local p = path .. "f"
    client:DataWatch(p, function(d)
      data = { d or NONE }
      update = true
    end)
    wait(function() return update end)
    assert.are.same({ NONE }, data)
    update = false

    client:create(p, "fred")
    wait(function() return update end)
    assert.are.equal("fred", data[1])
  end)

  it("test_datawatch_across_session_expire", function()
    local update, data = false, { true }
    client:DataWatch(path)(function(d)
      data = { d or NONE }
      update = true
    end)
    wait(function() return update end)
    assert.are.same({ "" }, data)
    update = false

    h:expire_session()
    client:retry(client.set, client, path, "fred")
    wait(function() return update end, 25)
    assert.are.equal("fred", data[1])
  end)

  it("KazooDataWatcherTests::test_func_stops", function()
    local update, data = false, { true }
    path = path .. "f"
    local fail_through = false
    client:DataWatch(path)(function(d)
      data = { d or NONE }
      update = true
      if fail_through then return false end
    end)
    wait(function() return update end)
    assert.are.same({ NONE }, data)
    update = false

    fail_through = true
    client:create(path, "fred")
    wait(function() return update end)
    assert.are.equal("fred", data[1])
    update = false

    client:set(path, "asdfasdf")
    settle()
    assert.are.equal("fred", data[1])

    local d = client:get(path)
    assert.are.equal("asdfasdf", d)
  end)

  it("test_no_such_node", function()
    local called, args = false, nil
    client:DataWatch("/some/path")(function(d, stat)
      called, args = true, { d or NONE, stat or NONE }
    end)
    assert.is_true(called)
    assert.are.same({ NONE, NONE }, args)
  end)

  it("test_no_such_node_for_children_watch", function()
    local args, update = {}, false
    local p = path .. "/test_no_such_node_for_children_watch"
    local function changed(children)
      args[#args + 1] = children
      update = true
    end

    -- watch a node which does not exist
    local children_watch = client:ChildrenWatch(p, changed)
    assert.is_false(update)
    assert.is_true(children_watch.stopped)
    assert.are.same({}, args)

    -- watch a node which exists
    client:create(p, "")
    children_watch = client:ChildrenWatch(p, changed)
    wait(function() return update end, 3)
    assert.are.same({ {} }, args)
    update = false

    -- watch changes
    client:create(p .. "/fred", "")
    wait(function() return update end, 3)
    assert.are.same({ {}, { "fred" } }, args)
    update = false

    -- delete children
    client:delete(p .. "/fred")
    wait(function() return update end, 3)
    assert.are.same({ {}, { "fred" }, {} }, args)
    update = false

    -- delete watching
    client:delete(p)
    wait(function() return children_watch.stopped end, 10, "the watch to stop")
    assert.is_false(update)
    assert.is_true(children_watch.stopped)
  end)

  it("test_watcher_evaluating_to_false", function()
    -- kazoo's WeirdWatcher: a callable that is false as a truth value; here, a callable
    -- table (Lua has no false table)
    local watcher = setmetatable({}, { __call = function(self) self.called = true end })
    client:DataWatch(path, watcher)
    client:set(path, "mwahaha")
    assert.is_true(watcher.called)
  end)

  it("test_watcher_repeat_delete", function()
    local a, ev = {}, false
    client:delete(path)
    client:DataWatch(path)(function(val)
      a[#a + 1] = val or NONE
      ev = true
    end)
    assert.are.same({ NONE }, a)
    wait(function() return ev end)
    ev = false
    client:create(path, "blah")
    wait(function() return ev end)
    assert.is_true(ev)
    ev = false
    assert.are.same({ NONE, "blah" }, a)
    client:delete(path)
    wait(function() return ev end)
    assert.is_true(ev)
    ev = false
    assert.are.same({ NONE, "blah", NONE }, a)
    client:create(path, "blah")
    wait(function() return ev end)
    assert.is_true(ev)
    ev = false
    assert.are.same({ NONE, "blah", NONE, "blah" }, a)
  end)

  it("test_watcher_with_closing", function()
    local a = {}
    client:delete(path)
    client:DataWatch(path)(function(val) a[#a + 1] = val or NONE end)
    assert.are.same({ NONE }, a)
    local b = not pcall(client.stop, client)
    assert.is_false(b)
  end)

  -- ---------------------------------------------------------------- KazooChildrenWatcherTests

  -- kazoo's `changed`: replaces all_children with children; fail_through() -> stop.
  local function recorder(fail_through)
    local r = { all_children = { "fred" }, update = false }
    r.changed = function(children)
      r.all_children = children
      r.update = true
      if fail_through and fail_through() then return false end
    end
    return r
  end

  it("test_child_watcher", function()
    local r = recorder()
    client:ChildrenWatch(path)(r.changed)
    wait(function() return r.update end)
    assert.are.same({}, r.all_children)
    r.update = false

    client:create(path .. "/smith")
    wait(function() return r.update end)
    assert.are.same({ "smith" }, r.all_children)
    r.update = false

    client:create(path .. "/george")
    wait(function() return r.update end)
    assert.are.same({ "george", "smith" }, helpers.sorted(r.all_children))
  end)

  it("test_child_watcher_once", function()
    local r = recorder()
    local cwatch = client:ChildrenWatch(path)
    cwatch(r.changed)
    wait(function() return r.update end)
    assert.are.same({}, r.all_children)
    r.update = false
    helpers.raises(errors.KazooException, cwatch,
                   function() r.update = true end)
  end)

  it("test_child_watcher_with_event", function()
    local update, events = false, { true }
    client:ChildrenWatch(path, nil, { send_event = true })(function(_, event)
      events = { event or NONE }
      update = true
    end)
    wait(function() return update end)
    assert.are.same({ NONE }, events)
    update = false

    client:create(path .. "/smith")
    wait(function() return update end)
    assert.are.equal("CHILD", events[1].type)
  end)

  it("test_func_style_child_watcher", function()
    local r = recorder()
    client:ChildrenWatch(path, r.changed)
    wait(function() return r.update end)
    assert.are.same({}, r.all_children)
    r.update = false

    client:create(path .. "/smith")
    wait(function() return r.update end)
    assert.are.same({ "smith" }, r.all_children)
    r.update = false

    client:create(path .. "/george")
    wait(function() return r.update end)
    assert.are.same({ "george", "smith" }, helpers.sorted(r.all_children))
  end)

  it("KazooChildrenWatcherTests::test_func_stops", function()
    local fail_through = false
    local r = recorder(function() return fail_through end)
    client:ChildrenWatch(path)(r.changed)
    wait(function() return r.update end)
    assert.are.same({}, r.all_children)
    r.update = false

    fail_through = true
    client:create(path .. "/smith")
    wait(function() return r.update end)
    assert.are.same({ "smith" }, r.all_children)
    r.update = false

    client:create(path .. "/george")
    settle()
    assert.are.same({ "smith" }, r.all_children)
  end)

  it("test_child_watcher_remove_session_watcher", function()
    local fail_through = false
    local r = recorder(function() return fail_through end)
    local children_watch = client:ChildrenWatch(path, r.changed)
    local session_watcher = children_watch._listener

    wait(function() return r.update end)
    assert.is_true(contains(client._listeners, session_watcher))
    assert.are.same({}, r.all_children)
    r.update = false

    fail_through = true
    client:create(path .. "/smith")
    wait(function() return r.update end)
    assert.is_false(contains(client._listeners, session_watcher))
    assert.are.same({ "smith" }, r.all_children)
    r.update = false

    client:create(path .. "/george")
    settle()
    assert.is_false(contains(client._listeners, session_watcher))
    assert.are.same({ "smith" }, r.all_children)
  end)

  it("test_child_watch_session_loss", function()
    local r = recorder()
    client:ChildrenWatch(path)(r.changed)
    wait(function() return r.update end)
    assert.are.same({}, r.all_children)
    r.update = false

    client:create(path .. "/smith")
    wait(function() return r.update end)
    assert.are.same({ "smith" }, r.all_children)
    r.update = false
    h:expire_session()

    client:retry(client.create, client, path .. "/george")
    wait(function() return r.update end, 20)
    assert.are.same({ "george", "smith" }, helpers.sorted(r.all_children))
  end)

  it("test_child_stop_on_session_loss", function()
    local r = recorder()
    client:ChildrenWatch(path, nil, { allow_session_lost = false })(r.changed)
    wait(function() return r.update end)
    assert.are.same({}, r.all_children)
    r.update = false

    client:create(path .. "/smith")
    wait(function() return r.update end)
    assert.are.same({ "smith" }, r.all_children)
    r.update = false
    h:expire_session()

    client:retry(client.create, client, path .. "/george")
    settle()
    assert.is_false(r.update)
    assert.are.same({ "smith" }, r.all_children)

    local children = client:get_children(path)
    assert.are.same({ "george", "smith" }, helpers.sorted(children))
  end)

  -- ---------------------------------------------------------------- KazooPatientChildrenWatcherTests

  it("test_watch", function()
    client:ensure_path(path)
    local watcher = client:PatientChildrenWatch(path, 0.1)
    local result = watcher:start()
    local children, asy = result:get()
    assert.are.equal(0, #children)
    assert.is_false(asy:ready())

    client:create(path .. "/fred")
    asy:get(10) -- kazoo's 1 s: an upper bound, generous on a loaded machine
    assert.is_true(asy:ready())
  end)

  it("test_exception", function()
    path = support.unique_path() -- kazoo's setUp of this class makes no node
    local watcher = client:PatientChildrenWatch(path, 0.1)
    local result = watcher:start()
    helpers.raises(errors.NoNodeError, result.get, result)
  end)

  it("test_watch_iterations", function()
    client:ensure_path(path)
    -- kazoo's boundary is 0.5 s against 0.08 s pauses; 5 s keeps the same meaning (each
    -- change comes well within the boundary) on a machine that may stall for a second
    local watcher = client:PatientChildrenWatch(path, 5)
    local result = watcher:start()
    assert.is_false(result:ready())

    testing.sleep(0.08)
    client:create(path .. "/" .. support.uuid())
    assert.is_false(result:ready())
    testing.sleep(0.08)
    assert.is_false(result:ready())
    client:create(path .. "/" .. support.uuid())
    testing.sleep(0.08)
    assert.is_false(result:ready())

    local children = result:get()
    assert.are.equal(2, #children)
  end)
end)
