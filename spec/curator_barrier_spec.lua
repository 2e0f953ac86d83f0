-- zk:Barrier is Curator 5.4's DistributedBarrier layout too (one node at the path: the barrier
-- is up while it exists; setBarrier creates it with plain parents, removeBarrier deletes it,
-- waitOnBarrier watches it), shared with a real Curator program
-- (spec/fixtures/java/CuratorBarrier.java in its own JVM): each side's barrier holds the
-- other's waiters until it is removed, through a waiter's SUSPENDED and LOST, and with one
-- Barrier object shared by coroutines.  zk:DoubleBarrier(path, n, id, {layout = "curator"}) is
-- Curator 5.4's DistributedDoubleBarrier (spec/fixtures/java/CuratorDoubleBarrier.java): zklua
-- and Curator members of one barrier enter and leave together, through a zklua member's
-- SUSPENDED and LOST, and with one DoubleBarrier object shared by coroutines.
-- Waits are for events: a line the Java program prints, a call's return, a coroutine waiting.
local zklua = require "zklua"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local interop = require "support.curator"
local cqueues = require "cqueues"
local cq_handler = require "zklua.handlers.cqueues"

local SESSION_MS = 8000

describe("Barrier and Curator's DistributedBarrier", function()
  local server, zk, path
  local s = interop.scaffold("/barrier", function(t) server, zk, path = t.server, t.zk, t.path end,
                             { suffix = "/gate" })
  setup(s.setup); teardown(s.teardown); before_each(s.before_each); after_each(s.after_each)

  local function start()
    return s:start("CuratorBarrier", server.hosts, path, SESSION_MS)
  end

  -- Runs body(member, env) in a coroutine of a fresh cqueues controller, member a client of
  -- hosts under it; env.spawn(fn) runs fn in another coroutine; env.until_(pred) waits for
  -- pred (polled between sleeps: handler.waiting() then counts the other coroutines only);
  -- env.line(program, pattern) waits for a printed line.
  local function in_coroutines(hosts, body)
    interop.in_cqueues(function(cq)
      local member = zklua.client{ hosts = hosts, handler = cq_handler.new(cq),
                                   timeout = SESSION_MS / 1000 }
      member:start()
      local env = {}
      function env.spawn(fn) cq:wrap(fn) end
      function env.until_(pred, what)
        local deadline = cqueues.monotime() + 60
        while not pred() do
          if cqueues.monotime() > deadline then error("timed out waiting for " .. what) end
          member.handler.sleep(0.02)
        end
      end
      function env.line(program, pattern)
        env.until_(function() return program:printed(pattern) end, pattern)
      end
      local okb, errb = pcall(body, member, env)
      member:close()
      if not okb then error(errb, 0) end
    end, 180)
  end

  it("a zklua barrier holds a Curator waiter until zklua removes it", function()
    local b = zk:Barrier(path)
    b:create()
    local curator = start()
    curator:send("wait 300")
    curator:expect("^timeout$")
    curator:send("wait")
    assert.is_false(curator:printed("^passed$"))
    assert.is_true(b:remove())
    curator:expect("^passed$")
  end)

  it("a Curator barrier holds zklua waiters (coroutines sharing one Barrier) until it goes",
     function()
    local curator = start()
    curator:send("set")
    curator:expect("^set$")
    assert.is_not_nil(zk:exists(path))
    in_coroutines(server.hosts, function(member, env)
      local b = member:Barrier(path)
      assert.is_false(b:wait(0.3)) -- the barrier is up
      local results = {}
      for i = 1, 3 do env.spawn(function() results[i] = { pcall(b.wait, b, 60) } end) end
      env.until_(function() return member.handler.waiting() >= 3 end, "three waiters")
      assert.same({}, results)
      curator:send("remove")
      env.until_(function() return results[1] and results[2] and results[3] end, "results")
      for i = 1, 3 do assert.same({ true, true }, results[i]) end
    end)
    curator:expect("^removed$")
  end)

  it("SUSPENDED: a waiter cut off while Curator removes the barrier passes once reconnected",
     function()
    local curator = start()
    curator:send("set")
    curator:expect("^set$")
    local proxy = testing.proxy(server:node(1))
    in_coroutines(proxy.hosts, function(member, env)
      local b = member:Barrier(path)
      local result
      env.spawn(function() result = { pcall(b.wait, b, 60) } end)
      env.until_(function() return member.handler.waiting() >= 1 end, "the waiter")
      proxy:refuse(true)
      proxy:drop()
      env.until_(function() return member.state == "SUSPENDED" end, "SUSPENDED")
      curator:send("remove")
      env.line(curator, "^removed$")
      assert.is_nil(result) -- cut off: it cannot know yet
      proxy:refuse(false)
      env.until_(function() return result ~= nil end, "the wait to end")
      assert.same({ true, true }, result)
      assert.equals("CONNECTED", member.state)
    end)
    proxy:stop()
  end)

  it("LOST: a waiter whose session expires waits on on the new session", function()
    local curator = start()
    curator:send("set")
    curator:expect("^set$")
    in_coroutines(server.hosts, function(member, env)
      local b = member:Barrier(path)
      local result
      env.spawn(function() result = { pcall(b.wait, b, 60) } end)
      env.until_(function() return member.handler.waiting() >= 1 end, "the waiter")
      testing.expire_session(member, 30)
      env.until_(function() return member.state == "CONNECTED" end, "the new session")
      assert.is_nil(result) -- the barrier is still up
      curator:send("remove")
      env.until_(function() return result ~= nil end, "the wait to end")
      assert.same({ true, true }, result)
    end)
  end)

  it("bad input is refused before anything is sent", function()
    local err = helpers.raises(errors.BadArgumentsError, zk.Barrier, zk, 42)
    assert.matches("path", tostring(err))
    local b = zk:Barrier(path)
    err = helpers.raises(errors.BadArgumentsError, b.wait, b, "soon")
    assert.matches("timeout", tostring(err))
    assert.is_nil(zk:exists(path))
  end)

  describe("DoubleBarrier{layout = \"curator\"} and Curator's DistributedDoubleBarrier", function()
    local function curator_member(qty)
      return s:start("CuratorDoubleBarrier", server.hosts, path, SESSION_MS, qty)
    end

    -- The member nodes under path (ready left out), as a set, and their count.
    local function members(client)
      local ok, list = pcall(client.get_children, client, path)
      local set, n = {}, 0
      for _, name in ipairs(ok and list or {}) do
        if name ~= "ready" then set[name] = true; n = n + 1 end
      end
      return set, n
    end

    -- The one member node that is in after but not in before.
    local function new_node(before, after)
      local found
      for name in pairs(after) do
        if not before[name] then assert.is_nil(found); found = name end
      end
      return assert(found)
    end

    -- Two Curator JVMs and two zklua clients share one barrier of 4; last_kind ("curator" or
    -- "zklua") is the side of the member that enters last and leaves last: nobody passes enter
    -- before the 4th entered, nobody passes leave before the last left.
    local function mixed_group(last_kind)
      local j1, j2 = curator_member(4), curator_member(4)
      in_coroutines(server.hosts, function(member, env)
        local other = zklua.client{ hosts = server.hosts, handler = member.handler,
                                    timeout = SESSION_MS / 1000 }
        other:start()
        local z1 = member:DoubleBarrier(path, 4, "z1", { layout = "curator" })
        local z2 = other:DoubleBarrier(path, 4, "z2", { layout = "curator" })
        local results, names = {}, {}
        local function zklua_call(z, key, method)
          env.spawn(function() results[key] = { pcall(z[method], z, 60) } end)
        end
        -- enter, one member at a time; each one's node recorded
        local order = last_kind == "curator" and { "j1", "z1", "z2", "j2" }
                      or { "j1", "z1", "j2", "z2" }
        local by = { j1 = j1, j2 = j2, z1 = z1, z2 = z2 }
        for i, key in ipairs(order) do
          local before = members(zk)
          if key:sub(1, 1) == "j" then by[key]:send("enter") else zklua_call(by[key], key, "enter") end
          env.until_(function() return select(2, members(zk)) == i end, key .. "'s node")
          names[key] = new_node(before, (members(zk)))
          if i < 4 then -- nobody passed: 4 are needed
            assert.is_false(j1:printed("^entered$") or j2:printed("^entered$"))
            assert.is_nil(results.z1); assert.is_nil(results.z2)
            assert.is_nil(zk:exists(path .. "/ready"))
          end
        end
        for _, key in ipairs({ "z1", "z2" }) do
          assert.truthy(names[key] == by[key].node_name, key)
          assert.truthy(names[key]:match("^%x+%-%x+%-%x+%-%x+%-%x+$") and #names[key] == 36)
          local data, stat = zk:get(path .. "/" .. names[key])
          assert.equals(key, data)
          assert.is_true(stat.owner_session_id ~= 0)
        end
        env.line(j1, "^entered$"); env.line(j2, "^entered$")
        env.until_(function() return results.z1 and results.z2 end, "the zklua enters")
        assert.same({ true, true }, results.z1); assert.same({ true, true }, results.z2)
        results.z1, results.z2 = nil, nil
        -- leave: everyone but the last; the last one holds them all
        local last = order[4]
        local lowest = names.j1
        for _, name in pairs(names) do if name < lowest then lowest = name end end
        for _, key in ipairs(order) do
          if key ~= last then
            if key:sub(1, 1) == "j" then by[key]:send("leave") else zklua_call(by[key], key, "leave") end
          end
        end
        -- every leaver but the lowest deletes its node and waits; the lowest waits with its own
        env.until_(function()
          for name in pairs(members(zk)) do
            if name ~= names[last] and name ~= lowest then return false end
          end
          return true
        end, "the leavers' nodes to go")
        env.until_(function()
          return member.handler.waiting() >= (last_kind == "zklua" and 1 or 2)
        end, "the zklua leavers waiting")
        assert.is_false(j1:printed("^left$") or j2:printed("^left$"))
        assert.is_nil(results.z1); assert.is_nil(results.z2)
        if last:sub(1, 1) == "j" then by[last]:send("leave") else zklua_call(by[last], last, "leave") end
        env.line(j1, "^left$"); env.line(j2, "^left$")
        env.until_(function() return results.z1 and results.z2 end, "the zklua leaves")
        assert.same({ true, true }, results.z1); assert.same({ true, true }, results.z2)
        assert.is_false(z1.participating or z2.participating)
        assert.is_false(j1:printed("^error") or j2:printed("^error"))
        other:close()
      end)
      -- ready went with the last leaver; the container path goes once empty
      testing.wait_for(function() return zk:exists(path) == nil end, 30, "the container to go")
    end

    it("a Curator member entering and leaving last holds zklua and Curator members",
       function() mixed_group("curator") end)

    it("a zklua member entering and leaving last holds Curator and zklua members",
       function() mixed_group("zklua") end)

    it("SUSPENDED: a zklua member cut off while Curator enters and leaves goes on", function()
      local j = curator_member(2)
      local proxy = testing.proxy(server:node(1))
      in_coroutines(proxy.hosts, function(member, env)
        local z = member:DoubleBarrier(path, 2, "z", { layout = "curator" })
        local result
        env.spawn(function() result = { pcall(z.enter, z, 60) } end)
        env.until_(function() return zk:exists(path .. "/" .. z.node_name) end, "z's node")
        local function cut()
          proxy:refuse(true)
          proxy:drop()
          env.until_(function() return member.state == "SUSPENDED" end, "SUSPENDED")
        end
        cut()
        j:send("enter")
        env.line(j, "^entered$") -- z's node counts: its session lives
        assert.is_nil(result) -- cut off: it cannot know yet
        proxy:refuse(false)
        env.until_(function() return result ~= nil end, "z's enter")
        assert.same({ true, true }, result)
        result = nil
        env.spawn(function() result = { pcall(z.leave, z, 60) } end)
        env.until_(function() return member.handler.waiting() >= 1 end, "z's leave")
        cut()
        j:send("leave")
        assert.is_nil(result)
        proxy:refuse(false)
        env.until_(function() return result ~= nil end, "z's leave to end")
        assert.same({ true, true }, result)
        env.line(j, "^left$")
        assert.is_false(j:printed("^error"))
      end)
      proxy:stop()
    end)

    it("LOST: an enter goes on on the new session; an expired member's leave still waits",
       function()
      local j = curator_member(2)
      in_coroutines(server.hosts, function(member, env)
        local z = member:DoubleBarrier(path, 2, "z", { layout = "curator" })
        local result, lost = nil, 0
        z:on_lost(function() lost = lost + 1 end)
        env.spawn(function() result = { pcall(z.enter, z, 60) } end)
        env.until_(function() return zk:exists(path .. "/" .. z.node_name) end, "z's node")
        testing.expire_session(member, 30)
        env.until_(function() return member.state == "CONNECTED" end, "the new session")
        env.until_(function()
          local _, stat = pcall(zk.exists, zk, path .. "/" .. z.node_name)
          return stat and stat.owner_session_id == member:client_id()
        end, "z's node on the new session")
        assert.is_nil(result)
        j:send("enter")
        env.line(j, "^entered$")
        env.until_(function() return result ~= nil end, "z's enter")
        assert.same({ true, true }, result)
        -- entered, then its node expires: on_lost runs, it stays a member that must leave
        testing.expire_session(member, 30)
        env.until_(function() return lost == 1 end, "on_lost")
        assert.is_true(z.participating)
        result = nil
        env.spawn(function() result = { pcall(z.leave, z, 60) } end)
        env.until_(function() return member.handler.waiting() >= 1 end, "z's leave")
        assert.is_nil(result) -- Curator's member is still in
        j:send("leave")
        env.line(j, "^left$")
        env.until_(function() return result ~= nil end, "z's leave to end")
        assert.same({ true, true }, result)
      end)
    end)

    it("coroutines sharing one DoubleBarrier take turns and pass together with Curator",
       function()
      local j = curator_member(2)
      in_coroutines(server.hosts, function(member, env)
        local z = member:DoubleBarrier(path, 2, "z", { layout = "curator" })
        local results = {}
        local function call(i, method)
          env.spawn(function() results[i] = { pcall(z[method], z, 60) } end)
        end
        call(1, "enter"); call(2, "enter")
        env.until_(function() return member.handler.waiting() >= 2 end, "two enters")
        assert.same({}, results)
        j:send("enter")
        env.line(j, "^entered$")
        env.until_(function() return results[1] and results[2] end, "the enters")
        assert.same({ true, true }, results[1]); assert.same({ true, true }, results[2])
        assert.equals(2, select(2, members(zk))) -- two nodes: Curator's and the one object's
        results = {}
        call(1, "leave"); call(2, "leave")
        env.until_(function() return member.handler.waiting() >= 2 end, "two leaves")
        assert.same({}, results)
        j:send("leave")
        env.line(j, "^left$")
        env.until_(function() return results[1] and results[2] end, "the leaves")
        assert.same({ true, true }, results[1]); assert.same({ true, true }, results[2])
      end)
    end)

    it("bad input is refused before anything is sent", function()
      local err = helpers.raises(errors.BadArgumentsError, zk.DoubleBarrier, zk, path, 2, "x",
                                 { layout = "zoo" })
      assert.matches("layout", tostring(err))
      err = helpers.raises(errors.BadArgumentsError, zk.DoubleBarrier, zk, path, 2,
                           { layout = 1 })
      assert.matches("layout", tostring(err))
      err = helpers.raises(errors.BadArgumentsError, zk.DoubleBarrier, zk, path, 2, "x",
                           { mode = "curator" })
      assert.matches("unknown option", tostring(err))
      err = helpers.raises(errors.BadArgumentsError, zk.DoubleBarrier, zk, path, 0,
                           { layout = "curator" })
      assert.matches("num_clients", tostring(err))
      local d = zk:DoubleBarrier(path, 2, { layout = "curator" })
      assert.equals("curator", d.layout)
      err = helpers.raises(errors.BadArgumentsError, d.enter, d, "soon")
      assert.matches("timeout", tostring(err))
      assert.is_nil(zk:exists(path))
    end)
  end)
end)
