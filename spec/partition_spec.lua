-- Network partitions on a 3-node loopback ensemble whose nodes reach each other only through
-- proxies (testing.ensemble(3, {partitionable = true})).  A follower is cut off while its
-- clients still reach it (the minority side): from both other nodes, its links closed or
-- silenced (nothing closed: the nodes notice by their timeouts), or from the leader only
-- (silenced; it still reaches the other follower); or a holder's own link to its server is
-- silenced, the ensemble whole.  A holder on the minority side is a Lock
-- holder, a SetPartitioner member cut off before a rebalance or in the middle of one (as it
-- turns RELEASE), or a PartitionAllocator member cut off while another member claims the
-- item it hands over.
--
-- What "given up before the majority grants it" means (the contract, as kazoo's and
-- Curator's): on SUSPENDED a holder stops acting as the holder until CONNECTED.  A client of
-- the cut-off node hears SUSPENDED when its server drops it (a follower without a leader
-- closes its client connections after syncLimit * tickTime: 1 s here) or, when its own link
-- goes silent, the client notices after 2/3 of its session timeout — before the majority
-- expires its session (a whole session timeout after the last packet it got), and the
-- majority grants a lock or an item only after that expiry.
--
-- Each case keeps a ledger: every event as this process saw it, on one monotonic clock.  A
-- hold starts when a holder is told it holds (acquire returned, ACQUIRED, on_acquire) and ends
-- when it is told to stop (release, RELEASE, on_release) or hears SUSPENDED or LOST.  Proved
-- from the ledger: no hold starts while another holder's hold of the same thing is open (so
-- SUSPENDED at the cut-off holder precedes the grant to another); the cut-off client goes
-- SUSPENDED then LOST; every call it made during the partition ended; no write the
-- majority acknowledged is lost; the fencing tokens grow; and once healed, the cut-off node
-- follows the leader again and its client has a new session.  At the end the spec prints the
-- fault and partition matrix from the ledgers (make test-partition runs it alone).
local zklua = require "zklua"
local core = require "zklua.core"
local testing = require "zklua.testing"

local TIMEOUT = 4 -- the clients' session timeout (seconds; twice that for a silenced client link)
local BOUND = 60 -- the longest any wait may take (an upper bound, never a speed claim)
local TB = 0.3 -- the SetPartitioner's time_boundary

-- ---------------------------------------------------------------- the ledger

local Ledger = {}
Ledger.__index = Ledger

local function new_ledger(name)
  return setmetatable({ name = name, events = {}, holders = {}, ended = {}, faults = 0,
                        sessions_lost = 0, acked = {}, acked_lost = 0, overlaps = {},
                        calls = {}, waiting = 0, margins = {}, client_of = {} },
                      Ledger)
end

