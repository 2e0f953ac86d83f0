-- One-shot watches, DataWatch and ChildrenWatch.
local zklua = require "zklua"
local testing = require "zklua.testing"
local watchers = require "zklua.watchers"
local helpers = require "support.helpers"
local child = require "fixtures.child"

local ROOT = "/watch"

local expire = helpers.expire
local sorted = helpers.sorted

describe("watches", function()
  local server, zk, other

  -- Lets any event that is coming arrive: a round trip on both clients, then a short wait.
  local function settle()
    other:sync(ROOT)
    zk:sync(ROOT)
    testing.sleep(0.2)
  end

  -- Runs during() while zk's next blocking read waits for its answer: the server answers a
  -- session's requests in order, so this exists' answer comes first and the read's wait runs
  -- its callback.
  local function while_next_read_waits(during)
    zk:exists_async(ROOT):rawlink(function() during() end)
  end

  -- Inside while_next_read_waits: once zk's read sent after the exists is answered (a later
  -- request of zk's is answered after it: one connection answers in order), change() runs;
  -- then zk reads path, and the server sends zk the watch event before that reply, so the
  -- event is queued (its newer read runs once this callback returns) with no timing guess.
  local function answered_then(change, path)
    zk:exists(ROOT)
    change()
    zk:exists(path)
  end

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  before_each(function()
    zk = helpers.client(server.hosts)
    other = helpers.client(server.hosts)
    zk:ensure_path(ROOT)
  end)

  after_each(function()
    helpers.drop(other, ROOT)
    if zk then zk:close() end
  end)

  describe("one-shot watches", function()
    it("a get watch fires once with a CHANGED event", function()
      local path = ROOT .. "/g"
      zk:create(path, "v0")
      local events = {}
      zk:get(path, function(ev) events[#events + 1] = ev end)
      other:set(path, "v1")
      testing.wait_for(function() return #events > 0 end, 5, "the watch")
      other:set(path, "v2")
      settle()
      assert.are.equal(1, #events)
      assert.are.equal("CHANGED", events[1].type)
      assert.are.equal("CONNECTED", events[1].state)
      assert.are.equal(path, events[1].path)
    end)

    it("a get watch fires DELETED when the node is deleted", function()
      local path = ROOT .. "/g"
      zk:create(path, "")
      local events = {}
      zk:get(path, function(ev) events[#events + 1] = ev end)
      other:delete(path)
      testing.wait_for(function() return #events > 0 end, 5, "the watch")
      settle()
      assert.are.equal(1, #events)
      assert.are.equal("DELETED", events[1].type)
      assert.are.equal(path, events[1].path)
    end)

    it("a watch fires for a change made by the same client", function()
      local path = ROOT .. "/g"
      zk:create(path, "")
      local event
      zk:get(path, function(ev) event = ev end)
      zk:set(path, "mine")
      testing.wait_for(function() return event ~= nil end, 5, "the watch")
      assert.are.equal("CHANGED", event.type)
    end)

    it("an exists watch on a missing node fires CREATED once", function()
      local path = ROOT .. "/later"
      local events = {}
      assert.is_nil(zk:exists(path, function(ev) events[#events + 1] = ev end))
      other:create(path, "")
      testing.wait_for(function() return #events > 0 end, 5, "the watch")
      other:set(path, "x")
      other:delete(path)
      settle()
      assert.are.equal(1, #events)
      assert.are.equal("CREATED", events[1].type)
      assert.are.equal(path, events[1].path)
      assert.are.equal("CONNECTED", events[1].state)
    end)

    it("an exists watch on an existing node fires CHANGED, or DELETED", function()
      local path = ROOT .. "/e"
      zk:create(path, "")
      local changed, deleted
      assert.is_table(zk:exists(path, function(ev) changed = ev end))
      other:set(path, "x")
      testing.wait_for(function() return changed ~= nil end, 5, "the CHANGED watch")
      assert.are.equal("CHANGED", changed.type)
      zk:exists(path, function(ev) deleted = ev end)
      other:delete(path)
      testing.wait_for(function() return deleted ~= nil end, 5, "the DELETED watch")
      assert.are.equal("DELETED", deleted.type)
    end)

    it("a get_children watch fires once with a CHILD event", function()
      local path = ROOT .. "/parent"
      zk:create(path, "")
      local events = {}
      assert.are.same({}, zk:get_children(path, function(ev) events[#events + 1] = ev end))
      other:create(path .. "/kid1", "")
      testing.wait_for(function() return #events > 0 end, 5, "the watch")
      other:create(path .. "/kid2", "")
      other:delete(path .. "/kid1")
      settle()
      assert.are.equal(1, #events)
      assert.are.equal("CHILD", events[1].type)
      assert.are.equal(path, events[1].path)
    end)

    it("a get_children watch does not fire for a change of the node's data", function()
      local path = ROOT .. "/parent"
      zk:create(path, "")
      local events = {}
      zk:get_children(path, function(ev) events[#events + 1] = ev end)
      other:set(path, "data")
      settle()
      assert.are.equal(0, #events)
      other:create(path .. "/kid", "")
      testing.wait_for(function() return #events > 0 end, 5, "the watch")
    end)

    it("a get_children watch fires when a child is deleted, and DELETED for the node", function()
      local path = ROOT .. "/parent"
      zk:create(path .. "/kid", "", { makepath = true })
      local child_event, node_event
      zk:get_children(path, function(ev) child_event = ev end)
      other:delete(path .. "/kid")
      testing.wait_for(function() return child_event ~= nil end, 5, "the CHILD watch")
      assert.are.equal("CHILD", child_event.type)
      zk:get_children(path, function(ev) node_event = ev end)
      other:delete(path)
      testing.wait_for(function() return node_event ~= nil end, 5, "the DELETED watch")
      assert.are.equal("DELETED", node_event.type)
    end)

    it("a one-shot watch survives a connection loss (SUSPENDED) and fires afterwards", function()
      local path = ROOT .. "/suspended"
      -- the outage through a proxy (refused, connection dropped), not a server restart: a
      -- restart on a loaded machine can outlast the session
      local p = testing.proxy(server:node(1))
      local zk = zklua.client{ hosts = p.hosts, timeout = 10 } -- luacheck: ignore 431
      zk:start()
      zk:create(path, "v0")
      local event
      local states = {}
      zk:add_listener(function(state) states[#states + 1] = state end)
      zk:get(path, function(ev) event = ev end)
      local session = zk:client_id()
      p:refuse(true)
      p:drop()
      testing.wait_for(function() return zk.state == "SUSPENDED" end, 10, "SUSPENDED")
      p:refuse(false)
      testing.wait_for(function() return zk.state == "CONNECTED" end, 15, "reconnection")
      assert.are.equal(session, (zk:client_id()), "the session")
      assert.are.same({ "SUSPENDED", "CONNECTED" }, states)
      assert.is_nil(event)
      other:set(path, "v1")
      testing.wait_for(function() return event ~= nil end, 5, "the watch")
      assert.are.equal("CHANGED", event.type)
      zk:close()
      p:stop()
    end)

    it("on a session expiry each is called once with a NONE event (EXPIRED_SESSION)",
       function()
      local path = ROOT .. "/expiry"
      zk:create(path, "v0")
      local events, states = {}, {}
      zk:add_listener(function(state) states[#states + 1] = state end)
      local function record(kind)
        return function(ev)
          events[#events + 1] = { kind = kind, type = ev.type, state = ev.state, path = ev.path,
                                  after = states[#states] }
        end
      end
      zk:get(path, record("get"))
      zk:exists(path .. "/none", record("exists"))
      zk:get_children(path, record("children"))
      expire(zk)
      testing.wait_for(function() return zk.state == "CONNECTED" end, 10, "a new session")
      other:set(path, "v1")
      other:create(path .. "/none", "")
      settle()
      assert.are.same({
        { kind = "get", type = "NONE", state = "EXPIRED_SESSION", after = "LOST" },
        { kind = "exists", type = "NONE", state = "EXPIRED_SESSION", after = "LOST" },
        { kind = "children", type = "NONE", state = "EXPIRED_SESSION", after = "LOST" },
      }, events)
    end)

    it("a watch loop that re-arms itself learns that its session expired", function()
      local path = ROOT .. "/loop"
      zk:create(path, "v0")
      local seen, expired, done = {}, false, false
      local function loop(ev)
        if done then return end
        if ev and ev.state == "EXPIRED_SESSION" then
          expired = true -- the session died: start over once connected
          return
        end
        local data = zk:get(path, loop)
        seen[#seen + 1] = data
      end
      loop(nil)
      other:set(path, "v1")
      testing.wait_for(function() return seen[#seen] == "v1" end, 5, "the loop")
      expire(zk)
      assert.is_true(expired)
      testing.wait_for(function() return zk.state == "CONNECTED" end, 10, "a new session")
      loop(nil)
      other:set(path, "v2")
      testing.wait_for(function() return seen[#seen] == "v2" end, 5, "the re-armed loop")
      done = true
    end)

    it("a watch passed to a failing get is never called", function()
      local path = ROOT .. "/missing"
      local called = false
      assert.has_error(function() zk:get(path, function() called = true end) end)
      other:create(path, "")
      other:set(path, "x")
      settle()
      assert.is_false(called)
    end)

    it("a watch callback may call the client again", function()
      local path = ROOT .. "/reenter"
      zk:create(path, "v0")
      local seen, children, rewatched
      zk:get(path, function()
        seen = zk:get(path) -- a synchronous call from inside the callback
        children = zk:get_children(ROOT)
        zk:exists(path, function(ev) rewatched = ev end)
      end)
      other:set(path, "v1")
      testing.wait_for(function() return seen ~= nil end, 5, "the watch")
      assert.are.equal("v1", seen)
      assert.are.same({ "reenter" }, children)
      other:set(path, "v2")
      testing.wait_for(function() return rewatched ~= nil end, 5, "the watch set in the callback")
      assert.are.equal("CHANGED", rewatched.type)
    end)

    it("an error in a watch callback does not break the client", function()
      local path = ROOT .. "/boom"
      zk:create(path, "")
      local logged = {}
      local client = zklua.client{ hosts = server.hosts,
                                   logger = function(_, msg) logged[#logged + 1] = msg end }
      client:start()
      local second
      client:get(path, function() error("boom in callback") end)
      client:exists(path, function(ev) second = ev end)
      other:set(path, "x")
      testing.wait_for(function() return second ~= nil end, 5, "the second watch")
      assert.are.equal("x", (client:get(path)))
      assert.truthy(table.concat(logged, "\n"):find("boom in callback", 1, true))
      client:close()
    end)
  end)

  describe("DataWatch", function()
    it("is called at once, on each change and on deletion", function()
      local path = ROOT .. "/dw"
      zk:create(path, "v0")
      local calls = {}
      zk:DataWatch(path, function(data, stat, event)
        calls[#calls + 1] = { data = data, stat = stat, event = event }
      end)
      assert.are.equal(1, #calls)
      assert.are.equal("v0", calls[1].data)
      assert.are.equal(0, calls[1].stat.version)
      assert.is_nil(calls[1].event)

      other:set(path, "v1")
      testing.wait_for(function() return #calls >= 2 end, 5, "the change")
      assert.are.equal("v1", calls[2].data)
      assert.are.equal(1, calls[2].stat.version)
      assert.are.equal("CHANGED", calls[2].event.type)

      other:set(path, "v2")
      testing.wait_for(function() return #calls >= 3 end, 5, "the second change")
      assert.are.equal("v2", calls[3].data)

      other:delete(path)
      testing.wait_for(function() return #calls >= 4 end, 5, "the deletion")
      assert.is_nil(calls[4].data)
      assert.is_nil(calls[4].stat)
      assert.are.equal("DELETED", calls[4].event.type)
      settle()
      assert.are.equal(4, #calls)
    end)

    it("is called with nil, nil for a missing node, then when it is created", function()
      local path = ROOT .. "/dw-missing"
      local calls = {}
      zk:DataWatch(path, function(data, stat) calls[#calls + 1] = { data = data, stat = stat } end)
      assert.are.equal(1, #calls)
      assert.is_nil(calls[1].data)
      assert.is_nil(calls[1].stat)
      other:create(path, "born")
      testing.wait_for(function() return #calls >= 2 end, 5, "the creation")
      assert.are.equal("born", calls[2].data)
      assert.are.equal(0, calls[2].stat.version)
      -- and again after deletion and re-creation
      other:delete(path)
      testing.wait_for(function() return #calls >= 3 end, 5, "the deletion")
      other:create(path, "again")
      testing.wait_for(function() return #calls >= 4 end, 5, "the re-creation")
      assert.are.equal("again", calls[4].data)
    end)

    it("sees every value of a node set several times", function()
      local path = ROOT .. "/dw-seq"
      zk:create(path, "0")
      local values = {}
      zk:DataWatch(path, function(data) values[#values + 1] = data end)
      for i = 1, 5 do
        other:set(path, tostring(i))
        testing.wait_for(function() return values[#values] == tostring(i) end, 5, "value " .. i)
      end
      assert.are.same({ "0", "1", "2", "3", "4", "5" }, values)
    end)

    it("stops when the function returns false", function()
      local path = ROOT .. "/dw-stop"
      zk:create(path, "v0")
      local calls = 0
      zk:DataWatch(path, function()
        calls = calls + 1
        if calls == 2 then return false end
      end)
      other:set(path, "v1")
      testing.wait_for(function() return calls >= 2 end, 5, "the change")
      other:set(path, "v2")
      other:set(path, "v3")
      other:delete(path)
      settle()
      assert.are.equal(2, calls)
    end)

    it("works as a decorator: zk:DataWatch(path)(fn)", function()
      local path = ROOT .. "/dw-deco"
      zk:create(path, "v0")
      local values = {}
      local function fn(data) values[#values + 1] = data end
      local returned = zk:DataWatch(path)(fn)
      assert.are.equal(fn, returned)
      assert.are.same({ "v0" }, values)
      other:set(path, "v1")
      testing.wait_for(function() return #values >= 2 end, 5, "the change")
      assert.are.same({ "v0", "v1" }, values)
    end)

    it("the function may call the client", function()
      local path = ROOT .. "/dw-call"
      zk:create(path, "v0")
      local kids = {}
      zk:DataWatch(path, function(data)
        if data then kids[#kids + 1] = #zk:get_children(path) end
      end)
      other:create(path .. "/k", "")
      other:set(path, "v1")
      testing.wait_for(function() return #kids >= 2 end, 5, "the change")
      assert.are.same({ 0, 1 }, kids)
    end)

    it("keeps firing after a session expiry, for changes made by another client", function()
      local path = ROOT .. "/dw-expire"
      zk:create(path, "v0")
      local values = {}
      zk:DataWatch(path, function(data) values[#values + 1] = data end)
      local plain = {}
      zk:get(path, function(ev) plain[#plain + 1] = ev end)
      expire(zk)
      testing.wait_for(function() return zk.state == "CONNECTED" end, 10, "a new session")
      other:set(path, "after")
      testing.wait_for(function() return values[#values] == "after" end, 10,
                       "the DataWatch after the expiry")
      settle()
      assert.are.equal("v0", values[1])
      assert.are.equal("after", values[#values])
      -- the one-shot watch died with the old session: called once, with a NONE event
      assert.are.equal(1, #plain)
      assert.are.equal("NONE", plain[1].type)
      assert.are.equal("EXPIRED_SESSION", plain[1].state)
      -- and it keeps going
      other:set(path, "later")
      testing.wait_for(function() return values[#values] == "later" end, 5, "a later change")
    end)

    it("never reports an older value after a newer one (a fetch overtaken by a watch)",
       function()
      local path = ROOT .. "/dw-order"
      zk:create(path, "v0")
      local values = {}
      -- zk's first read returns v0; before it is back in Lua, the node changes, the watch that
      -- read set fires, and a newer read reports "v1" (it runs once this callback returns:
      -- callbacks never nest): the older v0 must not follow it
      while_next_read_waits(function()
        answered_then(function() other:set(path, "v1") end, path)
      end)
      zk:DataWatch(path, function(data) values[#values + 1] = data end)
      settle()
      assert.are.same({ "v1" }, values)
      other:set(path, "v2")
      testing.wait_for(function() return values[#values] == "v2" end, 5, "a later change")
      assert.are.same({ "v1", "v2" }, values)
    end)

    it("reports a change made while the session was expired", function()
      local path = ROOT .. "/dw-missed"
      zk:create(path, "v0")
      local values = {}
      zk:DataWatch(path, function(data) values[#values + 1] = data end)
      expire(zk)
      other:set(path, "meanwhile")
      testing.wait_for(function() return values[#values] == "meanwhile" end, 10,
                       "the change made during the expiry")
    end)
  end)

  -- A burst past the refetch window (zklua.watchers): N nodes, a DataWatch each; another
  -- process sets them all while this one runs no event loop, so every change event is queued
  -- before the first is handled.  burst(base, during) returns what each watch saw last, and
  -- two functions: the most reads in flight (sampled in every call) and whether a refetch
  -- ever waited; during() runs in the first call that sees one waiting.
  describe("DataWatch refetches in a burst past the window", function()
    local WINDOW = watchers.refetch_window
    local N = 3 * WINDOW

    local function burst(base, during)
      local last, most, waited = {}, 0, false
      zk:create(base, "")
      for i = 1, N do zk:create(base .. "/n" .. i, "0") end
      for i = 1, N do
        zk:DataWatch(base .. "/n" .. i, function(data)
          last[i] = data
          local reg = zk._data_watches
          if reg.flying > most then most = reg.flying end
          if reg.head < reg.tail then
            if not waited and during then during() end
            waited = true
          end
        end)
      end
      local argv = helpers.lua_argv("spec/fixtures/watch_burst.lua", "write", server.hosts,
                                    base, tostring(N))
      for i, word in ipairs(argv) do argv[i] = child.quote(word) end
      local _, err, code = helpers.run(table.concat(argv, " "), 60)
      assert.are.equal(0, code, "the writer process: " .. err)
      return last, function() return most end, function() return waited end
    end

    -- whether every watch saw value last (value(i) when a function)
    local function all_are(last, value)
      for i = 1, N do
        local wanted = value
        if type(value) == "function" then wanted = value(i) end
        if last[i] ~= wanted then return false end
      end
      return true
    end

    it("every change is reported, with at most the window's reads in flight", function()
      local last, most, waited = burst(ROOT .. "/window")
      helpers.wait_until(function() return all_are(last, "1") end, 60, "every DataWatch")
      assert.is_true(waited(), "no refetch waited: the burst never filled the window")
      assert.is_true(most() <= WINDOW, most() .. " reads in flight")
      assert.are.equal(0, zk._data_watches.flying)
    end)

    it("a stop while refetches wait loses no watch: each re-reads at the next start",
       function()
      local base = ROOT .. "/stopped"
      local last = burst(base, function() zk:stop() end)
      helpers.wait_until(function() return zk.state == "LOST" end, 10, "the stop")
      zk:start()
      for i = 1, N, 97 do other:set(base .. "/n" .. i, "2") end
      helpers.wait_until(function()
        return all_are(last, function(i) return (i - 1) % 97 == 0 and "2" or "1" end)
      end, 60, "every DataWatch after the restart")
      assert.are.equal(0, zk._data_watches.flying)
      other:set(base .. "/n" .. N, "3")
      helpers.wait_until(function() return last[N] == "3" end, 10, "a later change")
    end)

    it("a session expiry (LOST) while refetches wait loses no watch", function()
      local base = ROOT .. "/expired"
      local last = burst(base, function() expire(zk) end)
      helpers.wait_until(function() return all_are(last, "1") end, 60,
                         "every DataWatch after the expiry")
      for i = 1, N do other:set_async(base .. "/n" .. i, "2") end
      other:sync(base)
      helpers.wait_until(function() return all_are(last, "2") end, 60, "every later change")
      assert.are.equal(0, zk._data_watches.flying)
    end)
  end)

  describe("testing.expire_session", function()
    it("expires the session at the first call, every time", function()
      for i = 1, 5 do
        local before = zk:client_id()
        local ok, err = pcall(testing.expire_session, zk, 10)
        assert(ok, "attempt " .. i .. ": " .. tostring(err))
        testing.wait_for(function() return zk.state == "CONNECTED" end, 10, "a new session")
        assert.are_not.equal(before, zk:client_id())
      end
    end)
  end)

  describe("ChildrenWatch", function()
    it("never reports an older list after a newer one (a fetch overtaken by a watch)",
       function()
      local path = ROOT .. "/cw-order"
      zk:create(path .. "/a", "", { makepath = true })
      local calls = {}
      while_next_read_waits(function()
        answered_then(function() other:create(path .. "/b", "") end, path)
      end)
      zk:ChildrenWatch(path, function(children) calls[#calls + 1] = sorted(children) end)
      settle()
      assert.are.same({ { "a", "b" } }, calls)
      other:create(path .. "/c", "")
      testing.wait_for(function() return #calls >= 2 end, 5, "a later change")
      assert.are.same({ { "a", "b" }, { "a", "b", "c" } }, calls)
    end)

    it("is called at once and on every change of the children", function()
      local path = ROOT .. "/cw"
      zk:create(path .. "/a", "", { makepath = true })
      local calls = {}
      zk:ChildrenWatch(path, function(children) calls[#calls + 1] = sorted(children) end)
      assert.are.same({ { "a" } }, calls)
      other:create(path .. "/b", "")
      testing.wait_for(function() return #calls >= 2 end, 5, "the new child")
      assert.are.same({ "a", "b" }, calls[2])
      other:delete(path .. "/a")
      testing.wait_for(function() return #calls >= 3 end, 5, "the deleted child")
      assert.are.same({ "b" }, calls[3])
      other:set(path, "data") -- not a change of the children
      settle()
      assert.are.equal(3, #calls)
    end)

    it("stops when the function returns false", function()
      local path = ROOT .. "/cw-stop"
      zk:create(path, "")
      local calls = 0
      zk:ChildrenWatch(path, function()
        calls = calls + 1
        if calls == 2 then return false end
      end)
      other:create(path .. "/a", "")
      testing.wait_for(function() return calls >= 2 end, 5, "the change")
      other:create(path .. "/b", "")
      other:create(path .. "/c", "")
      settle()
      assert.are.equal(2, calls)
    end)

    it("stops when the node is deleted", function()
      local path = ROOT .. "/cw-gone"
      zk:create(path, "")
      local calls = 0
      zk:ChildrenWatch(path, function() calls = calls + 1 end)
      assert.are.equal(1, calls)
      other:delete(path)
      settle()
      other:create(path, "")
      other:create(path .. "/x", "")
      settle()
      assert.are.equal(1, calls)
    end)

    it("works as a decorator: zk:ChildrenWatch(path)(fn)", function()
      local path = ROOT .. "/cw-deco"
      zk:create(path, "")
      local calls = {}
      local function fn(children) calls[#calls + 1] = children end
      assert.are.equal(fn, zk:ChildrenWatch(path)(fn))
      assert.are.same({ {} }, calls)
      other:create(path .. "/x", "")
      testing.wait_for(function() return #calls >= 2 end, 5, "the change")
      assert.are.same({ "x" }, calls[2])
    end)

    it("passes the event with send_event", function()
      local path = ROOT .. "/cw-event"
      zk:create(path, "")
      local calls = {}
      zk:ChildrenWatch(path, function(children, event)
        calls[#calls + 1] = { children = children, event = event }
      end, { send_event = true })
      assert.are.equal(1, #calls)
      assert.are.same({}, calls[1].children)
      assert.is_nil(calls[1].event)
      other:create(path .. "/x", "")
      testing.wait_for(function() return #calls >= 2 end, 5, "the change")
      assert.are.same({ "x" }, calls[2].children)
      assert.is_table(calls[2].event)
      assert.are.equal("CHILD", calls[2].event.type)
      assert.are.equal(path, calls[2].event.path)
    end)

    it("without send_event the function gets the children only", function()
      local path = ROOT .. "/cw-noevent"
      zk:create(path, "")
      local counts = {}
      zk:ChildrenWatch(path, function(...) counts[#counts + 1] = select("#", ...) end)
      other:create(path .. "/x", "")
      testing.wait_for(function() return #counts >= 2 end, 5, "the change")
      assert.are.same({ 1, 1 }, counts)
    end)

    it("keeps firing after a session expiry", function()
      local path = ROOT .. "/cw-expire"
      zk:create(path, "")
      local calls = {}
      zk:ChildrenWatch(path, function(children) calls[#calls + 1] = sorted(children) end)
      expire(zk)
      testing.wait_for(function() return zk.state == "CONNECTED" end, 10, "a new session")
      other:create(path .. "/after", "")
      testing.wait_for(function()
        local last = calls[#calls]
        return last and last[1] == "after"
      end, 10, "the ChildrenWatch after the expiry")
    end)
  end)
end)
