-- ReadLock and WriteLock with layout = "curator" and Curator 5.4's InterProcessReadWriteLock
-- (Debian's libcurator-recipes-java, spec/fixtures/java/CuratorReadWriteLock.java in its own
-- JVM): Curator's node names, a Java writer excluding zklua readers and writers and the other
-- way round, readers of both sides sharing, a queued writer holding later readers back (on
-- either side), a holder's SUSPENDED (it keeps the lock) and LOST (the other side gets it),
-- one ReadLock object shared by coroutines, and bad input.
-- Every wait is for an event: a line the Java program prints, or a znode watched by zklua.
local zklua = require "zklua"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local interop = require "support.curator"

local SESSION_MS = 8000
local CURATOR = { layout = "curator" }
local READ_NODE = "^_c_%x+%-%x+%-%x+%-%x+%-%x+%-__READ__%d%d%d%d%d%d%d%d%d%d$"
local WRITE_NODE = "^_c_%x+%-%x+%-%x+%-%x+%-%x+%-__WRIT__%d%d%d%d%d%d%d%d%d%d$"

describe("ReadLock/WriteLock{layout = 'curator'} and InterProcessReadWriteLock", function()
  local server, zk, path
  local s = interop.scaffold("/rwlock", function(t) server, zk, path = t.server, t.zk, t.path end)
  setup(s.setup); teardown(s.teardown); before_each(s.before_each); after_each(s.after_each)

  local function start()
    return s:start("CuratorReadWriteLock", server.hosts, path, SESSION_MS)
  end

  local function client()
    return s:closing(helpers.client(server.hosts))
  end

  it("Curator's node names; Curator lists zklua's nodes, zklua Curator's", function()
    local curator = start()
    local r = zk:ReadLock(path, "zklua-r", CURATOR)
    local w = client():WriteLock(path, "zklua-w", CURATOR)
    assert.is_true(r:acquire())
    assert.matches(READ_NODE, r.node)
    assert.equals("zklua-r", zk:get(path .. "/" .. r.node))
    curator:send("read")
    curator:expect("^read acquired$") -- readers share
    assert.is_false(w:acquire(false))
    curator:send("nodes")
    curator:expect("^nodes 2$")
    r:release()
    curator:send("unread")
    curator:expect("^read released$")
    assert.is_true(w:acquire())
    assert.matches(WRITE_NODE, w.node)
    curator:send("nodes")
    curator:expect("^nodes 1$")
    local _, name = curator:expect("^node (.*)$")
    assert.equals(path .. "/" .. w.node, name)
    -- a Java holder's data is Curator's default: the JVM's address, not an identifier
    curator:send("read 200")
    curator:expect("^read timeout$")
    w:release()
    curator:send("read")
    curator:expect("^read acquired$")
    local contenders = r:contenders()
    assert.equals(1, #contenders)
    assert.matches("^%d+%.%d+%.%d+%.%d+$", contenders[1])
  end)

  it("a Curator writer excludes zklua readers and writers; a zklua reader gets it after",
     function()
    local curator = start()
    local r = zk:ReadLock(path, "zklua-r", CURATOR)
    local w = client():WriteLock(path, "zklua-w", CURATOR)
    curator:send("read")
    curator:expect("^read acquired$")
    assert.is_true(r:acquire(false)) -- a Curator reader shares with a zklua one
    r:release()
    curator:send("unread")
    curator:expect("^read released$")
    curator:send("write")
    curator:expect("^write acquired$")
    assert.is_false(r:acquire(false))
    assert.is_false(w:acquire(false))
    local observer = client()
    s:on_change(observer, function() curator:send("unwrite") end) -- once zklua's node is there
    assert.is_true(r:acquire(true, 60))
    curator:expect("^write released$")
    assert.matches(READ_NODE, r.node)
    r:release()
  end)

  it("a zklua writer excludes Curator readers and writers; they get it after", function()
    local curator = start()
    local other = start()
    local w = zk:WriteLock(path, "zklua-w", CURATOR)
    assert.is_true(w:acquire())
    curator:send("read 200")
    curator:expect("^read timeout$")
    other:send("write 200")
    other:expect("^write timeout$")
    curator:send("read")
    s:wait_children(2, "Curator's read node")
    assert.is_false(curator:printed("^read acquired$"))
    w:release()
    curator:expect("^read acquired$")
  end)

  it("a queued Curator writer holds later zklua readers back, as Curator's own", function()
    local curator = start()
    local r1 = zk:ReadLock(path, "r1", CURATOR)
    local r2 = client():ReadLock(path, "r2", CURATOR)
    assert.is_true(r1:acquire())
    curator:send("write") -- queued behind zklua's reader
    s:wait_children(2, "Curator's write node")
    assert.is_false(r2:acquire(false)) -- a reader waits behind a lower writer
    r1:release()
    curator:expect("^write acquired$")
    local observer = client()
    s:on_change(observer, function() curator:send("unwrite") end) -- once r2's node is queued
    assert.is_true(r2:acquire(true, 60))
    curator:expect("^write released$")
    r2:release()
  end)

  it("SUSPENDED: a zklua holder keeps the lock; Curator's writer waits until it releases",
     function()
    local proxy = testing.proxy(server:node(1))
    local member = zklua.client{ hosts = proxy.hosts, timeout = SESSION_MS / 1000 }
    s:closing(member)
    member:start()
    local r = member:ReadLock(path, "zklua-r", CURATOR)
    assert.is_true(r:acquire())
    -- the JVM starts before the cut: the cut must stay shorter than the session timeout
    local curator = start()
    proxy:refuse(true)
    proxy:drop()
    testing.wait_for(function() return member.state == "SUSPENDED" end, 30, "SUSPENDED")
    assert.is_true(r.is_acquired) -- its node lives with the session
    curator:send("write 300")
    curator:expect("^write timeout$")
    assert.equals("SUSPENDED", member.state) -- still the same session, cut off
    proxy:refuse(false)
    testing.wait_for(function() return member.state == "CONNECTED" end, 30, "CONNECTED")
    assert.is_true(r.is_acquired)
    curator:send("write")
    s:wait_children(2, "Curator's write node")
    r:release()
    curator:expect("^write acquired$")
    proxy:stop()
  end)

  it("LOST: a zklua writer's session expires; Curator's reader gets the lock", function()
    local holder = client()
    local w = holder:WriteLock(path, "zklua-w", CURATOR)
    local lost = false
    w:on_lost(function() lost = true end)
    assert.is_true(w:acquire())
    local curator = start()
    curator:send("read")
    s:wait_children(2, "Curator's read node")
    helpers.expire(holder)
    curator:expect("^read acquired$")
    testing.wait_for(function() return lost end, 30, "the holder to learn of LOST")
    assert.is_false(w.is_acquired)
  end)

  it("coroutines sharing one ReadLock hold it in turn, after Curator's writer", function()
    local cq_handler = require "zklua.handlers.cqueues"
    local curator = start()
    curator:send("write")
    curator:expect("^write acquired$")
    local n = 3
    local inside, most, done, order, arrived = 0, 0, 0, {}, {}
    interop.in_cqueues(function(cq)
      local member = zklua.client{ hosts = server.hosts, handler = cq_handler.new(cq) }
      member:start()
      local r = member:ReadLock(path, "shared", CURATOR)
      for i = 1, n do
        cq:wrap(function()
          arrived[#arrived + 1] = i
          r:with({ timeout = 60 }, function()
            order[#order + 1] = i
            inside = inside + 1
            most = math.max(most, inside)
            member.handler.sleep(0.01) -- the others run meanwhile
            inside = inside - 1
          end)
          done = done + 1
        end)
      end
      local function children_n()
        local list = member:get_children(path)
        return #list
      end
      while children_n() < 2 do member.handler.sleep(0.02) end -- zklua's node queued
      assert.same({}, order) -- nobody holds it while Curator writes
      curator:send("unwrite")
      assert.is_true(member.handler.wait(function() return done == n end, 60))
      member:close()
    end)
    assert.equals(1, most)
    assert.equals(n, #order)
    assert.same(arrived, order) -- in the order they asked
    curator:expect("^write released$")
  end)

  it("bad input is refused before anything is sent", function()
    local raises = helpers.raises
    local err = raises(errors.BadArgumentsError, zk.ReadLock, zk, path, "x", { layout = "curatr" })
    assert.matches("option 'layout' must be \"kazoo\" or \"curator\"", tostring(err))
    err = raises(errors.BadArgumentsError, zk.WriteLock, zk, path, 7, CURATOR)
    assert.matches("identifier must be a string or nil", tostring(err))
    err = raises(errors.BadArgumentsError, zk.WriteLock, zk, path, "x",
                 { layout = "curator", extra_lock_patterns = { "a.b" } })
    assert.matches("regular expression character", tostring(err))
    local r = zk:ReadLock(path, "x", CURATOR)
    err = raises(errors.BadArgumentsError, r.acquire, r, "yes")
    assert.matches("blocking", tostring(err))
    assert.is_nil(zk:exists(path))
  end)
end)
