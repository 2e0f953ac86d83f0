-- Election{layout = "curator-selector"} and Curator 5.4's LeaderSelector (autoRequeue, its
-- standard listener adapter; spec/fixtures/java/CuratorSelector.java in its own JVM): the
-- leader holds an InterProcessMutex on the path; zklua's run(fn) is takeLeadership and
-- run({requeue = true}, fn) autoRequeue.  Terms alternate between the two sides; a zklua
-- leader's SUSPENDED (is_leader false, nobody else leads, leader again on the same session)
-- and LOST (Curator leads; zklua queues again on its new session); one Election shared by
-- coroutines; bad input.  Waits are for events: lines the Java program prints, znode
-- changes, states.
local zklua = require "zklua"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local interop = require "support.curator"

local SESSION_MS = 8000
local SELECTOR = { layout = "curator-selector" }
local LOCK_NODE = "^_c_%x+%-%x+%-%x+%-%x+%-%x+%-lock%-%d%d%d%d%d%d%d%d%d%d$"

describe("Election{layout = 'curator-selector'} and LeaderSelector", function()
  local server, zk, path
  local s = interop.scaffold("/selector", function(t) server, zk, path = t.server, t.zk, t.path end)
  setup(s.setup); teardown(s.teardown); before_each(s.before_each); after_each(s.after_each)

  local function curator_selector(hosts, id)
    return s:start("CuratorSelector", hosts or server.hosts, path, id or "curator-1", SESSION_MS)
  end

  local function client(hosts)
    local c = s:closing(zklua.client{ hosts = hosts or server.hosts, timeout = SESSION_MS / 1000 })
    c:start()
    return c
  end

  it("zklua and Curator take turns, both requeueing; Curator sees zklua's id", function()
    local curator = curator_selector()
    curator:send("start")
    curator:expect("^leading$")
    local e = zk:Election(path, "zklua-1", SELECTOR)
    assert.equals("curator-selector", e.layout)
    assert.equals("standard", e.error_policy)
    local observer = client()
    s:on_change(observer, function() curator:send("yield") end) -- zklua's node is queued
    local seen = {}
    local ok, terms = e:run({ requeue = true }, function()
      seen[#seen + 1] = e.is_leader
      assert.matches(LOCK_NODE, e.lock.node)
      if #seen == 1 then
        curator:expect("^yielded$")
        s:wait_children(2, "Curator queued again")
        curator:send("leader")
        curator:expect("^leader zklua%-1$")
        assert.same({ "zklua-1", "curator-1" }, e:contenders())
        curator:send("yield") -- Curator's next term ends at once: zklua leads again
      else
        curator:expect("^leading$")
        curator:expect("^yielded$")
        e:cancel() -- no third term: the next wait is cancelled
      end
    end)
    assert.is_true(ok)
    assert.equals(2, terms)
    assert.same({ true, true }, seen)
    curator:expect("^leading$") -- Curator leads once zklua left
  end)

  it("SUSPENDED: a zklua leader stops leading, nobody else leads, and it leads again",
     function()
    local proxy = testing.proxy(server:node(1))
    local member = client(proxy.hosts)
    local e = member:Election(path, "zklua-1", SELECTOR)
    local lost, led = 0, 0
    e:on_lost(function() lost = lost + 1 end)
    e:on_leader(function() led = led + 1 end)
    local curator
    local ok = e:run(function()
      curator = curator_selector()
      curator:send("start")
      curator:expect("^started$")
      s:wait_children(2, "Curator's node")
      proxy:refuse(true)
      proxy:drop()
      testing.wait_for(function() return not e.is_leader end, 30, "leadership to end")
      assert.equals("SUSPENDED", member.state)
      assert.equals(1, lost)
      curator:send("leader")
      curator:expect("^leader zklua%-1$") -- zklua's node is kept: nobody else leads
      assert.is_false(curator:printed("^leading$"))
      proxy:refuse(false)
      testing.wait_for(function() return e.is_leader end, 30, "leadership to come back")
      assert.equals(1, led)
    end)
    assert.is_true(ok)
    curator:expect("^leading$")
    proxy:stop()
  end)

  it("LOST: Curator leads once zklua's session expired; zklua queues again", function()
    local member = client()
    local e = member:Election(path, "zklua-1", SELECTOR)
    local lost = false
    e:on_lost(function() lost = true end)
    local curator
    local observer = client()
    local ok, terms = e:run({ requeue = true }, function()
      curator = curator_selector()
      curator:send("start")
      curator:expect("^started$")
      s:wait_children(2, "Curator's node")
      helpers.expire(member)
      curator:expect("^leading$")
      assert.is_true(lost)
      assert.is_false(e.is_leader)
      -- requeued on the new session: once its node is there, end the run
      s:on_change(observer, function() e:cancel() end)
    end)
    assert.is_true(ok)
    assert.equals(1, terms)
    assert.is_false(curator:printed("^interrupted$"))
  end)

  it("one Election shared by coroutines: a second run() is refused at once", function()
    local cq_handler = require "zklua.handlers.cqueues"
    local results = {}
    interop.in_cqueues(function(cq)
      local member = zklua.client{ hosts = server.hosts, handler = cq_handler.new(cq) }
      member:start()
      local e = member:Election(path, "shared", SELECTOR)
      local function one(i)
        results[i] = { pcall(e.run, e, { requeue = true }, function()
          member.handler.wait(function() return results[3 - i] ~= nil end, 30)
          e:cancel()
        end) }
      end
      cq:wrap(function() one(1) end)
      cq:wrap(function() one(2) end)
      assert.is_true(member.handler.wait(function() return results[1] and results[2] end, 60))
      member:close()
    end)
    local led, refused = results[1], results[2]
    if not led[1] then led, refused = refused, led end
    assert.same({ true, true, 1 }, led) -- one term, then cancelled
    assert.is_false(refused[1])
    assert.is_true(errors.is(refused[2], errors.KazooException), tostring(refused[2]))
  end)

  it("bad input is refused before anything is sent", function()
    local raises = helpers.raises
    local err = raises(errors.BadArgumentsError, zk.Election, zk, path, "x",
                       { layout = "curator-selectr" })
    assert.matches("option 'layout' must be \"kazoo\", \"curator\" or \"curator%-selector\"",
                   tostring(err))
    local e = zk:Election(path, "x", SELECTOR)
    err = raises(errors.BadArgumentsError, e.run, e, { requeue = "yes" }, function() end)
    assert.matches("requeue", tostring(err))
    err = raises(errors.BadArgumentsError, e.run, e, { again = true }, function() end)
    assert.matches("unknown option 'again'", tostring(err))
    assert.is_nil(zk:exists(path))
  end)
end)
