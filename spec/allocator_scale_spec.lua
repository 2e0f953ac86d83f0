-- PartitionAllocator at a scale make test can afford: many members in this process sharing
-- thousands of items start, settle and hand over with no session lost, under sticky and
-- round_robin.  Before per-event work was O(1) (allocator_claims.c) and member nodes were read
-- once each (allocator.c), a start of 50 members x 10k items took 26 s and round_robin never
-- settled in 150 s (issue 20); bench/allocator_bench.lua measures the speed, this only checks
-- the outcome (its waits are upper bounds, never speed claims).
local zklua = require "zklua"
local testing = require "zklua.testing"
local helpers = require "support.helpers"

local MEMBERS, ITEMS = 20, 4000
local SESSION = 5 -- seconds: short, so a member starved by the others would expire
local LONG = 600

describe("PartitionAllocator at scale", function()
  local server

  setup(function() server = testing.server() end)
  teardown(function() server:stop() end)

  local function run(strategy)
    local path = "/allocator-scale/" .. strategy
    local set = {}
    for i = 1, ITEMS do set[i] = string.format("item-%05d", i) end
    local members, clients, states = {}, {}, {}
    local function join(i)
      local zk = zklua.client{ hosts = server.hosts, timeout = SESSION }
      zk:start()
      zk:add_listener(function(state) states[#states + 1] = i .. " " .. state end)
      clients[#clients + 1] = zk
      local m = zk:PartitionAllocator{ path = path, identifier = string.format("m%02d", i),
                                       strategy = strategy }
      m:start(set, LONG)
      members[#members + 1] = m
    end
    local function check()
      for _, m in ipairs(members) do
        assert.is_true(m:wait_settled(LONG), m.identifier .. " did not settle")
      end
      local owner, n = {}, 0
      for _, m in ipairs(members) do
        for _, item in ipairs(m.allocation) do
          assert.is_nil(owner[item], item .. " owned twice")
          owner[item] = m.identifier
          n = n + 1
        end
      end
      assert.are.equal(ITEMS, n)
    end
    for i = 1, MEMBERS do join(i) end
    check()
    join(MEMBERS + 1) -- a join
    check()
    local leaving = table.remove(members, 2) -- a clean leave
    leaving:stop(LONG)
    check()
    for _, m in ipairs(members) do m:stop(LONG) end
    assert.are.same({}, states) -- no SUSPENDED, no LOST
    for _, zk in ipairs(clients) do zk:close() end
    helpers.delete_trees(server.hosts, path)
  end

  it("sticky: 20 members x 4000 items start, take a join and a leave, no session lost",
     function() run("sticky") end)

  it("round_robin: the same settles although every join moves most items", function()
    run("round_robin")
  end)
end)
