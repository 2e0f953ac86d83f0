-- Election{layout = "curator"} follows Curator 5.4's LeaderLatch on SUSPENDED (its default
-- StandardConnectionStateErrorPolicy: SUSPENDED and LOST end leadership), and keeps kazoo's
-- behaviour with error_policy = "session"; in a mixed group with real Curator 5.4 LeaderLatch
-- programs (spec/fixtures/java/CuratorLatch.java, Debian's libcurator-*-java).
-- The connection loss is a fault placed by the test (zklua.testing.proxy: refuse new
-- connections, then drop the open one), so SUSPENDED comes exactly between two steps and lasts
-- until the test lets the client reconnect; every wait is for an event (a state, a callback,
-- a line a Java program prints).
local zklua = require "zklua"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local interop = require "support.curator"

local SESSION_MS = 8000 -- long enough that a suspension the test ends at once never expires

describe("Election{layout = 'curator'} on SUSPENDED", function()
  local server, zk, path
  local s = interop.scaffold("/latchpolicy", function(t) server, zk, path = t.server, t.zk, t.path end)
  setup(s.setup); teardown(s.teardown); before_each(s.before_each); after_each(s.after_each)

  local function proxy()
    return s:closing(testing.proxy(server:node(1)))
  end

  -- A started client through proxy p; states: the states it went through.
  local function client_via(p, opts)
    opts = opts or {}
    opts.hosts, opts.timeout = p.hosts, SESSION_MS / 1000
    local c = s:closing(zklua.client(opts))
    c:start()
    local states = {}
    c:add_listener(function(state) states[#states + 1] = state end)
    return c, states
  end

  -- The connection is lost and stays lost: new connections refused, the open one closed.
  local function cut(p)
    p:refuse(true)
    p:drop()
  end

  -- Whether program printed line (in any order with the lines around it: Curator runs its
  -- connection state listeners and the latch's callbacks in no fixed order).
  local function saw(program, line)
    return ("\n" .. program.kid:stdout()):find("\n" .. line .. "\n", 1, true) ~= nil
  end

  -- A latch election on member with counters of its callbacks.
  local function latch(member, id, opts)
    local e = member:Election(path, id, opts or { layout = "curator" })
    local seen = { leader = 0, lost = 0 }
    e:on_leader(function() seen.leader = seen.leader + 1 end)
    e:on_lost(function() seen.lost = seen.lost + 1 end)
    return e, seen
  end

  it("a zklua leader stops leading on SUSPENDED and leads again on the same session; " ..
     "a Curator follower never leads meanwhile", function()
    local p = proxy()
    local member, states = client_via(p)
    local election, seen = latch(member, "zklua-1")
    assert.equals("standard", election.error_policy)
    election:start()
    assert.is_true(election:await(30))
    local node, token = election.lock.node, election.fencing_token
    assert.is_number(token)
    local curator = s:start("CuratorLatch", server.hosts, path, "curator-1", SESSION_MS)
    curator:send("start")
    curator:expect("^started$")
    s:wait_children(2, "Curator's node")

    cut(p)
    testing.wait_for(function() return seen.lost == 1 end, 30, "on_lost on SUSPENDED")
    assert.equals("SUSPENDED", member.state)
    assert.is_false(election.is_leader)
    assert.is_nil(election.fencing_token)
    assert.is_true(election.is_running) -- still a member: its node is kept
    curator:send("leader") -- Curator still sees zklua's node first: nobody else leads
    curator:expect("^leader zklua%-1$")
    assert.is_false(curator:printed("^is%-leader$"))

    p:refuse(false)
    assert.is_true(election:await(30)) -- CONNECTED again on the same session
    assert.same({ "SUSPENDED", "CONNECTED" }, states)
    assert.equals(2, seen.leader)
    assert.equals(1, seen.lost)
    assert.equals(node, election.lock.node)
    assert.equals(token, election.fencing_token)
    assert.is_false(curator:printed("^is%-leader$"))
    election:stop()
    curator:expect("^is%-leader$")
  end)

  it("with error_policy = 'session' a zklua leader keeps leading through SUSPENDED (kazoo's)",
     function()
    local p = proxy()
    local member, states = client_via(p)
    local election, seen = latch(member, "zklua-1", { layout = "curator",
                                                      error_policy = "session" })
    election:start()
    assert.is_true(election:await(30))
    cut(p)
    testing.wait_for(function() return member.state == "SUSPENDED" end, 30, "SUSPENDED")
    member:dispatch() -- whatever the state change queued has run
    assert.is_true(election.is_leader)
    assert.is_number(election.fencing_token)
    assert.equals(0, seen.lost)
    p:refuse(false)
    testing.wait_for(function() return member.state == "CONNECTED" end, 30, "CONNECTED")
    member:dispatch()
    assert.same({ "SUSPENDED", "CONNECTED" }, states)
    assert.is_true(election.is_leader)
    assert.same({ leader = 1, lost = 0 }, seen)
    -- and kazoo's layout keeps "session" by default, while taking "standard" when asked
    assert.equals("session", member:Election(path .. "/k", "k").error_policy)
    assert.equals("standard", member:Election(path .. "/k", "k",
                                               { error_policy = "standard" }).error_policy)
    election:stop()
  end)

  it("a Curator leader calls notLeader on SUSPENDED and isLeader on RECONNECTED; " ..
     "a zklua follower never leads meanwhile", function()
    local p = proxy()
    local curator = s:start("CuratorLatch", p.hosts, path, "curator-1", SESSION_MS)
    curator:send("start")
    curator:expect("^is%-leader$")
    local election, seen = latch(zk, "zklua-1")
    election:start()
    s:wait_children(2, "zklua's node")
    cut(p)
    curator:expect("^not%-leader$")
    testing.wait_for(function() return saw(curator, "state SUSPENDED") end, 30, "SUSPENDED")
    assert.same({ "curator-1", "zklua-1" }, election:contenders()) -- its node is kept
    assert.is_false(election.is_leader)
    p:refuse(false)
    curator:expect("^is%-leader$")
    testing.wait_for(function() return saw(curator, "state RECONNECTED") end, 30, "RECONNECTED")
    assert.is_falsy(saw(curator, "state LOST"))
    zk:dispatch()
    assert.same({ leader = 0, lost = 0 }, seen)
    curator:send("close")
    curator:expect("^closed$")
    assert.is_true(election:await(30))
    election:stop()
  end)

  it("run(fn): is_leader false while SUSPENDED, true again once reconnected", function()
    local p = proxy()
    local member = client_via(p)
    local election, seen = latch(member, "runner")
    local during = {}
    local ok, result = election:run(function()
      during[#during + 1] = election.is_leader
      cut(p)
      testing.wait_for(function() return not election.is_leader end, 30, "leadership to end")
      during[#during + 1] = member.state
      p:refuse(false)
      testing.wait_for(function() return election.is_leader end, 30, "leadership to return")
      member:dispatch()
      return "done"
    end)
    assert.is_true(ok)
    assert.equals("done", result)
    assert.same({ true, "SUSPENDED" }, during)
    assert.same({ leader = 1, lost = 1 }, seen)
    assert.is_false(election.is_leader)
    assert.same({}, s:children())
  end)

  it("LOST (session expiry) ends leadership once and the latch rejoins", function()
    local member = helpers.client(server.hosts)
    s:closing(member)
    local election, seen = latch(member, "zklua-1")
    election:start()
    assert.is_true(election:await(30))
    local before = election.lock.node
    local curator = s:start("CuratorLatch", server.hosts, path, "curator-1", SESSION_MS)
    curator:send("start")
    curator:expect("^started$")
    s:wait_children(2, "Curator's node")
    helpers.expire(member)
    curator:expect("^is%-leader$", 60)
    testing.wait_for(function() return seen.lost == 1 and #s:children() == 2 end, 30,
                     "on_lost and zklua's new node")
    assert.is_false(election.is_leader)
    assert.not_equals(before, election.lock.node)
    curator:send("close")
    curator:expect("^closed$")
    assert.is_true(election:await(30))
    assert.same({ leader = 2, lost = 1 }, seen)
    election:stop()
  end)

  it("coroutines awaiting one suspended latch all see it lead again", function()
    local cq_handler = require "zklua.handlers.cqueues"
    local p = proxy()
    local results, seen, node = {}, nil, nil
    interop.in_cqueues(function(cq)
      local member = client_via(p, { handler = cq_handler.new(cq) })
      local wait = member.handler.wait
      local election
      election, seen = latch(member, "shared")
      election:start()
      assert.is_true(election:await(30))
      node = election.lock.node
      cut(p)
      assert.is_true(wait(function() return seen.lost == 1 end, 30), "on_lost")
      assert.equals("SUSPENDED", member.state) -- not the LOST of a session timeout
      assert.is_false(election.is_leader)
      for i = 1, 3 do
        cq:wrap(function() results[i] = { pcall(election.await, election, 30) } end)
      end
      -- the three awaiters and this coroutine
      assert.is_true(wait(function() return member.handler.waiting() >= 4 end, 30))
      assert.same({}, results) -- all three wait while SUSPENDED
      p:refuse(false)
      assert.is_true(wait(function() return results[1] and results[2] and results[3] end, 30))
      assert.equals(node, election.lock.node) -- the same node, on the same session
      election:stop()
    end)
    for i = 1, 3 do assert.same({ true, true }, results[i]) end
    assert.same({ leader = 2, lost = 1 }, seen)
  end)

  it("a bad error_policy is refused before anything is sent", function()
    local err = helpers.raises(errors.BadArgumentsError, zk.Election, zk, path, "x",
                               { layout = "curator", error_policy = "strict" })
    assert.matches("option 'error_policy' must be \"standard\" or \"session\"", tostring(err))
    err = helpers.raises(errors.BadArgumentsError, zk.Election, zk, path, "x",
                         { error_policy = 1 })
    assert.matches("got number", tostring(err))
    assert.is_nil(zk:exists(path))
  end)
end)