function Ledger:note(who, what)
  self.events[#self.events + 1] = { at = core.monotonic(), who = who, what = what }
end

-- who is told it holds item.  Another holder whose hold is still open is an overlap; the
-- time since the previous holder stopped acting is the margin of the handover.
function Ledger:hold(who, item)
  self:note(who, "holds " .. item)
  local current = self.holders[item]
  if current and current.who ~= who then
    self.overlaps[#self.overlaps + 1] = string.format("%s: %s was granted it while %s held it",
                                                      item, who, current.who)
  end
  local last = self.ended[item]
  if last and last.who ~= who then
    self.margins[#self.margins + 1] = { item = item, from = last.who, to = who,
                                        why = last.why, gap = core.monotonic() - last.at }
  end
  self.holders[item] = { who = who }
end

-- who stops acting as the holder of item (why: released, SUSPENDED, LOST, ...).
function Ledger:unhold(who, item, why)
  local current = self.holders[item]
  if current and current.who == who then
    self.holders[item] = nil
    self.ended[item] = { who = who, at = core.monotonic(), why = why }
    self:note(who, "stops holding " .. item .. " (" .. why .. ")")
  end
end

-- The contract: on SUSPENDED (or LOST) of client who, every holder on it (who itself, and
-- the members on_client() put on it) stops acting as a holder.
function Ledger:stop_acting(who, why)
  local items = {}
  for item, h in pairs(self.holders) do
    if h.who == who or self.client_of[h.who] == who then items[#items + 1] = item end
  end
  for _, item in ipairs(items) do self:unhold(self.holders[item].who, item, why) end
end

-- member (a recipe's holder) runs on the client the ledger follows as client.
function Ledger:on_client(member, client)
  self.client_of[member] = client
end

function Ledger:fault(what)
  self.faults = self.faults + 1
  self:note("test", what)
end

-- Follows client zk as who: its states go to the ledger; returns the states seen.
function Ledger:follow(who, zk)
  local states = {}
  local function listener(state)
    if self.done then return true end
    states[#states + 1] = state
    self:note(who, state)
    if state == "SUSPENDED" or state == "LOST" then self:stop_acting(who, state) end
    if state == "LOST" then self.sessions_lost = self.sessions_lost + 1 end
  end
  zk:add_listener(listener)
  return states
end

-- A call made during the partition (a future): it must end.
function Ledger:call(future)
  self.calls[#self.calls + 1] = future
  return future
end

-- A blocking call made during the partition: it must return or raise, within its bound.
function Ledger:blocking(fn, ...)
  local done = false
  self.calls[#self.calls + 1] = { ready = function() return done end }
  local ok, err = pcall(fn, ...)
  done = true
  return ok, err
end

-- Waits (bounded) for every call of the case to end; counts those that did not.
function Ledger:settle_calls()
  pcall(testing.wait_for, function()
    for _, call in ipairs(self.calls) do
      if not call:ready() then return false end
    end
    return true
  end, BOUND, "the calls made during the partition")
  for _, call in ipairs(self.calls) do
    if not call:ready() then self.waiting = self.waiting + 1 end
  end
end

-- Writes value under dir with zk; an acknowledged write goes to the ledger.
function Ledger:write(zk, dir, value)
  self.acked[#self.acked + 1] = zk:create(dir .. "/w-", value, { sequence = true })
end

-- Counts the acknowledged writes that zk (a client of the healed node) does not see.
function Ledger:check_writes(zk, dir)
  zk:sync(dir)
  local present = {}
  for _, name in ipairs(zk:get_children(dir)) do present[dir .. "/" .. name] = true end
  for _, path in ipairs(self.acked) do
    if not present[path] then self.acked_lost = self.acked_lost + 1 end
  end
end

-- The smallest margin of a handover from who (seconds), or nil.
function Ledger:margin_from(who)
  local least
  for _, m in ipairs(self.margins) do
    if m.from == who and (not least or m.gap < least) then least = m.gap end
  end
  return least
end

function Ledger:dump()
  local lines = {}
  local t0 = self.events[1] and self.events[1].at or 0
  for _, e in ipairs(self.events) do
    lines[#lines + 1] = string.format("%8.3f %-9s %s", e.at - t0, e.who, e.what)
  end
  return table.concat(lines, "\n")
end

-- What every case proves from its ledger.
local function assert_ledger(L)
  assert(#L.overlaps == 0, "overlapping holders: " .. table.concat(L.overlaps, "; ") ..
         "\n" .. L:dump())
  assert(L.waiting == 0, L.waiting .. " calls made during the partition never ended")
  assert(L.acked_lost == 0, L.acked_lost .. " acknowledged writes lost")
end

-- The fault and partition matrix: one row per case's ledger, and the totals.
local function matrix(ledgers)
  local format = "%-30s %6s %9s %11s %11s %11s %13s"
  local lines = { "", "fault and partition matrix (spec/partition_spec.lua's ledgers)",
    format:format("case", "faults", "sessions", "acked", "overlapping", "calls left",
                  "SUSPENDED to"),
    format:format("", "made", "lost", "writes lost", "holders", "waiting", "grant, min s") }
  local totals = { 0, 0, 0, 0, 0 }
  for _, L in ipairs(ledgers) do
    local least -- of the handovers from a holder on the cut-off client
    for _, m in ipairs(L.margins) do
      local side = L.client_of[m.from] or m.from
      if side == "cut-off" and (not least or m.gap < least) then least = m.gap end
    end
    local row = { L.faults, L.sessions_lost, L.acked_lost, #L.overlaps, L.waiting }
    for i, v in ipairs(row) do totals[i] = totals[i] + v end
    lines[#lines + 1] = format:format(L.name, row[1], row[2], row[3], row[4], row[5],
                                      least and string.format("%.2f", least) or "-")
  end
  lines[#lines + 1] = format:format("total", totals[1], totals[2], totals[3], totals[4],
                                    totals[5], "")
  return table.concat(lines, "\n") .. "\n"
end

-- ---------------------------------------------------------------- the cases

describe("a partitioned ensemble", function()
  local ens, n = nil, 0
  local ledgers = {}

  setup(function() ens = testing.ensemble(3, { partitionable = true }) end)
  teardown(function()
    ens:stop()
    io.stdout:write(matrix(ledgers))
  end)

  -- A follower (to cut off), the leader, and the hosts of the two nodes that are not cut.
  local function pick_nodes()
    local cut, leader
    testing.wait_for(function()
      cut, leader = nil, nil
      for _, node in ipairs(ens.nodes) do
        local mode = node:mode()
        if mode == "follower" then cut = node elseif mode == "leader" then leader = node end
      end
      local serving = 0
      for _, node in ipairs(ens.nodes) do
        if node:mode() then serving = serving + 1 end
      end
      return cut and leader and serving == 3
    end, BOUND, "three serving nodes")
    local majority = {}
    for _, node in ipairs(ens.nodes) do
      if node ~= cut then majority[#majority + 1] = node.hosts end
    end
    return cut, leader, table.concat(majority, ",")
  end

  local function client(hosts, timeout)
    local zk = zklua.client{ hosts = hosts, timeout = timeout or TIMEOUT }
    zk:start()
    return zk
  end

  -- Starts a case: its ledger, its root, the nodes, a client of the cut-off node (zc) and
  -- one of the majority (zm); both followed by the ledger.
  -- how = "client": zc reaches the cut-off node through a proxy of its own (c.proxy).
  local function begin(name, how)
    n = n + 1
    local L = new_ledger(name)
    ledgers[#ledgers + 1] = L
    local c = { L = L, root = "/partition/" .. n }
    c.cut, c.leader, c.majority = pick_nodes()
    if how == "client" then c.proxy = testing.proxy(c.cut) end
    -- a silent link is noticed after 2/3 of the session timeout, so the margin before the
    -- majority's expiry is only a third of it: twice the usual timeout keeps it clear of a
    -- loaded machine's delays (the ledger's times are taken when Lua runs the events)
    c.zc = how == "client" and client(c.proxy.hosts, 2 * TIMEOUT) or client(c.cut.hosts)
    c.zm = client(c.majority)
    c.zc_states = L:follow("cut-off", c.zc)
    L:follow("majority", c.zm)
    c.zm:ensure_path(c.root .. "/acked")
    return c
  end

  -- The partition: how = "closed" | "silent" (the node cut from both others) | "leader"
  -- (cut from the leader only, silenced) | "client" (zc's own link silenced, the nodes whole).
  local function partition(c, how)
    if how == "leader" then
      ens:cut(c.cut.id, c.leader.id, { silent = true })
    elseif how == "client" then
      c.proxy:silence("both")
    else
      ens:isolate(c.cut.id, { silent = how == "silent" })
    end
    c.L:fault("node " .. c.cut.id .. " cut off (" .. how .. ")")
    -- calls of the cut-off client during the partition: each must end
    c.L:call(c.zc:create_async(c.root .. "/acked/during-", "x", { sequence = true }))
    c.L:call(c.zc:exists_async(c.root))
  end

  -- The cut-off client goes SUSPENDED then LOST; the partition heals; the cut-off node follows
  -- the leader again, its client has a new session and sees every acknowledged write.
  local function heal(c)
    testing.wait_for(function() return c.zc.state == "LOST" end, BOUND, "LOST at the cut-off")
    assert.are.same({ "SUSPENDED", "LOST" }, { c.zc_states[1], c.zc_states[2] })
    c.L:settle_calls()
    ens:heal()
    if c.proxy then c.proxy:resume() end
    c.L:note("test", "healed")
    testing.wait_for(function() return c.cut:mode() == "follower" end, BOUND,
                     "the healed node to follow the leader")
    testing.wait_for(function() return c.zc.state == "CONNECTED" end, BOUND,
                     "the cut-off client's new session")
    c.L:check_writes(c.zc, c.root .. "/acked")
    c.L.done = true
    if os.getenv("ZKLUA_LEDGER") then io.stdout:write("\n", c.L.name, "\n", c.L:dump(), "\n") end
    assert_ledger(c.L)
  end

  local function finish(c)
    c.zc:close()
    c.zm:close()
    if c.others then for _, zk in ipairs(c.others) do zk:close() end end
    if c.proxy then c.proxy:stop() end
  end

  local function lock_case(name, how)
    local c = begin(name, how)
    local L = c.L
    for i = 1, 20 do L:write(i % 2 == 0 and c.zm or c.zc, c.root .. "/acked", tostring(i)) end
    local held = c.zc:Lock(c.root .. "/lock", "cut-off client")
    assert.is_true(held:acquire(true, BOUND))
    L:hold("cut-off", "lock")
    local cut_token = held.fencing_token
    local heard_lost = false
    held:on_lost(function() heard_lost = true; L:note("cut-off", "on_lost") end)

    partition(c, how)
    for i = 21, 40 do L:write(c.zm, c.root .. "/acked", tostring(i)) end -- the majority serves
    local taker = c.zm:Lock(c.root .. "/lock", "majority client")
    assert.is_true(taker:acquire(true, BOUND)) -- once the majority expired zc's session
    L:hold("majority", "lock")

    heal(c)
    assert.is_true(heard_lost, "the cut-off holder never heard it lost the lock")
    assert.is_false(held.is_acquired)
    assert.is_true(taker.fencing_token > cut_token)
    local margin = L:margin_from("cut-off")
    assert(margin and margin > 0, "no handover from the cut-off holder in the ledger")
    assert.is_true(taker:release())
    finish(c)
  end

  it("links closed: the lock holder hears SUSPENDED before the majority grants the lock",
     function()
    lock_case("lock, node cut off (closed)", "closed")
  end)

  it("links silenced: the lock holder hears SUSPENDED before the majority grants the lock",
     function()
    lock_case("lock, node cut off (silent)", "silent")
  end)

  it("cut from the leader only: the lock holder hears SUSPENDED before the grant", function()
    lock_case("lock, node cut from leader", "leader")
  end)

  it("the holder's own link silenced: it hears SUSPENDED (after 2/3 of its session timeout) " ..
     "before the grant", function()
    lock_case("lock, client link silenced", "client")
  end)

  -- when = "before": a is cut off while it holds its items, then a third member joins (the
  -- majority rebalances during the partition); "during": a third member joins, and a is cut
  -- off as it turns RELEASE, before its user released anything.
  local function partitioner_case(name, when)
    local c = begin(name)
    local L = c.L
    local zb, zd = client(c.majority), client(c.majority)
    c.others = { zb, zd }
    L:follow("b", zb)
    L:follow("d", zd)
    L:on_client("a", "cut-off")
    local set = { "i1", "i2", "i3", "i4", "i5", "i6" }
    local path = c.root .. "/sp"
    local members = {}
    local function member(zk, id)
      local qp = zk:SetPartitioner{ path = path, set = set, identifier = id,
                                    time_boundary = TB, state_change_event = function(state, qp)
        L:note(id, "state " .. state)
        if id == "a" and state == "RELEASE" and when == "during" and not c.cut_off then
          c.cut_off = true
          partition(c, "silent")
        end
        if state == "ACQUIRED" then
          for item in qp:iter() do L:hold(id, item) end
        else
          L:stop_acting(id, state)
        end
      end }
      members[#members + 1] = qp
      return qp
    end
    -- the test drives the members as their users would: release_set() in RELEASE
    local function pump(live, done, what)
      testing.wait_for(function()
        for _, qp in ipairs(live) do
          if qp.release then
            local ok, err = L:blocking(qp.release_set, qp)
            if not ok then L:note(qp.identifier, "release_set: " .. tostring(err)) end
          end
        end
        return done()
      end, BOUND, what)
    end
    local function all_acquired(live)
      return function()
        for _, qp in ipairs(live) do if not qp.acquired then return false end end
        return true
      end
    end
    local a = member(c.zc, "a")
    local b = member(zb, "b")
    pump({ a, b }, all_acquired({ a, b }), "a and b to split the set")
    L:write(c.zm, c.root .. "/acked", "before")

    if when == "before" then
      c.cut_off = true
      partition(c, "silent") -- a still holds its items: it must stop on SUSPENDED
    end
    local d = member(zd, "d") -- a third member: a rebalance
    testing.wait_for(function() return c.cut_off end, BOUND, "a's RELEASE")
    L:write(c.zm, c.root .. "/acked", "during")
    pump({ a, b, d }, function() return a.failed and b.acquired and d.acquired end,
         "b and d to own the set without a")
    local owner = {}
    for _, qp in ipairs({ b, d }) do
      for item in qp:iter() do
        assert(owner[item] == nil, item .. " owned twice")
        owner[item] = qp.identifier
      end
    end
    for _, item in ipairs(set) do assert(owner[item], item .. " owned by nobody") end
    heal(c)
    local margin = L:margin_from("a")
    assert(margin and margin > 0, "no item handed over from the cut-off member in the ledger")
    for _, qp in ipairs({ b, d }) do qp:finish() end
    finish(c)
  end

  it("a SetPartitioner rebalance during a partition: SUSPENDED precedes the new owners",
     function()
    partitioner_case("SetPartitioner: cut, rebalance", "before")
  end)

  it("a partition during a SetPartitioner rebalance: the new owners come after a's release",
     function()
    partitioner_case("SetPartitioner: rebalance, cut", "during")
  end)

  it("an allocator's claim cut in half: SUSPENDED precedes the claim of the handed item",
     function()
    local c = begin("allocator claim")
    local L = c.L
    local path = c.root .. "/alloc"
    local items = { "p1", "p2", "p3", "p4" }
    local cut_during_release = false
    L:on_client("a", "cut-off")
    L:on_client("b", "majority")
    local function member(zk, id, on_release)
      return zk:PartitionAllocator{
        path = path, identifier = id, rejoin = false, max_reaction_time = 10,
        on_acquire = function(item) L:hold(id, item) end,
        on_release = function(item)
          L:unhold(id, item, "on_release")
          if on_release then on_release(item) end
        end,
        on_rebalance = function(_, _, info)
          if info.session_lost then L:stop_acting(id, "session lost") end
        end }
    end
    local a = member(c.zc, "a", function()
      -- a hands an item over: cut it off right then, while b's claim waits for a's node
      if not cut_during_release then
        cut_during_release = true
        partition(c, "silent")
      end
    end)
    a:start(items, BOUND)
    assert.is_true(a:wait_settled(BOUND))
    assert.are.equal(#items, #a.allocation)
    L:write(c.zm, c.root .. "/acked", "before")
    local b = member(c.zm, "b")
    b:start(nil, BOUND) -- a (the leader) gives b half the items: a releases, b claims
    testing.wait_for(function() return cut_during_release end, BOUND, "a's first release")
    L:write(c.zm, c.root .. "/acked", "during")
    testing.wait_for(function() return #b.allocation == #items end, BOUND,
                     "b to own every item once a's session expired")
    heal(c)
    assert.are.equal("idle", a.state) -- rejoin = false: a stopped on LOST
    local margin = L:margin_from("a")
    assert(margin and margin > 0, "no item handed over from the cut-off member in the ledger")
    b:stop(BOUND)
    finish(c)
  end)

end)
