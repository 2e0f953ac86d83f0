-- SetPartitioner (src/recipes/partitioning/set_partitioner.c, lua/zklua/recipes/partitioning/partitioner.lua) against
-- real servers: several clients in one process, zklua member processes
-- (spec/fixtures/partitioner_child.lua) and kazoo member processes
-- (spec/fixtures/kazoo_partitioner.py, Debian's python3-kazoo), with real faults (kill -9,
-- session expiry, an ensemble node stopped or paused).
--
-- Member processes log "own <item> <token> T" / "drop <item> T" with T on the machine's
-- monotonic clock; the checker below proves from those logs that no item was owned by two
-- members at once (each owner let go before the next took it, with a larger fencing token)
-- and that the live members own every item exactly once in the end.
local zklua = require "zklua"
local core = require "zklua.core"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local child = require "fixtures.child"
local helpers = require "support.helpers"
local partitioner = require "zklua.recipes.partitioning.partitioner"

local ROOT = "/partitioner-spec"
local TB = 0.3 -- time_boundary used by the tests

local raises = helpers.raises

-- Runs the event loop, calling release_set() on every member in RELEASE (the user's part of
-- the protocol), until done() holds (raises after timeout seconds).
local function pump(members, done, timeout, what)
  local ok = child.poll_until(function()
    for _, qp in ipairs(members) do
      if qp.release then qp:release_set() end
    end
    return done()
  end, timeout or 20)
  if not ok then error("timed out waiting for " .. (what or "the members"), 2) end
end

local function all_acquired(members)
  return function()
    for _, qp in ipairs(members) do
      if not qp.acquired then return false end
    end
    return true
  end
end

local function items(n, prefix)
  local list = {}
  for i = 1, n do list[i] = string.format("%s%02d", prefix or "q", i) end
  return list
end

