-- Session lifecycle against a standalone server: kazoo's states and listeners, session ids,
-- start timeouts, expiry, stop() with ops in flight, restarting, close(), resuming a session,
-- and the host event-loop interface (fileno / dispatch).
local zklua = require "zklua"
local core = require "zklua.core"
local compat = require "zklua.compat"
local testing = require "zklua.testing"
local child = require "fixtures.child"
local helpers = require "support.helpers"
local errors = zklua.errors

-- Expires zk's session as testing.expire_session does (another handle attaches to the session
-- and closes it), then waits for zk to see LOST.  The client's own reconnection races the other
-- handle for the session and often wins it back before the close arrives (testing.expire_session
-- then times out), so this tries again, quickly, until the session really is gone.
-- during(), when given, runs right after the other handle closed the session, before zk has
-- been told: ops it submits are in flight as the session expires.
local function expire(zk, during)
  for _ = 1, 15 do
    testing.wait_for(function() return zk.state == "CONNECTED" end, 15, "a connected client")
    local id, passwd = zk:client_id()
    local lost = false
    local function on_state(state)
      if state == "LOST" then lost = true; return true end
    end
    zk:add_listener(on_state)
    local other = core.session(zk._hosts, math.floor(zk:session_timeout() * 1000), false,
                               zk._session_hex(id), passwd)
    assert(other:start())
    local connected = false
    local deadline = core.monotonic() + 5
    while not connected and core.monotonic() < deadline do
      other:wait(0.05)
      repeat
        local kind, state = other:next()
        if kind == "state" and state == "CONNECTED" then connected = true end
      until kind == nil or connected
    end
    other:stop()
    other:close()
    if during then during() end
    pcall(testing.wait_for, function() return lost end, 1)
    if lost then return id end
    zk:remove_listener(on_state) -- the client kept its session: try again
  end
  error("could not expire the session")
end

local in_order = helpers.in_order

local eventually = helpers.wait_until

local function error_name(err)
  if not errors.is_error(err) then return tostring(err) end
  if err.class == errors.ZookeeperError then return tostring(err) end -- an unmapped code
  return err.name
end

