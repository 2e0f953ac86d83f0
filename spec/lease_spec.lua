-- NonBlockingLease and MultiNonBlockingLease (src/recipes/lease.c, lease_record.c,
-- lua/zklua/recipes/lease.lua) against real servers: clients in one process, zklua child
-- processes (spec/fixtures/lease_child.lua), kazoo child processes
-- (spec/fixtures/kazoo_lease.py, Debian's python3-kazoo), a frozen or stopped standalone
-- server, session expiry, and a 3-node ensemble whose node is stopped.
--
-- Most tests fix the clock with utcnow (as kazoo's own tests do) so that "the end has passed"
-- is decided by the values given, never by how long a test takes.
local zklua = require "zklua"
local core = require "zklua.core"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local child = require "fixtures.child"

local ROOT = "/leases"
local T0 = 1893553445 -- 2030-01-02T03:04:05 UTC

local raises = helpers.raises
local eventually = helpers.eventually

local function at(t) return function() return t end end

-- kazoo's record for holder and end (an epoch), built here from os.date's UTC formatting.
local function record(holder, end_time)
  return '{"version": 1, "holder": "' .. holder .. '", "end": "' ..
         os.date("!%Y-%m-%dT%H:%M:%S", end_time) .. '"}'
end

describe("leases", function()
  local server, a, b, c, path, holder_path
  local counter = 0
  local kids = helpers.kids()

  local function children(p, zk)
    local ok, list = pcall((zk or a).get_children, zk or a, p or path)
    if not ok then return {} end
    table.sort(list)
    return list
  end

  local function spawn_zklua(opts, env)
    local argv = { "./zklua", "spec/fixtures/lease_child.lua", "hosts=" .. server.hosts }
    for k, v in pairs(opts) do argv[#argv + 1] = k .. "=" .. tostring(v) end
    local kid = child.spawn(argv, env)
    kids[#kids + 1] = kid -- cleaned up with the others
    return kid
  end

  local function kazoo(...)
    local kid = kids:kazoo("spec/fixtures/kazoo_lease.py", server.hosts, ...)
    assert.is_true(kid:wait_exit(60), "kazoo did not finish: " .. kid:stdout())
    assert.are.equal(0, kid.status, kid:stderr())
    return kid:stdout():match("^(%a+) ([^\n]*)")
  end

  local function kazoo_obtains(...)
    local word, value = kazoo(...)
    assert.are.equal("obtained", word)
    return value == "True"
  end

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  before_each(function()
    counter = counter + 1
    path = ROOT .. "/t" .. counter
    holder_path = path .. "/lease_holder"
    a, b, c = helpers.clients(server.hosts, 3)
  end)

  after_each(function()
    kids:cleanup()
    for _, zk in ipairs({ a, b, c }) do zk:close() end
    helpers.delete_trees(server.hosts, path, path .. "-go")
  end)

  describe("one lease", function()
    it("obtains a free lease and writes kazoo's record, byte for byte", function()
      local lease = a:NonBlockingLease(path, 60, "worker-1", at(T0))
      assert.is_true(lease.obtained)
      assert.are.equal(T0 + 60, lease.expires)
      assert.are.equal("worker-1", lease.identifier)
      local data, stat = a:get(holder_path)
      assert.are.equal(record("worker-1", T0 + 60), data)
      assert.are.equal('{"version": 1, "holder": "worker-1", "end": "2030-01-02T03:05:05"}', data)
      assert.are.equal(0, stat.ephemeralOwner) -- persistent: the lease is not a session's
      assert.are.same({ "lease_holder" }, children()) -- the internal lock was released
    end)

    it("refuses other identities until the end passes; the same identity renews", function()
      assert.is_true(a:NonBlockingLease(path, 60, "A", at(T0)).obtained)
      local refused = b:NonBlockingLease(path, 60, "B", at(T0 + 59))
      assert.is_false(refused.obtained)
      assert.is_nil(refused.expires)
      assert.are.equal(record("A", T0 + 60), (a:get(holder_path)))
      local renewed = a:NonBlockingLease(path, 60, "A", at(T0 + 30))
      assert.is_true(renewed.obtained)
      assert.are.equal(record("A", T0 + 90), (a:get(holder_path)))
      assert.is_false(b:NonBlockingLease(path, 60, "B", at(T0 + 89.5)).obtained)
      local taken = b:NonBlockingLease(path, 30.9, "B", at(T0 + 90)) -- now == end: it ended
      assert.is_true(taken.obtained)
      assert.are.equal(T0 + 120, taken.expires) -- whole seconds, as kazoo's strftime
      assert.are.equal(record("B", T0 + 120), (a:get(holder_path)))
      assert.is_false(c:NonBlockingLease(path, 60, "A", at(T0 + 100)).obtained)
    end)

    it("reads records as kazoo does: another version is left alone, a broken one raises", function()
      a:create(holder_path, '{"version": 2, "holder": "X", "end": "2000-01-01T00:00:00"}',
               { makepath = true })
      assert.is_false(a:NonBlockingLease(path, 60, "A", at(T0)).obtained)
      -- Python's json and comparisons: 1.0 and true are version 1; keys may be escaped;
      -- strptime takes one-digit fields and a lower-case t; a non-string holder is another's
      local readable = {
        { '{"version": 1.0, "holder": "X", "end": "2000-01-01T00:00:00"}', true },
        { '{"end": "2000-1-2t3:4:5", "holder": "X", "version": true}', true },
        { ' {"v\\u0065rsion": 1, "holder": 7, "end": "2999-01-01T00:00:00", "x": [1, {}]} ', false },
        { '{"version": 1, "holder": "A", "end": "2999-01-01T00:00:00"}', true }, -- own
        { '{"version": 1, "holder": "A\\u00e9", "end": "2999-01-01T00:00:00"}', false },
      }
      for i, case in ipairs(readable) do
        a:set(holder_path, case[1])
        local lease = a:NonBlockingLease(path, 60, "A", at(T0))
        assert.are.equal(case[2], lease.obtained, "record " .. i)
        if case[2] then assert.are.equal(record("A", T0 + 60), (a:get(holder_path))) end
      end
      local broken = { "not json", "[1, 2]", '"text"', '{"version": 1}',
                       '{"version": 1, "holder": "X"}',
                       '{"version": 1, "holder": "X", "end": 5}',
                       '{"version": 1, "holder": "X", "end": "2000-01-01T00:00:00Z"}',
                       '{"version": 1, "holder": "X", "end": "2000-02-30T00:00:00"}',
                       '{"version": 1, "end": "2000-01-01T00:00:00"}',
                       '{"version": 1, "holder": "X", "end": "2000-01-01T00:00:00"} x',
                       '{"version": 1, "holder": "\1", "end": "2000-01-01T00:00:00"}',
                       '{"version": 1, "holder": "\255", "end": "2000-01-01T00:00:00"}' }
      for _, text in ipairs(broken) do
        a:set(holder_path, text)
        local err = raises(errors.KazooException, a.NonBlockingLease, a, path, 60, "A", at(T0))
        assert.truthy(tostring(err):find("not a lease record", 1, true), tostring(err))
        assert.are.equal(text, (a:get(holder_path))) -- left as it was
        assert.are.same({ "lease_holder" }, children()) -- the internal lock was released
      end
    end)

    it("times are UTC whatever the local time zone", function()
      local before = math.floor(core.utcnow())
      local kid = spawn_zklua({ path = path, duration = 3600, ident = "tz" },
                              { TZ = "XYZ-5:45" }) -- UTC+5:45, no tzdata needed
      kid:wait_line("^obtained", 30)
      assert.is_true(kid:wait_exit(20))
      local after = core.utcnow()
      local expires = tonumber(kid:stdout():match("expires (%d+)"))
      assert.is_true(expires >= before + 3600 and expires <= after + 3600,
                     string.format("%d not in [%d, %.3f]", expires, before + 3600, after + 3600))
      assert.are.equal(record("tz", expires), (a:get(holder_path)))
      -- kazoo, in another zone, reads that end against its own clock: still running
      local k = child.spawn({ helpers.PYTHON, "spec/fixtures/kazoo_lease.py", server.hosts,
                              "obtain", path, "60", "kazoo" }, { TZ = "XYZ+3" })
      kids[#kids + 1] = k
      k:wait_line("^obtained False", 30)
    end)

    it("the default identity is the host's name, kazoo's socket.gethostname()", function()
      local lease = a:NonBlockingLease(path, 3600)
      assert.is_true(lease.obtained)
      local word, name = kazoo("hostname")
      assert.are.equal("hostname", word)
      assert.are.equal(name, lease.identifier)
      assert.are.equal(name, a:get(holder_path):match('"holder": "([^"]*)"'))
      assert.is_true(a:NonBlockingLease(path, 3600, "").obtained) -- "" is the default too
      assert.is_true(kazoo_obtains("obtain", path, "3600", "-")) -- same host: a renewal
    end)
  end)

  describe("MultiNonBlockingLease", function()
    it("takes the first slot it can of count, and renews its own", function()
      local m1 = a:MultiNonBlockingLease(2, path, 60, "A", at(T0))
      assert.is_true(m1.obtained)
      assert.are.equal(path .. "/0", m1.lease.path)
      local m2 = b:MultiNonBlockingLease(2, path, 60, "B", at(T0))
      assert.is_true(m2.obtained)
      assert.are.equal(path .. "/1", m2.lease.path)
      assert.is_false(c:MultiNonBlockingLease(2, path, 60, "C", at(T0)).obtained)
      assert.are.equal(record("A", T0 + 60), (a:get(path .. "/0/lease_holder")))
      assert.are.equal(record("B", T0 + 60), (a:get(path .. "/1/lease_holder")))
      local again = b:MultiNonBlockingLease(2, path, 60, "B", at(T0 + 10))
      assert.is_true(again.obtained)
      assert.are.equal(path .. "/1", again.lease.path) -- slot 0 is A's: B renews its own
      assert.are.equal(record("B", T0 + 70), (a:get(path .. "/1/lease_holder")))
      assert.is_true(c:MultiNonBlockingLease(2, path, 60, "C", at(T0 + 60)).obtained) -- A's ended
      assert.are.equal(record("C", T0 + 120), (a:get(path .. "/0/lease_holder")))
    end)
  end)

  describe("several processes", function()
    it("six processes (zklua and kazoo) try at once: exactly one obtains", function()
      local go = path .. "-go"
      local procs = {}
      for i = 1, 4 do
        procs[#procs + 1] = spawn_zklua({ path = path, duration = 3600, ident = "z" .. i, go = go })
      end
      for i = 1, 2 do
        procs[#procs + 1] = kids:kazoo("spec/fixtures/kazoo_lease.py", server.hosts, "obtain",
                                       path, "3600", "k" .. i, "-", go)
      end
      for _, kid in ipairs(procs) do kid:wait_line("^ready", 60) end -- each watches go
      a:create(go, "")
      local winners = {}
      for _, kid in ipairs(procs) do
        local line = kid:wait_line("^obtained", 60)
        if line:match("[Tt]rue") then winners[#winners + 1] = kid end
        assert.is_true(kid:wait_exit(30))
        assert.are.equal(0, kid.status, kid:stderr())
      end
      assert.are.equal(1, #winners)
      assert.are.same({ "lease_holder" }, children())
    end)
  end)

  describe("sessions and connections", function()
    it("a lease outlives its session: LOST changes nothing", function()
      local lease = a:NonBlockingLease(path, 3600, "A")
      assert.is_true(lease.obtained)
      local before = a:get(holder_path)
      helpers.expire(a)
      testing.wait_for(function() return a.state == "CONNECTED" end, 20, "a new session")
      assert.is_true(lease.obtained)
      assert.are.equal(before, (b:get(holder_path)))
      assert.is_false(b:NonBlockingLease(path, 3600, "B").obtained)
      a:close() -- nor does the end of the client
      assert.is_false(b:NonBlockingLease(path, 3600, "B").obtained)
      assert.is_true(b:NonBlockingLease(path, 3600, "A").obtained) -- the identity renews it
      a = zklua.client(server.hosts) -- for after_each
      a:start()
    end)

    it("obtaining without a connection fails with the usual errors, writing nothing", function()
      local stopped = zklua.client(server.hosts)
      raises(errors.ConnectionClosedError, stopped.NonBlockingLease, stopped, path, 60, "X")
      stopped:close()
      raises(errors.ConnectionClosedError, stopped.NonBlockingLease, stopped, path, 60, "X")
      -- SUSPENDED through a fault proxy (refused, connection dropped), not a server restart: a
      -- restart on a loaded machine can outlast the session
      local p = testing.proxy(server:node(1))
      local zk = zklua.client{ hosts = p.hosts, timeout = 20 }
      finally(function() zk:close(); p:stop() end)
      zk:start()
      local session = zk:client_id()
      p:refuse(true)
      p:drop()
      testing.wait_for(function() return zk.state == "SUSPENDED" end, 10, "SUSPENDED")
      raises(errors.ConnectionLoss, zk.NonBlockingLease, zk, path, 60, "A")
      raises(errors.ConnectionLoss, zk.MultiNonBlockingLease, zk, 2, path, 60, "A")
      assert.is_nil(b:exists(path)) -- the server has nothing of them
      p:refuse(false)
      testing.wait_for(function() return zk.state == "CONNECTED" end, 30, "reconnection")
      assert.are.equal(session, (zk:client_id()), "the session")
      assert.is_nil(zk:exists(path))
      assert.is_true(zk:NonBlockingLease(path, 60, "A").obtained)
    end)

    it("a connection loss while waiting for the internal lock raises ConnectionLoss", function()
      local zk = zklua.client{ hosts = server.hosts, timeout = 4 }
      zk:start()
      local lock = c:Lock(path, "someone") -- holds kazoo's lease lock at the lease's path
      assert.is_true(lock:acquire())
      local node = server:node(1)
      c:get_children(path, function() node:pause() end) -- zk's contender node appeared
      zk:add_listener(function(state) if state == "SUSPENDED" then node:resume() end end)
      raises(errors.ConnectionLoss, zk.NonBlockingLease, zk, path, 60, "Z")
      node:resume()
      testing.wait_for(function() return zk.state == "CONNECTED" end, 30, "reconnection")
      eventually(function() return #children() == 1 end, 30, "zk's contender node to go")
      assert.is_true(lock:release())
      assert.are.same({}, children())
      assert.is_true(zk:NonBlockingLease(path, 60, "Z").obtained)
      zk:close()
    end)

    it("a session expiry during the attempt ends it; nothing is left behind", function()
      local zk = zklua.client{ hosts = server.hosts, timeout = 10 }
      zk:start()
      local lock = c:Lock(path, "someone")
      assert.is_true(lock:acquire())
      c:get_children(path, function() helpers.expire(zk) end)
      local err = helpers.raised(zk.NonBlockingLease, zk, path, 60, "Z")
      assert.is_true(errors.is(err, errors.SessionExpiredError) or
                     errors.is(err, errors.ConnectionLoss), tostring(err))
      eventually(function() return #children() == 1 end, 30, "zk's contender node to go")
      assert.is_true(lock:release())
      testing.wait_for(function() return zk.state == "CONNECTED" end, 30, "a new session")
      assert.is_true(zk:NonBlockingLease(path, 60, "Z").obtained)
      zk:close()
    end)
  end)

  describe("kazoo interop", function()
    it("a kazoo lease refuses zklua; the same identity renews it from zklua", function()
      assert.is_true(kazoo_obtains("obtain", path, "60", "kazoo", tostring(T0)))
      assert.are.equal(record("kazoo", T0 + 60), (a:get(holder_path)))
      assert.is_false(a:NonBlockingLease(path, 60, "zklua", at(T0 + 59)).obtained)
      assert.is_true(a:NonBlockingLease(path, 60, "kazoo", at(T0 + 10)).obtained)
      assert.are.equal(record("kazoo", T0 + 70), (a:get(holder_path)))
      assert.is_true(a:NonBlockingLease(path, 60, "zklua", at(T0 + 70)).obtained) -- ended
    end)

    it("a zklua lease refuses kazoo; the same identity renews it from kazoo", function()
      assert.is_true(a:NonBlockingLease(path, 60, "zklua", at(T0)).obtained)
      assert.is_false(kazoo_obtains("obtain", path, "60", "kazoo", tostring(T0 + 59)))
      assert.is_true(kazoo_obtains("obtain", path, "60", "zklua", tostring(T0 + 10)))
      assert.are.equal(record("zklua", T0 + 70), (a:get(holder_path)))
      assert.is_true(kazoo_obtains("obtain", path, "60", "kazoo", tostring(T0 + 70)))
      assert.is_false(a:NonBlockingLease(path, 60, "zklua", at(T0 + 71)).obtained)
    end)

    it("non-ASCII identities: the same bytes on both sides, renewals across", function()
      local ident = "h\195\169 \226\152\131 \240\159\152\128 \"q\" \\"
      assert.is_true(kazoo_obtains("obtain", path, "60", ident, tostring(T0)))
      local by_kazoo = a:get(holder_path)
      a:delete(holder_path)
      assert.is_true(a:NonBlockingLease(path, 60, ident, at(T0)).obtained)
      assert.are.equal(by_kazoo, (a:get(holder_path)))
      assert.truthy(by_kazoo:find("\\u00e9 \\u2603 \\ud83d\\ude00 \\\"q\\\" \\\\", 1, true))
      assert.is_true(kazoo_obtains("obtain", path, "60", ident, tostring(T0 + 30)))
      assert.is_false(kazoo_obtains("obtain", path, "60", "h\195\169", tostring(T0 + 31)))
      assert.is_true(a:NonBlockingLease(path, 60, ident, at(T0 + 40)).obtained)
      assert.is_false(a:NonBlockingLease(path, 60, "other", at(T0 + 41)).obtained)
    end)

    it("MultiNonBlockingLease slots are shared with kazoo", function()
      assert.is_true(kazoo_obtains("multi", "2", path, "60", "kazoo-1", tostring(T0)))
      local mine = a:MultiNonBlockingLease(2, path, 60, "zklua", at(T0))
      assert.is_true(mine.obtained)
      assert.are.equal(path .. "/1", mine.lease.path)
      assert.is_false(kazoo_obtains("multi", "2", path, "60", "kazoo-2", tostring(T0)))
      assert.is_false(b:MultiNonBlockingLease(2, path, 60, "zklua-2", at(T0)).obtained)
      assert.is_true(kazoo_obtains("multi", "2", path, "60", "zklua", tostring(T0 + 1)))
      assert.are.equal(record("zklua", T0 + 61), (a:get(path .. "/1/lease_holder")))
    end)
  end)

  describe("bad arguments", function()
    it("are refused before anything is sent", function()
      local function refused(argument, fn, ...)
        local err = raises(errors.BadArgumentsError, fn, ...)
        assert.are.equal(argument, err.argument)
      end
      refused("path", a.NonBlockingLease, a, "/a/../b", 60)
      refused("path", a.NonBlockingLease, a, 42, 60)
      for _, bad in ipairs({ "nil", -1, 0 / 0, math.huge, "60", {} }) do
        if bad == "nil" then bad = nil end
        refused("duration", a.NonBlockingLease, a, path, bad, "A")
        refused("duration", a.MultiNonBlockingLease, a, 2, path, bad, "A")
      end
      refused("identifier", a.NonBlockingLease, a, path, 60, 42)
      refused("identifier", a.NonBlockingLease, a, path, 60, "\255\254")
      refused("identifier", a.NonBlockingLease, a, path, 60, string.rep("x", 300000))
      refused("utcnow", a.NonBlockingLease, a, path, 60, "A", 42)
      for _, bad in ipairs({ 0, -1, 1.5, "2", 2 ^ 40 }) do
        refused("count", a.MultiNonBlockingLease, a, bad, path, 60, "A")
      end
      assert.is_nil(a:exists(path))
    end)

    it("a bad clock is refused with the internal lock released", function()
      local err = raises(errors.BadArgumentsError, a.NonBlockingLease, a, path, 60, "A",
                         function() return "noon" end)
      assert.are.equal("utcnow", err.argument)
      assert.are.same({}, children())
      local ok, boom = pcall(a.NonBlockingLease, a, path, 60, "A",
                             function() error("clock broke") end)
      assert.is_false(ok)
      assert.truthy(tostring(boom):find("clock broke", 1, true))
      assert.are.same({}, children())
      err = raises(errors.BadArgumentsError, a.NonBlockingLease, a, path, 1e12, "A", at(T0))
      assert.are.equal("duration", err.argument)
      assert.are.same({}, children())
      assert.is_true(a:NonBlockingLease(path, 60, "A", at(T0)).obtained)
    end)
  end)
end)

describe("lease in an ensemble", function()
  local ens

  setup(function() ens = testing.ensemble(3) end)
  teardown(function() ens:stop() end)

  it("a holder cut off from its server keeps its lease; clients of other servers are refused",
     function()
    -- the holder's only server out of reach through a fault proxy (refused, connection
    -- dropped), not stopped and restarted: a node's restart and resync on a loaded machine
    -- can outlast the session
    local path = "/leases/ensemble"
    local p = testing.proxy(ens:node(1))
    local holder = zklua.client{ hosts = p.hosts, timeout = 20 }
    local other = zklua.client{ hosts = ens:node(2).hosts .. "," .. ens:node(3).hosts }
    finally(function() holder:close(); other:close(); p:stop() end)
    holder:start()
    other:start()
    local lease = holder:NonBlockingLease(path, 3600, "H")
    assert.is_true(lease.obtained)
    local session = holder:client_id()
    p:refuse(true)
    p:drop()
    testing.wait_for(function() return holder.state == "SUSPENDED" end, 10, "SUSPENDED")
    assert.is_true(lease.obtained)
    raises(errors.ConnectionLoss, holder.NonBlockingLease, holder, path, 3600, "H")
    assert.is_false(other:NonBlockingLease(path, 3600, "O").obtained)
    p:refuse(false)
    testing.wait_for(function() return holder.state == "CONNECTED" end, 30, "reconnection")
    assert.are.equal(session, (holder:client_id()), "the session")
    assert.is_true(holder:NonBlockingLease(path, 3600, "H").obtained) -- renewed
    assert.is_false(other:NonBlockingLease(path, 3600, "O").obtained)
  end)
end)
