-- Callbacks may be callable tables (a table whose metatable has __call), as kazoo takes any
-- callable: a watch, a state listener, a DataWatch or ChildrenWatch function, a future's
-- rawlink and a retry's function.  Anything else is refused before anything is sent: a
-- listener with kazoo's ConfigurationError, the others with BadArgumentsError.
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local Future = require "zklua.future"
local helpers = require "support.helpers"

local ROOT = "/callables"

-- A callable table that records its calls' first arguments.
local function recorder()
  return setmetatable({ calls = {} }, {
    __call = function(self, first) self.calls[#self.calls + 1] = first == nil and false or first end,
  })
end

describe("callable tables as callbacks", function()
  local server, zk

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)
  before_each(function() zk = helpers.client(server.hosts, ROOT) end)
  after_each(function() helpers.drop(zk, ROOT) end)

  it("are called as watches", function()
    local w = recorder()
    assert.is_nil(zk:exists(ROOT .. "/w", w))
    zk:create(ROOT .. "/w", "v")
    testing.wait_for(function() return #w.calls == 1 end, 10, "the watch")
    assert.are.equal("CREATED", w.calls[1].type)
    assert.are.equal(ROOT .. "/w", w.calls[1].path)
  end)

  it("are called as state listeners", function()
    local l = recorder()
    zk:add_listener(l)
    zk:stop()
    assert.are.same({ "LOST" }, l.calls)
    zk:start()
    assert.are.same({ "LOST", "CONNECTED" }, l.calls)
    zk:remove_listener(l)
  end)

  it("are called by DataWatch and ChildrenWatch", function()
    local d, c = recorder(), recorder()
    zk:create(ROOT .. "/d", "one")
    zk:DataWatch(ROOT .. "/d", d)
    zk:ChildrenWatch(ROOT, c)
    testing.wait_for(function() return #d.calls >= 1 and #c.calls >= 1 end, 10, "first calls")
    assert.are.equal("one", d.calls[1])
    zk:set(ROOT .. "/d", "two")
    testing.wait_for(function() return d.calls[#d.calls] == "two" end, 10, "the change")
  end)

  it("are called by rawlink and retry", function()
    local f, r = Future.new(zk.handler), recorder()
    f:rawlink(r)
    f:set("done")
    assert.are.equal(f, r.calls[1])
    local retried = recorder()
    zk:retry(retried, "arg")
    assert.are.same({ "arg" }, retried.calls)
  end)

  it("anything else is refused", function()
    local not_callable = setmetatable({}, {})
    helpers.raises(errors.ConfigurationError, zk.add_listener, zk, not_callable)
    helpers.raises(errors.ConfigurationError, zk.add_listener, zk, nil)
    helpers.raises(errors.BadArgumentsError, zk.exists, zk, ROOT, not_callable)
    helpers.raises(errors.BadArgumentsError, zk.DataWatch, zk, ROOT, not_callable)
    helpers.raises(errors.BadArgumentsError, zk.ChildrenWatch, zk, ROOT, 42)
    local f = Future.new(zk.handler)
    helpers.raises(errors.BadArgumentsError, f.rawlink, f, not_callable)
    helpers.raises(errors.BadArgumentsError, zk.retry, zk, not_callable)
  end)
end)
