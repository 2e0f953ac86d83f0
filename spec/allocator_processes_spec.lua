-- PartitionAllocator members as separate processes (spec/fixtures/allocator_child.lua), under
-- real faults: clean leaves and joins, kill -9, session expiry, members running different
-- strategies (one random, one buggy) through leader changes, concurrent changes of the set,
-- and the loss of an ensemble node.  Every member logs what it owns with fencing tokens and
-- times; spec/support/ownership.lua proves from those logs that no item was owned by two
-- members at once and that the survivors cover the whole set.
local core = require "zklua.core"
local testing = require "zklua.testing"
local helpers = require "support.helpers"
local ownership = require "support.ownership"
local child = require "fixtures.child"

local eventually = helpers.eventually
local WAIT = 60 -- generous: child processes share two cores with other test runs

local function items(n)
  local list = {}
  for i = 1, n do list[i] = string.format("item-%03d", i) end
  return list
end

local function count_lines(text, pattern)
  local n = 0
  for line in text:gmatch("[^\n]+") do
    if line:match(pattern) then n = n + 1 end
  end
  return n
end

describe("PartitionAllocator members in processes", function()
  local server, admin, path, hosts
  local kids = helpers.kids()
  local logs, ended
  local counter = 0

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  before_each(function()
    counter = counter + 1
    path = "/allocator-procs/t" .. counter
    hosts = server.hosts
    admin = helpers.client(hosts)
    logs, ended = {}, {}
  end)

  after_each(function()
    kids:cleanup()
    admin:close()
    helpers.delete_trees(hosts, path, path .. "-ctl")
    for _, log in ipairs(logs) do os.remove(log) end
  end)

  -- Starts a member process; returns once it joined.  opts: strategy, timeout, seed, ...
  local function spawn(ident, opts)
    local log = os.tmpname()
    logs[#logs + 1] = log
    local argv = { "./zklua", "spec/fixtures/allocator_child.lua", "hosts=" .. hosts,
                   "path=" .. path, "ident=" .. ident, "log=" .. log }
    for k, v in pairs(opts or {}) do argv[#argv + 1] = k .. "=" .. tostring(v) end
    local kid = kids:spawn(argv)
    kid.ident, kid.log = ident, log
    kid.ready = kid:wait_line("^ready", WAIT)
    kid.member_pid = kid.ready:match("^ready (%d+)")
    kid:wait_line("^started", WAIT)
    return kid
  end

  -- Sends a command through the member's control node; waits until it ran.
  local function command(kid, text)
    local before = count_lines(kid:stdout(), "^done ")
    admin:set(path .. "-ctl/" .. kid.ident, text)
    eventually(function() return count_lines(kid:stdout(), "^done ") > before or kid:exited() end,
               WAIT, kid.ident .. " to run " .. text)
  end

  local function kill(kid)
    assert.is_false(kid:exited(), kid.ident .. " exited early: " .. kid:stdout() .. kid:stderr())
    kid:signal("KILL")
    ended[kid.member_pid] = core.monotonic() -- it logs nothing after this
    assert.is_true(kid:wait_exit(10))
  end

  local function report(window)
    return ownership.check(ownership.read(logs), { ended = ended, window = window })
  end

  -- Waits until the logs show every item of set owned exactly once (and, when `holders` is
  -- given, by exactly those idents, each with at least one item); checks safety throughout.
  local function wait_cover(set, holders, window)
    local last
    eventually(function()
      last = report(window)
      ownership.assert_safe(last)
      if not pcall(ownership.assert_cover, last, set) then return false end
      if not holders then return true end
      local by = {}
      for _, ident in pairs(ownership.final_owners(last)) do by[ident] = true end
      for _, ident in ipairs(holders) do
        if not by[ident] then return false end
      end
      for ident in pairs(by) do
        local wanted = false
        for _, h in ipairs(holders) do wanted = wanted or h == ident end
        if not wanted then return false end
      end
      return true
    end, WAIT, "every item owned once" .. (holders and (" by " .. table.concat(holders, ", ")) or ""))
    return last
  end

  local function leader_written()
    local data = admin:get(path .. "/assignment")
    return data:match('"leader":"([^"]*)"')
  end

  it("processes join and leave cleanly: the survivors cover every item, never two owners", function()
    local set = items(24)
    local k1 = spawn("m1", { seed = 24 })
    local k2 = spawn("m2")
    local k3 = spawn("m3")
    wait_cover(set, { "m1", "m2", "m3" })
    command(k2, "stop")
    assert.is_true(k2:wait_exit(WAIT))
    assert.are.equal(0, k2.status, k2:stderr())
    wait_cover(set, { "m1", "m3" })
    local k4 = spawn("m4")
    wait_cover(set, { "m1", "m3", "m4" })
    command(k1, "stop") -- the leader leaves: m3 leads now
    assert.is_true(k1:wait_exit(WAIT))
    local final = wait_cover(set, { "m3", "m4" })
    assert.are.equal("m3", leader_written())
    -- a clean leave hands items over only after their release: no overlap at all
    assert.are.same({}, final.windows)
    assert.is_true(final.acquisitions >= 24 + 8)
    assert.is_true(k4:exited() == false and k3:exited() == false)
  end)

  it("kill -9 of a member: the others take its items once its session expires", function()
    local set = items(18)
    local k1 = spawn("m1", { seed = 18, timeout = 2 })
    local k2 = spawn("m2", { timeout = 2 })
    spawn("m3", { timeout = 2 })
    wait_cover(set, { "m1", "m2", "m3" })
    kill(k2)
    wait_cover(set, { "m1", "m3" })
    kill(k1) -- and the leader itself
    local final = wait_cover(set, { "m3" })
    assert.are.same({}, final.windows)
    assert.are.equal("m3", leader_written())
  end)

  it("session expiry of a member: it reports its items lost, rejoins and owns items again", function()
    local set = items(12)
    spawn("m1", { seed = 12 })
    local k2 = spawn("m2", { timeout = 4 })
    wait_cover(set, { "m1", "m2" })
    local _, id, hex = k2.ready:match("^ready (%d+) (%S+) (%x+)")
    local passwd = hex:gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end)
    -- as testing.expire_session: take the session over with a second handle and close it,
    -- until the member hears LOST (it often wins its session back first)
    eventually(function()
      local other = core.session(hosts, 4000, false, id, passwd)
      other:start()
      local deadline = core.monotonic() + 2
      repeat
        other:wait(0.05)
        local kind, state = other:next()
      until (kind == "state" and state == "CONNECTED") or core.monotonic() > deadline
      other:stop()
      other:close()
      return k2:stdout():find("state LOST", 1, true) ~= nil
    end, WAIT, "m2 to hear LOST")
    local final = wait_cover(set, { "m1", "m2" }, { m2 = true })
    local text = child.read_file(k2.log)
    assert.truthy(text:find(" lost m2 ", 1, true), "m2 logged no lost item")
    assert.is_true(count_lines(text, " acquire m2 ") > count_lines(text, " lost m2 "))
    -- overlaps, if any, are only the documented window of the expired member
    for _, w in ipairs(final.windows) do assert.truthy(w:find("m2(", 1, true), w) end
  end)

  it("members running different strategies (random, buggy) never own an item twice", function()
    local set = items(20)
    -- sessions of 4 s: no member's connection may drop on a slow machine (a sanitizer run),
    -- since this spec allows no expiry window
    local k1 = spawn("m1", { seed = 20, strategy = "random", timeout = 4 })
    local k2 = spawn("m2", { strategy = "reverse", timeout = 4 })
    spawn("m3", { strategy = "buggy", timeout = 4 })
    spawn("m4", { strategy = "rendezvous", timeout = 4 })
    wait_cover(set, nil)
    assert.are.equal("m1", leader_written())
    for i = 1, 3 do -- the random leader re-divides on every change: the others follow
      command(k1, "add extra-" .. i)
      set[#set + 1] = "extra-" .. i
      wait_cover(set, nil)
    end
    kill(k1) -- m2 (reverse) leads
    wait_cover(set, { "m2", "m3", "m4" })
    assert.are.equal("m2", leader_written())
    command(k2, "stop") -- m3 leads: its strategy is buggy, round_robin covers instead
    assert.is_true(k2:wait_exit(WAIT))
    local final = wait_cover(set, { "m3", "m4" })
    assert.are.equal("m3", leader_written())
    assert.are.same({}, final.windows)
  end)

  it("concurrent changes of the set from several processes never lose an update", function()
    local k = { spawn("m1", { seed = 0 }), spawn("m2"), spawn("m3") }
    local want = {}
    for i, kid in ipairs(k) do -- 3 writers, 15 single-item changes each, at the same time
      local mine = {}
      for j = 1, 15 do
        mine[j] = string.format("w%d-%02d", i, j)
        want[#want + 1] = mine[j]
      end
      admin:set(path .. "-ctl/" .. kid.ident, "add_each " .. table.concat(mine, ","))
    end
    eventually(function()
      for _, kid in ipairs(k) do
        if count_lines(kid:stdout(), "^done add_each") < 1 then return false end
      end
      return true
    end, WAIT, "the writers")
    table.sort(want)
    local stored = core.allocator_decode_items((admin:get(path .. "/partitions")))
    assert.are.same(want, stored)
    wait_cover(want, { "m1", "m2", "m3" })
    local gone = {}
    for i, kid in ipairs(k) do -- and removals, crossing each other's items
      local theirs = {}
      for j = 1, 10 do theirs[j] = string.format("w%d-%02d", i % 3 + 1, j) end
      for _, item in ipairs(theirs) do gone[item] = true end
      admin:set(path .. "-ctl/" .. kid.ident, "remove_each " .. table.concat(theirs, ","))
    end
    eventually(function()
      for _, kid in ipairs(k) do
        if count_lines(kid:stdout(), "^done remove_each") < 1 then return false end
      end
      return true
    end, WAIT, "the removers")
    local left = {}
    for _, item in ipairs(want) do
      if not gone[item] then left[#left + 1] = item end
    end
    assert.are.same(left, core.allocator_decode_items((admin:get(path .. "/partitions"))))
    wait_cover(left, { "m1", "m2", "m3" })
  end)
end)

describe("PartitionAllocator members on a 3-node ensemble", function()
  local ens, admin, path
  local kids = helpers.kids()
  local logs = {}

  setup(function() ens = testing.ensemble(3) end)
  teardown(function()
    kids:cleanup()
    if admin then admin:close() end
    for _, log in ipairs(logs) do os.remove(log) end
    if ens then ens:stop() end
  end)

  it("keep their items through the loss of their server; the set stays covered", function()
    path = "/allocator-ensemble"
    admin = helpers.client(ens.hosts)
    local function spawn(ident, opts)
      local log = os.tmpname()
      logs[#logs + 1] = log
      local argv = { "./zklua", "spec/fixtures/allocator_child.lua", "hosts=" .. ens.hosts,
                     "path=" .. path, "ident=" .. ident, "log=" .. log, "timeout=20" }
      for k, v in pairs(opts or {}) do argv[#argv + 1] = k .. "=" .. tostring(v) end
      local kid = kids:spawn(argv)
      kid.ident = ident
      kid.ready = kid:wait_line("^ready", WAIT)
      kid:wait_line("^started", WAIT)
      return kid
    end
    local set = items(15)
    local k = { spawn("m1", { seed = 15 }), spawn("m2"), spawn("m3") }
    local function covered()
      local r = ownership.check(ownership.read(logs), {})
      ownership.assert_safe(r)
      if not pcall(ownership.assert_cover, r, set) then return false end
      local holders = 0
      local seen = {}
      for _, ident in pairs(ownership.final_owners(r)) do
        if not seen[ident] then holders, seen[ident] = holders + 1, true end
      end
      return holders == 3, r
    end
    eventually(covered, WAIT, "every item owned once by the three members")
    local _, before = covered()
    -- the server m1 is connected to goes away: m1 is SUSPENDED, then reconnects elsewhere
    local sid = k[1].ready:match("^ready %d+ (%S+)")
    local node
    helpers.wait_until(function()
      for i = 1, 3 do
        local cons = core.four_letter("127.0.0.1", ens:node(i).port, "cons", 1)
        if cons and cons:find("sid=" .. sid, 1, true) then node = ens:node(i) end
      end
      return node ~= nil
    end, WAIT, "m1's server")
    node:stop()
    eventually(function() return k[1]:stdout():find("state SUSPENDED", 1, true) ~= nil end,
               WAIT, "m1 to be SUSPENDED")
    eventually(function()
      return count_lines(k[1]:stdout(), "^state CONNECTED") >= 2
    end, WAIT, "m1 to reconnect to another server")
    node:start()
    eventually(covered, WAIT, "every item owned once")
    local _, after = covered()
    -- nobody lost or gained anything: the same acquisitions, the same owners and tokens
    assert.are.equal(before.acquisitions, after.acquisitions)
    assert.are.same(ownership.final_owners(before), ownership.final_owners(after))
  end)
end)
