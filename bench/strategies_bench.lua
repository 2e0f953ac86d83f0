--- bench/strategies_bench.lua — the partition strategies (zklua.strategies), no server needed:
-- allocation time for 100 members x 10000 items per strategy (the C built-ins called from Lua,
-- tables in and out included; round-robin written in plain Lua and the Lua example strategy
-- for comparison), and the items each moves when an 11th member joins a 10-member group
-- sharing 1000 items (ideal: 1000 / 11).  Targets: sticky and rendezvous move <= 1.2 x ideal.
--
--   ./zklua bench/strategies_bench.lua [RUNS=5]             prints the table
--   ./zklua bench/strategies_bench.lua --results [RUNS=5]   prints one line per strategy,
--     RESULT strategy_<id> ms=<median ms> moved=<items> ideal=<items>   (bench/run.lua reads
--     them; ids: round_robin, round_robin_lua, consistent_hash, rendezvous, sticky, weighted,
--     least_loaded)
--   dofile("bench/strategies_bench.lua")(runs) -> table lines
local core = require "zklua.core"
local strategies = require "zklua.strategies"

-- kazoo's stride in plain Lua: what a strategy costs when it is not C.
local function lua_round_robin(members, items)
  local m, it = {}, {}
  for i, v in ipairs(members) do m[i] = v end
  for i, v in ipairs(items) do it[i] = v end
  table.sort(m)
  table.sort(it)
  local assignment, n = {}, #m
  for _, member in ipairs(m) do assignment[member] = {} end
  if n == 0 then return assignment end
  for k, item in ipairs(it) do
    local owned = assignment[m[(k - 1) % n + 1]]
    owned[#owned + 1] = item
  end
  return assignment
end

local function names(prefix, n)
  local list = {}
  for i = 1, n do list[i] = string.format("%s%05d", prefix, i) end
  return list
end

local function median(list)
  table.sort(list)
  local n = #list
  if n % 2 == 1 then return list[(n + 1) / 2] end
  return (list[n / 2] + list[n / 2 + 1]) / 2
end

-- Median milliseconds of one call of strategy(members, items, ctx) over runs calls.
local function time_ms(strategy, members, items, ctx, runs)
  local samples = {}
  for r = 1, runs do
    collectgarbage()
    local t0 = core.monotonic()
    strategy(members, items, ctx)
    samples[r] = (core.monotonic() - t0) * 1000
  end
  return median(samples)
end

-- Items moved when member 11 joins 10 members sharing 1000 items (the new call gets the old
-- ownership as ctx.current, as an allocator passes it).
local function join_moves(strategy)
  local ten, eleven = names("member-", 10), names("member-", 11)
  local items = names("item-", 1000)
  local old = strategy(ten, items)
  local new = strategy(eleven, items, { current = strategies.owners(old) })
  assert(strategies.validate(new, eleven, items))
  return strategies.moves(old, new)
end

local function run(runs)
  runs = runs or 5
  local members, items = names("member-", 100), names("item-", 10000)
  local weights = {}
  for i, m in ipairs(members) do weights[m] = 1 + i % 4 end
  -- a realistic rebalance for sticky/weighted: the ownership of 99 members, one joining now
  local current = strategies.owners(strategies.sticky({ (table.unpack or unpack)(members, 1, 99) }, items))
  local least_loaded = strategies.load("examples/strategies/least_loaded.lua")
  local cases = {
    { "round_robin", "round_robin (C)", strategies.round_robin },
    { "round_robin_lua", "round_robin (plain Lua)", lua_round_robin },
    { "consistent_hash", "consistent_hash (C, 160 vnodes)", strategies.consistent_hash },
    { "rendezvous", "rendezvous (C)", strategies.rendezvous },
    { "sticky", "sticky (C, 99 owners + 1 joining)", strategies.sticky, { current = current } },
    { "weighted", "weighted (C, weights 1-4, 99 owners + 1)", strategies.weighted,
      { current = current, weights = weights } },
    { "least_loaded", "least_loaded (Lua example, 99 owners + 1)", least_loaded,
      { current = current }, math.max(1, math.floor(runs / 2)) },
  }
  local results = {}
  for _, case in ipairs(cases) do
    local id, label, strategy, ctx, case_runs = case[1], case[2], case[3], case[4], case[5]
    io.stderr:write("strategies: " .. label .. "\n")
    results[#results + 1] = { id = id, label = label, ideal = 1000 / 11, moved = join_moves(strategy),
                              ms = time_ms(strategy, members, items, ctx, case_runs or runs) }
  end
  return results
end

local function table_lines(runs)
  local lines = {
    "| strategy | ms per allocation, 100 members x 10000 items | items moved on a join, " ..
    "10 -> 11 members x 1000 items | moved / ideal (" .. string.format("%.1f", 1000 / 11) .. ") |",
    "|---|---:|---:|---:|",
  }
  for _, r in ipairs(run(runs)) do
    lines[#lines + 1] = string.format("| %s | %.1f | %d | %.2f |", r.label, r.ms, r.moved,
                                      r.moved / r.ideal)
  end
  return lines
end

if arg and arg[0] and arg[0]:match("strategies_bench%.lua$") then
  if arg[1] == "--results" then
    for _, r in ipairs(run(tonumber(arg[2]))) do
      print(string.format("RESULT strategy_%s ms=%.3f moved=%d ideal=%.2f", r.id, r.ms, r.moved,
                          r.ideal))
    end
  else
    print(table.concat(table_lines(tonumber(arg[1])), "\n"))
  end
end

return table_lines