local function raises(class, fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected " .. class.name .. ", but the call succeeded")
  assert.is_true(errors.is(err, class), "expected " .. class.name .. ", got " .. error_name(err))
  return err
end

describe("a session on a standalone server", function()
  local server
  local clients

  setup(function() server = testing.server() end)
  teardown(function() if server then server:stop() end end)

  before_each(function() clients = {} end)
  after_each(function()
    for _, c in ipairs(clients) do pcall(c.close, c) end
  end)

  -- a client closed after the test
  local function client(opts)
    if opts == nil then opts = server.hosts end
    local c = zklua.client(opts)
    clients[#clients + 1] = c
    return c
  end

  local function started(opts)
    local c = client(opts)
    c:start()
    return c
  end

  describe("states", function()
    it("is LOST before start and CONNECTED after, as kazoo's", function()
      local zk = client()
      assert.are.equal("LOST", zk.state)
      assert.is_false(zk.connected)
      zk:start()
      assert.are.equal("CONNECTED", zk.state)
      assert.is_true(zk.connected)
      assert.are.equal("CONNECTED", zk.client_state)
      assert.are.equal(zklua.states.CONNECTED, zk.state)
    end)

    it("tells listeners each change; remove_listener and returning true unsubscribe",
       function()
      local zk = client()
      local heard, removed, once = {}, {}, {}
      local function removed_listener(state) removed[#removed + 1] = state end
      zk:add_listener(function(state) heard[#heard + 1] = state end)
      zk:add_listener(removed_listener)
      zk:add_listener(function(state)
        once[#once + 1] = state
        return true
      end)
      zk:start()
      assert.are.same({ "CONNECTED" }, heard)
      assert.are.same({ "CONNECTED" }, removed)
      assert.are.same({ "CONNECTED" }, once)

      zk:remove_listener(removed_listener)
      zk:stop()
      assert.are.same({ "CONNECTED", "LOST" }, heard)
      assert.are.equal("LOST", zk.state)
      assert.is_false(zk.connected)
      zk:start()
      assert.are.same({ "CONNECTED", "LOST", "CONNECTED" }, heard)
      assert.are.same({ "CONNECTED" }, removed)
      assert.are.same({ "CONNECTED" }, once)
    end)

    it("a listener that raises does not stop the others", function()
      local logged = {}
      local zk = client{ hosts = server.hosts,
                         logger = function(level, msg) logged[#logged + 1] = level .. " " .. msg end }
      local heard = {}
      zk:add_listener(function() error("listener failure") end)
      zk:add_listener(function(state) heard[#heard + 1] = state end)
      zk:start()
      assert.are.same({ "CONNECTED" }, heard)
      assert.is_truthy(table.concat(logged, "\n"):find("listener failure", 1, true))
    end)
  end)

    it("keeps its listeners as a set, in the order added, through 20k adds and removes",
       function()
      local zk = client()
      local heard = {}
      local fns = {}
      for i = 1, 20000 do
        fns[i] = function(state) heard[#heard + 1] = i .. state end
        zk:add_listener(fns[i])
      end
      local function twice(state) heard[#heard + 1] = "twice" .. state end
      zk:add_listener(twice)
      zk:add_listener(twice) -- again: kazoo's listeners are a set, so it is called once
      for i = 1, 20000 do
        if i % 3 ~= 0 then zk:remove_listener(fns[i]) end
      end
      zk:remove_listener(fns[1]) -- already removed: nothing happens
      zk:add_listener(fns[1])    -- added again: it comes last
      zk:start()
      local expected = {}
      for i = 3, 20000, 3 do expected[#expected + 1] = i .. "CONNECTED" end
      expected[#expected + 1] = "twiceCONNECTED"
      expected[#expected + 1] = "1CONNECTED"
      assert.are.same(expected, heard)
    end)

  describe("client_id", function()
    it("is nil before start, then an id and a 16-byte password the server knows", function()
      local zk = client()
      assert.is_nil(zk:client_id())
      zk:start()
      local id, passwd = zk:client_id()
      assert.is_true(compat.is_id(id), "id " .. tostring(id))
      local hex = string.format("0x%x", id)
      assert.are.equal("string", type(passwd))
      assert.are.equal(16, #passwd)
      -- the server lists the connection with that session id
      local cons = core.four_letter("127.0.0.1", server:node(1).port, "cons", 2)
      assert.is_truthy(cons and cons:find("sid=" .. hex, 1, true), "cons: " .. tostring(cons))
      -- and an ephemeral node is owned by it
      zk:create("/owned", "", { ephemeral = true })
      local stat = zk:exists("/owned")
      assert.are.equal(id, stat.owner_session_id)
    end)
  end)

  describe("start", function()
    it("raises a TimeoutError when no server answers, and leaves the client stopped",
       function()
      local port = core.free_port()
      local zk = client{ hosts = "127.0.0.1:" .. port, timeout = 5 }
      local heard = {}
      zk:add_listener(function(state) heard[#heard + 1] = state end)
      local t0 = core.monotonic()
      local err = raises(errors.TimeoutError, zk.start, zk, 1)
      assert.is_true(core.monotonic() - t0 < 10, "start(1) did not give up")
      assert.are.equal("TimeoutError", err.name)
      assert.is_string(tostring(err))
      assert.are.equal("LOST", zk.state)
      assert.is_false(zk.connected)
      assert.are.equal("CLOSED", zk.client_state)
      assert.is_nil(zk:client_id())
      -- stopped: ops refuse at once instead of queueing, and nothing happens later
      raises(errors.ConnectionClosedError, zk.exists, zk, "/")
      raises(errors.ConnectionClosedError, zk.get_async, zk, "/")
      zk:dispatch(0.3)
      assert.are.equal("LOST", zk.state)
      assert.are.same({}, heard)
    end)

    it("a client whose start timed out can start once a server is there", function()
      local zk = client{ hosts = server.hosts, timeout = 5 }
      server:node(1):stop()
      local ok, err = pcall(function()
        raises(errors.TimeoutError, zk.start, zk, 1)
        assert.are.equal("LOST", zk.state)
      end)
      server:node(1):start()
      assert(ok, err)
      zk:start(20)
      assert.are.equal("CONNECTED", zk.state)
      zk:create("/after-timeout", "x", { ephemeral = true })
      assert.are.equal("x", (zk:get("/after-timeout")))
    end)
  end)

  describe("expiry", function()
    it("gives LOST then CONNECTED with a new session; ephemerals go; DataWatch goes on",
       function()
      local zk = started()
      local observer = started()
      local states = {}
      zk:add_listener(function(state) states[#states + 1] = state end)
      zk:create("/exp-eph", "e", { ephemeral = true })
      zk:ensure_path("/exp-data")
      local seen = {}
      zk:DataWatch("/exp-data", function(data) seen[#seen + 1] = data end)
      local fired = {}
      zk:exists("/exp-oneshot", function(ev) fired[#fired + 1] = ev.type end)
      local old_id = zk:client_id()

      expire(zk)
      testing.wait_for(function() return zk.state == "CONNECTED" end, 15, "a new session")

      assert.is_true(in_order(states, { "LOST", "CONNECTED" }), table.concat(states, " "))
      assert.are.equal("CONNECTED", zk.client_state)
      local new_id = zk:client_id()
      assert.is_truthy(new_id)
      assert.are_not.equal(old_id, new_id)
      assert.is_nil(zk:exists("/exp-eph"))
      assert.is_nil(observer:exists("/exp-eph"))
      -- the new session works, ephemerals included
      zk:create("/exp-eph", "again", { ephemeral = true })
      assert.are.equal(new_id, observer:exists("/exp-eph").owner_session_id)

      -- the DataWatch re-armed on the new session
      observer:set("/exp-data", "after expiry")
      testing.wait_for(function() return seen[#seen] == "after expiry" end, 10,
                       "the DataWatch to fire after the expiry")
      observer:set("/exp-data", "and again")
      testing.wait_for(function() return seen[#seen] == "and again" end, 10,
                       "the DataWatch to fire a second time")
      -- the one-shot watch died with the old session: it was told so (a NONE event), once,
      -- and a change now does not fire it
      observer:create("/exp-oneshot", "")
      zk:dispatch(0.3)
      assert.are.same({ "NONE" }, fired)
      zk:delete("/exp-eph")
    end)

    it("fails the ops in flight with SessionExpiredError, and retried ops succeed", function()
      local zk = started()
      zk:ensure_path("/inflight")
      local futures, retried = {}, {}
      -- enough tries that only an error the policy refuses to retry can make a command fail
      local retry = zklua.retry{ max_tries = 10, delay = 0.05, max_delay = 0.5 }
      local function submit(n)
        for i = 1, n do
          if i % 2 == 0 then
            futures[#futures + 1] = zk:set_async("/inflight", tostring(i))
          else
            futures[#futures + 1] = zk:get_async("/inflight")
          end
        end
      end
      -- The race that decides how an op in flight fails is a matter of thread scheduling:
      -- several expiries give it several chances.
      for round = 1, 12 do
        submit(20)
        expire(zk, function()
          -- the session is gone at the server; the client has not been told yet
          submit(20)
          retried[#retried + 1] = { pcall(retry, zk.set, zk, "/inflight", "r" .. round) }
        end)
        testing.wait_for(function() return zk.state == "CONNECTED" end, 15, "a new session")
      end

      local outcomes, pending = {}, 0
      for _, f in ipairs(futures) do
        if not f:wait(15) then
          pending = pending + 1
        else
          local name = f:successful() and "ok" or error_name(f.exception)
          outcomes[name] = (outcomes[name] or 0) + 1
        end
      end
      assert.are.equal(0, pending, "futures never resolved")
      local problems = {}
      for name, count in pairs(outcomes) do
        -- ConnectionLoss: an op on the wire when the connection dropped (kazoo's too);
        -- OperationTimeoutError: libzookeeper's word for a connection attempt that timed out.
        -- Both are retried by a retry policy.  Not ConnectionClosedError: that means "the
        -- client was stopped", which it was not, and a retry policy gives up on it.
        if not (name == "ok" or name == "SessionExpiredError" or name == "ConnectionLoss"
                or name == "OperationTimeoutError") then
          problems[#problems + 1] = string.format("%d of %d ops in flight failed with %s",
                                                  count, #futures, name)
        end
      end
      for i, r in ipairs(retried) do
        if not r[1] then
          problems[#problems + 1] = "a retried set failed (" .. i .. " of " .. #retried ..
                                    "): " .. error_name(r[2])
        end
      end
      assert.are.same({}, problems)
      assert.is_truthy(outcomes.SessionExpiredError, "no op saw the expiry")
      assert.are.equal("r12", (zk:get("/inflight")))
    end)
  end)

  describe("stop", function()
    it("with 1000 ops in flight resolves every future, reports LOST and ends the session",
       function()
      -- a session timeout far above the 5 s allowed below: the node must go because stop()
      -- closed the session, not because the session expired
      local zk = started{ hosts = server.hosts, timeout = 30 }
      local observer = started()
      local heard = {}
      zk:add_listener(function(state) heard[#heard + 1] = state end)
      zk:ensure_path("/busy")
      zk:create("/busy-eph", "", { ephemeral = true })
      local futures = {}
      for i = 1, 1000 do
        local kind = i % 4
        if kind == 0 then
          futures[i] = zk:get_async("/busy")
        elseif kind == 1 then
          futures[i] = zk:set_async("/busy", tostring(i))
        elseif kind == 2 then
          futures[i] = zk:create_async("/busy/n-", "", { sequence = true, ephemeral = true })
        else
          futures[i] = zk:exists_async("/busy", function() end)
        end
      end
      zk:stop()

      -- every future is resolved by the time stop() returns
      local ok, closed, other, pending = 0, 0, {}, 0
      for _, f in ipairs(futures) do
        if not f:ready() then
          pending = pending + 1
        elseif f:successful() then
          ok = ok + 1
        elseif errors.is(f.exception, errors.ConnectionClosedError) then
          closed = closed + 1
        else
          other[#other + 1] = error_name(f.exception)
        end
      end
      assert.are.equal(0, pending, "futures left pending by stop()")
      assert.are.same({}, other)
      assert.are.equal(1000, ok + closed)
      -- a resolved future answers get() without waiting
      for _, f in ipairs(futures) do
        if f:successful() then assert.has_no.errors(function() f:get(0) end) end
      end

      assert.are.equal("LOST", heard[#heard])
      assert.are.equal("LOST", zk.state)
      assert.are.equal("CLOSED", zk.client_state)
      assert.is_false(zk.connected)
      eventually(function() return observer:exists("/busy-eph") == nil end, 5,
                       "the stopped client's ephemeral node to vanish")
      eventually(function() return #observer:get_children("/busy") == 0 end, 5,
                       "the stopped client's sequential ephemerals to vanish")
      raises(errors.ConnectionClosedError, zk.get, zk, "/busy")
    end)

    it("a stopped client starts again with a new session", function()
      local zk = started()
      local first = zk:client_id()
      zk:create("/restart-eph", "1", { ephemeral = true })
      zk:stop()
      zk:stop() -- twice is harmless
      zk:start()
      assert.are.equal("CONNECTED", zk.state)
      local second = zk:client_id()
      assert.is_truthy(second)
      assert.are_not.equal(first, second)
      assert.is_nil(zk:exists("/restart-eph"))
      zk:create("/restart-eph", "2", { ephemeral = true })
      assert.are.equal("2", (zk:get("/restart-eph")))
      zk:restart()
      assert.are.equal("CONNECTED", zk.state)
      assert.are_not.equal(second, (zk:client_id()))
      assert.is_nil(zk:exists("/restart-eph"))
    end)
  end)

  describe("close", function()
    it("then every op, and start, raise ConnectionClosedError", function()
      local zk = started()
      zk:ensure_path("/closed")
      zk:close()
      assert.are.equal("LOST", zk.state)
      assert.are.equal("CLOSED", zk.client_state)
      raises(errors.ConnectionClosedError, zk.get, zk, "/closed")
      raises(errors.ConnectionClosedError, zk.exists, zk, "/closed")
      raises(errors.ConnectionClosedError, zk.set, zk, "/closed", "x")
      raises(errors.ConnectionClosedError, zk.create, zk, "/closed/x", "x")
      raises(errors.ConnectionClosedError, zk.delete, zk, "/closed")
      raises(errors.ConnectionClosedError, zk.get_children, zk, "/closed")
      raises(errors.ConnectionClosedError, zk.get_async, zk, "/closed")
      raises(errors.ConnectionClosedError, zk.start, zk)
      -- ConnectionClosedError is a SessionExpiredError, as in kazoo
      local err = raises(errors.SessionExpiredError, zk.sync, zk, "/")
      assert.are.equal("ConnectionClosedError", err.name)
      assert.is_nil(zk:client_id())
      assert.are.equal(0, zk:dispatch(0))
      zk:close() -- twice is harmless
      zk:stop()
    end)
  end)

  describe("client_id option", function()
    it("resumes a session another process left behind", function()
      local observer = started()
      local c = child.spawn(helpers.lua_argv("spec/fixtures/hold_session.lua", server.hosts,
                                             "/resumed-eph", "sleep", "30"))
      local ok, err = pcall(function()
        local line = c:wait_line("^ready", 20)
        local id, hex = line:match("^ready %d+ (0x%x+) (%x+)$")
        assert.is_truthy(id, line)
        local passwd = hex:gsub("%x%x", function(b) return string.char(tonumber(b, 16)) end)
        -- the holder dies without closing its session: the session and its node live on
        c:signal("KILL")
        assert.is_true(c:wait_exit(10))
        assert.are.equal(id, string.format("0x%x", observer:exists("/resumed-eph").owner_session_id))

        local zk = client{ hosts = server.hosts, timeout = 30, client_id = { id, passwd } }
        zk:start()
        assert.are.equal(id, string.format("0x%x", (zk:client_id())))
        -- the resumed session owns the node: closing it removes the node
        assert.are.equal(zk:client_id(), zk:exists("/resumed-eph").owner_session_id)
        zk:close()
        eventually(function() return observer:exists("/resumed-eph") == nil end, 5,
                         "the resumed session's ephemeral node to vanish")
      end)
      c:cleanup()
      assert(ok, err)
    end)
  end)

  describe("as part of a host event loop", function()
    it("fileno is an integer fd", function()
      local zk = started()
      local fd = zk:fileno()
      assert.is_true(helpers.is_integer(fd), "fileno " .. tostring(fd))
      assert.is_true(fd >= 0)
      zk:close()
      assert.is_nil(zk:fileno())
    end)

    it("dispatch(0) never blocks and returns how many events it handled", function()
      local zk = started()
      assert.are.equal(0, zk:dispatch(0))
      assert.are.equal(0, zk:dispatch())
      local futures = {}
      for i = 1, 5 do futures[i] = zk:exists_async("/") end
      local handled, rounds = 0, 0
      local deadline = core.monotonic() + 10
      while handled < 5 and core.monotonic() < deadline do
        core.poll({ zk:fileno() }, 1) -- the fd is readable while events wait
        local n = zk:dispatch(0)
        assert.is_true(helpers.is_integer(n))
        handled, rounds = handled + n, rounds + 1
      end
      assert.are.equal(5, handled)
      for i = 1, 5 do assert.is_true(futures[i]:ready()) end
      assert.are.equal(0, zk:dispatch(0))
      -- the fd is not readable when nothing waits
      assert.is_false(core.poll({ zk:fileno() }, 0))
    end)

    it("dispatch(timeout) returns when nothing happens, and early when something does",
       function()
      local zk = started()
      local t0 = core.monotonic()
      assert.are.equal(0, zk:dispatch(0.2))
      assert.is_true(core.monotonic() - t0 < 5, "dispatch(0.2) hung")
      local f = zk:exists_async("/")
      local handled = 0
      t0 = core.monotonic()
      while not f:ready() and core.monotonic() - t0 < 10 do handled = handled + zk:dispatch(30) end
      assert.is_true(f:ready())
      assert.is_true(handled >= 1)
      assert.is_true(core.monotonic() - t0 < 10, "dispatch(30) waited though an event came")
    end)

    it("a watch callback may stop the client", function()
      local zk = started()
      local observer = started()
      local fired
      zk:exists("/stop-from-watch", function(event)
        fired = event
        zk:stop()
      end)
      observer:create("/stop-from-watch", "")
      testing.wait_for(function() return fired ~= nil end, 10, "the watch")
      assert.are.equal("CREATED", fired.type)
      assert.are.equal("LOST", zk.state)
      assert.are.equal("CLOSED", zk.client_state)
      raises(errors.ConnectionClosedError, zk.get, zk, "/")
      zk:start()
      assert.are.equal("CONNECTED", zk.state)
      observer:delete("/stop-from-watch")
    end)

    it("a watch callback may close the client", function()
      local zk = started()
      local observer = started()
      local fired, after
      zk:get_children("/", function(event)
        fired = event
        zk:close()
        after = { pcall(zk.get, zk, "/") }
      end)
      -- more events queued behind the one that closes
      for _ = 1, 20 do zk:exists_async("/") end
      observer:create("/close-from-watch", "")
      testing.wait_for(function() return fired ~= nil end, 10, "the watch")
      assert.are.equal("CHILD", fired.type)
      assert.is_false(after[1])
      assert.is_true(errors.is(after[2], errors.ConnectionClosedError))
      assert.are.equal(0, zk:dispatch(0))
      assert.is_nil(zk:fileno())
      observer:delete("/close-from-watch")
    end)
  end)
end)
