-- The `_async` twins and the futures they return (kazoo's IAsyncResult).
local zklua = require "zklua"
local testing = require "zklua.testing"
local Future = require "zklua.future"
local helpers = require "support.helpers"
local errors = zklua.errors
local security = zklua.security

local ROOT = "/async"

local function is_future(f)
  return type(f) == "table" and getmetatable(f) == Future
end

-- SIGSTOPs the server; returns once every thread of the JVM stopped (Node:pause).
local function pause(server)
  server:node(1):pause()
end

local sorted = helpers.sorted

describe("async operations", function()
  local server, zk

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  before_each(function() zk = helpers.client(server.hosts, ROOT) end)

  after_each(function() helpers.drop(zk, ROOT) end)

  describe("every op's _async twin returns a future resolving to what the sync op returns", function()
    it("create_async", function()
      local f = zk:create_async(ROOT .. "/c", "v")
      assert.is_true(is_future(f))
      assert.are.equal(ROOT .. "/c", f:get(5))
      local g = zk:create_async(ROOT .. "/d", "v", { include_data = true })
      local path, stat = g:get(5)
      assert.are.equal(ROOT .. "/d", path)
      assert.are.equal(0, stat.version)
      local h = zk:create_async(ROOT .. "/m/n", "", { makepath = true })
      assert.is_true(is_future(h))
      assert.are.equal(ROOT .. "/m/n", h:get(5))
    end)

    it("ensure_path_async", function()
      local f = zk:ensure_path_async(ROOT .. "/e/f")
      assert.is_true(is_future(f))
      assert.is_true(f:get(5))
      assert.is_not_nil(zk:exists(ROOT .. "/e/f"))
    end)

    it("exists_async", function()
      zk:create(ROOT .. "/x", "abc")
      local f = zk:exists_async(ROOT .. "/x")
      assert.is_true(is_future(f))
      assert.are.equal(3, f:get(5).dataLength)
      local missing = zk:exists_async(ROOT .. "/nope")
      assert.is_nil(missing:get(5))
      assert.is_true(missing:successful())
    end)

    it("get_async", function()
      zk:create(ROOT .. "/x", "a\0b")
      local f = zk:get_async(ROOT .. "/x")
      assert.is_true(is_future(f))
      local data, stat = f:get(5)
      assert.are.equal("a\0b", data)
      assert.are.equal(0, stat.version)
      assert.are.equal("a\0b", f.value)
    end)

    it("get_children_async", function()
      zk:create(ROOT .. "/p/a", "", { makepath = true })
      zk:create(ROOT .. "/p/b", "")
      local f = zk:get_children_async(ROOT .. "/p")
      assert.is_true(is_future(f))
      local children, extra = f:get(5)
      assert.are.same({ "a", "b" }, sorted(children))
      assert.is_nil(extra)
      local children2, stat = zk:get_children_async(ROOT .. "/p", nil, true):get(5)
      assert.are.same({ "a", "b" }, sorted(children2))
      assert.are.equal(2, stat.numChildren)
    end)

    it("set_async", function()
      zk:create(ROOT .. "/x", "1")
      local f = zk:set_async(ROOT .. "/x", "2")
      assert.is_true(is_future(f))
      assert.are.equal(1, f:get(5).version)
      assert.are.equal("2", (zk:get(ROOT .. "/x")))
    end)

    it("delete_async", function()
      zk:create(ROOT .. "/x", "")
      local f = zk:delete_async(ROOT .. "/x")
      assert.is_true(is_future(f))
      assert.is_true(f:get(5))
      assert.is_nil(zk:exists(ROOT .. "/x"))
    end)

    it("get_acls_async and set_acls_async", function()
      zk:create(ROOT .. "/x", "")
      local f = zk:get_acls_async(ROOT .. "/x")
      assert.is_true(is_future(f))
      local acls, stat = f:get(5)
      assert.are.equal(31, acls[1].perms)
      assert.are.equal(0, stat.aversion)
      local g = zk:set_acls_async(ROOT .. "/x", security.READ_ACL_UNSAFE)
      assert.is_true(is_future(g))
      assert.are.equal(1, g:get(5).aversion)
    end)

    it("sync_async", function()
      local f = zk:sync_async(ROOT)
      assert.is_true(is_future(f))
      assert.are.equal(ROOT, f:get(5))
    end)

    it("add_auth_async", function()
      local f = zk:add_auth_async("digest", "someone:secret")
      assert.is_true(is_future(f))
      assert.is_true(f:get(5))
    end)

    it("transaction commit_async", function()
      local t = zk:transaction()
      t:create(ROOT .. "/t", "")
      local f = t:commit_async()
      assert.is_true(is_future(f))
      assert.are.same({ ROOT .. "/t" }, f:get(5))
    end)
  end)

  describe("a future that fails", function()
    it("raises the error object from get and holds it in f.exception", function()
      local f = zk:get_async(ROOT .. "/nope")
      assert.is_true(f:wait(5))
      assert.is_true(f:ready())
      assert.is_false(f:successful())
      assert.is_nil(f.value)
      assert.is_true(errors.is(f.exception, errors.NoNodeError))
      assert.are.equal(ROOT .. "/nope", f.exception.path)
      local ok, err = pcall(f.get, f, 1)
      assert.is_false(ok)
      assert.are.equal(f.exception, err)
      -- and again: a resolved future keeps its result
      local ok2, err2 = pcall(f.get, f)
      assert.is_false(ok2)
      assert.are.equal(err, err2)
    end)

    it("carries each op's own error", function()
      zk:create(ROOT .. "/x", "")
      local exists = zk:create_async(ROOT .. "/x", "")
      local version = zk:set_async(ROOT .. "/x", "", 7)
      local full = zk:create_async(ROOT .. "/full/child", "")
      zk:create(ROOT .. "/parent/kid", "", { makepath = true })
      local not_empty = zk:delete_async(ROOT .. "/parent")
      for _, f in ipairs({ exists, version, full, not_empty }) do assert.is_true(f:wait(5)) end
      assert.is_true(errors.is(exists.exception, errors.NodeExistsError))
      assert.is_true(errors.is(version.exception, errors.BadVersionError))
      assert.is_true(errors.is(full.exception, errors.NoNodeError))
      assert.is_true(errors.is(not_empty.exception, errors.NotEmptyError))
    end)
  end)

  describe("a successful future", function()
    it("reports ready, successful, value and no exception", function()
      zk:create(ROOT .. "/x", "data")
      local f = zk:get_async(ROOT .. "/x")
      assert.is_true(f:wait(5))
      assert.is_true(f:ready())
      assert.is_true(f:successful())
      assert.are.equal("data", f.value)
      assert.is_nil(f.exception)
      -- get on a resolved future returns at once, every time
      assert.are.equal("data", (f:get(0)))
      assert.are.equal("data", (f:get()))
      assert.are.equal("data", (f:get_nowait()))
    end)
  end)

  describe("rawlink and unlink", function()
    it("calls the callback once, with the future, when it resolves", function()
      zk:create(ROOT .. "/x", "v")
      local f = zk:get_async(ROOT .. "/x")
      local calls, seen, ready_inside = 0, nil, nil
      f:rawlink(function(arg)
        calls = calls + 1
        seen = arg
        ready_inside = arg:ready()
      end)
      assert.are.equal("v", (f:get(5)))
      zk:sync(ROOT) -- more events: the callback must not run again
      assert.are.equal(1, calls)
      assert.are.equal(f, seen)
      assert.is_true(ready_inside)
    end)

    it("calls the callback at once when the future is already resolved", function()
      zk:create(ROOT .. "/x", "v")
      local f = zk:get_async(ROOT .. "/x")
      f:wait(5)
      local calls = 0
      f:rawlink(function() calls = calls + 1 end)
      assert.are.equal(1, calls)
    end)

    it("calls every linked callback, in order, on failure too", function()
      local f = zk:get_async(ROOT .. "/nope")
      local order = {}
      f:rawlink(function() order[#order + 1] = "first" end)
      f:rawlink(function(g) order[#order + 1] = g.exception.name end)
      f:wait(5)
      assert.are.same({ "first", "NoNodeError" }, order)
    end)

    it("does not call a callback taken back with unlink", function()
      zk:create(ROOT .. "/x", "v")
      local f = zk:get_async(ROOT .. "/x")
      local kept, dropped = 0, 0
      local function drop() dropped = dropped + 1 end
      f:rawlink(drop)
      f:rawlink(function() kept = kept + 1 end)
      f:unlink(drop)
      f:get(5)
      assert.are.equal(0, dropped)
      assert.are.equal(1, kept)
    end)

    it("works on futures made directly, resolved by set and set_exception", function()
      local f = Future.new(zk.handler)
      local got
      f:rawlink(function(g) got = g.value end)
      assert.is_false(f:ready())
      f:set("hello")
      assert.are.equal("hello", got)
      f:set("again") -- a future resolves once
      assert.are.equal("hello", f:get())

      local g = Future.new(zk.handler)
      g:set_exception(errors.NoNodeError("gone", "/g"))
      g:set("late")
      assert.is_false(g:successful())
      local ok, err = pcall(g.get, g)
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.NoNodeError))
      assert.are.equal("/g", err.path)
    end)
  end)

  describe("timeouts", function()
    it("get raises TimeoutError on a future that never resolves; wait returns false", function()
      local f = Future.new(zk.handler)
      local ok, err = pcall(f.get, f, 0.001)
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.TimeoutError))
      assert.is_false(f:wait(0.01))
      assert.is_false(f:ready())
      local ok2, err2 = pcall(f.get_nowait, f)
      assert.is_false(ok2)
      assert.is_true(errors.is(err2, errors.TimeoutError))
    end)

    it("get raises TimeoutError while the server cannot answer; the op finishes later", function()
      zk:create(ROOT .. "/x", "later")
      pause(server)
      local f = zk:get_async(ROOT .. "/x")
      local ok, err = pcall(f.get, f, 0.2)
      server:node(1):resume()
      assert.is_false(ok)
      assert.is_true(errors.is(err, errors.TimeoutError))
      assert.is_false(f:ready())
      assert.are.equal("later", (f:get(10)))
    end)
  end)

  describe("pipelining", function()
    it("resolves 1000 pipelined get_async with the right data", function()
      local n_nodes = 20
      for i = 1, n_nodes do zk:create(ROOT .. "/n" .. i, "value-" .. i) end
      local futures = {}
      for i = 1, 1000 do
        futures[i] = zk:get_async(ROOT .. "/n" .. ((i - 1) % n_nodes + 1))
      end
      local linked = 0
      for _, f in ipairs(futures) do f:rawlink(function() linked = linked + 1 end) end
      testing.wait_for(function() return linked == 1000 end, 20, "1000 futures")
      for i, f in ipairs(futures) do
        assert.is_true(f:successful())
        assert.are.equal("value-" .. ((i - 1) % n_nodes + 1), f.value)
      end
    end)

    it("resolves futures in submission order", function()
      zk:create(ROOT .. "/x", "")
      local order = {}
      local futures = {}
      for i = 1, 50 do
        futures[i] = zk:set_async(ROOT .. "/x", tostring(i))
        futures[i]:rawlink(function() order[#order + 1] = i end)
      end
      futures[50]:get(10)
      for i = 1, 50 do assert.are.equal(i, order[i]) end
      assert.are.equal("50", (zk:get(ROOT .. "/x")))
    end)
  end)

  -- Reads wait in the session's cork until the client next waits or sends anything else
  -- (src/core/ops.c): none of that may show.
  describe("reads sent in bursts", function()
    it("keep their order with the writes around them", function()
      zk:create(ROOT .. "/x", "old")
      local before = zk:get_async(ROOT .. "/x")
      local write = zk:set_async(ROOT .. "/x", "new")
      local after = zk:get_async(ROOT .. "/x")
      local exists = zk:exists_async(ROOT .. "/x")
      local children = zk:get_children_async(ROOT)
      assert.are.equal("new", (after:get(10)))
      assert.are.equal("old", (before:get(10)))
      assert.are.equal(1, write:get(10).version)
      assert.are.equal(1, exists:get(10).version)
      assert.are.same({ "x" }, children:get(10))
    end)

    it("do not hold back a write: another client sees it while this one never waits", function()
      zk:create(ROOT .. "/x", "old")
      local reads = {}
      for i = 1, 10 do reads[i] = zk:get_async(ROOT .. "/x") end
      zk:set_async(ROOT .. "/x", "new")
      local other = helpers.client(server.hosts)
      helpers.wait_until(function() return (other:get(ROOT .. "/x")) == "new" end, 10,
                         "the write seen by another client")
      other:close()
      for i = 1, 10 do assert.are.equal("old", (reads[i]:get(10))) end
    end)

    it("go out a cork-full at a time while the script never waits", function()
      zk:create(ROOT .. "/x", "v")
      -- a window wider than the burst: what is tested is the cork (window_spec: the window)
      local wide = zklua.client{ hosts = server.hosts, max_in_flight = 4000 }
      wide:start()
      local core = require "zklua.core"
      local node = server:node(1)
      local function received() -- requests the server has read, from its srvr report
        local report = core.four_letter("127.0.0.1", node.port, "srvr", 2)
        return tonumber(report and report:match("Received: (%d+)"))
      end
      local before = received()
      local futures = {}
      for i = 1, 3000 do futures[i] = wide:get_async(ROOT .. "/x") end -- the cork holds 1024
      local deadline = core.monotonic() + 10
      while received() - before < 2048 and core.monotonic() < deadline do
        core.sleep(0.05) -- sleeps without dispatching: nothing here sends the cork
      end
      assert.is_true(received() - before >= 2048, "sent without a wait: " ..
                     tostring(received() - before))
      assert.is_false(futures[3000]:ready())
      for i = 1, 3000 do assert.are.equal("v", (futures[i]:get(10))) end
      wide:close()
    end)

    it("make the fd readable, so an event loop polling it completes them", function()
      zk:create(ROOT .. "/x", "v")
      local core = require "zklua.core"
      local fd = zk:fileno()
      assert.is_false(core.poll({ fd }, 0))
      local futures = {}
      for i = 1, 300 do futures[i] = zk:get_async(ROOT .. "/x") end
      local deadline = core.monotonic() + 10
      while not futures[300]:ready() and core.monotonic() < deadline do
        if core.poll({ fd }, 1) then zk:dispatch(0) end
      end
      for i = 1, 300 do
        assert.is_true(futures[i]:ready(), "future " .. i)
        assert.are.equal("v", futures[i].value)
      end
    end)

    it("go out before stop() ends the session: their futures resolve", function()
      zk:create(ROOT .. "/x", "v")
      local f = zk:get_async(ROOT .. "/x")
      zk:stop()
      assert.is_true(f:ready())
      assert.are.equal("v", f:get(0)) -- stop() lets the ops asked for finish
      zk:start()
    end)
  end)

  describe("futures across stop()", function()
    it("an op in flight fails with ConnectionClosedError when the client stops", function()
      zk:create(ROOT .. "/x", "")
      pause(server)
      local f = zk:get_async(ROOT .. "/x")
      zk:stop()
      server:node(1):resume()
      assert.is_true(f:ready())
      assert.is_true(errors.is(f.exception, errors.ConnectionClosedError),
                     "got value " .. tostring(f.value) .. ", exception " .. tostring(f.exception))
      zk:start()
    end)
  end)
end)
