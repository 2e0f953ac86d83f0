-- PartitionAllocator (src/recipes/partitioning/allocator*.c, lua/zklua/recipes/partitioning/allocator.lua) against a
-- real server, with several clients in this process: division and re-division, hooks and
-- their order and bounds, the shared set, strategies (switched, failing, mixed), SUSPENDED
-- and LOST, and bad input.  spec/allocator_processes_spec.lua runs members as processes
-- (kill -9, expiry, ensemble node loss).  Ownership is checked with spec/support/ownership.lua
-- over what the hooks recorded.
local zklua = require "zklua"
local core = require "zklua.core"
local errors = require "zklua.errors"
local testing = require "zklua.testing"
local strategies = require "zklua.strategies"
local helpers = require "support.helpers"
local ownership = require "support.ownership"

local eventually = helpers.eventually
local raises = helpers.raises

local ROOT = "/allocator"
local WAIT = 30 -- generous: many helpers share two cores

local function items(n, prefix)
  local list = {}
  for i = 1, n do list[i] = string.format("%s%02d", prefix or "item-", i) end
  return list
end

describe("PartitionAllocator", function()
  local server, a, b, c, path, events, running
  local counter = 0

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  before_each(function()
    counter = counter + 1
    path = ROOT .. "/t" .. counter
    a, b, c = helpers.clients(server.hosts, 3)
    events, running = {}, {}
  end)

  after_each(function()
    for _, m in ipairs(running) do pcall(m.stop, m) end
    for _, zk in ipairs({ a, b, c }) do zk:close() end
    helpers.delete_trees(server.hosts, path)
  end)

  -- A member whose hooks record ownership events (the checker's format: pid = ident).
  local function member(zk, id, opts)
    opts = opts or {}
    local spec = { path = opts.path or path, identifier = id }
    for k, v in pairs(opts) do
      if k ~= "on_acquire" and k ~= "on_release" and k ~= "on_rebalance" then spec[k] = v end
    end
    if not spec.strategy and not spec.allocator_fn then spec.strategy = "round_robin" end
    local function record(event, item, token)
      events[#events + 1] = { t = core.monotonic(), event = event, ident = id, pid = id,
                              item = item, token = token }
    end
    local self
    spec.on_acquire = function(item, token)
      record("acquire", item, token)
      if opts.on_acquire then opts.on_acquire(item, token) end
    end
    spec.on_release = function(item)
      local token = self:fencing_token(item)
      if opts.on_release then opts.on_release(item) end
      record("release", item, token)
    end
    spec.on_rebalance = function(new, old, info)
      if info.session_lost then
        for _, item in ipairs(info.lost) do record("lost", item, nil) end
      end
      if opts.on_rebalance then opts.on_rebalance(new, old, info) end
    end
    self = zk:PartitionAllocator(spec)
    running[#running + 1] = self
    return self
  end

  local function settle(...)
    for _, m in ipairs({ ... }) do
      assert.is_true(m:wait_settled(WAIT), m.identifier .. " did not settle")
    end
  end

  -- Every item of `list` owned by exactly one of the members, and nothing else.
  local function assert_divided(list, ...)
    local owner = {}
    for _, m in ipairs({ ... }) do
      for _, item in ipairs(m.allocation) do
        assert.is_nil(owner[item], item .. " owned by " .. tostring(owner[item]) .. " and " ..
                      m.identifier)
        owner[item] = m.identifier
      end
    end
    for _, item in ipairs(list) do assert.is_not_nil(owner[item], item .. " not owned") end
    local n = 0
    for _ in pairs(owner) do n = n + 1 end
    assert.are.equal(#list, n)
    return owner
  end

  local function assert_safe()
    local report = ownership.check(events, {})
    ownership.assert_safe(report)
    return report
  end

  local function owner_node(item)
    return path .. "/owners/" .. core.allocator_node_name(item)
  end

  describe("division", function()
    it("one member owns the whole set; a join takes a share; a clean leave hands it back", function()
      local set = items(6)
      local ma = member(a, "A")
      assert.is_true(ma:start(set))
      settle(ma)
      assert.are.same(set, ma.allocation)
      assert.is_true(ma.is_leader)
      assert.are.equal("running", ma.state)
      for _, item in ipairs(set) do
        local data, stat = a:get(owner_node(item))
        assert.are.equal("A", data)
        assert.are.equal(a:client_id(), stat.owner_session_id) -- ephemeral, ours
        assert.are.equal(stat.czxid, ma:fencing_token(item))
      end
      local first_generation = ma.generation

      local mb = member(b, "B")
      assert.is_true(mb:start())
      settle(ma, mb)
      assert.are.same({ "A", "B" }, ma:members())
      assert.are.same(set, mb:partitions())
      assert.is_false(mb.is_leader)
      assert.is_true(ma.generation > first_generation)
      local owner = assert_divided(set, ma, mb)
      assert.are.equal(3, #ma.allocation) -- round_robin: 3 and 3
      for _, item in ipairs(mb.allocation) do
        assert.are.equal("B", (b:get(owner_node(item))))
        assert.are.equal(owner[item], "B")
      end

      assert.is_true(ma:stop())
      assert.are.equal("idle", ma.state)
      assert.are.same({}, ma.allocation)
      settle(mb)
      assert.are.same(set, mb.allocation)
      assert.is_true(mb.is_leader)
      assert.are.same({ "B" }, mb:members())
      assert.is_false(ma:stop())
      assert_safe()
    end)

    it("members joining in a burst get one assignment, not one each (settle)", function()
      local set = items(12)
      local SETTLE = 3 -- seconds: the joins below come milliseconds apart
      local ma = member(a, "A", { settle = SETTLE })
      local started = core.monotonic()
      assert.is_true(ma:start(set))
      settle(ma)
      -- a new leader waits one window before its first assignment too
      assert.is_true(core.monotonic() - started >= SETTLE)
      assert.are.equal(12, #ma.allocation)
      local first = ma.generation
      local extra = { helpers.clients(server.hosts, 3) }
      local joined = {}
      for i, zk in ipairs(extra) do joined[i] = member(zk, "J" .. i, { settle = SETTLE }) end
      for _, m in ipairs(joined) do assert.is_true(m:start()) end
      settle(ma, table.unpack(joined))
      assert.are.equal(first + 1, ma.generation) -- one assignment for the three joins
      assert_divided(set, ma, table.unpack(joined))
      for _, m in ipairs(joined) do assert.are.equal(3, #m.allocation) end
      for _, m in ipairs(joined) do m:stop() end
      for _, zk in ipairs(extra) do zk:close() end
      assert_safe()
    end)

    it("joins slower than settle still fold: the window grows with the burst's gaps", function()
      -- Four joins PAUSE apart, each gap longer than SETTLE: a fixed window assigned after
      -- each (four assignments, items moving at every one, as a start of 100 members whose
      -- joins came ~70 ms apart did with settle 0.1: 56,092 transactions instead of ~10k).
      -- The window is twice the burst's longest gap, so at most the first join is assigned
      -- alone (when it comes over the cap after A's change) and the other three together.
      local set = items(24)
      local SETTLE, PAUSE = 0.2, 0.3
      local ma = member(a, "A", { settle = SETTLE })
      assert.is_true(ma:start(set))
      settle(ma)
      local first = ma.generation
      local extra = { helpers.clients(server.hosts, 4) }
      local joined = {}
      for i, zk in ipairs(extra) do
        zklua.sleep(PAUSE) -- (the gap between two joins: the scenario, not a synchronisation)
        joined[i] = member(zk, "J" .. i, { settle = SETTLE })
        assert.is_true(joined[i]:start())
      end
      settle(ma, table.unpack(joined))
      assert.is_true(ma.generation - first <= 2,
                     (ma.generation - first) .. " assignments for 4 joins")
      assert_divided(set, ma, table.unpack(joined))
      for _, m in ipairs(joined) do m:stop() end
      for _, zk in ipairs(extra) do zk:close() end
      assert_safe()
    end)

    it("on_rebalance reports what was gained and lost, what moved, and the generation", function()
      local calls = {}
      local function on_rebalance(new, old, info)
        calls[#calls + 1] = { new = new, old = old, info = info }
      end
      local ma = member(a, "A", { on_rebalance = on_rebalance })
      ma:start(items(4))
      settle(ma)
      local last = calls[#calls]
      assert.are.same(items(4), last.new)
      local gained = {}
      for _, call in ipairs(calls) do
        for _, item in ipairs(call.info.gained) do gained[#gained + 1] = item end
        assert.are.same({}, call.info.lost)
        assert.is_false(call.info.session_lost)
      end
      table.sort(gained)
      assert.are.same(items(4), gained)
      calls = {}
      local mb = member(b, "B")
      mb:start()
      settle(ma, mb)
      local lost, moved = {}, {}
      for _, call in ipairs(calls) do
        for _, item in ipairs(call.info.lost) do lost[#lost + 1] = item end
        for _, item in ipairs(call.info.moved) do moved[#moved + 1] = item end
        assert.are.same({}, call.info.gained)
        assert.are.equal(ma.generation, call.info.generation)
      end
      table.sort(lost)
      table.sort(moved)
      assert.are.same(mb.allocation, lost)
      assert.are.same(mb.allocation, moved) -- what moved in the group: A's items to B
      assert.are.same(ma.allocation, calls[#calls].new)
    end)

    it("items may hold any characters: node names are escaped, items come back as they were", function()
      local odd = { "a/b", ".", "..", "with space", "%41", "üñí", "tab\there", "zookeeper" }
      local ma = member(a, "A")
      ma:start(odd)
      settle(ma)
      local want = {}
      for i, v in ipairs(odd) do want[i] = v end
      table.sort(want)
      assert.are.same(want, ma.allocation)
      assert.are.same(want, ma:partitions())
      local names = a:get_children(path .. "/owners")
      table.sort(names)
      local escaped = {}
      for i, v in ipairs(want) do escaped[i] = core.allocator_node_name(v) end
      table.sort(escaped)
      assert.are.same(escaped, names)
      assert.are.equal("%2E%2E", core.allocator_node_name(".."))
      assert.are.equal("a%2Fb", core.allocator_node_name("a/b"))
    end)
  end)

  describe("hooks", function()
    it("a member finishes on_release before the next owner's on_acquire; tokens grow", function()
      local ma = member(a, "A", { on_release = function() zklua.sleep(0.3) end })
      ma:start(items(4))
      settle(ma)
      local mb = member(b, "B")
      mb:start()
      settle(ma, mb)
      local released, acquired = {}, {}
      for _, e in ipairs(events) do
        if e.event == "release" and e.ident == "A" then released[e.item] = e end
        if e.event == "acquire" and e.ident == "B" then acquired[e.item] = e end
      end
      local moved = 0
      for item, got in pairs(acquired) do
        local gave = released[item]
        assert.is_not_nil(gave, item .. " acquired by B but never released by A")
        assert.is_true(gave.t < got.t, item .. ": B acquired before A's on_release returned")
        assert.is_true(gave.token < got.token)
        moved = moved + 1
      end
      assert.are.equal(2, moved)
      assert_safe()
    end)

    it("a hook running over max_reaction_time is stopped and the item handed over anyway", function()
      local logged = {}
      local zk = zklua.client{ hosts = server.hosts, logger = function(level, message)
        logged[#logged + 1] = level .. ": " .. message
      end }
      zk:start()
      local stuck = 0
      local ma = member(zk, "A", { max_reaction_time = 0.3, on_release = function()
        stuck = stuck + 1
        -- never returns by itself (under LuaJIT too: the JIT is off while a hook runs)
        while true do end
      end })
      ma:start(items(2))
      settle(ma)
      local mb = member(b, "B")
      mb:start()
      settle(ma, mb)
      assert.are.equal(1, stuck)
      assert.are.equal(1, #mb.allocation)
      assert_divided(items(2), ma, mb)
      local found = false
      for _, line in ipairs(logged) do
        if line:find("ran over max_reaction_time", 1, true) then found = true end
      end
      assert.is_true(found, table.concat(logged, "\n"))
      ma:stop()
      zk:close()
    end)

    it("an on_acquire or on_release that raises is logged; ownership goes on", function()
      local logged = {}
      local zk = zklua.client{ hosts = server.hosts, logger = function(level, message)
        logged[#logged + 1] = level .. ": " .. message
      end }
      zk:start()
      local ma = member(zk, "A", { on_acquire = function() error("acquire boom") end,
                                   on_release = function() error("release boom") end })
      ma:start(items(2))
      settle(ma)
      assert.are.same(items(2), ma.allocation)
      local mb = member(b, "B")
      mb:start()
      settle(ma, mb)
      assert_divided(items(2), ma, mb)
      local text = table.concat(logged, "\n")
      assert.truthy(text:find("acquire boom", 1, true))
      assert.truthy(text:find("release boom", 1, true))
      ma:stop()
      zk:close()
    end)

    it("stop() inside a hook leaves once the hook returns; waiting inside one is refused", function()
      local ma, stopped_inside, wait_error
      ma = member(a, "A", { on_acquire = function(item)
        if item == "item-02" and stopped_inside == nil then
          local ok, err = pcall(ma.wait_settled, ma, 1)
          wait_error = not ok and err
          stopped_inside = ma:stop()
        end
      end })
      ma:start(items(3))
      eventually(function() return ma.state == "idle" end, WAIT, "A to leave")
      assert.is_true(stopped_inside)
      assert.is_true(errors.is(wait_error, errors.KazooException), tostring(wait_error))
      assert.are.same({}, ma.allocation)
      assert.are.same({}, a:get_children(path .. "/owners"))
      assert.are.same({}, a:get_children(path .. "/members"))
      assert_safe()
    end)
  end)

  describe("the shared set", function()
    it("a seed is stored sorted by bytes, without repeats, as read before the start", function()
      local ma = member(a, "A")
      local seed = { "b", "\195\169", "a", "B", "b", "a-1", "a" } -- "é": bytes sort it last
      local sorted = { "B", "a", "a-1", "b", "\195\169" }
      assert.are.same({}, ma:partitions()) -- no set yet: read from ZooKeeper
      ma:start(seed)
      settle(ma)
      assert.are.same(sorted, ma:partitions())
      assert.are.same(sorted, core.allocator_decode_items((a:get(path .. "/partitions"))))
      assert.are.same({ "b", "\195\169", "a", "B", "b", "a-1", "a" }, seed) -- left as given
      assert_divided(sorted, ma)
    end)

    it("add_partitions and remove_partitions change the set everyone divides", function()
      local ma, mb = member(a, "A"), member(b, "B")
      ma:start(items(4))
      mb:start({ "ignored" }) -- the set exists: a seed is used only for a new set
      settle(ma, mb)
      assert.are.same(items(4), mb:partitions())
      assert.is_true(mb:add_partitions({ "x", "y", "item-01" }))
      assert.is_false(mb:add_partitions({ "x" }))
      settle(ma, mb)
      local set = items(4)
      set[#set + 1] = "x"
      set[#set + 1] = "y"
      assert.are.same(set, ma:partitions())
      assert_divided(set, ma, mb)
      assert.is_true(ma:remove_partitions({ "item-01", "x", "not-there" }))
      assert.is_false(ma:remove_partitions({ "x" }))
      settle(ma, mb)
      set = { "item-02", "item-03", "item-04", "y" }
      assert.are.same(set, mb:partitions())
      assert_divided(set, ma, mb)
      assert.is_false(ma:owns("item-01") or mb:owns("item-01"))
      assert.is_nil(a:exists(owner_node("item-01")))
      -- not running: partitions() and members() read the server
      local idle = a:PartitionAllocator{ path = path, identifier = "C" }
      assert.are.same(set, idle:partitions())
      assert.are.same({ "A", "B" }, idle:members())
      assert.is_true(idle:add_partitions({ "z" }))
      settle(ma, mb)
      set[#set + 1] = "z"
      assert_divided(set, ma, mb)
      assert_safe()
    end)
    -- sets over one znode (chunked): spec/allocator_large_set_spec.lua
  end)

  describe("strategies", function()
    it("set_strategy switches a running leader's strategy: it re-divides at once", function()
      local ma, mb = member(a, "A"), member(b, "B")
      ma:start(items(6))
      mb:start()
      settle(ma, mb)
      assert.are.equal(3, #mb.allocation)
      local to_b = function(members, list)
        local out = {}
        for _, m in ipairs(members) do out[m] = {} end
        out.B = list
        return out
      end
      ma:set_strategy(to_b)
      settle(ma, mb)
      assert.are.same(items(6), mb.allocation)
      assert.are.same({}, ma.allocation)
      -- a strategy loaded from a script, and a built-in's name
      ma:set_strategy(strategies.load("examples/strategies/least_loaded.lua"))
      settle(ma, mb)
      assert.are.equal(3, #ma.allocation)
      assert.are.equal(3, #mb.allocation)
      ma:set_strategy("sticky")
      settle(ma, mb)
      assert_divided(items(6), ma, mb)
      -- a follower's strategy applies when it leads
      mb:set_strategy(to_b)
      settle(ma, mb)
      assert.are.equal(3, #mb.allocation)
      ma:stop()
      settle(mb)
      assert.are.same(items(6), mb.allocation)
      assert_safe()
    end)

    it("a leader's strategy that raises, hangs or returns a bad assignment: round_robin covers all", function()
      local logged = {}
      local zk = zklua.client{ hosts = server.hosts, logger = function(level, message)
        logged[#logged + 1] = level .. ": " .. message
      end }
      zk:start()
      local twice = function(members, list) -- every item twice
        local out = { [members[1]] = {} }
        for _, item in ipairs(list) do
          out[members[1]][#out[members[1]] + 1] = item
          out[members[1]][#out[members[1]] + 1] = item
        end
        return out
      end
      local ma = member(zk, "A", { allocator_fn = twice, strategy_timeout = 0.3 })
      local mb = member(b, "B")
      ma:start(items(4))
      mb:start()
      settle(ma, mb)
      assert_divided(items(4), ma, mb)
      assert.are.equal(2, #mb.allocation) -- round_robin's share
      assert.truthy(ma.strategy_error)
      for _, bad in ipairs({
        function() error("strategy boom") end,
        function() while true do core.monotonic() end end, -- stuck (see zklua.bounded)
        function() return "not a table" end,
        function(members) return { [members[1]] = { "not-an-item" } } end,
        function() return { ghost = items(4) } end,
      }) do
        ma.strategy_error = nil
        ma:set_strategy(bad)
        settle(ma, mb)
        assert.truthy(ma.strategy_error)
        assert_divided(items(4), ma, mb)
      end
      local text = table.concat(logged, "\n")
      assert.truthy(text:find("strategy boom", 1, true), text)
      assert.truthy(text:find("strategy_timeout", 1, true), text)
      ma:stop()
      zk:close()
      assert_safe()
    end)

    it("members' weights reach the leader's strategy (ctx.weights)", function()
      local seen
      local ma = member(a, "A", { strategy = "weighted", weight = 1 })
      local mb = member(b, "B", { weight = 3, allocator_fn = function(members, list, ctx)
        seen = ctx
        return strategies.round_robin(members, list, ctx)
      end })
      ma:start(items(8))
      mb:start()
      settle(ma, mb)
      assert.are.equal(2, #ma.allocation) -- weighted: 8 * 1/4 and 8 * 3/4
      assert.are.equal(6, #mb.allocation)
      assert.is_nil(seen) -- B follows; only the leader computes
      ma:stop()
      settle(mb) -- B leads and owns all 8 (after a settle window)
      mb:add_partitions({ "x" })
      settle(mb)
      assert.are.same({ B = 3 }, seen.weights)
      assert.are.equal("B", seen.identifier)
      local current = {}
      for _, item in ipairs(items(8)) do current[item] = "B" end
      assert.are.same(current, seen.current) -- who owns what now; "x" is new: nobody
    end)

    it("members running different strategies (one random) never own an item twice", function()
      local random = function(members, list)
        local out = {}
        for _, m in ipairs(members) do out[m] = {} end
        for _, item in ipairs(list) do
          local m = members[math.random(#members)]
          out[m][#out[m] + 1] = item
        end
        return out
      end
      local set = items(12)
      local ma = member(a, "A", { allocator_fn = random })
      local mb = member(b, "B", { strategy = "rendezvous" })
      local mc = member(c, "C", { strategy = "sticky" })
      ma:start(set)
      mb:start()
      mc:start()
      settle(ma, mb, mc)
      assert_divided(set, ma, mb, mc)
      for _ = 1, 3 do -- the random leader re-divides: the others follow
        ma:set_strategy(random)
        settle(ma, mb, mc)
        assert_divided(set, ma, mb, mc)
      end
      ma:stop() -- B (rendezvous) leads
      settle(mb, mc)
      assert.is_true(mb.is_leader)
      assert_divided(set, mb, mc)
      mb:add_partitions({ "extra" })
      set[#set + 1] = "extra"
      settle(mb, mc)
      assert_divided(set, mb, mc)
      local report = assert_safe()
      assert.is_true(report.acquisitions > #set)
    end)
  end)

  describe("sessions", function()
    it("SUSPENDED: items stay owned while the server is briefly down; no hook runs", function()
      -- the server out of reach through a proxy (no server restart: a JVM start on a loaded
      -- machine can outlast the session, and LOST is another test)
      local p = testing.proxy(server:node(1))
      a:close()
      b:close()
      a, b = helpers.clients(p.hosts, 2)
      local set = items(6)
      local ma, mb = member(a, "A"), member(b, "B")
      ma:start(set)
      mb:start()
      settle(ma, mb)
      local before_a, before_b = ma.allocation, mb.allocation
      local tokens = {}
      for _, item in ipairs(set) do tokens[item] = ma:fencing_token(item) or mb:fencing_token(item) end
      local count = #events
      p:refuse(true) -- reconnections fail at once, as to a stopped server
      p:drop()
      testing.wait_for(function() return a.state == "SUSPENDED" and b.state == "SUSPENDED" end,
                       WAIT, "SUSPENDED")
      assert.are.same(before_a, ma.allocation)
      assert.are.same(before_b, mb.allocation)
      p:refuse(false)
      testing.wait_for(function() return a.state == "CONNECTED" and b.state == "CONNECTED" end,
                       WAIT, "reconnection")
      settle(ma, mb)
      assert.are.same(before_a, ma.allocation)
      assert.are.same(before_b, mb.allocation)
      for _, item in ipairs(set) do
        assert.are.equal(tokens[item], ma:fencing_token(item) or mb:fencing_token(item))
      end
      assert.are.equal(count, #events) -- nobody released or acquired anything
      assert_safe()
      p:stop()
    end)

    it("LOST: everything is reported lost, then the member rejoins and owns items again", function()
      local set = items(6)
      local lost_calls = {}
      local ma = member(a, "A", { on_rebalance = function(new, old, info)
        if info.session_lost then lost_calls[#lost_calls + 1] = { new = new, old = old, info = info } end
      end })
      local mb = member(b, "B")
      ma:start(set)
      mb:start()
      settle(ma, mb)
      local had = ma.allocation
      local old_tokens = {}
      for _, item in ipairs(had) do old_tokens[item] = ma:fencing_token(item) end
      helpers.expire(a)
      eventually(function() return #lost_calls > 0 end, WAIT, "on_rebalance with session_lost")
      assert.are.same({}, lost_calls[1].new)
      assert.are.same(had, lost_calls[1].old)
      assert.are.same(had, lost_calls[1].info.lost)
      settle(ma, mb)
      assert.are.equal("running", ma.state)
      assert.is_true(#ma.allocation > 0)
      assert_divided(set, ma, mb)
      for _, item in ipairs(ma.allocation) do
        if old_tokens[item] then assert.is_true(ma:fencing_token(item) > old_tokens[item]) end
      end
      ownership.assert_safe(ownership.check(events, { window = { A = true } }))
    end)

    it("LOST with rejoin = false stops the member; the others take its items", function()
      local ma = member(a, "A", { rejoin = false })
      local mb = member(b, "B")
      ma:start(items(4))
      mb:start()
      settle(ma, mb)
      helpers.expire(a)
      eventually(function() return ma.state == "idle" end, WAIT, "A to stop")
      assert.are.same({}, ma.allocation)
      assert.is_true(errors.is(ma.error, errors.SessionExpiredError), tostring(ma.error))
      settle(mb)
      assert.are.same(items(4), mb.allocation)
      assert.are.same({ "B" }, mb:members())
      assert.is_true(ma:start()) -- it can join again
      settle(ma, mb)
      assert_divided(items(4), ma, mb)
    end)

    it("LOST before the seed was written: the rejoin writes it (the set is not lost)", function()
      -- The group's paths are there (an earlier member left them), the set is not.  The
      -- reply to the first path create is cut (the seed is never sent), the session expires,
      -- and the rejoin must go back to the paths and the seed, not straight to its member node.
      local cqueues = require "cqueues"
      local cq_handler = require "zklua.handlers.cqueues"
      a:ensure_path(path .. "/members")
      a:ensure_path(path .. "/owners")
      local p = testing.proxy(server:node(1))
      local cq = cqueues.new()
      local handler = cq_handler.new(cq)
      local zk, ma, started, failure, finished
      cq:wrap(function()
        zk = zklua.client{ hosts = p.hosts, timeout = 4, handler = handler }
        zk:start()
        ma = member(zk, "A")
        p:cut_reply("create")
        cq:wrap(function()
          local ok, err = pcall(ma.start, ma, items(4), 60)
          if ok then started = true else failure = tostring(err) end
        end)
        local deadline = cqueues.monotime() + WAIT
        while not p:status().cut do
          assert(cqueues.monotime() < deadline, "the path create never reached the server")
          handler.sleep(0.02)
        end
        assert.are.equal("joining", ma.state)
        testing.expire_session(zk, WAIT, server.hosts) -- LOST: the silenced link counts too
        p:resume()
        while not started and not failure do
          assert(cqueues.monotime() < deadline + WAIT, "start did not return")
          handler.sleep(0.02)
        end
        assert(ma:wait_settled(WAIT), "A did not settle")
        finished = true
      end)
      local deadline = cqueues.monotime() + 4 * WAIT
      local ok, err = true, nil
      while ok and not finished and cqueues.monotime() < deadline do ok, err = cq:step(0.5) end
      local allocation = ma and ma.allocation
      if ma then pcall(ma.stop, ma) end
      if zk then zk:close() end
      p:stop()
      assert(ok, err)
      assert.is_nil(failure)
      assert.is_true(finished, "the test's coroutines did not finish")
      assert.is_not_nil(a:exists(path .. "/partitions"), "the seed was never written")
      assert.are.same(items(4), allocation)
    end)

    it("zk:stop() while running is a LOST that stops the member", function()
      local ma, mb = member(a, "A"), member(b, "B")
      ma:start(items(4))
      mb:start()
      settle(ma, mb)
      assert.are.equal(2, #ma.allocation)
      a:stop()
      assert.are.equal("idle", ma.state)
      assert.are.same({}, ma.allocation)
      settle(mb)
      assert.are.same(items(4), mb.allocation)
      a:start()
    end)

    it("one member per client and path; an identifier held by a live session waits", function()
      local ma = member(a, "A")
      ma:start({ "i" })
      local again = member(a, "A2")
      raises(errors.KazooException, again.start, again)
      local twin = member(b, "A") -- same identifier, another session
      raises(errors.TimeoutError, twin.start, twin, nil, 1)
      assert.are.equal("idle", twin.state)
      ma:stop()
      assert.is_true(twin:start(nil, WAIT))
      settle(twin)
      assert.are.same({ "i" }, twin.allocation)
      assert.is_true(again:start()) -- the path is free on client a now
      settle(twin, again)
      assert_divided({ "i" }, twin, again)
    end)
  end)

  describe("bad input", function()
    it("is refused with BadArgumentsError naming the argument, before anything is sent", function()
      local function bad(argument, opts)
        local err = raises(errors.BadArgumentsError, a.PartitionAllocator, a, opts)
        assert.are.equal(argument, err.argument, tostring(err))
      end
      bad("options", nil)
      bad("options", "path")
      bad("path", { path = "/a/../b" })
      bad("path", { path = path .. "/." })
      bad("path", { path = 42 })
      bad("bogus", { path = path, bogus = true })
      bad("identifier", { path = path, identifier = "" })
      bad("identifier", { path = path, identifier = "nul\0byte" })
      bad("identifier", { path = path, identifier = "\255\254" })
      bad("identifier", { path = path, identifier = 7 })
      bad("strategy", { path = path, strategy = "no-such-strategy" })
      bad("strategy", { path = path, strategy = 42 })
      bad("strategy", { path = path, strategy = "sticky", allocator_fn = function() end })
      bad("allocator_fn", { path = path, allocator_fn = "round_robin" })
      bad("on_acquire", { path = path, on_acquire = true })
      bad("on_rebalance", { path = path, on_rebalance = {} })
      bad("max_reaction_time", { path = path, max_reaction_time = -1 })
      bad("max_reaction_time", { path = path, max_reaction_time = 0 / 0 })
      bad("max_reaction_time", { path = path, max_reaction_time = "1" })
      bad("weight", { path = path, weight = 0 })
      bad("weight", { path = path, weight = math.huge })
      bad("rejoin", { path = path, rejoin = "yes" })
      bad("strategy_timeout", { path = path, strategy_timeout = 0 })
      bad("settle", { path = path, settle = -0.1 })
      bad("settle", { path = path, settle = math.huge })
      bad("settle", { path = path, settle = 3601 })
      bad("settle", { path = path, settle = "0.1" })

      local m = a:PartitionAllocator{ path = path, identifier = "A" }
      local function bad_call(argument, fn, ...)
        local err = raises(errors.BadArgumentsError, fn, m, ...)
        assert.are.equal(argument, err.argument, tostring(err))
      end
      bad_call("seed_partitions", m.start, "item")
      bad_call("seed_partitions", m.start, { "ok", 3 })
      bad_call("seed_partitions", m.start, { "ok", "" })
      bad_call("seed_partitions", m.start, { a = "b" })
      bad_call("seed_partitions", m.start, { "\255" })
      bad_call("timeout", m.start, {}, -1)
      bad_call("items", m.add_partitions, nil)
      bad_call("items", m.add_partitions, { "ok", false })
      bad_call("items", m.remove_partitions, "x")
      bad_call("strategy", m.set_strategy, nil)
      bad_call("strategy", m.set_strategy, "nope")
      bad_call("item", m.fencing_token, 1)
      bad_call("timeout", m.wait_settled, "soon")
      assert.is_nil(a:exists(path)) -- nothing was written
      assert.are.equal("idle", m.state)
      local closed = zklua.client(server.hosts)
      raises(errors.ConnectionClosedError, closed.PartitionAllocator, closed, { path = path })
    end)
  end)

  describe("the ownership checker", function()
    it("finds overlaps, tokens that do not grow, and releases of unowned items", function()
      local function ev(t, event, ident, item, token)
        return { t = t, event = event, ident = ident, pid = ident, item = item, token = token }
      end
      local good = { ev(1, "acquire", "A", "x", 10), ev(2, "release", "A", "x", 10),
                     ev(3, "acquire", "B", "x", 11) }
      local report = ownership.check(good, {})
      ownership.assert_safe(report)
      ownership.assert_cover(report, { "x" })
      local overlap = { ev(1, "acquire", "A", "x", 10), ev(2, "acquire", "B", "x", 11),
                        ev(3, "release", "A", "x", 10) }
      assert.has_error(function() ownership.assert_safe(ownership.check(overlap, {})) end)
      local shrinking = { ev(1, "acquire", "A", "x", 12), ev(2, "release", "A", "x", 12),
                          ev(3, "acquire", "B", "x", 11) }
      assert.has_error(function() ownership.assert_safe(ownership.check(shrinking, {})) end)
      local stray = { ev(1, "release", "A", "x", 1) }
      assert.has_error(function() ownership.assert_safe(ownership.check(stray, {})) end)
      -- a process that ended owns nothing after its end; a lost session's window is allowed
      -- only for the idents named
      local killed = { ev(1, "acquire", "A", "x", 10), ev(5, "acquire", "B", "x", 11) }
      ownership.assert_safe(ownership.check(killed, { ended = { A = 2 } }))
      assert.has_error(function() ownership.assert_safe(ownership.check(killed, { ended = { A = 6 } })) end)
      local expired = { ev(1, "acquire", "A", "x", 10), ev(2, "acquire", "B", "x", 11),
                        ev(3, "lost", "A", "x", 10) }
      ownership.assert_safe(ownership.check(expired, { window = { A = true } }))
      assert.has_error(function() ownership.assert_safe(ownership.check(expired, {})) end)
      assert.has_error(function() ownership.assert_cover(ownership.check(good, {}), { "x", "y" }) end)
      local both = { ev(1, "acquire", "A", "x", 10), ev(2, "acquire", "B", "x", 11) }
      assert.has_error(function() ownership.assert_cover(ownership.check(both, {}), { "x" }) end)
    end)
  end)
end)