-- Asserts that the members' shares are disjoint and cover set exactly.
local function assert_split(set, members)
  local owner = {}
  for _, qp in ipairs(members) do
    for item in qp:iter() do
      assert(owner[item] == nil, tostring(item) .. " is owned by " .. tostring(owner[item]) ..
             " and " .. qp.identifier)
      owner[item] = qp.identifier
    end
  end
  for _, item in ipairs(set) do
    assert(owner[item], tostring(item) .. " is owned by nobody")
  end
  local n = 0
  for _ in pairs(owner) do n = n + 1 end
  assert.are.equal(#set, n)
end

-- ---------------------------------------------------------------- member processes' logs

-- Reads the logs of members = { {kid =, name =, ended = T or nil, expired = bool}, ... }:
-- returns item -> ownership intervals { member, token, start, stop (nil: still owned),
-- expired }.  A member that ended (killed) without letting go stops owning at `ended`.
local function intervals(members)
  local per_item = {}
  local function add(item, iv)
    per_item[item] = per_item[item] or {}
    table.insert(per_item[item], iv)
  end
  for _, m in ipairs(members) do
    local open = {}
    for line in m.kid:stdout():gmatch("[^\n]+") do
      local item, token, t = line:match("^own (%S+) (%S+) (%S+)$")
      if item then
        open[item] = { member = m.name, token = tonumber(token), start = tonumber(t),
                       expired = m.expired }
      end
      local dropped, dt = line:match("^drop (%S+) (%S+)$")
      if dropped and open[dropped] then
        open[dropped].stop = tonumber(dt)
        add(dropped, open[dropped])
        open[dropped] = nil
      end
    end
    for item, iv in pairs(open) do
      iv.stop = m.ended
      add(item, iv)
    end
  end
  return per_item
end

-- No item was owned by two members at once; each new owner had a larger fencing token.  The
-- one overlap kazoo's SetPartitioner has too: a member whose session the test expired learns
-- it only when it reconnects, while the others may already own its items; such a member must
-- still let go (stop), and the fencing tokens must still grow.
local function assert_never_shared(members)
  for item, list in pairs(intervals(members)) do
    table.sort(list, function(a, b) return a.start < b.start end)
    for i = 2, #list do
      local a, b = list[i - 1], list[i]
      assert(a.stop, string.format("%s: %s still owned it when %s took it at %.3f", item,
             a.member, b.member, b.start))
      assert(a.expired or a.stop <= b.start, string.format(
             "%s: owned by %s until %.3f and by %s from %.3f", item, a.member, a.stop, b.member,
             b.start))
      assert(b.token > a.token, string.format("%s: fencing token %s of %s is not above %s of %s",
             item, tostring(b.token), b.member, tostring(a.token), a.member))
    end
  end
end

-- item -> its current owner (a member still owning it), or false when two do.
local function current_owners(members)
  local owners = {}
  for item, list in pairs(intervals(members)) do
    for _, iv in ipairs(list) do
      if iv.stop == nil then owners[item] = owners[item] == nil and iv.member or false end
    end
  end
  return owners
end

-- Waits until the live members own every item of set exactly once.
-- also (optional): a further condition on the owners (e.g. that every member has a share:
-- a cover among fewer members may come first, before the last one joined).
-- check (optional): called at each poll; raises to end the wait at once (a member failed).
local function wait_full_cover(members, set, timeout, what, also, check)
  local last
  local ok = child.poll_until(function()
    if check then check() end -- raises to end the wait at once
    last = current_owners(members)
    for _, item in ipairs(set) do
      if not last[item] then return false end
    end
    return also == nil or also(last)
  end, timeout or 30)
  if not ok then
    local missing = {}
    for _, item in ipairs(set) do
      if not last[item] then missing[#missing + 1] = item end
    end
    -- each member's last lines (its states, a failure and why) explain a cover that never came
    local tails = {}
    for _, m in ipairs(members) do
      local lines = {}
      for line in m.kid:stdout():gmatch("[^\n]+") do
        if not line:match("^own ") and not line:match("^drop ") then lines[#lines + 1] = line end
      end
      tails[#tails + 1] = (m.name or "?") .. ": " ..
                          table.concat(lines, " | ", math.max(1, #lines - 5))
    end
    error("timed out waiting for " .. (what or "full cover") .. "; not owned (or shared): " ..
          table.concat(missing, ",") .. "\nmembers' last lines:\n" .. table.concat(tails, "\n"),
          2)
  end
  assert_never_shared(members)
  return last
end

-- item -> owner as a list: the items owned by name.
local function owned_by(owners, name)
  local list = {}
  for item, owner in pairs(owners) do
    if owner == name then list[#list + 1] = item end
  end
  table.sort(list)
  return list
end

describe("SetPartitioner", function()
  local server, path, zk
  local counter = 0
  local kids = helpers.kids()

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  before_each(function()
    counter = counter + 1
    path = ROOT .. "/t" .. counter
    zk = helpers.client(server.hosts)
  end)

  after_each(function()
    kids:cleanup()
    zk:close()
    helpers.delete_trees(server.hosts, path, path .. "-ctl")
  end)

  local function member(client, set, opts)
    opts = opts or {}
    opts.path = opts.path or path
    opts.set = set
    opts.time_boundary = opts.time_boundary or TB
    return client:SetPartitioner(opts)
  end

  local function spawn(name, set, extra)
    local argv = { "./zklua", "spec/fixtures/partitioner_child.lua", "hosts=" .. (extra and
                   extra.hosts or server.hosts), "path=" .. path, "set=" .. table.concat(set, ","),
                   "ident=" .. name, "tb=" .. TB, "ctl=" .. path .. "-ctl", "timeout=" ..
                   (extra and extra.timeout or 2) }
    local kid = kids:spawn(argv)
    kid:wait_line("^ready", 30)
    return { kid = kid, name = name }
  end

  describe("in one process", function()
    it("runs the seed's loop as written", function()
      local client = zk
      local done = {}
      -- kazoo's example, in Lua; the work is recording the queue, and the loop ends once
      -- every queue was worked on
      local qp = client:SetPartitioner{
        path = path .. "/work_queues", set = { "queue-1", "queue-2", "queue-3" },
        time_boundary = TB }

      while #done < 3 do
        if qp.failed then
          error("Lost or unable to acquire partition")
        elseif qp.release then
          qp:release_set()
        elseif qp.acquired then
          for partition in qp:iter() do
            done[#done + 1] = partition -- Do something with each partition
          end
        elseif qp.allocating then
          qp:wait_for_acquire()
        end
      end
      assert.are.same({ "queue-1", "queue-2", "queue-3" }, helpers.sorted(done))
      qp:finish()
      assert.is_true(qp.failed)
    end)

    it("uses kazoo's nodes and kazoo's default identifier", function()
      local qp = member(zk, { "b", "a" })
      local out = io.popen(helpers.PYTHON .. " -c 'import socket; print(socket.getfqdn())'"):read("l")
      local pid = io.open("/proc/self/stat"):read("l"):match("^%d+")
      assert.are.equal(out .. "-" .. pid, qp.identifier)
      assert.is_true(qp:wait_for_acquire(10))
      local party = zk:get_children(path .. "/party")
      assert.are.equal(1, #party)
      assert.truthy(party[1]:match("^%x+%-" .. qp.identifier:gsub("%p", "%%%0") .. "$"))
      assert.are.equal(32, #party[1]:match("^(%x+)%-"))
      assert.are.equal(qp.identifier, (zk:get(path .. "/party/" .. party[1])))
      assert.are.same({ "a", "b" }, helpers.sorted(zk:get_children(path .. "/locks")))
      for _, item in ipairs({ "a", "b" }) do
        local nodes = zk:get_children(path .. "/locks/" .. item)
        assert.are.equal(1, #nodes)
        assert.truthy(nodes[1]:match("^%x+__lock__%d%d%d%d%d%d%d%d%d%d$"))
        local data, stat = zk:get(path .. "/locks/" .. item .. "/" .. nodes[1])
        assert.are.equal(qp.identifier, data)
        assert.are.equal(zk:client_id(), stat.owner_session_id)
        assert.are.equal(stat.czxid, qp:fencing_token(item))
      end
      qp:finish()
      assert.are.same({}, zk:get_children(path .. "/party"))
      assert.are.same({}, zk:get_children(path .. "/locks/a"))
    end)

    it("splits like kazoo's default partition_func and names items like Python's str()", function()
      local function python(ident, members, set)
        local words = {}
        for i, v in ipairs(set) do
          local name = partitioner.item_name(v)
          -- an int as its digits, a float exactly (Python reads both back as they were)
          words[i] = (type(v) == "string" or name:find("^%-?%d+$")) and name
                     or string.format("%.17e", v)
        end
        local cmd = string.format("%s spec/fixtures/kazoo_partitioner.py partition %s %s %s %s",
                                  helpers.PYTHON, type(set[1]) == "number" and "num" or "str",
                                  child.quote(ident),
                                  child.quote(table.concat(members, ",")),
                                  child.quote(table.concat(words, ",")))
        local pipe = io.popen(cmd)
        local lines = {}
        for line in pipe:lines() do lines[#lines + 1] = line end
        assert(pipe:close(), "python failed: " .. cmd)
        return lines
      end
      local strings = { "b", "B", "a", "\xc3\xa9t\xc3\xa9", "z", "Z", "10", "9", "a-1", "_" }
      local numbers = { 10, 9, -1, 2.5, 100, 0.5, 1e-05, 0.0001, 1e16, 123456789.125,
                        2 ^ 60, -3.75e-7, 7 }
      local members = { "w-2", "W-1", "w-10", "\xc3\xa9" }
      for _, set in ipairs({ strings, numbers }) do
        for _, ident in ipairs(members) do
          local mine = {}
          for i, item in ipairs(partitioner.round_robin(ident, members, set)) do
            mine[i] = partitioner.item_name(item)
          end
          assert.are.same(python(ident, members, set), mine)
        end
      end
    end)

    it("goes ALLOCATING -> ACQUIRED -> RELEASE -> ALLOCATING as members come and go", function()
      local seen = {}
      local set = items(10)
      local a = member(zk, set, { identifier = "a",
                                  state_change_event = function(state, qp)
                                    seen[#seen + 1] = state .. ":" .. qp.identifier
                                  end })
      assert.are.equal("ALLOCATING", a.state)
      assert.is_true(a.allocating)
      assert.is_true(a:wait_for_acquire(10))
      assert.is_true(a.acquired)
      assert.are.same(set, a:list())
      assert.are.equal(10, a:len())

      local zk2 = helpers.client(server.hosts)
      local b = member(zk2, set, { identifier = "b", time_boundary = 30 })
      helpers.eventually(function() return a.release end, 10, "a to see the join")
      assert.are.same(set, a:list()) -- still held until released
      a:release_set()
      assert.are.equal("ALLOCATING", a.state)
      assert.are.same({}, a:list())
      -- b waits out its 30 s settle window: wait_for_acquire gives up, false
      assert.is_false(b:wait_for_acquire(0.2))
      assert.is_true(b.allocating)
      b:finish()
      zk2:close()
      pump({ a }, all_acquired({ a }), 20, "a alone again")
      assert.are.same(set, a:list())
      assert.are.same({ "ACQUIRED:a", "RELEASE:a", "ALLOCATING:a", "ACQUIRED:a" }, seen)
    end)

    it("waits until the party stayed unchanged for time_boundary before allocating", function()
      local shares = {}
      local a = member(zk, items(6), { identifier = "a", time_boundary = 3,
                                       state_change_event = function(state, qp)
                                         if state == "ACQUIRED" then shares[#shares + 1] = qp:list() end
                                       end })
      local zk2 = helpers.client(server.hosts) -- joins within a's settle window
      local b = member(zk2, items(6), { identifier = "b", time_boundary = 3 })
      pump({ a, b }, all_acquired({ a, b }), 30, "the split")
      -- a's first share already is the two-member split: the join restarted its window
      assert.are.same({ { "q01", "q03", "q05" } }, shares)
      zk2:close()
    end)

    it("lets three members in one process split the set, and re-split on a leave", function()
      local set = items(11)
      local clients = { zk, helpers.client(server.hosts), helpers.client(server.hosts) }
      local qps = {}
      for i, c in ipairs(clients) do qps[i] = member(c, set, { identifier = "m" .. i }) end
      pump(qps, all_acquired(qps), 30, "three shares")
      assert_split(set, qps)
      assert.are.same({ "q01", "q04", "q07", "q10" }, qps[1]:list()) -- kazoo's stride
      local tokens = {}
      for item in qps[2]:iter() do tokens[item] = qps[2]:fencing_token(item) end
      qps[2]:finish()
      assert.is_true(qps[2].failed)
      assert.is_nil(qps[2].error)
      assert.are.same({}, qps[2]:list())
      local rest = { qps[1], qps[3] }
      pump(rest, function() return all_acquired(rest)() and qps[1]:len() + qps[3]:len() == 11 end, 30,
           "two shares")
      assert_split(set, rest)
      for item, token in pairs(tokens) do
        local owner = qps[1]:fencing_token(item) and qps[1] or qps[3]
        assert.is_true(owner:fencing_token(item) > token)
      end
      clients[2]:close()
      clients[3]:close()
    end)

    it("re-partitions a changed set with update_set (kazoo #386)", function()
      local zk2 = helpers.client(server.hosts)
      local a = member(zk, items(4), { identifier = "a" })
      local b = member(zk2, items(4), { identifier = "b" })
      local qps = { a, b }
      pump(qps, all_acquired(qps), 30, "the first split")
      assert_split(items(4), qps)
      local new = items(9, "n")
      a:update_set(new)
      assert.is_true(a.release)
      b:update_set(new)
      assert.are.same(new, a:get_set())
      pump(qps, function()
        return all_acquired(qps)() and a:len() + b:len() == 9
      end, 30, "the new split")
      assert_split(new, qps)
      assert.are.same({ "n01", "n03", "n05", "n07", "n09" }, a:list())
      -- during an allocation: it starts over with the newest set
      a:update_set(items(3, "x"))
      b:update_set(items(3, "x"))
      a:update_set(items(2, "y"))
      b:update_set(items(2, "y"))
      pump(qps, function() return all_acquired(qps)() and a:len() + b:len() == 2 end, 30, "the last split")
      assert_split(items(2, "y"), qps)
      zk2:close()
    end)

    it("fails instead of allocating forever when members hold different sets (kazoo #392)", function()
      local zk2 = helpers.client(server.hosts)
      -- a owns a and c of {a, b, c}; b owns c of {b, c, d}: both want c
      local a = member(zk, { "a", "b", "c" }, { identifier = "A", conflict_timeout = 1 })
      local b = member(zk2, { "b", "c", "d" }, { identifier = "B", conflict_timeout = 1 })
      local qps = { a, b }
      pump(qps, function() return a.failed or b.failed end, 30, "one of them to fail")
      local failed, other = a.failed and a or b, a.failed and b or a
      local err = failed.error
      assert.is_true(errors.is(err, errors.LockTimeout), tostring(err))
      assert.are.equal("c", err.item)
      assert.truthy(tostring(err):find("#392", 1, true))
      assert.truthy(tostring(err):find(string.format("member %q", other.identifier), 1, true),
                    tostring(err))
      assert.are.same({}, failed:list())
      -- the failed member left the party: the other one takes its whole set
      pump({ other }, function() return other.acquired and other:len() == 3 end, 30, "the survivor")
      assert.are.same(other == a and { "a", "b", "c" } or { "b", "c", "d" },
                      helpers.sorted(other:list()))
      zk2:close()
    end)

    it("waits out a slow releaser: conflict_timeout counts from the last lock it got", function()
      -- Another contender (plain Locks on the items' lock nodes, as a member still releasing a
      -- big share would hold them) lets the items go one by one, the whole taking twice
      -- conflict_timeout; every window sees some of them come free, so this is no conflict.
      local zk2 = helpers.client(server.hosts)
      local set = items(24)
      local held = {}
      for i, item in ipairs(set) do
        held[i] = zk2:Lock(path .. "/locks/" .. item, "slow")
        assert.is_true(held[i]:acquire())
      end
      local a = member(zk, set, { identifier = "A", conflict_timeout = 3 })
      local start, next_free = core.monotonic(), 1
      pump({ a }, function()
        while next_free <= #set and core.monotonic() - start >= next_free * 0.25 do
          held[next_free]:release()
          next_free = next_free + 1
        end
        return a.acquired or a.failed
      end, 60, "a to acquire or fail")
      assert.is_nil(a.error)
      assert.is_true(a.acquired)
      assert.are.same(set, helpers.sorted(a:list()))
      assert.is_true(core.monotonic() - start > 3, "the releases outlasted one window")
      a:finish()
      zk2:close()
    end)

    it("names a duplicate identifier as the cause of a conflict", function()
      local zk2 = helpers.client(server.hosts)
      local a = member(zk, items(2), { identifier = "dup", conflict_timeout = 1 })
      local b = member(zk2, items(2), { identifier = "dup", conflict_timeout = 1 })
      pump({ a, b }, function() return a.failed or b.failed end, 30, "one of them to fail")
      local failed = a.failed and a or b
      assert.is_true(errors.is(failed.error, errors.LockTimeout), tostring(failed.error))
      assert.truthy(tostring(failed.error):find("another member uses the same identifier", 1, true),
                    tostring(failed.error))
      zk2:close()
    end)

    it("goes to FAILURE when the session expires (LOST), and the others take over", function()
      local zk2 = helpers.client(server.hosts)
      local set = items(6)
      local seen = {}
      local a = member(zk, set, { identifier = "a",
                                  state_change_event = function(s) seen[#seen + 1] = s end })
      local b = member(zk2, set, { identifier = "b" })
      pump({ a, b }, all_acquired({ a, b }), 30, "the split")
      helpers.expire(zk)
      helpers.eventually(function() return a.failed end, 10, "a to fail")
      assert.is_true(errors.is(a.error, errors.SessionExpiredError), tostring(a.error))
      -- read before the FAILURE notice was handled (the state is C's and can be ahead of it,
      -- as a loaded run showed): the error is made from the state, never nil
      local handled = rawget(a, "error")
      rawset(a, "error", nil)
      assert.is_true(errors.is(a.error, errors.SessionExpiredError), tostring(a.error))
      rawset(a, "error", handled)
      assert.are.same({}, a:list())
      assert.are.equal("FAILURE", seen[#seen])
      pump({ b }, function() return b.acquired and b:len() == 6 end, 30, "b to own everything")
      -- FAILURE is final: release_set and update_set change nothing, finish is harmless
      a:release_set()
      a:update_set({ "x" })
      a:finish()
      assert.is_true(a.failed)
      zk2:close()
    end)

    -- kazoo's rule: ownership ends with the connection.  The client cannot know how long the
    -- server keeps its session (a follower cut off from its leader keeps answering pings while
    -- the leader expires it), so ACQUIRED turns RELEASE the moment SUSPENDED is seen.
    local function release_on_suspended(fault, after)
      local p = testing.proxy(server:node(1))
      local client = zklua.client{ hosts = p.hosts, timeout = 8 }
      client:start()
      local seen, at_suspended = {}, nil
      local qp = member(client, items(3), { identifier = "s", state_change_event = function(s)
        seen[#seen + 1] = s -- (it runs later, from the event loop: the client may be back)
      end })
      client:add_listener(function(state)
        if state == "SUSPENDED" and at_suspended == nil then at_suspended = qp.state end
      end)
      assert.is_true(qp:wait_for_acquire(20))
      fault(p)
      -- (state_change_event runs from the event loop once the change is queued: waited for)
      testing.wait_for(function() return at_suspended ~= nil and #seen >= 2 end, 30, "SUSPENDED")
      assert.are.equal("RELEASE", at_suspended) -- already when SUSPENDED was reported
      assert.are.same({ "ACQUIRED", "RELEASE" }, seen)
      assert.are.same(items(3), qp:list()) -- owned until released, as kazoo's list(qp)
      after(p)
      testing.wait_for(function() return client.state == "CONNECTED" or qp.failed end, 30,
                       "the reconnection")
      if qp.failed then -- the client counted the silence as a session expiry (LOST)
        assert.is_true(errors.is(qp.error, errors.SessionExpiredError), tostring(qp.error))
      else -- the session lived: release, and the same share comes back
        assert.is_true(qp.release)
        qp:release_set()
        assert.is_true(qp:wait_for_acquire(30))
        assert.are.same(items(3), qp:list())
        qp:finish()
      end
      client:close()
      p:stop()
    end

    it("turns ACQUIRED into RELEASE at once when its connection goes silent (SUSPENDED)", function()
      release_on_suspended(function(p) p:silence("down") end, function(p) p:resume() end)
    end)

    it("turns ACQUIRED into RELEASE at once when its connection closes (SUSPENDED)", function()
      release_on_suspended(function(p) p:drop() end, function() end)
    end)

    it("goes to FAILURE when the client stops, releasing nothing twice", function()
      local a = member(zk, items(2), { identifier = "a" })
      assert.is_true(a:wait_for_acquire(10))
      zk:stop()
      assert.is_true(a.failed)
      assert.is_true(errors.is(a.error, errors.ConnectionClosedError), tostring(a.error))
      a:finish()
      zk:start()
      local admin = helpers.client(server.hosts)
      assert.are.same({}, admin:get_children(path .. "/party"))
      admin:close()
    end)

    it("fails with the error of a partition_func that raises or returns nonsense", function()
      local logged = {}
      zk:close()
      zk = zklua.client{ hosts = server.hosts,
                         logger = function(level, msg) logged[#logged + 1] = level .. " " .. msg end }
      zk:start()
      local a = member(zk, items(3), { identifier = "a",
                                       partition_func = function() error("no idea") end })
      helpers.eventually(function() return a.failed end, 10, "a to fail")
      assert.truthy(tostring(a.error):find("no idea", 1, true))
      local wanted = "ERROR SetPartitioner on " .. path .. ": partition_func raised an error: "
      assert.truthy(table.concat(logged, "\n"):find(wanted, 1, true), table.concat(logged, "\n"))
      local b = member(zk, items(3), { identifier = "b", path = path .. "/b",
                                       partition_func = function() return { "q01", "nope" } end })
      helpers.eventually(function() return b.failed end, 10, "b to fail")
      assert.truthy(tostring(b.error):find("not in the set", 1, true), tostring(b.error))
      -- a custom function gets (identifier, members, set) and its share is what is owned
      local got
      local c = member(zk, items(3), { identifier = "c", path = path .. "/c",
                                       partition_func = function(id, members, set)
                                         got = { id, members, set }
                                         return { set[3], set[1] }
                                       end })
      assert.is_true(c:wait_for_acquire(10))
      assert.are.same({ "c", { "c" }, items(3) }, got)
      assert.are.same({ "q03", "q01" }, c:list())
      c:finish()
    end)

    it("returns from its constructor when what followed the join failed in the same pass",
       function()
      -- A slow process (valgrind) drains the join's reply, the party's listing, a settle of
      -- time_boundary 0 and the partition asked for in one pass over the events, before the
      -- constructor looks at the state: it found FAILURE and raised "could not join the
      -- party".  Here a handler makes the constructor's wait look only once the partition
      -- was asked for, whatever the machine's speed.
      local blocking = require "zklua.handlers.blocking"
      local armed, asked = false, false
      local handler = setmetatable({
        wait = function(done, timeout)
          return blocking.wait(function() return done() and (asked or not armed) end, timeout)
        end,
      }, { __index = blocking })
      local gated = zklua.client{ hosts = server.hosts, handler = handler, logger = function() end }
      gated:start()
      local make = core.set_partitioner
      core.set_partitioner = function(...) -- the join starts here: the wait from now on is gated
        armed = true
        return make(...)
      end
      local ok, qp = pcall(gated.SetPartitioner, gated, {
        path = path, set = items(3), identifier = "slow", time_boundary = 0,
        partition_func = function() asked = true; error("boom") end })
      core.set_partitioner = make
      armed = false
      assert(ok, tostring(qp))
      assert.is_true(qp.failed)
      assert.truthy(tostring(qp.error):find("boom", 1, true), tostring(qp.error))
      gated:close()
    end)

    it("checks every argument before anything is sent", function()
      local bad = {
        { "path", { path = "/a/../b", set = {} } },
        { "path", { path = 5, set = {} } },
        { "set", { path = path } },
        { "set", { path = path, set = "abc" } },
        { "set", { path = path, set = { 1, "a" } } },
        { "set", { path = path, set = { "a", "a" } } },
        { "set", { path = path, set = { 1, 1.0 } } },
        { "set", { path = path, set = { "a/b" } } },
        { "set", { path = path, set = { "" } } },
        { "set", { path = path, set = { ".." } } },
        { "set", { path = path, set = { x = 1 } } },
        { "set", { path = path, set = { 0 / 0 } } },
        { "set", { path = path, set = { math.huge } } },
        { "set", { path = path, set = { {} } } },
        { "set", { path = path, set = { true } } },
        { "partition_func", { path = path, set = {}, partition_func = "f" } },
        { "identifier", { path = path, set = {}, identifier = 5 } },
        { "identifier", { path = path, set = {}, identifier = "a/b" } },
        { "time_boundary", { path = path, set = {}, time_boundary = -1 } },
        { "time_boundary", { path = path, set = {}, time_boundary = "1" } },
        { "time_boundary", { path = path, set = {}, time_boundary = 0 / 0 } },
        { "max_reaction_time", { path = path, set = {}, max_reaction_time = -1 } },
        { "conflict_timeout", { path = path, set = {}, conflict_timeout = 0 } },
        { "state_change_event", { path = path, set = {}, state_change_event = 5 } },
        { "foo", { path = path, set = {}, foo = 1 } },
      }
      for _, case in ipairs(bad) do
        local err = raises(errors.BadArgumentsError, zk.SetPartitioner, zk, case[2])
        assert.are.equal(case[1], err.argument, tostring(err))
        assert.truthy(tostring(err):find("SetPartitioner", 1, true))
      end
      raises(errors.BadArgumentsError, zk.SetPartitioner, zk, path, {}, nil, nil, 1, 1, nil, 9)
      raises(errors.BadArgumentsError, zk.SetPartitioner, zk, { path = path, set = {} }, 2)
      assert.is_nil(zk:exists(path)) -- nothing was sent
      local qp = zk:SetPartitioner(path, { 3, 1, 2 }, nil, "pos", TB) -- kazoo's positional form
      assert.is_true(qp:wait_for_acquire(10))
      assert.are.same({ 1, 2, 3 }, qp:list())
      local err = raises(errors.BadArgumentsError, qp.update_set, qp, { 1, "a" })
      assert.are.equal("new_set", err.argument)
      raises(errors.BadArgumentsError, qp.fencing_token, qp, {})
      raises(errors.BadArgumentsError, qp.wait_for_acquire, qp, -1)
      assert.are.same({ 3, 1, 2 }, qp:get_set()) -- as given
      zk:close()
      raises(errors.ConnectionClosedError, zk.SetPartitioner, zk, path, { 1 })
      zk = helpers.client(server.hosts)
    end)
  end)

  describe("member processes", function()
    it("split the set on joins and re-cover it after a clean leave, a kill -9 and an expiry", function()
      local set = items(24)
      local members = {}
      for i = 1, 3 do members[i] = spawn("p" .. i, set) end
      local owners = wait_full_cover(members, set, 30, "three members")
      assert.are.same({ "q01", "q04", "q07", "q10", "q13", "q16", "q19", "q22" },
                      owned_by(owners, "p1"))
      -- a join: four shares
      members[4] = spawn("p4", set)
      wait_full_cover(members, set, 30, "four members")
      helpers.eventually(function() return #owned_by(current_owners(members), "p4") == 6 end, 30,
                         "p4's share")
      -- a clean leave (finish): its items move to the others
      local before = owned_by(current_owners(members), "p2")
      zk:create(path .. "-ctl/p2", "", { makepath = true })
      members[2].kid:wait_line("^finished", 30)
      assert.is_true(members[2].kid:wait_exit(10))
      owners = wait_full_cover(members, set, 30, "after p2 left")
      for _, item in ipairs(before) do assert.are_not.equal("p2", owners[item]) end
      -- kill -9: the session times out (2 s), then the others take its items
      local victim = members[3]
      victim.kid:signal("KILL")
      victim.ended = core.monotonic()
      owners = wait_full_cover(members, set, 40, "after the kill -9 of p3")
      assert.are.same({}, owned_by(owners, "p3"))
      -- session expiry: the member sees FAILURE, the others re-cover
      local v = members[4]
      v.expired = true
      local id, hex = v.kid:stdout():match("^ready %d+ (%S+) (%x+)")
      local passwd = hex:gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end)
      local failed = false
      for _ = 1, 30 do
        local other = zklua.client{ hosts = server.hosts, client_id = { id, passwd }, timeout = 2 }
        pcall(other.start, other, 2)
        other:close()
        failed = child.poll_until(function() return v.kid:stdout():find("\nfailed ") ~= nil end, 1)
        if failed then break end
      end
      assert.is_true(failed, "p4 did not see its session expire")
      assert.truthy(v.kid:stdout():find("state FAILURE", 1, true))
      assert.truthy(v.kid:stdout():find("SessionExpiredError", 1, true))
      owners = wait_full_cover(members, set, 30, "after p4's expiry")
      assert.are.same(set, owned_by(owners, "p1"))
    end)

    it("split one set with kazoo members, with no overlap and full cover (interop)", function()
      local set = items(20, "k")
      local members = {}
      local function spawn_kazoo(name)
        local kid = kids:kazoo("spec/fixtures/kazoo_partitioner.py", server.hosts, path,
                               table.concat(set, ","), name, tostring(TB), path .. "-ctl")
        kid:wait_line("^ready", 30)
        return { kid = kid, name = name }
      end
      members[1] = spawn("z1", set)
      members[2] = spawn_kazoo("k1")
      members[3] = spawn("z2", set)
      members[4] = spawn_kazoo("k2")
      local sorted_members = { "k1", "k2", "z1", "z2" }
      local owners = wait_full_cover(members, set, 40, "two kazoo and two zklua members",
                                     function(o)
        for _, name in ipairs(sorted_members) do
          if #owned_by(o, name) ~= #set / 4 then return false end
        end
        return true
      end)
      -- every member owns exactly kazoo's round-robin share
      for i, name in ipairs(sorted_members) do
        local want = {}
        for k = i, #set, 4 do want[#want + 1] = set[k] end
        assert.are.same(want, owned_by(owners, name))
      end
      -- a kazoo member leaves cleanly, then a zklua one: the rest re-cover
      zk:create(path .. "-ctl/k1", "", { makepath = true })
      members[2].kid:wait_line("^finished", 30)
      owners = wait_full_cover(members, set, 40, "after k1 left")
      assert.are.same({}, owned_by(owners, "k1"))
      zk:create(path .. "-ctl/z1", "")
      members[1].kid:wait_line("^finished", 30)
      owners = wait_full_cover(members, set, 40, "after z1 left")
      assert.are.equal(10, #owned_by(owners, "k2"))
      assert.are.equal(10, #owned_by(owners, "z2"))
    end)
  end)
end)

describe("SetPartitioner on an ensemble", function()
  local ens, path
  local counter = 0
  local kids = helpers.kids()

  setup(function() ens = testing.ensemble(3) end)
  teardown(function() ens:stop() end)

  before_each(function()
    counter = counter + 1
    path = ROOT .. "/e" .. counter
  end)

  after_each(function()
    kids:cleanup()
    for i = 1, 3 do
      if not ens:node(i):is_running() then ens:node(i):start() end
    end
    helpers.delete_trees(ens.hosts, path, path .. "-ctl")
  end)

  local function follower()
    local leader = ens:leader()
    for i = 1, 3 do
      if ens:node(i) ~= leader then return ens:node(i) end
    end
  end

  it("members re-cover every item when ensemble nodes are lost", function()
    -- The members keep their sessions through both faults: a session timeout (30 s) longer
    -- than an election on a loaded machine.  With 10 s, a loaded run once saw the election and
    -- the new leader's sync outlast it: every member declared its session lost (SUSPENDED for
    -- a whole timeout), failed and exited, and nothing was owned again.
    local set = items(15)
    local members = {}
    for i = 1, 3 do
      local kid = kids:spawn({ "./zklua", "spec/fixtures/partitioner_child.lua",
                               "hosts=" .. ens.hosts, "path=" .. path,
                               "set=" .. table.concat(set, ","), "ident=e" .. i, "tb=" .. TB,
                               "timeout=30" })
      kid:wait_line("^ready", 30)
      members[i] = { kid = kid, name = "e" .. i }
    end
    -- a member that fails ends the test at once, with its lines, not after the cover's timeout
    local function none_failed()
      for _, m in ipairs(members) do
        local out = m.kid:stdout()
        local line = out:match("^failed [^\n]*") or out:match("\nfailed [^\n]*")
        if line then error(m.name .. " failed: " .. line, 0) end
      end
    end
    wait_full_cover(members, set, 40, "three members", nil, none_failed)
    local lost = follower()
    lost:stop()
    wait_full_cover(members, set, 60, "after a follower stopped", nil, none_failed)
    lost:start()
    -- the restarted node has joined the leader before the leader goes: two nodes can elect
    helpers.eventually(function() return lost:mode() == "follower" end, 60, "the node following")
    local leader = ens:leader()
    leader:stop()
    wait_full_cover(members, set, 60, "after the leader stopped", nil, none_failed)
    -- every item is still owned, by the same stride as before
    local owners = wait_full_cover(members, set, 60, "the end", nil, none_failed)
    assert.are.same({ "q01", "q04", "q07", "q10", "q13" }, owned_by(owners, "e1"))
  end)

  it("turns RELEASE at the first SUSPENDED (a paused follower); an acquire waits for the connection", function()
    local node = follower()
    local zk = zklua.client{ hosts = node.hosts, timeout = 6 }
    zk:start()
    local seen = {}
    local qp = zk:SetPartitioner{ path = path, set = items(3), identifier = "s", time_boundary = TB,
                                  state_change_event = function(s)
                                    seen[#seen + 1] = s .. "/" .. zk.state
                                  end }
    assert.is_true(qp:wait_for_acquire(20))
    node:pause()
    helpers.eventually(function() return zk.state == "SUSPENDED" and #seen >= 2 end, 20, "SUSPENDED")
    assert.is_true(qp.release) -- the session may be gone already: the items are given up
    assert.are.same({ "ACQUIRED/CONNECTED", "RELEASE/SUSPENDED" }, seen)
    node:resume()
    helpers.eventually(function() return zk.state == "CONNECTED" or qp.failed end, 30, "CONNECTED")
    if qp.failed then -- the pause outlasted the session: LOST
      assert.is_true(errors.is(qp.error, errors.SessionExpiredError), tostring(qp.error))
      zk:close()
      return
    end
    qp:release_set()
    assert.is_true(qp:wait_for_acquire(30))
    assert.are.same(items(3), qp:list())

    -- an allocation that meets a connection loss claims nothing until reconnected
    qp:update_set(items(4))
    assert.is_true(qp.release)
    qp:release_set()
    node:pause()
    helpers.eventually(function() return zk.state == "SUSPENDED" end, 20, "SUSPENDED again")
    assert.is_true(qp.allocating)
    node:resume()
    helpers.eventually(function() return zk.state == "CONNECTED" or qp.failed end, 30, "CONNECTED")
    if not qp.failed then
      assert.is_true(qp:wait_for_acquire(30))
      assert.are.same(items(4), qp:list())
      qp:finish()
    end
    zk:close()
  end)
end)
