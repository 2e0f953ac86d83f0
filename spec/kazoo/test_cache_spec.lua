-- kazoo's kazoo/tests/test_cache.py, translated (see /work/shared/reference/kazoo-tests):
-- TreeCache against a real standalone server.
--
-- kazoo's event.event_type / event.event_data are event.type / event.data here; its ValueError
-- for a path outside the tree is BadArgumentsError.  As kazoo's tearDown, every test ends by
-- asserting that the cache reported no fault.  zklua's cache is a C state machine
-- (src/recipes/tree_cache.c): where kazoo's test looks into its Python objects (the client's
-- watcher sets, the TreeNode objects the garbage collector counts, spies on get_async, a
-- patched TreeNode method), the translation asserts what those stand for from outside: the
-- cache's watches are gone after close() (a change reaches the watches set outside the cache
-- and no cache listener), the nodes are re-read after a reconnection (the changes made
-- meanwhile are reported), an error raised while the cache handles an event reaches the
-- listen_fault listeners once.  (The C cache's memory is checked by the suite's valgrind and
-- sanitizer runs.)
local zklua = require "zklua"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local support = require "kazoo.support"
local TreeEvent = require("zklua.recipes.tree_cache").TreeEvent
local errors = zklua.errors

local raises = helpers.raises

describe("test_cache.py", function()
  local h, client, path, cache, proxy
  local events, faults

  before_each(function()
    h = support.harness()
    client = h.client
    events, faults = {}, {}
    path, cache = nil, nil
  end)

  after_each(function()
    -- kazoo's tearDown: an error the cache reported fails the test (its FakeException aside)
    local reported = {}
    for _, err in ipairs(faults) do
      if not (type(err) == "table" and err.fake) then reported[#reported + 1] = tostring(err) end
    end
    if cache then cache:close() end
    cache = nil
    h:teardown()
    if proxy then proxy:stop() end
    proxy = nil
    assert.are.same({}, reported)
  end)

  local function make_cache(on)
    if cache == nil then
      path = support.unique_path()
      cache = (on or client):TreeCache(path)
      cache:listen(function(event) events[#events + 1] = event end)
      cache:listen_fault(function(err) faults[#faults + 1] = err end)
      cache:start()
    end
    return cache
  end

  -- kazoo's wait_cache(expect, since, timeout): the next event (of type expect), or skips to
  -- the first of type since.
  local function wait_cache(expect, since, timeout)
    local started = since == nil
    while true do
      testing.wait_for(function() return #events > 0 end, timeout or 10, "a cache event")
      local event = table.remove(events, 1)
      if started then
        if expect ~= nil then assert.are.equal(expect, event.type) end
        return event
      end
      if event.type == since then
        started = true
        if expect == nil then return end
      end
    end
  end

  -- Any event a change made before this causes has been delivered when it returns: the
  -- server sends the watch events before the reply to a later sync.
  local function settle(zk)
    (zk or client):sync("/")
  end

  it("test_start", function()
    make_cache()
    wait_cache(nil, TreeEvent.INITIALIZED)

    local stat = client:exists(path)
    assert.are.equal(0, stat.version)

    assert.are.equal("started", cache.state)
    assert.is_truthy(cache:get_data(path)) -- the root node is live
  end)

  it("test_start_started", function()
    make_cache()
    raises(errors.KazooException, cache.start, cache)
  end)

  it("test_start_closed", function()
    make_cache()
    cache:close()
    raises(errors.KazooException, cache.start, cache)
  end)

  it("test_close", function()
    make_cache()
    wait_cache(nil, TreeEvent.INITIALIZED)
    client:create(path .. "/foo/bar/baz", "", { makepath = true })
    for _ = 1, 3 do wait_cache(TreeEvent.NODE_ADDED) end

    -- stub watchers which are outside of the tree cache
    local stub_data, stub_child = {}, {}
    client:get(path .. "/foo", function(ev) stub_data[#stub_data + 1] = ev end)
    client:get_children(path .. "/foo", function(ev) stub_child[#stub_child + 1] = ev end)

    cache:close()

    -- nothing should be published since the tree closed
    assert.are.same({}, events)

    -- the tree should be empty
    assert.is_nil(cache:get_data(path))
    assert.is_nil(cache:get_children(path))
    assert.are.equal("closed", cache.state)

    -- the cache's watchers are gone: changes reach no cache listener ...
    client:set(path .. "/foo", "changed")
    client:create(path .. "/foo/qux")
    client:set(path .. "/foo/bar/baz", "changed")
    settle()
    assert.are.same({}, events)
    -- ... while the watchers outside the cache are still there
    assert.are.equal(1, #stub_data)
    assert.are.equal("CHANGED", stub_data[1].type)
    assert.are.equal(1, #stub_child)
    assert.are.equal("CHILD", stub_child[1].type)
  end)

  it("test_delete_operation", function()
    make_cache()
    wait_cache(nil, TreeEvent.INITIALIZED)
    assert.are.same({}, cache:get_children(path)) -- the root alone

    client:create(path .. "/foo/bar/baz", "", { makepath = true })
    for _ = 1, 3 do wait_cache(TreeEvent.NODE_ADDED) end

    client:delete(path .. "/foo", nil, true)
    for _ = 1, 3 do wait_cache(TreeEvent.NODE_REMOVED) end

    -- the tree should be empty
    assert.are.same({}, cache:get_children(path))
    assert.is_nil(cache:get_data(path .. "/foo"))
    assert.is_nil(cache:get_data(path .. "/foo/bar"))
    assert.is_nil(cache:get_data(path .. "/foo/bar/baz"))

    -- the removed nodes' watches are gone: nothing more comes, and the root is the tree
    settle()
    assert.are.same({}, events)
    assert.is_truthy(cache:get_data(path))
  end)

  it("test_children_operation", function()
    make_cache()
    wait_cache(nil, TreeEvent.INITIALIZED)

    client:create(path .. "/test_children", "test_children_1")
    local event = wait_cache(TreeEvent.NODE_ADDED)
    assert.are.equal(TreeEvent.NODE_ADDED, event.type)
    assert.are.equal(path .. "/test_children", event.data.path)
    assert.are.equal("test_children_1", event.data.data)
    assert.are.equal(0, event.data.stat.version)

    client:set(path .. "/test_children", "test_children_2")
    event = wait_cache(TreeEvent.NODE_UPDATED)
    assert.are.equal(TreeEvent.NODE_UPDATED, event.type)
    assert.are.equal(path .. "/test_children", event.data.path)
    assert.are.equal("test_children_2", event.data.data)
    assert.are.equal(1, event.data.stat.version)

    client:delete(path .. "/test_children")
    event = wait_cache(TreeEvent.NODE_REMOVED)
    assert.are.equal(TreeEvent.NODE_REMOVED, event.type)
    assert.are.equal(path .. "/test_children", event.data.path)
    assert.are.equal("test_children_2", event.data.data)
    assert.are.equal(1, event.data.stat.version)
  end)

  it("test_subtree_operation", function()
    make_cache()
    wait_cache(nil, TreeEvent.INITIALIZED)

    client:create(path .. "/foo/bar/baz", "", { makepath = true })
    for _, relative_path in ipairs({ "/foo", "/foo/bar", "/foo/bar/baz" }) do
      local event = wait_cache(TreeEvent.NODE_ADDED)
      assert.are.equal(TreeEvent.NODE_ADDED, event.type)
      assert.are.equal(path .. relative_path, event.data.path)
      assert.are.equal("", event.data.data)
      assert.are.equal(0, event.data.stat.version)
    end

    client:delete(path .. "/foo", nil, true)
    for _, relative_path in ipairs({ "/foo/bar/baz", "/foo/bar", "/foo" }) do
      local event = wait_cache(TreeEvent.NODE_REMOVED)
      assert.are.equal(TreeEvent.NODE_REMOVED, event.type)
      assert.are.equal(path .. relative_path, event.data.path)
    end
  end)

  -- kazoo patches the cache's client away ("disable any remote operation"); zklua's reads
  -- answer from memory: they are made here with the client stopped.
  local function tree_of_foo_bar_baz()
    make_cache()
    wait_cache(nil, TreeEvent.INITIALIZED)
    client:create(path .. "/foo/bar/baz", "@", { makepath = true })
    wait_cache(TreeEvent.NODE_ADDED)
    wait_cache(TreeEvent.NODE_ADDED)
    wait_cache(TreeEvent.NODE_ADDED)
  end

  it("test_get_data", function()
    tree_of_foo_bar_baz()
    local c = cache
    c.client:stop()
    assert.are.equal("", c:get_data(path).data)
    assert.are.equal(0, c:get_data(path).stat.version)

    assert.are.equal("", c:get_data(path .. "/foo").data)
    assert.are.equal(0, c:get_data(path .. "/foo").stat.version)

    assert.are.equal("", c:get_data(path .. "/foo/bar").data)
    assert.are.equal(0, c:get_data(path .. "/foo/bar").stat.version)

    assert.are.equal("@", c:get_data(path .. "/foo/bar/baz").data)
    assert.are.equal(0, c:get_data(path .. "/foo/bar/baz").stat.version)
  end)

  it("test_get_children", function()
    tree_of_foo_bar_baz()
    local c = cache
    c.client:stop()
    assert.are.same({}, c:get_children(path .. "/foo/bar/baz"))
    assert.are.same({ "baz" }, c:get_children(path .. "/foo/bar"))
    assert.are.same({ "bar" }, c:get_children(path .. "/foo"))
    assert.are.same({ "foo" }, c:get_children(path))
  end)

  it("test_get_data_out_of_tree", function()
    make_cache()
    wait_cache(nil, TreeEvent.INITIALIZED)
    raises(errors.BadArgumentsError, cache.get_data, cache, "/out_of_tree")
  end)

  it("test_get_children_out_of_tree", function()
    make_cache()
    wait_cache(nil, TreeEvent.INITIALIZED)
    raises(errors.BadArgumentsError, cache.get_children, cache, "/out_of_tree")
  end)

  it("test_get_data_no_node", function()
    make_cache()
    wait_cache(nil, TreeEvent.INITIALIZED)
    cache.client:stop()
    assert.is_nil(cache:get_data(path .. "/non_exists"))
  end)

  it("test_get_children_no_node", function()
    make_cache()
    wait_cache(nil, TreeEvent.INITIALIZED)
    cache.client:stop()
    assert.is_nil(cache:get_children(path .. "/non_exists"))
  end)

  it("test_session_reconnected", function()
    -- the cache's client goes through a fault proxy (kazoo's lose_connection)
    proxy = testing.proxy(h.server:node(1))
    local zk = h:get_client{ hosts = proxy.hosts .. h.namespace }
    zk:start()
    make_cache(zk)
    wait_cache(nil, TreeEvent.INITIALIZED)

    zk:create(path .. "/foo")
    local event = wait_cache(TreeEvent.NODE_ADDED)
    assert.are.equal(path .. "/foo", event.data.path)

    -- session suspended
    proxy:refuse(true)
    proxy:drop()
    wait_cache(TreeEvent.CONNECTION_SUSPENDED)
    -- meanwhile another client changes both nodes: the cache must read both again
    client:set(path, "root changed")
    client:set(path .. "/foo", "foo changed")

    -- connection restored
    proxy:refuse(false)
    wait_cache(TreeEvent.CONNECTION_RECONNECTED)

    -- make sure that all nodes are refreshed (kazoo spies on the reads; here their results)
    local updated = {}
    for _ = 1, 2 do
      event = wait_cache(TreeEvent.NODE_UPDATED)
      updated[event.data.path] = event.data.data
    end
    assert.are.same({ [path] = "root changed", [path .. "/foo"] = "foo changed" }, updated)
    -- and no NODE_ADDED: the nodes are the same ones
    settle(zk)
    assert.are.same({}, events)
  end)

  it("test_root_recreated", function()
    make_cache()
    wait_cache(nil, TreeEvent.INITIALIZED)

    -- remove the root node
    client:delete(path)
    local event = wait_cache(TreeEvent.NODE_REMOVED)
    assert.are.equal(TreeEvent.NODE_REMOVED, event.type)
    assert.are.equal("", event.data.data)
    assert.are.equal(path, event.data.path)
    assert.are.equal(0, event.data.stat.version)

    -- re-create the root node
    client:ensure_path(path)
    event = wait_cache(TreeEvent.NODE_ADDED)
    assert.are.equal(TreeEvent.NODE_ADDED, event.type)
    assert.are.equal("", event.data.data)
    assert.are.equal(path, event.data.path)
    assert.are.equal(0, event.data.stat.version)
  end)

  it("test_exception_handler", function()
    -- kazoo makes the cache's own handling of an event raise (a patched TreeNode); here a
    -- listener raises while the cache delivers its first event
    local error_value = setmetatable({ fake = true }, { __tostring = function() return "Fake" end })
    local handled = {}
    path = support.unique_path()
    cache = client:TreeCache(path)
    local raised = false
    cache:listen(function()
      if not raised then
        raised = true
        error(error_value, 0)
      end
    end)
    cache:listen_fault(function(err) faults[#faults + 1] = err end)
    cache:listen_fault(function(err) handled[#handled + 1] = err end)
    cache:start()
    testing.wait_for(function() return #handled > 0 end, 10, "the fault")
    cache:close()
    assert.are.equal(1, #handled)
    assert.are.equal(error_value, handled[1])
  end)

  it("test_exception_suppressed", function()
    make_cache()
    wait_cache(nil, TreeEvent.INITIALIZED)

    -- stoke up ConnectionClosedError
    client:stop()
    client:close()
    wait_cache(nil, TreeEvent.CONNECTION_LOST)

    -- the cache's reads failing with ConnectionClosedError are no fault, and change nothing
    assert.are.same({}, faults)
    assert.are.same({}, events)
    assert.are.same({}, cache:get_children(path))
  end)
end)
