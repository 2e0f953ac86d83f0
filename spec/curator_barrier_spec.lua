-- zk:Barrier is Curator 5.4's DistributedBarrier layout too (one node at the path: the barrier
-- is up while it exists; setBarrier creates it with plain parents, removeBarrier deletes it,
-- waitOnBarrier watches it), shared with a real Curator program
-- (spec/fixtures/java/CuratorBarrier.java in its own JVM): each side's barrier holds the
-- other's waiters until it is removed, through a waiter's SUSPENDED and LOST, and with one
-- Barrier object shared by coroutines.
-- Waits are for events: a line the Java program prints, a call's return, a coroutine waiting.
local zklua = require "zklua"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local java = require "support.java"
local cqueues = require "cqueues"
local cq_handler = require "zklua.handlers.cqueues"

local SESSION_MS = 8000

describe("Barrier and Curator's DistributedBarrier", function()
  local server, zk, path
  local counter = 0
  local programs = {}

  local function start()
    local p = java.start("CuratorBarrier", server.hosts, path, SESSION_MS)
    programs[#programs + 1] = p
    return p
  end

  -- Runs body(member, env) in a coroutine of a fresh cqueues controller, member a client of
  -- hosts under it; env.spawn(fn) runs fn in another coroutine; env.until_(pred) waits for
  -- pred (polled between sleeps: handler.waiting() then counts the other coroutines only);
  -- env.line(program, pattern) waits for a printed line.
  local function in_coroutines(hosts, body)
    local cq = cqueues.new()
    local finished, failure = false, nil
    cq:wrap(function()
      local ok, err = pcall(function()
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
      end)
      if not ok then failure = tostring(err) end
      finished = true
    end)
    local deadline = cqueues.monotime() + 180
    while not finished and cqueues.monotime() < deadline do assert(cq:step(0.5)) end
    assert.is_nil(failure)
    assert.is_true(finished)
  end

  setup(function()
    server = testing.server()
    helpers.client(server.hosts, "/barrier"):close()
  end)
  teardown(function() server:stop() end)

  before_each(function()
    counter = counter + 1
    path = "/barrier/t" .. counter .. "/gate"
    zk = helpers.client(server.hosts)
  end)

  after_each(function()
    for i = #programs, 1, -1 do programs[i]:stop(); programs[i] = nil end
    helpers.drop(zk, "/barrier/t" .. counter)
  end)

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
end)
